package acpgw_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// BenchmarkPromptRoundTrip measures one prompt round trip three ways in the
// same run, interleaved: the fake agent driven directly over its pipes, the
// same agent behind a plain Streamable HTTP relay (plainRelay: the fair
// baseline, the same HTTP requests and SSE stream done plainly), and behind
// the daemon through the ACP mount (POST session/prompt, the session stream
// read as SSE). Both HTTP ways are timed by the same client code. It
// reports the mean latency of the first text chunk and of the end of the
// turn for each, the medians of the first chunk, and the ratios (ACP /
// relay, ACP / direct).
func BenchmarkPromptRoundTrip(b *testing.B) {
	direct := startDirectAgent(b)
	relay := startPlainRelay(b)
	rc := newStreamClient(b, relay.srv.URL, http.Header{}, "relay")
	d := daemon.Start(b)
	g := newBenchClient(b, d)

	var dFirst, dEnd, rFirst, rEnd, gFirst, gEnd time.Duration
	rFirsts := make([]time.Duration, 0, b.N)
	gFirsts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, e := direct.roundTrip(b, i)
		dFirst += f
		dEnd += e
		f, e = rc.roundTrip(b)
		rFirst += f
		rEnd += e
		rFirsts = append(rFirsts, f)
		f, e = g.roundTrip(b)
		gFirst += f
		gEnd += e
		gFirsts = append(gFirsts, f)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(dFirst.Microseconds())/n, "direct-first-µs")
	b.ReportMetric(float64(dEnd.Microseconds())/n, "direct-end-µs")
	b.ReportMetric(float64(rFirst.Microseconds())/n, "relay-first-µs")
	b.ReportMetric(float64(rEnd.Microseconds())/n, "relay-end-µs")
	b.ReportMetric(float64(gFirst.Microseconds())/n, "acp-first-µs")
	b.ReportMetric(float64(gEnd.Microseconds())/n, "acp-end-µs")
	b.ReportMetric(float64(gFirst)/float64(dFirst), "first-ratio")
	b.ReportMetric(float64(gEnd)/float64(dEnd), "end-ratio")
	b.ReportMetric(float64(gFirst)/float64(rFirst), "first/relay")
	b.ReportMetric(float64(gEnd)/float64(rEnd), "end/relay")
	rm, gm := median(rFirsts), median(gFirsts)
	b.ReportMetric(float64(rm.Microseconds()), "relay-first-p50-µs")
	b.ReportMetric(float64(gm.Microseconds()), "acp-first-p50-µs")
	b.ReportMetric(float64(gm)/float64(rm), "first-p50/relay")
}

func median(s []time.Duration) time.Duration {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2]
}

// directAgent is the fake agent on its own pipes.
type directAgent struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func startDirectAgent(b *testing.B) *directAgent {
	argv := testkit.FakeAgent(b)
	cmd := exec.Command(argv[0], argv[1:]...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	a := &directAgent{in: in, out: bufio.NewReaderSize(out, 1<<20)}
	a.until(b, "agent_ready")
	return a
}

func (a *directAgent) until(b *testing.B, typ string) {
	for {
		line, err := a.out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("agent: %v", err)
		}
		var m struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(line, &m)
		if m.Type == typ {
			return
		}
	}
}

// roundTrip sends a prompt and times its first text delta and agent_end.
func (a *directAgent) roundTrip(b *testing.B, i int) (first, end time.Duration) {
	start := time.Now()
	fmt.Fprintf(a.in, `{"type":"prompt","id":"p%d","message":"hello there"}`+"\n", i)
	for {
		line, err := a.out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("agent: %v", err)
		}
		var m struct {
			Type    string `json:"type"`
			Success *bool  `json:"success"`
			Error   string `json:"error"`
			AME     *struct {
				Type string `json:"type"`
			} `json:"assistantMessageEvent"`
		}
		_ = json.Unmarshal(line, &m)
		switch {
		case m.Type == "response" && m.Success != nil && !*m.Success:
			// The agent was still finishing the last turn: ask again.
			fmt.Fprintf(a.in, `{"type":"prompt","id":"p%d","message":"hello there"}`+"\n", i)
		case m.Type == "message_update" && m.AME != nil && m.AME.Type == "text_delta" && first == 0:
			first = time.Since(start)
		case m.Type == "agent_end":
			return first, time.Since(start)
		}
	}
}

// benchClient is a minimal Streamable HTTP client with its session stream
// read by a goroutine.
type benchClient struct {
	url    string
	h      http.Header
	sid    string
	id     int
	events chan []byte
}

func newBenchClient(b *testing.B, d *daemon.Daemon) *benchClient {
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(b))
	h := c.Header(sid)
	// A second reader would be refused: close the harness's stream first.
	c.CloseStream(sid)
	return newStreamClient(b, d.ACPURL, h, sid)
}

// newStreamClient opens the session stream (GET, SSE) at url with the
// headers h and reads it on a goroutine.
func newStreamClient(b *testing.B, url string, h http.Header, sid string) *benchClient {
	g := &benchClient{url: url, h: h.Clone(), sid: sid, id: 1000, events: make(chan []byte, 4096)}
	h = h.Clone()
	h.Set("Accept", "text/event-stream")
	req, _ := http.NewRequest("GET", url, nil)
	req.Header = h
	var resp *http.Response
	var err error
	for try := 0; try < 50; try++ {
		resp, err = http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if resp != nil {
			resp.Body.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("session stream: %v", err)
	}
	b.Cleanup(func() { resp.Body.Close() })
	go func() {
		r := bufio.NewReaderSize(resp.Body, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(g.events)
				return
			}
			if bytes.HasPrefix(line, []byte("data: ")) {
				g.events <- bytes.TrimSpace(line[6:])
			}
		}
	}()
	return g
}

func (g *benchClient) roundTrip(b *testing.B) (first, end time.Duration) {
	g.id++
	body := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(g.id) + `,"method":"session/prompt","params":{"sessionId":"` + g.sid +
		`","prompt":[{"type":"text","text":"hello there"}]}}`)
	start := time.Now()
	req, _ := http.NewRequest("POST", g.url, bytes.NewReader(body))
	req.Header = g.h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b.Fatalf("prompt: %d", resp.StatusCode)
	}
	want := []byte(`"id":` + strconv.Itoa(g.id) + `,`)
	for ev := range g.events {
		switch {
		case first == 0 && bytes.Contains(ev, []byte(`"agent_message_chunk"`)):
			first = time.Since(start)
		case bytes.Contains(ev, want):
			if !bytes.Contains(ev, []byte(`"end_turn"`)) {
				b.Fatalf("prompt answered %s", ev)
			}
			return first, time.Since(start)
		}
	}
	b.Fatal("the session stream ended")
	return 0, 0
}
