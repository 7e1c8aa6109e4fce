package inspect_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
)

type work struct{ n int }
type boom struct{}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

// eventually waits for cond: a hang guard, every state here comes in
// milliseconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, cond, "%s", what)
}

func one(t *testing.T, in *inspect.Inspector, q inspect.Query) inspect.Actor {
	t.Helper()
	as := in.Snapshot(q)
	if len(as) != 1 {
		t.Fatalf("want one actor for %+v, have %+v", q, as)
	}
	return as[0]
}

// gated spawns an actor whose handler blocks on gate for every work message.
func gated(sys *actor.ActorSystem, in *inspect.Inspector, kind, session, domain string, gate chan struct{}) *actor.PID {
	return sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *work:
			<-gate
		case *boom:
			panic("boom on purpose")
		}
	}, in.Props(kind, session, domain)...))
}

// epoch is where the tests' fake clocks start.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestDepthPostedProcessedAndCurrent(t *testing.T) {
	sys := newSystem(t)
	clk := clock.NewFake(epoch)
	in := inspect.New(inspect.Options{Clock: clk})
	gate := make(chan struct{})
	pid := gated(sys, in, inspect.KindSurface, "s1", "slow", gate)
	for i := range 10 {
		sys.Root.Send(pid, &work{n: i})
	}
	eventually(t, "the first message being handled", func() bool {
		a := one(t, in, inspect.Query{})
		return a.Current != "" && a.Depth == 9
	})
	a := one(t, in, inspect.Query{})
	if a.ID != pid.Id || a.Kind != "surface" || a.Session != "s1" || a.Domain != "slow" {
		t.Fatalf("identity: %+v", a)
	}
	if a.Posted != 10 || a.Processed != 0 || a.Current != "*inspect_test.work" || a.CurrentForMS == nil {
		t.Fatalf("while stuck: %+v", a)
	}
	if !a.Started.Equal(epoch) || *a.CurrentForMS != 0 {
		t.Fatalf("started %v, current for %d ms: the clock has not moved", a.Started, *a.CurrentForMS)
	}
	clk.Advance(30 * time.Millisecond)
	if ms := *one(t, in, inspect.Query{}).CurrentForMS; ms != 30 {
		t.Fatalf("current for %d ms after the clock moved 30 ms", ms)
	}
	close(gate)
	eventually(t, "all processed", func() bool { return one(t, in, inspect.Query{}).Processed == 10 })
	a = one(t, in, inspect.Query{})
	if a.Depth != 0 || a.Posted != 10 || a.Current != "" || a.CurrentForMS != nil {
		t.Fatalf("after draining: %+v", a)
	}
	// The first message ran 30 ms on the clock, the others none at all.
	if a.P99US != 30_000 || a.P50US != 0 {
		t.Fatalf("percentiles: p50 %d µs p99 %d µs", a.P50US, a.P99US)
	}
}

func TestEntryDisappearsWhenTheActorStops(t *testing.T) {
	sys := newSystem(t)
	in := inspect.New(inspect.Options{})
	open := make(chan struct{})
	close(open)
	a := gated(sys, in, inspect.KindSession, "s1", "", open)
	b := gated(sys, in, inspect.KindWS, "s1", "", open)
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			c.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}, in.Props(inspect.KindAgentProc, "s2", "")...), "child")
		}
	}, in.Props(inspect.KindSession, "s2", "")...))
	eventually(t, "four actors", func() bool { return in.Len() == 4 })

	sys.Root.Stop(a)
	sys.Root.Poison(b)
	eventually(t, "stopped and poisoned actors gone", func() bool { return len(in.Snapshot(inspect.Query{Session: "s1"})) == 0 })
	if n := len(in.Snapshot(inspect.Query{Session: "s2"})); n != 2 {
		t.Fatalf("the other session's actors: %d", n)
	}
	// Stopping a parent stops its child: both entries go.
	if err := sys.Root.StopFuture(parent).Wait(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "parent and child gone", func() bool { return in.Len() == 0 })
}

