package session_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/metrics"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// fixture is one session actor on a fake clock, in its own actor system,
// with a real agent process.
type fixture struct {
	t     *testing.T
	clock *clock.Fake
	dir   *session.Local
	id    string
	c     *testkit.Collector
}

func newFixture(t *testing.T, argv []string, lim session.Limits) *fixture {
	t.Helper()
	st := memstore.New()
	w := store.NewWriter(st, 1, slog.Default())
	sys := actor.NewActorSystem()
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	deps := &session.Deps{
		NodeID:  "test",
		Writer:  w,
		Agent:   func(string) (session.AgentSpec, bool) { return session.AgentSpec{Name: "a", Argv: argv}, true },
		Metrics: metrics.New(prometheus.NewRegistry()),
		Limits:  lim,
		Clock:   fc,
	}
	dir := session.NewLocal(sys, deps)
	id := session.NewID()
	if err := st.CreateSession(context.Background(), store.Session{ID: id, Owner: "o", Agent: "a", Status: session.StatusStarting}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, clock: fc, dir: dir, id: id, c: testkit.NewCollector(sys)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dir.Close()
		dir.StopAll(ctx, "shutdown")
		w.Close()
		sys.Shutdown()
	})
	res := f.req(&pb.Subscribe{Subscriber: f.c.Pid(), ClientKind: "test", Subject: "o"}).(*pb.SubscribeResult)
	if !res.GetOk() {
		t.Fatalf("subscribe: %v", res)
	}
	return f
}

func (f *fixture) req(m proto.Message) proto.Message {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := f.dir.Request(ctx, f.id, m)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func status(st, code string) func(testkit.Frame) bool {
	return func(fr testkit.Frame) bool {
		return fr.Kind == "session" && fr.Data["status"] == st && (code == "" || fr.Data["code"] == code)
	}
}

// An agent that never becomes ready is stopped when the readiness timeout
// passes on the session's clock, and the session says why.
func TestReadyTimeoutOnTheSessionClock(t *testing.T) {
	f := newFixture(t, testkit.FakeAgent(t, "-mode", "silent"), session.Limits{ReadyTimeout: time.Minute})
	f.c.Wait(t, 10*time.Second, "starting", status(session.StatusStarting, ""))
	if !f.clock.WaitPending(1, 10*time.Second) {
		t.Fatal("no readiness timer armed")
	}
	f.clock.Advance(59 * time.Second)
	if sum := f.req(&pb.GetSummary{Caller: &pb.Caller{Subject: "o"}}).(*pb.SessionSummary); sum.GetStatus() != session.StatusStarting {
		t.Fatalf("status %q before the timeout; want starting", sum.GetStatus())
	}
	f.clock.Advance(time.Second)
	f.c.Wait(t, 10*time.Second, "ready_timeout", status(session.StatusError, "ready_timeout"))
}

// A crashed agent is restarted after the back-off, on the session's clock,
// and the session ends once the restart policy is spent.
func TestRestartBackoffAndPolicy(t *testing.T) {
	f := newFixture(t, testkit.FakeAgent(t), session.Limits{RestartBackoff: time.Second, RestartMax: 2, RestartWindow: time.Hour})
	f.c.Wait(t, 10*time.Second, "ready", status(session.StatusReady, ""))
	for i, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		pending := f.clock.Pending()
		f.req(&pb.RunCommand{Caller: &pb.Caller{Subject: "o"}, Domain: "demo", Action: "crash"})
		f.c.Wait(t, 10*time.Second, "crashed", status(session.StatusError, "agent_crashed"))
		if !f.clock.WaitPending(pending+1, 10*time.Second) {
			t.Fatalf("crash %d: no restart timer armed", i+1)
		}
		f.clock.Advance(backoff - time.Millisecond)
		if sum := f.req(&pb.GetSummary{Caller: &pb.Caller{Subject: "o"}}).(*pb.SessionSummary); sum.GetStatus() != session.StatusError {
			t.Fatalf("crash %d: restarted before the back-off (%s)", i+1, sum.GetStatus())
		}
		f.clock.Advance(time.Millisecond)
		f.c.Wait(t, 10*time.Second, "ready again", status(session.StatusReady, ""))
	}
	f.req(&pb.RunCommand{Caller: &pb.Caller{Subject: "o"}, Domain: "demo", Action: "crash"})
	f.c.Wait(t, 10*time.Second, "ended", status(session.StatusEnded, "restart_exhausted"))
	f.c.Wait(t, 10*time.Second, "end frame", func(fr testkit.Frame) bool { return fr.Kind == "end" && fr.Data["reason"] == "crashed" })
}
