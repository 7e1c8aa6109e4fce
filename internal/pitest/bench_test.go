package pitest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
)

// BenchmarkPiOverhead measures what surfaced adds to driving pi directly.
// Each iteration sends one prompt to a pi driven over a plain pipe (the
// baseline: JSONL on its stdin, events read from its stdout) and one to a
// pi hosted by surfaced (HTTP POST /prompt, chat chunks read from the SSE
// stream), both against the same scripted model server, alternating so that
// drift hits both alike. It reports the median time to the first text
// delta and to the end of the turn (agent_end / finish) for each, and their
// ratios (gateway / direct).
func BenchmarkPiOverhead(b *testing.B) {
	srv := model(b, func(r llmstub.Request) llmstub.Reply {
		parts := make([]string, 20)
		for i := range parts {
			parts[i] = fmt.Sprintf("word%d ", i)
		}
		return llmstub.Say(parts...)
	})
	home := Home(b, Config{BaseURL: srv.URL})

	direct := startDirect(b, home)
	d := startDaemon(b, surfaced.Limits{}, Agent(b, "pi", home))
	id := d.create("")
	s := d.sse(id)
	ready(b, s)

	// Warm both up (first model call, JIT).
	direct.turn(b, "warm up")
	gatewayTurn(b, d, s, id, "warm up")

	var dFirst, dEnd, gFirst, gEnd []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, e := direct.turn(b, fmt.Sprintf("prompt %d", i))
		dFirst, dEnd = append(dFirst, f), append(dEnd, e)
		f, e = gatewayTurn(b, d, s, id, fmt.Sprintf("prompt %d", i))
		gFirst, gEnd = append(gFirst, f), append(gEnd, e)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	df, de, gf, ge := median(dFirst), median(dEnd), median(gFirst), median(gEnd)
	b.ReportMetric(ms(df), "direct-first-ms")
	b.ReportMetric(ms(gf), "gateway-first-ms")
	b.ReportMetric(ms(de), "direct-end-ms")
	b.ReportMetric(ms(ge), "gateway-end-ms")
	b.ReportMetric(float64(gf)/float64(df), "ratio-first")
	b.ReportMetric(float64(ge)/float64(de), "ratio-end")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// gatewayTurn posts a prompt and reads the SSE stream to the turn's finish.
func gatewayTurn(b *testing.B, d *daemon, s *testkit.SSE, id, text string) (first, end time.Duration) {
	start := time.Now()
	d.prompt(id, text)
	for {
		select {
		case ev := <-s.Events:
			if ev.Kind != "chat" {
				continue
			}
			switch ev.Data["type"] {
			case "text-delta":
				if first == 0 {
					first = time.Since(start)
				}
			case "finish":
				return first, time.Since(start)
			}
		case <-time.After(wait):
			b.Fatalf("gateway turn %q did not finish", text)
		}
	}
}

// directPi is pi on a plain pipe, driven the way pi's own docs show.
type directPi struct {
	in  io.WriteCloser
	out *bufio.Reader
	n   int
}

func startDirect(b *testing.B, home string) *directPi {
	b.Helper()
	argv := Argv(b)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.TempDir()
	cmd.Env = append(os.Environ(), Env(home)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	p := &directPi{in: in, out: bufio.NewReaderSize(out, 1<<20)}
	// Ready when it answers get_commands, as surfaced decides.
	p.send(b, `{"id":"ready","type":"get_commands"}`)
	p.until(b, func(typ string, line []byte) bool { return typ == "response" })
	return p
}

func (p *directPi) send(b *testing.B, line string) {
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		b.Fatal(err)
	}
}

// until reads lines until done reports true.
func (p *directPi) until(b *testing.B, done func(typ string, line []byte) bool) {
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("pi output ended: %v", err)
		}
		var env struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &env) == nil && done(env.Type, line) {
			return
		}
	}
}

func (p *directPi) turn(b *testing.B, text string) (first, end time.Duration) {
	p.n++
	msg, _ := json.Marshal(text)
	start := time.Now()
	p.send(b, fmt.Sprintf(`{"id":"p%d","type":"prompt","message":%s}`, p.n, msg))
	p.until(b, func(typ string, line []byte) bool {
		switch typ {
		case "message_update":
			if first == 0 && strings.Contains(string(line), `"type":"text_delta"`) {
				first = time.Since(start)
			}
		case "agent_end":
			end = time.Since(start)
			return true
		}
		return false
	})
	return first, end
}