func TestFiltersAndSorts(t *testing.T) {
	sys := newSystem(t)
	clk := clock.NewFake(epoch)
	in := inspect.New(inspect.Options{Clock: clk})
	gate := make(chan struct{})
	defer close(gate)
	deep := gated(sys, in, inspect.KindSurface, "a", "deep", gate)
	shallow := gated(sys, in, inspect.KindSurface, "b", "shallow", gate)
	idle := gated(sys, in, inspect.KindSession, "a", "", gate)
	for range 5 {
		sys.Root.Send(deep, &work{})
	}
	// The deep actor is stuck for 30 ms longer than the shallow one.
	eventually(t, "deep stuck", func() bool {
		return one(t, in, inspect.Query{Session: "a", Kind: "surface"}).Current != ""
	})
	clk.Advance(30 * time.Millisecond)
	sys.Root.Send(shallow, &work{})
	sys.Root.Send(shallow, &work{})
	eventually(t, "queues", func() bool {
		as := in.Snapshot(inspect.Query{Sort: inspect.SortDepth})
		return len(as) == 3 && as[0].Depth == 4 && as[1].Depth == 1
	})
	as := in.Snapshot(inspect.Query{Sort: inspect.SortDepth})
	if as[0].ID != deep.Id || as[1].ID != shallow.Id || as[2].ID != idle.Id {
		t.Fatalf("depth order: %v", ids(as))
	}
	// Latency: the deep actor has been stuck longest.
	as = in.Snapshot(inspect.Query{Sort: inspect.SortLatency})
	if as[0].ID != deep.Id || as[2].ID != idle.Id {
		t.Fatalf("latency order: %v", ids(as))
	}
	// Default: by session, then kind order (session before surface).
	as = in.Snapshot(inspect.Query{})
	if as[0].ID != idle.Id || as[1].ID != deep.Id || as[2].ID != shallow.Id {
		t.Fatalf("default order: %v", ids(as))
	}
	if got := ids(in.Snapshot(inspect.Query{Kind: inspect.KindSurface, Session: "b"})); len(got) != 1 || got[0] != shallow.Id {
		t.Fatalf("kind+session filter: %v", got)
	}
	if got := in.Snapshot(inspect.Query{Session: "nope"}); got == nil || len(got) != 0 {
		t.Fatalf("no match must be an empty list, not nil: %#v", got)
	}
}

