package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

func percentiles(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	p := func(q float64) float64 { return float64(samples[int(float64(len(samples)-1)*q)].Microseconds()) }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
}

type benchCount struct {
	N int `json:"n"`
}

func benchDomains() daemon.Option {
	d := surface.Define("counter", benchCount{}, map[string]surface.Command[benchCount]{
		"add": func(ctx *surface.Ctx[benchCount], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c benchCount) benchCount { c.N++; return c })
			return nil, nil
		},
	})
	return daemon.Config(func(c *surfaced.Config) {
		c.Domains = append(c.Domains, surfaced.DomainBinding{Domain: d})
		c.Limits.CommandsPerSecond = 1 << 30
	})
}

// sseLines reads an SSE stream line by line.
type sseLines struct {
	resp *http.Response
	r    *bufio.Reader
}

func openLines(b testing.TB, url string, h http.Header) *sseLines {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("open %s: %v %v", url, err, resp)
	}
	return &sseLines{resp: resp, r: bufio.NewReaderSize(resp.Body, 64<<10)}
}

// until reads lines until one contains marker.
func (s *sseLines) until(marker []byte) (ids int, err error) {
	for {
		line, err := s.r.ReadSlice('\n')
		if err != nil {
			return ids, err
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			ids++
		}
		if bytes.Contains(line, marker) {
			return ids, nil
		}
	}
}

func (s *sseLines) close() { s.resp.Body.Close() }

// Command→snapshot latency: from the HTTP POST of a command to its state
// frame on an already open SSE stream.
func BenchmarkCommandToSnapshot(b *testing.B) {
	for _, tc := range []struct{ name, domain, action string }{
		{"native", "counter", "add"},
		{"agent-hosted", "demo", "increment"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			d := daemon.Start(b, benchDomains())
			id := d.Create(nil)
			s := openLines(b, d.URL+"/api/sessions/"+id+"/events", d.Auth())
			defer s.close()
			if _, err := s.until([]byte(`"status":"ready"`)); err != nil {
				b.Fatal(err)
			}
			key := `"key":"surface:` + tc.domain + `"`
			// The rev to wait for next.
			rev := 2
			client := &http.Client{}
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+id+"/surfaces/"+tc.domain+"/"+tc.action, nil)
				req.Header.Set("Authorization", "Bearer "+d.Token)
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("command: %v %v", err, resp)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want := []byte(key + `,"value":`)
				revMark := []byte(`"rev":` + strconv.Itoa(rev) + `}`)
				for {
					line, err := s.r.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if bytes.Contains(line, want) && bytes.Contains(line, revMark) {
						break
					}
				}
				samples = append(samples, time.Since(t0))
				rev++
			}
			b.StopTimer()
			percentiles(b, samples)
		})
	}
}

