package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Soak sizes: clients that connect, read their first frame and leave, and
// lines the agent writes (text deltas, soakBurst per turn).
const (
	soakConnects = 10_000
	soakLines    = 1_000_000
	soakBurst    = 10_000
	soakWorkers  = 8
)

// daemonSample is what the daemon process holds at one moment: its
// resident memory, its live heap after a collection, its goroutines and its
// open file descriptors.
type daemonSample struct {
	rss, heap  int64
	goroutines int
	fds        int
}

func (s daemonSample) String() string {
	return fmt.Sprintf("RSS %.1f MiB, heap %.1f MiB, %d goroutines, %d fds",
		float64(s.rss)/(1<<20), float64(s.heap)/(1<<20), s.goroutines, s.fds)
}

// BenchmarkSoak runs the real binary with the fake agent, one session, and
// measures the daemon before, during and after soakConnects SSE and
// WebSocket connects/disconnects and soakLines agent lines. It reports the
// samples (b.Log) and the growth as metrics; the sizes are fixed, so one
// iteration is the whole soak.
func BenchmarkSoak(b *testing.B) {
	pprofAddr := freeLoopbackAddr(b)
	p := startBinary(b, "run", "--addr", "127.0.0.1:0", "--data-dir", b.TempDir(), "--pprof-addr", pprofAddr,
		"--log-level", "warn", "--", testkit.Build(b, "./internal/fakeagent"))
	pid := p.cmd.Process.Pid
	sample := func() daemonSample {
		return daemonSample{rss: procRSS(b, pid), heap: pprofHeap(b, pprofAddr), goroutines: pprofGoroutines(b, pprofAddr), fds: procFDs(b, pid)}
	}
	// Uncompressed answers: /metrics would otherwise keep a gzip writer.
	apiClient := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	api := func(method, path, body string) map[string]any {
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := apiClient.Do(req)
		if err != nil {
			b.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		out := map[string]any{}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if err := json.Unmarshal(raw, &out); err != nil {
				b.Fatalf("%s %s: %v: %s", method, path, err, raw)
			}
		} else {
			out["_raw"] = string(raw)
		}
		return out
	}
	id, _ := api("POST", "/api/sessions", "{}")["sessionId"].(string)
	testkit.Eventually(b, 30*time.Second, func() bool { return api("GET", "/api/sessions/"+id, "")["status"] == "ready" }, "the session ready")
	clientsGone := func() bool {
		m := api("GET", "/metrics", "")["_raw"].(string)
		return strings.Contains(m, `surfaced_clients{kind="sse"} 0`) && strings.Contains(m, `surfaced_clients{kind="ws"} 0`)
	}

	// Connects and disconnects, half SSE, half WebSocket, soakWorkers at a
	// time; each reads its first frame (it was subscribed) and leaves.
	connect := func(n int, during func()) {
		sseClient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		var next atomic.Int64
		var wg sync.WaitGroup
		var once sync.Once
		for range soakWorkers {
			wg.Go(func() {
				for {
					i := int(next.Add(1))
					if i > n {
						return
					}
					if i%2 == 0 {
						sseOnce(b, sseClient, p.base+"/api/sessions/"+id+"/events", p.token)
					} else {
						wsOnce(b, p.base+"/api/sessions/"+id+"/ws", p.token)
					}
					if i == n/2 && during != nil {
						once.Do(during)
					}
				}
			})
		}
		wg.Wait()
		testkit.Eventually(b, 30*time.Second, clientsGone, "every client gone")
	}
	// Agent lines: turns of soakBurst text deltas, one after the other.
	lines := func(n int, during func()) {
		for turn := range n / soakBurst {
			res := api("POST", "/api/sessions/"+id+"/prompt", fmt.Sprintf(`{"message":"burst %d"}`, soakBurst))
			if res["queued"] == true {
				b.Fatalf("turn %d was queued behind the last", turn)
			}
			testkit.Eventually(b, 60*time.Second, func() bool {
				s := api("GET", "/api/sessions/"+id, "")
				return s["busy"] == false && s["queued"] == 0.0
			}, "turn %d done", turn)
			if turn == n/soakBurst/2 && during != nil {
				during()
			}
		}
	}

	// Warm up: pools, maps and the runtime reach their working size.
	connect(200, nil)
	lines(2*soakBurst, nil)

	rounds := 2
	if n, err := strconv.Atoi(os.Getenv("SOAK_ROUNDS")); err == nil && n >= 2 && n <= 9 {
		rounds = n
	}
	for range b.N {
		// Rounds on the same daemon: the first takes it to its working
		// size (RSS is the high-water mark: the runtime keeps the pages it
		// grew to); the next show what is left once it is there. The heap
		// still grows by up to ~10 MiB over the first few hundred thousand
		// actors: protoactor's process registry is 1024×32 maps, each made
		// on the first id that lands in it (docs/benchmarks.md;
		// SOAK_ROUNDS=8 shows it level off).
		before := sample()
		b.Logf("before:   %v", before)
		var prev daemonSample
		for round := 1; round <= rounds; round++ {
			t0 := time.Now()
			var during [2]daemonSample
			connect(soakConnects, func() { during[0] = sample() })
			connectTime := time.Since(t0)
			afterConnects := sample()
			t0 = time.Now()
			lines(soakLines, func() { during[1] = sample() })
			linesTime := time.Since(t0)
			s := sample()
			b.Logf("round %d: during %d connects: %v | after (%.1fs): %v | during %d lines: %v | after (%.1fs): %v",
				round, soakConnects, during[0], connectTime.Seconds(), afterConnects, soakLines, during[1], linesTime.Seconds(), s)
			if round < rounds {
				prev = s
				continue
			}
			b.ReportMetric(float64(s.rss-prev.rss)/(1<<20), "RSS-MiB-last-round")
			b.ReportMetric(float64(s.heap-prev.heap)/(1<<20), "heap-MiB-last-round")
			b.ReportMetric(float64(s.heap-before.heap)/(1<<20), "heap-MiB-growth")
			b.ReportMetric(float64(s.goroutines-before.goroutines), "goroutine-growth")
			b.ReportMetric(float64(s.fds-before.fds), "fd-growth")
			b.ReportMetric(float64(soakConnects)/connectTime.Seconds(), "connects/s")
			b.ReportMetric(float64(soakLines)/linesTime.Seconds(), "lines/s")
		}
	}
}

