package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit"
)

// commandLoad is one load of BenchmarkCommandLoad: sessions, each sent
// perSecond commands a second by a client of its own. inStep starts every
// session's client at the same instant (a burst of sessions commands each
// period); otherwise each starts at a random point of its period, as
// independent clients do.
type commandLoad struct {
	sessions  int
	perSecond float64
	inStep    bool
}

func (l commandLoad) String() string {
	s := fmt.Sprintf("%dx%g", l.sessions, l.perSecond)
	if l.inStep {
		s += "-in-step"
	}
	return s
}

// The loads of BenchmarkCommandLoad, in the order they run. The last is the
// same load as the third with every client in step: what a load generator
// whose clients all start their tickers at once offers (see
// docs/benchmarks.md, "Command load").
var commandLoads = []commandLoad{
	{1, 20, false},
	{20, 2, false},
	{200, 2, false},
	{200, 20, false},
	{200, 2, true},
}

// loadSessions is how many sessions BenchmarkCommandLoad creates (the
// largest load's); loadInFlight bounds the requests one session's client
// has in flight, as a browser bounds its connections to a host: a tick that
// finds them all busy sends nothing and is counted unsent.
const (
	loadSessions = 200
	loadInFlight = 6
)

// commandLoadResult is what one load measured.
type commandLoadResult struct {
	load     commandLoad
	elapsed  time.Duration
	ok       []time.Duration // latencies of the commands answered ok
	refused  int64           // answered 429 or 503 (queue_full, rate_limited, store_unavailable…)
	failed   int64           // any other answer, or no answer
	unsent   int64           // ticks that found loadInFlight requests in flight
	cpu      cpuShare
	codes    map[int]int64
	firstErr string
}

// cpuShare is the CPU time spent during a load by the daemon, its agents
// (its child processes) and the client (this process), and by the whole
// machine, in clock ticks.
type cpuShare struct {
	daemon, agents, client, machineBusy, machineTotal int64
}

func (r commandLoadResult) quantile(q float64) time.Duration {
	if len(r.ok) == 0 {
		return 0
	}
	return r.ok[min(len(r.ok)-1, int(q*float64(len(r.ok))))]
}

func (r commandLoadResult) carried() float64 { return float64(len(r.ok)) / r.elapsed.Seconds() }

// perCommand is a CPU time in ticks, per command answered ok, in µs.
func (r commandLoadResult) perCommand(ticks int64) float64 {
	if len(r.ok) == 0 {
		return 0
	}
	return float64(ticks) * 1e6 / clockTicks / float64(len(r.ok))
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const clockTicks = 100

// BenchmarkCommandLoad runs the daemon as a process with the demo agent
// (examples/surface-demo-agent, agent-hosted demo.increment) and 200
// sessions, and sends them commands over HTTP from keep-alive clients, one
// per session, at each load of commandLoads: the latency of the commands
// answered (p50, p99), what was carried, refused and left unsent, and the
// CPU each side spent per command. Every session has an event stream open
// (SSE) whose state frames are checked: every rev answered ok must be seen
// on its session's stream. The whole set runs on the embedded SQLite
// store; then on the plain baseline server (internal/plainserver: net/http,
// a goroutine per session, the same agent, the same SQLite writes with
// group commit, the same state frames); then the daemon on PostgreSQL
// (fsync and synchronous commit on); all in the same run. LOAD_SECONDS
// sets how long each load runs (default 3, as make bench runs it; the
// figures in the docs are LOAD_SECONDS=10). One iteration is the whole
// set; see docs/benchmarks.md.
func BenchmarkCommandLoad(b *testing.B) {
	seconds := 3
	if n, err := strconv.Atoi(os.Getenv("LOAD_SECONDS")); err == nil && n > 0 {
		seconds = n
	}
	for _, backend := range []string{"sqlite", "plain", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var dsn string
			start := func(b *testing.B) *daemonProc { return startLoadDaemon(b, dsn) }
			if backend == "plain" {
				start = startPlainServer
			}
			if backend == "postgres" {
				if _, err := pgtest.BinDir(); err != nil {
					testkit.Missing(b, "PostgreSQL: %v", err)
				}
				srv, err := pgtest.NewServer(context.Background(), pgtest.Options{Durable: true})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { srv.Stop() })
				if dsn, err = srv.CreateDatabase(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			for range b.N {
				results := runCommandLoads(b, start, time.Duration(seconds)*time.Second)
				base := results[0]
				for _, r := range results {
					b.Logf("%-16s %s", r.load, r)
					name := strings.ReplaceAll(r.load.String(), ".", "_")
					b.ReportMetric(float64(r.quantile(0.5).Microseconds())/1e3, name+"-p50-ms")
					b.ReportMetric(float64(r.quantile(0.99).Microseconds())/1e3, name+"-p99-ms")
					b.ReportMetric(r.carried(), name+"-ok/s")
					b.ReportMetric(float64(r.refused), name+"-refused")
					if r.load == (commandLoad{200, 2, false}) && base.quantile(0.5) > 0 {
						b.ReportMetric(float64(r.quantile(0.5))/float64(base.quantile(0.5)), "200x2/1x20-p50")
						b.ReportMetric(float64(r.quantile(0.99))/float64(base.quantile(0.99)), "200x2/1x20-p99")
					}
					if r.load == (commandLoad{200, 20, false}) {
						cpu := r.cpu.daemon + r.cpu.agents + r.cpu.client
						b.ReportMetric(r.perCommand(cpu), "200x20-CPU-µs/op")
					}
				}
			}
		})
	}
}

