package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Sizes of BenchmarkSleepingSessions: sessions created and left to sleep,
// sessions then woken (each once, picked at random), and the clients that
// wake them at once. SLEEP_SESSIONS and SLEEP_WAKES set the first two (the
// issue's size: SLEEP_SESSIONS=10000 SLEEP_WAKES=1000).
const (
	sleepSessions = 1000
	sleepWakes    = 200
	sleepClients  = 50
	// sleepCreators create the sessions; each create returns once the
	// session's agent is ready, so this bounds the agents alive at once
	// (with the idle timeout below).
	sleepCreators = 8
)

// BenchmarkSleepingSessions runs the real binary with the demo agent
// (examples/surface-demo-agent) on the embedded SQLite store, creates
// sessions and lets them sleep (limits.idle_timeout), then wakes some at
// random with a surface command each from sleepClients concurrent clients.
// It reports what a sleeping session costs the daemon (RSS and live heap,
// measured from outside the process: /proc and its pprof listener), the
// store's size per session, and the wake latency against the agent's own
// start-to-ready time measured raw (the same binary started by the
// benchmark and read until its agent_ready line) by the same number of
// concurrent clients in the same run.
//
// SLEEP_HEAP_PROFILE=<file> writes the daemon's heap profile with every
// session asleep; SLEEP_CPU_PROFILE=<file> its CPU profile of the first
// five seconds of the wakes.
func BenchmarkSleepingSessions(b *testing.B) {
	n, wakes := envInt("SLEEP_SESSIONS", sleepSessions), envInt("SLEEP_WAKES", sleepWakes)
	wakes = min(wakes, n)
	data := b.TempDir()
	cfg := filepath.Join(b.TempDir(), "surfaced.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `limits:
  idle_timeout: 300ms
  sessions_total: %d
  sessions_per_subject: %d
`, n+1000, n+1000), 0o600); err != nil {
		b.Fatal(err)
	}
	pprofAddr := freeLoopbackAddr(b)
	p := startBinary(b, "run", "--config", cfg, "--addr", "127.0.0.1:0", "--data-dir", data,
		"--pprof-addr", pprofAddr, "--log-level", "error", "./examples/surface-demo-agent")
	pid := p.cmd.Process.Pid
	// The raw baseline starts the same agent, built from the same package.
	agentBin := testkit.Build(b, "./examples/surface-demo-agent")
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: sleepClients}}
	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			fatalGo(b, "%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	// create makes a session and runs one command on it, which waits for
	// its agent to be ready: a creator has one starting agent at a time.
	create := func() string {
		st, raw := call("POST", "/api/sessions", `{"agent":"demo"}`)
		var out struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(raw, &out); st != http.StatusCreated || err != nil || out.SessionID == "" {
			fatalGo(b, "create: %d %s", st, raw)
		}
		if st, raw := call("POST", "/api/sessions/"+out.SessionID+"/surfaces/demo/increment", "{}"); st != http.StatusOK || !strings.Contains(string(raw), `"ok":true`) {
			fatalGo(b, "the first command: %d %s", st, raw)
		}
		return out.SessionID
	}
	active := func() int {
		_, raw := call("GET", "/metrics", "")
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "surfaced_sessions_active "); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		b.Fatal("no surfaced_sessions_active in /metrics")
		return 0
	}
	allAsleep := func() {
		testkit.Eventually(b, 5*time.Minute, func() bool { return active() == 0 }, "every session asleep")
	}
	storeBytes := func() int64 {
		var total int64
		matches, _ := filepath.Glob(filepath.Join(data, "surfaced.db*"))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil {
				total += fi.Size()
			}
		}
		return total
	}
	createN := func(k int) []string {
		ids := make([]string, k)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range sleepCreators {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < k; i = int(next.Add(1)) - 1 {
					ids[i] = create()
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		return ids
	}
	sample := func() daemonSample {
		return daemonSample{rss: procRSS(b, pid), heap: pprofHeap(b, pprofAddr), goroutines: pprofGoroutines(b, pprofAddr), fds: procFDs(b, pid)}
	}

	for range b.N {
		// Warm up: pools, maps and the runtime at their working size for a
		// few live sessions; then every one asleep.
		createN(2 * sleepCreators)
		allAsleep()
		before, storeBefore := sample(), storeBytes()
		t0 := time.Now()
		ids := createN(n)
		created := time.Since(t0)
		allAsleep()
		after, storeAfter := sample(), storeBytes()
		b.Logf("before %d sessions: %v, store %d B | all asleep: %v, store %d B | created in %.1fs",
			n, before, storeBefore, after, storeAfter, created.Seconds())
		if path := os.Getenv("SLEEP_HEAP_PROFILE"); path != "" {
			if err := os.WriteFile(path, []byte(pprofGet(b, pprofAddr, "/debug/pprof/heap?gc=1")), 0o600); err != nil {
				b.Fatal(err)
			}
		}

		// Wakes: each of `wakes` sessions picked at random gets one command
		// while it sleeps; the raw baseline starts the agent as many times,
		// by as many concurrent clients, half before and half after.
		picked := rand.Perm(n)[:wakes]
		raw := startToReady(b, agentBin, wakes/2)
		profiled := make(chan struct{})
		if path := os.Getenv("SLEEP_CPU_PROFILE"); path != "" {
			// The daemon's CPU while it wakes sessions (the first seconds).
			go func() {
				defer close(profiled)
				_ = os.WriteFile(path, []byte(pprofGet(b, pprofAddr, "/debug/pprof/profile?seconds=5")), 0o600)
			}()
		} else {
			close(profiled)
		}
		woken := concurrently(b, wakes, func(i int) time.Duration {
			id := ids[picked[i]]
			t := time.Now()
			st, body := call("POST", "/api/sessions/"+id+"/surfaces/demo/increment", "{}")
			d := time.Since(t)
			if st != http.StatusOK || !strings.Contains(string(body), `"ok":true`) {
				fatalGo(b, "wake %s: %d %s", id, st, body)
			}
			return d
		})
		<-profiled
		raw = append(raw, startToReady(b, agentBin, wakes-wakes/2)...)
		allAsleep()

		perSession := func(a, z int64) float64 { return float64(z-a) / float64(n) / 1024 }
		b.ReportMetric(float64(n), "sessions")
		b.ReportMetric(perSession(before.rss, after.rss), "RSS-KiB/sleeping")
		b.ReportMetric(perSession(before.heap, after.heap), "heap-KiB/sleeping")
		b.ReportMetric(float64(after.goroutines-before.goroutines), "goroutine-growth")
		b.ReportMetric(float64(after.fds-before.fds), "fd-growth")
		b.ReportMetric(perSession(storeBefore, storeAfter), "store-KiB/session")
		b.ReportMetric(float64(n)/created.Seconds(), "created/s")
		wp50, wp99 := pct(woken, 50), pct(woken, 99)
		rp50, rp99 := pct(raw, 50), pct(raw, 99)
		b.ReportMetric(float64(wp50.Microseconds())/1000, "wake-p50-ms")
		b.ReportMetric(float64(wp99.Microseconds())/1000, "wake-p99-ms")
		b.ReportMetric(float64(rp50.Microseconds())/1000, "raw-ready-p50-ms")
		b.ReportMetric(float64(rp99.Microseconds())/1000, "raw-ready-p99-ms")
		b.ReportMetric(float64(wp50)/float64(rp50), "wake/raw-p50")
		b.ReportMetric(float64(wp99)/float64(rp99), "wake/raw-p99")
	}
}

// startToReady starts the agent k times, sleepClients at once, and returns
// each start's time until its first line (agent_ready) is read; the agent
// is then stopped (closing its stdin) outside the timing.
func startToReady(b *testing.B, bin string, k int) []time.Duration {
	return concurrently(b, k, func(int) time.Duration {
		cmd := exec.Command(bin)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		t := time.Now()
		if err := cmd.Start(); err != nil {
			fatalGo(b, "start the agent: %v", err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		d := time.Since(t)
		in.Close()
		_ = cmd.Wait()
		if err != nil || !strings.Contains(line, `"agent_ready"`) {
			fatalGo(b, "the agent's first line: %q %v", line, err)
		}
		return d
	})
}

// concurrently runs f(0..k-1) on sleepClients goroutines and returns what
// each returned.
func concurrently(b *testing.B, k int, f func(i int) time.Duration) []time.Duration {
	out := make([]time.Duration, k)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(envInt("SLEEP_CLIENTS", sleepClients), k) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < k; i = int(next.Add(1)) - 1 {
				out[i] = f(i)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return out
}

// fatalGo fails the benchmark from one of its own goroutines (b.Fatal may
// only be called from the benchmark's): it records the failure and ends the
// goroutine; the benchmark stops once its goroutines are waited for.
func fatalGo(b *testing.B, format string, args ...any) {
	b.Errorf(format, args...)
	runtime.Goexit()
}

func pct(samples []time.Duration, p int) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