// sseOnce opens the session's event stream, reads its first event and
// closes the connection.
func sseOnce(b *testing.B, c *http.Client, url, token string) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatalf("SSE: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		b.Fatalf("SSE: %d %s", resp.StatusCode, raw)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatalf("SSE: the first event: %v", err)
		}
		if line == "\n" {
			return
		}
	}
}

// wsOnce opens the session's WebSocket, reads its first message and closes.
func wsOnce(b *testing.B, url, token string) {
	h := http.Header{"Authorization": {"Bearer " + token}}
	c, resp, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http://", "ws://", 1), h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		b.Fatalf("WebSocket: %d %v", status, err)
	}
	defer c.Close()
	if _, _, err := c.ReadMessage(); err != nil {
		b.Fatalf("WebSocket: the first message: %v", err)
	}
}

func freeLoopbackAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// procRSS is a process's resident set in bytes (VmRSS).
func procRSS(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib << 10
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

func procFDs(b *testing.B, pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		b.Fatal(err)
	}
	return len(fds)
}

func pprofGet(b *testing.B, addr, path string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		b.Fatalf("pprof %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// pprofGoroutines reads "goroutine profile: total N".
func pprofGoroutines(b *testing.B, addr string) int {
	out := pprofGet(b, addr, "/debug/pprof/goroutine?debug=1")
	var n int
	if _, err := fmt.Sscanf(out, "goroutine profile: total %d", &n); err != nil {
		b.Fatalf("goroutine profile: %v: %.100s", err, out)
	}
	return n
}

// pprofHeap is the daemon's HeapAlloc (live bytes) right after a
// collection (gc=1). Twice: what sync.Pools hold survives one collection.
func pprofHeap(b *testing.B, addr string) int64 {
	pprofGet(b, addr, "/debug/pprof/heap?debug=1&gc=1")
	out := pprofGet(b, addr, "/debug/pprof/heap?debug=1&gc=1")
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	b.Fatalf("no HeapAlloc in the heap profile")
	return 0
}