func (r commandLoadResult) String() string {
	s := fmt.Sprintf("offered %5.0f/s, ok %5.0f/s (%d in %.1fs), p50 %8s p99 %8s, refused %d, failed %d, unsent %d; "+
		"CPU per ok command: daemon %4.0f µs, agents %4.0f µs, client %4.0f µs; machine %.0f%% busy, others %.2f cores",
		float64(r.load.sessions)*r.load.perSecond, r.carried(), len(r.ok), r.elapsed.Seconds(),
		r.quantile(0.5).Round(10*time.Microsecond), r.quantile(0.99).Round(10*time.Microsecond), r.refused, r.failed, r.unsent,
		r.perCommand(r.cpu.daemon), r.perCommand(r.cpu.agents), r.perCommand(r.cpu.client),
		100*float64(r.cpu.machineBusy)/float64(max(1, r.cpu.machineTotal)), r.othersCores())
	if r.firstErr != "" {
		s += "; first failure: " + r.firstErr
	}
	return s
}

// othersCores is how many cores, on average, went to processes other than
// the daemon, its agents and the client during the load (the machine is
// shared).
func (r commandLoadResult) othersCores() float64 {
	ours := r.cpu.daemon + r.cpu.agents + r.cpu.client
	return float64(r.cpu.machineBusy-ours) / clockTicks / r.elapsed.Seconds()
}