func ids(as []inspect.Actor) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func TestQueryValidate(t *testing.T) {
	good := []inspect.Query{{}, {Kind: "acp", Sort: "depth"}, {Sort: "latency", Session: "01abc"}}
	for _, q := range good {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	bad := map[inspect.Query]string{
		{Kind: "sesion"}:                     `kind must be one of session, surface, agentproc, sse, ws, acp, not "sesion"`,
		{Sort: "size"}:                       `sort must be depth or latency, not "size"`,
		{Session: "a\nb"}:                    "session is not a session id",
		{Session: string(make([]byte, 200))}: "session is not a session id",
	}
	for q, want := range bad {
		if err := q.Validate(); err == nil || err.Error() != want {
			t.Errorf("%+v: want %q, have %v", q, want, err)
		}
	}
}

func TestRestartIsCountedAndClearsCurrent(t *testing.T) {
	sys := newSystem(t)
	in := inspect.New(inspect.Options{})
	reg := prometheus.NewRegistry()
	if err := in.Register(reg); err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	close(open)
	pid := gated(sys, in, inspect.KindSurface, "s", "d", open)
	sys.Root.Send(pid, &boom{})
	eventually(t, "restart counted", func() bool { return metric(t, reg, "surfaced_actor_restarts_total", "surface") == 1 })
	sys.Root.Send(pid, &work{})
	eventually(t, "processed after restart", func() bool { return one(t, in, inspect.Query{}).Processed == 2 })
	a := one(t, in, inspect.Query{})
	if a.ID != pid.Id || a.Current != "" || a.Posted != 2 {
		t.Fatalf("after restart: %+v", a)
	}
	// Registering twice is an error, not a panic.
	if err := in.Register(reg); err == nil {
		t.Fatal("second Register succeeded")
	}
}

func TestDeadLettersByKind(t *testing.T) {
	sys := newSystem(t)
	in := inspect.New(inspect.Options{})
	reg := prometheus.NewRegistry()
	if err := in.Register(reg); err != nil {
		t.Fatal(err)
	}
	stop := in.WatchDeadLetters(sys)
	open := make(chan struct{})
	close(open)
	pid := gated(sys, in, inspect.KindSSE, "s", "", open)
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	sys.Root.Send(pid, &work{})
	sys.Root.Send(pid, &work{})
	sys.Root.Send(actor.NewPID(sys.Address(), "never-was"), &work{})
	eventually(t, "dead letters", func() bool {
		return metric(t, reg, "surfaced_actor_dead_letters_total", "sse") == 2 &&
			metric(t, reg, "surfaced_actor_dead_letters_total", "other") == 1
	})
	stop()
	// The barrier: a subscriber of our own sees the next dead letter.
	// Publishing calls every subscriber in turn, in the order they came,
	// so once ours has it the inspector's would have counted it.
	witness := make(chan struct{}, 1)
	sub := sys.EventStream.Subscribe(func(ev any) {
		if dl, ok := ev.(*actor.DeadLetterEvent); ok && dl.PID.Equal(pid) {
			witness <- struct{}{}
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	sys.Root.Send(pid, &work{})
	select {
	case <-witness:
	case <-time.After(10 * time.Second):
		t.Fatal("the dead letter after stop was never published")
	}
	if n := metric(t, reg, "surfaced_actor_dead_letters_total", "sse"); n != 2 {
		t.Fatalf("counted after stop: %v", n)
	}
}

func TestMetricsPerKind(t *testing.T) {
	sys := newSystem(t)
	in := inspect.New(inspect.Options{})
	reg := prometheus.NewRegistry()
	if err := in.Register(reg); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	pid := gated(sys, in, inspect.KindSurface, "s", "d", gate)
	gated(sys, in, inspect.KindSurface, "s", "e", gate)
	for range 8 {
		sys.Root.Send(pid, &work{})
	}
	close(gate)
	eventually(t, "8 handled", func() bool { return metric(t, reg, "surfaced_actor_handling_seconds", "surface") == 8 })
	if n := metric(t, reg, "surfaced_actor_mailbox_depth", "surface"); n != 8 {
		t.Fatalf("depth observations: %v", n)
	}
	if n := metric(t, reg, "surfaced_actors", "surface"); n != 2 {
		t.Fatalf("live actors: %v", n)
	}
	// Some message saw others waiting behind it: the histogram's sum is > 0.
	if s := histSum(t, reg, "surfaced_actor_mailbox_depth", "surface"); s == 0 {
		t.Fatal("depth sum is 0 after 8 queued messages")
	}
	sys.Root.StopFuture(pid).Wait()
	eventually(t, "gauge down", func() bool { return metric(t, reg, "surfaced_actors", "surface") == 1 })
}

// One Props result spawned several times: each actor keeps its own record.
func TestPropsSpawnedTwice(t *testing.T) {
	sys := newSystem(t)
	in := inspect.New(inspect.Options{})
	props := actor.PropsFromFunc(func(actor.Context) {}, in.Props(inspect.KindSurface, "s", "d")...)
	a := sys.Root.Spawn(props)
	if _, err := sys.Root.SpawnNamed(props, a.Id); err == nil {
		t.Fatal("name reuse spawned")
	}
	b := sys.Root.Spawn(props)
	for range 3 {
		sys.Root.Send(a, &work{})
	}
	sys.Root.Send(b, &work{})
	eventually(t, "counts", func() bool {
		as := in.Snapshot(inspect.Query{})
		got := map[string]uint64{}
		for _, x := range as {
			got[x.ID] = x.Processed
		}
		return len(as) == 2 && got[a.Id] == 3 && got[b.Id] == 1
	})
}

func TestWindowAgeForgetsOldMessages(t *testing.T) {
	sys := newSystem(t)
	clk := clock.NewFake(epoch)
	in := inspect.New(inspect.Options{WindowAge: 100 * time.Millisecond, Window: 4, Clock: clk})
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if w, ok := c.Message().(*work); ok {
			clk.Advance(time.Duration(w.n) * time.Millisecond) // the handler's work, on the clock
		}
	}, in.Props(inspect.KindSession, "s", "")...))
	for _, ms := range []int{20, 1, 1, 1, 1} { // the 20 ms one falls out of the 4-message window
		sys.Root.Send(pid, &work{n: ms})
	}
	eventually(t, "handled", func() bool { return one(t, in, inspect.Query{}).Processed == 5 })
	if a := one(t, in, inspect.Query{}); a.P99US != 1000 || a.P50US != 1000 {
		t.Fatalf("window of 4: p50 %d µs, p99 %d µs", a.P50US, a.P99US)
	}
	// The last message ended at 24 ms; at 124 ms it is exactly WindowAge
	// old and still counts, a millisecond later none does.
	clk.Advance(100 * time.Millisecond)
	if a := one(t, in, inspect.Query{}); a.P50US != 1000 {
		t.Fatalf("at the window's age: p50 %d µs", a.P50US)
	}
	clk.Advance(time.Millisecond)
	if a := one(t, in, inspect.Query{}); a.P50US != 0 || a.P99US != 0 {
		t.Fatalf("past the window's age: p50 %d µs, p99 %d µs", a.P50US, a.P99US)
	}
}

// Many senders, snapshots all the while (run with -race): every message is
// counted once.
func TestConcurrentSendersAndSnapshots(t *testing.T) {
	sys := newSystem(t)
	in := inspect.New(inspect.Options{})
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}, in.Props(inspect.KindSession, "s", "")...))
	const senders, each = 4, 2000
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
				for _, a := range in.Snapshot(inspect.Query{Sort: inspect.SortLatency}) {
					if a.Processed > a.Posted {
						panic(fmt.Sprintf("processed %d > posted %d", a.Processed, a.Posted))
					}
				}
			}
		}
	}()
	var sw sync.WaitGroup
	for range senders {
		sw.Add(1)
		go func() {
			defer sw.Done()
			for i := range each {
				sys.Root.Send(pid, &work{n: i})
			}
		}()
	}
	sw.Wait()
	eventually(t, "all processed", func() bool { return one(t, in, inspect.Query{}).Processed == senders*each })
	close(done)
	wg.Wait()
	if a := one(t, in, inspect.Query{}); a.Posted != senders*each || a.Depth != 0 {
		t.Fatalf("%+v", a)
	}
}

// metric returns a counter or gauge value, or a histogram's sample count,
// for the series with kind=kind (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	m := series(t, reg, name, kind)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func histSum(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	if m := series(t, reg, name, kind); m != nil && m.Histogram != nil {
		return m.Histogram.GetSampleSum()
	}
	return 0
}

func series(t *testing.T, reg *prometheus.Registry, name, kind string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m
				}
			}
		}
	}
	return nil
}