// Fan-out: one session streams a burst of chat frames to N SSE clients;
// deliveries/s compared with a plain net/http SSE server (one goroutine and
// one bounded channel per client, pre-serialized frames, one flush per
// drained batch) in the same run, with the same clients.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		frames := max(200, min(20000, 400000/n))
		b.Run(fmt.Sprintf("surfaced/clients=%d", n), func(b *testing.B) {
			d := daemon.Start(b, benchDomains(), daemon.Gateway(fanoutLimits()))
			id := d.Create(nil)
			clients := make([]*sseLines, n)
			for i := range clients {
				clients[i] = openLines(b, d.URL+"/api/sessions/"+id+"/events", d.Auth())
				if _, err := clients[i].until([]byte(`"status":"ready"`)); err != nil {
					b.Fatal(err)
				}
			}
			defer func() {
				for _, c := range clients {
					c.close()
				}
			}()
			var delivered int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				var mu sync.Mutex
				for _, c := range clients {
					wg.Add(1)
					go func(c *sseLines) {
						defer wg.Done()
						k, err := c.until([]byte(`"type":"finish"`))
						if err != nil {
							b.Error(err)
						}
						mu.Lock()
						delivered += int64(k)
						mu.Unlock()
					}(c)
				}
				if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": fmt.Sprintf("burst %d", frames)}); st != 202 {
					b.Fatalf("prompt: %d %v", st, out)
				}
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
		})
		b.Run(fmt.Sprintf("plain/clients=%d", n), func(b *testing.B) {
			srv := newPlainSSE(1 << 16)
			defer srv.close()
			clients := make([]*sseLines, n)
			for i := range clients {
				clients[i] = openLines(b, srv.url, nil)
			}
			srv.waitClients(n)
			defer func() {
				for _, c := range clients {
					c.close()
				}
			}()
			var delivered int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				var mu sync.Mutex
				for _, c := range clients {
					wg.Add(1)
					go func(c *sseLines) {
						defer wg.Done()
						k, err := c.until([]byte(`"type":"finish"`))
						if err != nil {
							b.Error(err)
						}
						mu.Lock()
						delivered += int64(k)
						mu.Unlock()
					}(c)
				}
				srv.burst(frames)
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

func fanoutLimits() gateway.Limits {
	return gateway.Limits{QueueBytes: 64 << 20, QueueAge: time.Minute}
}

// plainSSE is the baseline: a well-built plain net/http SSE server.
type plainSSE struct {
	ln      net.Listener
	url     string
	mu      sync.Mutex
	clients []chan []byte
	joined  chan struct{}
	seq     int
	queue   int
}

// newPlainSSE starts the baseline server; queue is each client's channel
// capacity (frames).
func newPlainSSE(queue int) *plainSSE {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	p := &plainSSE{ln: ln, url: "http://" + ln.Addr().String() + "/", joined: make(chan struct{}, 100000), queue: queue}
	go http.Serve(ln, http.HandlerFunc(p.serve))
	return p
}

func (p *plainSSE) serve(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, p.queue)
	p.mu.Lock()
	p.clients = append(p.clients, ch)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	p.joined <- struct{}{}
	for {
		select {
		case f := <-ch:
			w.Write(f)
			for more := true; more; {
				select {
				case f := <-ch:
					w.Write(f)
				default:
					more = false
				}
			}
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (p *plainSSE) waitClients(n int) {
	for i := 0; i < n; i++ {
		<-p.joined
	}
}

func (p *plainSSE) burst(n int) {
	p.mu.Lock()
	clients := append([]chan []byte(nil), p.clients...)
	p.mu.Unlock()
	for i := 0; i <= n; i++ {
		p.seq++
		data := `{"delta":"tok ","id":"1-1-t0","type":"text-delta"}`
		if i == n {
			data = `{"type":"finish"}`
		}
		f := []byte("event: chat\nid: e-" + strconv.Itoa(p.seq) + "\ndata: " + data + "\n\n")
		for _, c := range clients {
			select {
			case c <- f:
			default: // a slow client would be cut; none is here
			}
		}
	}
}

func (p *plainSSE) close() { p.ln.Close() }

// RSS per idle SSE connection: the clients live in a child process, so the
// daemon's own RSS growth is what the connections cost it; the plain
// server's is measured the same way in the same run.
func BenchmarkIdleSSEMemory(b *testing.B) {
	const conns = 2000
	measure := func(b *testing.B, url string, h http.Header) {
		var before, after runtimeMem
		var ms0, ms1 goruntime.MemStats
		debug.FreeOSMemory()
		goruntime.ReadMemStats(&ms0)
		before.read()
		stop := spawnIdleClients(b, url, h, conns)
		defer stop()
		time.Sleep(time.Second)
		debug.FreeOSMemory()
		goruntime.ReadMemStats(&ms1)
		after.read()
		b.ReportMetric(float64(after.rss-before.rss)/conns/1024, "RSS-KiB/conn")
		b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/conns/1024, "heap-KiB/conn")
		b.ReportMetric(float64(int64(ms1.StackInuse)-int64(ms0.StackInuse))/conns/1024, "stack-KiB/conn")
	}
	b.Run("surfaced", func(b *testing.B) {
		for range b.N {
			d := daemon.Start(b, benchDomains())
			id := d.Create(nil)
			measure(b, d.URL+"/api/sessions/"+id+"/events", d.Auth())
		}
	})
	b.Run("plain", func(b *testing.B) {
		for range b.N {
			srv := newPlainSSE(256)
			measure(b, srv.url, nil)
			srv.close()
		}
	})
}

type runtimeMem struct{ rss int64 }

func (m *runtimeMem) read() {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			m.rss = kb * 1024
		}
	}
}

// spawnIdleClients runs this test binary as a client process holding n open
// streams (see TestMain).
func spawnIdleClients(b *testing.B, url string, h http.Header, n int) func() {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SURFACED_IDLE_CLIENTS="+strconv.Itoa(n), "SURFACED_IDLE_URL="+url,
		"SURFACED_IDLE_AUTH="+h.Get("Authorization"))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		b.Fatalf("idle clients: %q %v", line, err)
	}
	return func() { cmd.Process.Kill(); cmd.Wait() }
}

// idleClients is the child process of spawnIdleClients.
func idleClients() {
	n, _ := strconv.Atoi(os.Getenv("SURFACED_IDLE_CLIENTS"))
	url := os.Getenv("SURFACED_IDLE_URL")
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}
	client := &http.Client{Transport: tr}
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest("GET", url, nil)
		if a := os.Getenv("SURFACED_IDLE_AUTH"); a != "" {
			req.Header.Set("Authorization", a)
		}
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			fmt.Fprintln(os.Stderr, "idle client:", err, resp)
			os.Exit(1)
		}
		go io.Copy(io.Discard, resp.Body)
	}
	fmt.Println("ready")
	select {}
}

// Live sessions per node with the demo agent: 500 sessions, each with its
// own agent process, all answering a command.
func BenchmarkLiveSessions(b *testing.B) {
	const n = 500
	bin := testkit.Build(b, "./examples/surface-demo-agent")
	for range b.N {
		d := daemon.Start(b, daemon.Agents(surfaced.AgentSpec{Name: "demo", Argv: []string{bin}}), benchDomains(),
			daemon.Quotas(surfaced.Quotas{SessionsTotal: n + 10, SessionsPerSubject: n + 10}))
		var before runtimeMem
		before.read()
		t0 := time.Now()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = d.Create(nil)
		}
		created := time.Since(t0)
		var samples []time.Duration
		for _, id := range ids {
			t1 := time.Now()
			for {
				st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil)
				if st == 200 && out["ok"] == true {
					break
				}
				if time.Since(t1) > 30*time.Second {
					b.Fatalf("session %s never answered: %d %v", id, st, out)
				}
				time.Sleep(20 * time.Millisecond)
			}
			samples = append(samples, time.Since(t1))
		}
		var after runtimeMem
		after.read()
		b.ReportMetric(n, "sessions")
		b.ReportMetric(float64(n)/created.Seconds(), "created/s")
		b.ReportMetric(float64(after.rss-before.rss)/n/1024, "daemon-RSS-KiB/session")
		percentiles(b, samples)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = d.Runtime.Shutdown(ctx)
		cancel()
	}
}
