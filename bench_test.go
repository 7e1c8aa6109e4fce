package surfaced_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
	"github.com/surfaced/surfaced/store/sqlite"
)

// reportLatencies adds p50/p99 (µs) of the samples to the benchmark.
func reportLatencies(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	pct := func(p float64) float64 {
		return float64(samples[int(float64(len(samples)-1)*p)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

type benchCounter struct {
	N int `json:"n"`
}

func counterDomain() surface.Domain {
	return surface.Define("counter", benchCounter{}, map[string]surface.Command[benchCounter]{
		"add": func(ctx *surface.Ctx[benchCounter], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c benchCounter) benchCounter { c.N++; return c })
			return nil, nil
		},
		"get": func(ctx *surface.Ctx[benchCounter], _ json.RawMessage) (any, error) {
			return ctx.Get().N, nil
		},
	})
}

func benchRuntime(b *testing.B, st store.Store, agentArgv []string) (*surfaced.Runtime, string) {
	b.Helper()
	rt, err := surfaced.New(surfaced.Config{Store: st, Logger: quietLogger(),
		Agents:  []surfaced.AgentSpec{{Name: "fake", Argv: agentArgv}},
		Domains: []surfaced.DomainBinding{{Domain: counterDomain()}},
		Limits:  surfaced.Limits{CommandsPerSecond: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	testkit.ShutdownAtCleanup(b, rt)
	id, err := rt.CreateSession(context.Background(), surfaced.CreateOptions{Owner: owner})
	if err != nil {
		b.Fatal(err)
	}
	// Wait for the agent (agent-hosted benchmarks need it ready).
	testkit.Eventually(b, 10*time.Second, func() bool { return ready(rt, id) }, "session %s to be ready", id)
	return rt, id
}

func benchCommand(b *testing.B, rt *surfaced.Runtime, id, domain, action string) {
	ctx := context.Background()
	msg := &pb.RunCommand{Caller: me, Domain: domain, Action: action}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := rt.Request(ctx, id, msg)
		samples = append(samples, time.Since(t0))
		if err != nil || !res.(*pb.CommandResult).GetOk() {
			b.Fatalf("command: %v %v", err, res)
		}
	}
	b.StopTimer()
	reportLatencies(b, samples)
}

// A native command through the session and domain actors, in process: the
// command runs, the new snapshot is persisted (memstore) and the result comes
// back once the write is durable.
func BenchmarkNativeCommand(b *testing.B) {
	rt, id := benchRuntime(b, memstore.New(), testkit.FakeAgent(b))
	benchCommand(b, rt, id, "counter", "add")
}

// The same with nothing to persist (a read-only command): the actor hops alone.
func BenchmarkNativeCommandReadOnly(b *testing.B) {
	rt, id := benchRuntime(b, memstore.New(), testkit.FakeAgent(b))
	benchCommand(b, rt, id, "counter", "get")
}

// The same with the embedded SQLite store (ack after durable), and its
// baseline in the same run: the write the command makes (the domain's
// snapshot under its key, the next rev), done directly on the same store
// by one caller, one PutKV at a time, with nothing in between.
func BenchmarkNativeCommandSQLite(b *testing.B) {
	st, err := sqlite.Open(context.Background(), b.TempDir(), sqlite.WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	rt, id := benchRuntime(b, st, testkit.FakeAgent(b))
	b.Run("command", func(b *testing.B) { benchCommand(b, rt, id, "counter", "add") })
	b.Run("kv-write", func(b *testing.B) {
		ctx := context.Background()
		direct := "kkkkkkkkkkkkkkkkkkkkkkkkkk"
		now := time.Now()
		if err := st.CreateSession(ctx, store.Session{ID: direct, Owner: owner, Agent: "fake", Cwd: b.TempDir(),
			Status: "idle", Created: now, Updated: now}); err != nil && !errors.Is(err, store.ErrExists) {
			b.Fatal(err)
		}
		key := agentproc.SurfaceKey("counter")
		var rev uint64
		kvs, err := st.LoadKV(ctx, direct) // a run after the first continues the revs
		if err != nil {
			b.Fatal(err)
		}
		for _, kv := range kvs {
			rev = max(rev, kv.Rev)
		}
		samples := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			rev++
			t0 := time.Now()
			// The snapshot a command makes: marshalled, then written.
			snap, _ := json.Marshal(benchCounter{N: int(rev)})
			err := st.PutKV(ctx, direct, 0, []store.KV{{Key: key, Value: snap, Rev: rev}})
			samples = append(samples, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportLatencies(b, samples)
	})
}

// An agent-hosted command: session → domain actor → agent process actor →
// stdin → the agent → stdout → domain actor → persisted → result.
func BenchmarkAgentHostedCommand(b *testing.B) {
	rt, id := benchRuntime(b, memstore.New(), testkit.FakeAgent(b))
	benchCommand(b, rt, id, "demo", "increment")
}

// The baseline of BenchmarkAgentHostedCommand in the same run: the same
// agent driven directly over its pipes, one surface_dispatch round trip at a
// time, with nothing in between.
func BenchmarkRawPipeDispatch(b *testing.B) {
	cmd := exec.Command(testkit.FakeAgent(b)[0])
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	r := bufio.NewReaderSize(out, 1<<20)
	if _, err := r.ReadBytes('\n'); err != nil { // agent_ready
		b.Fatal(err)
	}
	state := json.RawMessage(`{"count":0,"log":[]}`)
	w := bufio.NewWriter(in)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		line, _ := json.Marshal(map[string]any{"type": "surface_dispatch", "id": fmt.Sprint(i), "domain": "demo",
			"action": "increment", "args": json.RawMessage("{}"), "state": state, "rev": i})
		w.Write(line)
		w.WriteByte('\n')
		w.Flush()
		resp, err := r.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		var res struct {
			State json.RawMessage `json:"state"`
		}
		if err := json.Unmarshal(resp, &res); err != nil {
			b.Fatal(err)
		}
		state = res.State
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	reportLatencies(b, samples)
}

// A data page of an agent-hosted domain (the data plane), in process:
// session actor → the domain's data actor → surface_fetch over the pipe →
// the page back to the caller. Baseline: BenchmarkRawPipeFetch.
func BenchmarkAgentHostedDataPage(b *testing.B) {
	rt, id := benchRuntime(b, memstore.New(), testkit.FakeAgent(b, "-data"))
	ctx := context.Background()
	msg := &pb.SurfaceFetch{Caller: me, Domain: "demo", Path: "rows", Query: "from=0&n=50"}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := rt.Request(ctx, id, msg)
		samples = append(samples, time.Since(t0))
		if err != nil || len(res.(*pb.SurfaceFetchResult).GetData()) == 0 {
			b.Fatalf("fetch: %v %v", err, res)
		}
	}
	b.StopTimer()
	reportLatencies(b, samples)
}

// The baseline of BenchmarkAgentHostedDataPage in the same run: the same
// agent driven directly over its pipes, one surface_fetch round trip at a
// time.
func BenchmarkRawPipeFetch(b *testing.B) {
	cmd := exec.Command(testkit.FakeAgent(b)[0])
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	r := bufio.NewReaderSize(out, 1<<20)
	if _, err := r.ReadBytes('\n'); err != nil { // agent_ready
		b.Fatal(err)
	}
	w := bufio.NewWriter(in)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		line, _ := json.Marshal(map[string]any{"type": "surface_fetch", "id": fmt.Sprint(i), "domain": "demo",
			"path": "rows", "query": "from=0&n=50", "rev": 1})
		w.Write(line)
		w.WriteByte('\n')
		w.Flush()
		resp, err := r.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		var res struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(resp, &res); err != nil || len(res.Data) == 0 {
			b.Fatalf("answer %s: %v", resp, err)
		}
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	reportLatencies(b, samples)
}

// Memory per idle session: live sessions whose agents run (the agents are
// separate processes and not counted), measured as the daemon's heap and
// goroutine stacks per session.
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 200
	for range b.N {
		rt, err := surfaced.New(surfaced.Config{Store: memstore.New(), Logger: quietLogger(),
			Agents: []surfaced.AgentSpec{{Name: "fake", Argv: testkit.FakeAgent(b)}}})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		ids := make([]string, 0, n)
		for i := 0; i < n; i++ {
			id, err := rt.CreateSession(context.Background(), surfaced.CreateOptions{Owner: owner})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		// Measured once every session is idle: its agent started and ready.
		testkit.Eventually(b, 60*time.Second, func() bool {
			for len(ids) > 0 && ready(rt, ids[0]) {
				ids = ids[1:]
			}
			return len(ids) == 0
		}, "%d sessions to be ready", n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		heap := float64(after.HeapAlloc-before.HeapAlloc) / n
		stacks := float64(after.StackInuse-before.StackInuse) / n
		b.ReportMetric(heap/1024, "heap-KiB/session")
		b.ReportMetric((heap+stacks)/1024, "heap+stack-KiB/session")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/session")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = rt.Shutdown(ctx)
		cancel()
	}
}

// Memory per dormant session actor (an ended session held for reads: no
// agent, no agent process actor): the actor alone.
func BenchmarkSessionActorMemory(b *testing.B) {
	const n = 1000
	for range b.N {
		st := memstore.New()
		now := time.Now()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("s%05d", i)
			_ = st.CreateSession(context.Background(), store.Session{ID: ids[i], Owner: owner, Agent: "fake", Status: "ended", Created: now, Updated: now})
		}
		rt, err := surfaced.New(surfaced.Config{Store: st, Logger: quietLogger(),
			Agents: []surfaced.AgentSpec{{Name: "fake", Argv: []string{"true"}}}})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, id := range ids {
			if _, err := rt.Request(context.Background(), id, &pb.GetSummary{Caller: me}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n/1024, "heap-KiB/actor")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = rt.Shutdown(ctx)
		cancel()
	}
}

// ready reports whether the session's agent is ready.
func ready(rt *surfaced.Runtime, id string) bool {
	res, err := rt.Request(context.Background(), id, &pb.GetSummary{Caller: me})
	return err == nil && res.(*pb.SessionSummary).GetStatus() == "ready"
}

// The 404 of a session id that is not the caller's, against SQLite: a
// missing id, someone else's sleeping session, someone else's live one, and
// (the reference) the owner's own live session. The three refusals do the
// same work (one store read), and none starts anything.
func BenchmarkNotFound(b *testing.B) {
	st, err := sqlite.Open(context.Background(), b.TempDir(), sqlite.WithLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	rt, live := benchRuntime(b, st, testkit.FakeAgent(b))
	now := time.Now()
	asleep := "zzzzzzzzzzzzzzzzzzzzzzzzzz"
	if err := st.CreateSession(context.Background(), store.Session{ID: asleep, Owner: owner, Agent: "fake", Cwd: b.TempDir(),
		Status: "idle", Created: now, Updated: now}); err != nil {
		b.Fatal(err)
	}
	stranger := &pb.GetSummary{Caller: &pb.Caller{Subject: "stranger"}}
	for _, c := range []struct {
		name  string
		id    string
		msg   *pb.GetSummary
		found bool
	}{
		{"missing", "aaaaaaaaaaaaaaaaaaaaaaaaaa", stranger, false},
		{"foreign-asleep", asleep, stranger, false},
		{"foreign-live", live, stranger, false},
		{"own-live", live, &pb.GetSummary{Caller: me}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				_, err := rt.Request(ctx, c.id, c.msg)
				if (err == nil) != c.found {
					b.Fatalf("%s: %v", c.name, err)
				}
			}
			if n := len(rt.LiveSessions()); n != 1 {
				b.Fatalf("%d sessions live", n)
			}
		})
	}
}