// startLoadDaemon starts the daemon with the demo agent, on PostgreSQL
// when dsn is set, else on the embedded store.
func startLoadDaemon(b *testing.B, dsn string) *daemonProc {
	cfg := filepath.Join(b.TempDir(), "surfaced.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("limits:\n  sessions_per_subject: %d\n  sessions_total: %d\n  sse_streams_per_subject: %d\n", loadSessions, loadSessions, loadSessions)), 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"run", "--config", cfg, "--addr", "127.0.0.1:0", "--data-dir", b.TempDir(), "--log-level", "warn"}
	if dsn != "" {
		args = append(args, "--store", dsn)
	}
	return startBinary(b, append(args, "./examples/surface-demo-agent")...)
}

// startPlainServer starts the baseline server (internal/plainserver) with
// the demo agent on an SQLite store of its own.
func startPlainServer(b *testing.B) *daemonProc {
	bin := testkit.Build(b, "./internal/plainserver")
	agent := testkit.Build(b, "./examples/surface-demo-agent")
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", b.TempDir(), "--agent", agent)
	stdout, _ := cmd.StdoutPipe()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "plainserver: open ")
	if err != nil || !ok {
		b.Fatalf("plainserver's first line %q (%v); stderr:\n%s", line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	return &daemonProc{cmd: cmd, url: u, base: strings.TrimSuffix(u, "/"), stderr: stderr}
}

// runCommandLoads starts a server, creates loadSessions demo sessions,
// opens an event stream on each, runs every load of commandLoads on them,
// and checks that each rev answered ok was seen on its session's stream.
func runCommandLoads(b *testing.B, start func(*testing.B) *daemonProc, each time.Duration) []commandLoadResult {
	p := start(b)
	defer stopDaemon(b, p)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loadSessions * loadInFlight, DisableCompression: true}}
	defer client.CloseIdleConnections()
	do := func(method, path string) (int, []byte, error) {
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+p.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	ids := createLoadSessions(b, do)
	w := watchLoadSessions(b, p, ids)
	defer w.stop()
	var results []commandLoadResult
	for _, l := range commandLoads {
		results = append(results, runCommandLoad(b, do, p.cmd.Process.Pid, ids[:l.sessions], w, l, each))
	}
	w.check(b)
	return results
}

// loadWatch is an event stream (SSE) open on every session of the load:
// the highest rev of surface:demo each has seen, and the highest answered
// ok (the demo's count, which is its rev).
type loadWatch struct {
	index  map[string]int
	seen   []atomic.Uint64
	acked  []atomic.Uint64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func watchLoadSessions(b *testing.B, p *daemonProc, ids []string) *loadWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &loadWatch{index: map[string]int{}, seen: make([]atomic.Uint64, len(ids)), acked: make([]atomic.Uint64, len(ids)), cancel: cancel}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(ids), DisableCompression: true}}
	opened := make(chan error, len(ids))
	for i, id := range ids {
		w.index[id] = i
		w.wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/api/sessions/"+id+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+p.token)
			resp, err := client.Do(req)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET events: %s", resp.Status)
				resp.Body.Close()
			}
			opened <- err
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			event := ""
			for sc.Scan() {
				line := sc.Text()
				if v, ok := strings.CutPrefix(line, "event: "); ok {
					event = v
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || event != "state" {
					continue
				}
				var f struct {
					Key string `json:"key"`
					Rev uint64 `json:"rev"`
				}
				if json.Unmarshal([]byte(data), &f) == nil && f.Key == "surface:demo" && f.Rev > w.seen[i].Load() {
					w.seen[i].Store(f.Rev)
				}
			}
		})
	}
	for range ids {
		if err := <-opened; err != nil {
			b.Fatal(err)
		}
	}
	return w
}

// answered records the count in an ok answer's data for session id.
func (w *loadWatch) answered(id string, body []byte) {
	var res struct {
		Data struct {
			Count uint64 `json:"count"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &res) != nil {
		return
	}
	a := &w.acked[w.index[id]]
	for {
		old := a.Load()
		if res.Data.Count <= old || a.CompareAndSwap(old, res.Data.Count) {
			return
		}
	}
}

// check waits until every stream has seen the highest rev answered on its
// session; a stream that has not within 30 s is an error (a frame lost).
func (w *loadWatch) check(b *testing.B) {
	behind := func() (n int) {
		for i := range w.seen {
			if w.seen[i].Load() < w.acked[i].Load() {
				n++
			}
		}
		return n
	}
	testkit.Eventually(b, 30*time.Second, func() bool { return behind() == 0 },
		"every session's stream to see the last rev answered ok on it (%d behind)", behind())
}

func (w *loadWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// createLoadSessions creates loadSessions demo sessions, 8 at a time, and
// runs one command on each (its agent is ready then).
func createLoadSessions(b *testing.B, do func(method, path string) (int, []byte, error)) []string {
	ids := make([]string, loadSessions)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= loadSessions {
					return
				}
				code, body, err := do("POST", "/api/sessions")
				var created struct {
					SessionID string `json:"sessionId"`
				}
				if err == nil && code == http.StatusCreated {
					err = json.Unmarshal(body, &created)
				} else if err == nil {
					err = fmt.Errorf("create: %d %s", code, body)
				}
				if err != nil {
					errs <- err
					return
				}
				ids[i] = created.SessionID
				ok := false
				for deadline := time.Now().Add(60 * time.Second); !ok && time.Now().Before(deadline); {
					code, _, err := do("POST", "/api/sessions/"+ids[i]+"/surfaces/demo/increment")
					if ok = err == nil && code == http.StatusOK; !ok {
						time.Sleep(50 * time.Millisecond) // the agent is starting
					}
				}
				if !ok {
					errs <- fmt.Errorf("session %s: no command answered ok within 60 s", ids[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return ids
}

// runCommandLoad sends l to the sessions ids for a second (not measured),
// then for each.
func runCommandLoad(b *testing.B, do func(method, path string) (int, []byte, error), daemonPID int, ids []string, w *loadWatch, l commandLoad, each time.Duration) commandLoadResult {
	period := time.Duration(float64(time.Second) / l.perSecond)
	res := commandLoadResult{load: l, codes: map[int]int64{}}
	var (
		mu       sync.Mutex
		measured atomic.Bool
		wg       sync.WaitGroup
	)
	warm := time.Second
	start := time.Now()
	measureFrom, end := start.Add(warm), start.Add(warm+each)
	rng := rand.New(rand.NewPCG(uint64(l.sessions), uint64(l.perSecond*1000)))
	for _, id := range ids {
		first := start
		if !l.inStep {
			first = start.Add(time.Duration(rng.Int64N(int64(period))))
		}
		wg.Go(func() {
			var inFlight atomic.Int32
			var requests sync.WaitGroup
			defer requests.Wait()
			for next := first; next.Before(end); next = next.Add(period) {
				time.Sleep(time.Until(next))
				if inFlight.Load() >= loadInFlight {
					if measured.Load() {
						atomic.AddInt64(&res.unsent, 1)
					}
					continue
				}
				inFlight.Add(1)
				requests.Go(func() {
					defer inFlight.Add(-1)
					t0 := time.Now()
					code, body, err := do("POST", "/api/sessions/"+id+"/surfaces/demo/increment")
					d := time.Since(t0)
					if err == nil && code == http.StatusOK {
						w.answered(id, body)
					}
					if t0.Before(measureFrom) {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					res.codes[code]++
					switch {
					case err == nil && code == http.StatusOK:
						res.ok = append(res.ok, d)
					case err == nil && (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable):
						res.refused++
					default:
						res.failed++
						if res.firstErr == "" {
							res.firstErr = fmt.Sprintf("%d %.200s %v", code, body, err)
						}
					}
				})
			}
		})
	}
	time.Sleep(time.Until(measureFrom))
	measured.Store(true)
	cpu0 := readCPU(b, daemonPID)
	time.Sleep(time.Until(end))
	cpu1 := readCPU(b, daemonPID)
	wg.Wait()
	// Answers that came after the end count (their commands were sent in
	// time), and their wait is in their latency; the rate is over the
	// measured window.
	res.cpu = cpuShare{
		daemon: cpu1.daemon - cpu0.daemon, agents: cpu1.agents - cpu0.agents, client: cpu1.client - cpu0.client,
		machineBusy: cpu1.machineBusy - cpu0.machineBusy, machineTotal: cpu1.machineTotal - cpu0.machineTotal,
	}
	res.elapsed = end.Sub(measureFrom)
	slices.Sort(res.ok)
	return res
}

// readCPU reads the CPU times so far of the daemon, of its children (the
// agents), of this process and of the machine.
func readCPU(b *testing.B, daemonPID int) cpuShare {
	var c cpuShare
	c.daemon = procCPUTicks(daemonPID)
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", daemonPID))
	for _, t := range tasks {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", daemonPID, t.Name()))
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				c.agents += procCPUTicks(pid)
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	c.client = (ru.Utime.Nano() + ru.Stime.Nano()) * clockTicks / 1e9
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	cpuLine, _, _ := strings.Cut(string(raw), "\n")
	for i, f := range strings.Fields(cpuLine)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		c.machineTotal += v
		if i != 3 && i != 4 { // idle, iowait
			c.machineBusy += v
		}
	}
	return c
}

// procCPUTicks is a process's user and system time in clock ticks (0 once
// it is gone).
func procCPUTicks(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// stopDaemon asks the daemon to stop (SIGTERM) and waits for it, so that
// its agents are gone before the next daemon starts.
func stopDaemon(b *testing.B, p *daemonProc) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Errorf("the daemon did not stop within 60 s of SIGTERM")
		_ = p.cmd.Process.Kill()
		<-done
	}
}
