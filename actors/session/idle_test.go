package session_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
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

// unwatched is a session on a fake clock that no client subscribes to,
// with a real agent process; gone counts its activations that stopped.
type unwatched struct {
	t     *testing.T
	clock *clock.Fake
	dir   *session.Local
	st    store.Store
	id    string
	gone  atomic.Int32
}

func newUnwatched(t *testing.T, lim session.Limits, agentFlags ...string) *unwatched {
	t.Helper()
	st := memstore.New()
	w := store.NewWriter(st, 1, slog.Default())
	sys := actor.NewActorSystem()
	u := &unwatched{t: t, clock: clock.NewFake(time.Unix(1_700_000_000, 0)), st: st, id: session.NewID()}
	argv := testkit.FakeAgent(t, agentFlags...)
	deps := &session.Deps{
		NodeID:      "test",
		Writer:      w,
		Agent:       func(string) (session.AgentSpec, bool) { return session.AgentSpec{Name: "a", Argv: argv}, true },
		Metrics:     metrics.New(prometheus.NewRegistry()),
		Limits:      lim,
		Clock:       u.clock,
		Deactivated: func(string, *actor.PID) { u.gone.Add(1) },
	}
	u.dir = session.NewLocal(sys, deps)
	if err := st.CreateSession(context.Background(), store.Session{ID: u.id, Owner: "o", Agent: "a", Status: session.StatusStarting}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u.dir.Close()
		u.dir.StopAll(ctx, "shutdown")
		w.Close()
		sys.Shutdown()
	})
	return u
}

func (u *unwatched) req(m proto.Message) proto.Message {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := u.dir.Request(ctx, u.id, m)
	if err != nil {
		u.t.Fatal(err)
	}
	return res
}

func (u *unwatched) summary() *pb.SessionSummary {
	u.t.Helper()
	return u.req(&pb.GetSummary{Caller: &pb.Caller{Subject: "o"}}).(*pb.SessionSummary)
}

// ready activates the session (a read, as POST /api/sessions does) and
// waits until its agent is ready and the idle timer is armed.
func (u *unwatched) ready() {
	u.t.Helper()
	testkit.Eventually(u.t, 10*time.Second, func() bool { return u.summary().GetStatus() == session.StatusReady }, "the agent ready")
	if !u.clock.WaitPending(1, 10*time.Second) {
		u.t.Fatal("no idle timer armed")
	}
}

func (u *unwatched) advance(d time.Duration) { u.clock.Advance(d) }

// asleep waits until the activation has stopped and the store says idle.
func (u *unwatched) asleep(what string) {
	u.t.Helper()
	testkit.Eventually(u.t, 10*time.Second, func() bool {
		rec, err := u.st.GetSession(context.Background(), u.id)
		return u.gone.Load() == 1 && err == nil && rec.Status == session.StatusIdle
	}, "%s", what)
}

// awake asserts the session is still live: the clock has not reached the
// due time of an idle timer, so none came due (nothing is in flight).
func (u *unwatched) awake(what string) {
	u.t.Helper()
	if n := u.gone.Load(); n != 0 {
		u.t.Fatalf("%s: the session slept", what)
	}
}

// A session no client ever watched sleeps idle_timeout after it started,
// whatever else it receives meanwhile: reads from clients and the agent's
// own answers do not keep it awake.
func TestUnwatchedSessionSleepsAfterIdleTimeout(t *testing.T) {
	u := newUnwatched(t, session.Limits{IdleTimeout: time.Minute})
	u.ready()
	for range 5 {
		u.advance(11 * time.Second)
		u.summary()
		u.req(&pb.GetState{Caller: &pb.Caller{Subject: "o"}})
		u.req(&pb.ListSurfaces{Caller: &pb.Caller{Subject: "o"}})
		u.req(&pb.GetMessages{Caller: &pb.Caller{Subject: "o"}})
	}
	u.advance(5*time.Second - time.Millisecond)
	u.awake("a millisecond before idle_timeout")
	u.advance(time.Millisecond)
	u.asleep("asleep at idle_timeout, although clients read it meanwhile")
}

// A command is a use: the idle clock starts again from it.
func TestCommandStartsTheIdleClockAgain(t *testing.T) {
	u := newUnwatched(t, session.Limits{IdleTimeout: time.Minute})
	u.ready()
	u.advance(40 * time.Second)
	if res := u.req(&pb.RunCommand{Caller: &pb.Caller{Subject: "o"}, Domain: "demo", Action: "increment"}).(*pb.CommandResult); !res.GetOk() {
		t.Fatalf("increment: %v", res)
	}
	// The first timer comes due 60 s after the start and arms the rest.
	pending := u.clock.Pending()
	u.advance(20 * time.Second)
	if !u.clock.WaitPending(pending, 10*time.Second) {
		t.Fatal("the idle timer was not armed again for the rest")
	}
	u.summary()
	u.awake("60 s after the start, 20 s after the command")
	u.advance(40*time.Second - time.Millisecond)
	u.awake("a millisecond before idle_timeout after the command")
	u.advance(time.Millisecond)
	u.asleep("asleep idle_timeout after the command")
}

// A command that wakes a session waits for its agent, however long the
// agent takes to start: the session does not sleep under it when the agent
// is ready past the idle timeout; its use counts from when it goes to its
// domain.
func TestCommandWaitingForTheAgentOutlastsTheIdleTimeout(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	u := newUnwatched(t, session.Limits{IdleTimeout: time.Minute, ReadyTimeout: time.Hour}, "-ready-gate", gate)
	res := make(chan proto.Message, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := u.dir.Request(ctx, u.id, &pb.RunCommand{Caller: &pb.Caller{Subject: "o"}, Domain: "demo", Action: "increment"})
		if err != nil {
			r = &pb.CommandResult{Error: pb.Err("request", err.Error())}
		}
		res <- r
	}()
	// The ready timer and the idle timer.
	if !u.clock.WaitPending(2, 10*time.Second) {
		t.Fatal("no idle timer armed")
	}
	u.advance(2 * time.Minute)
	u.awake("past idle_timeout with a command waiting for the agent")
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	if r := (<-res).(*pb.CommandResult); !r.GetOk() {
		t.Fatalf("the waking command: %v", r)
	}
	u.awake("the waking command answered")
	if !u.clock.WaitPending(1, 10*time.Second) {
		t.Fatal("the idle timer was not armed again")
	}
	u.advance(time.Minute)
	u.asleep("asleep idle_timeout after the command went to its domain")
}

// An ended session's actor lingers limits.ended_linger from its end, not
// from its activation, also when live sessions never sleep (idle_timeout 0)
// and nobody watches.
func TestEndedSessionLingersFromItsEnd(t *testing.T) {
	u := newUnwatched(t, session.Limits{EndedLinger: time.Minute, RestartMax: -1})
	testkit.Eventually(t, 10*time.Second, func() bool { return u.summary().GetStatus() == session.StatusReady }, "the agent ready")
	u.advance(10 * time.Minute)
	u.req(&pb.RunCommand{Caller: &pb.Caller{Subject: "o"}, Domain: "demo", Action: "crash"})
	testkit.Eventually(t, 10*time.Second, func() bool { return u.summary().GetStatus() == session.StatusEnded }, "ended (no restarts)")
	if !u.clock.WaitPending(1, 10*time.Second) {
		t.Fatal("no linger timer armed")
	}
	u.advance(time.Minute - time.Millisecond)
	u.awake("a millisecond before the linger is over")
	u.advance(time.Millisecond)
	testkit.Eventually(t, 10*time.Second, func() bool { return u.gone.Load() == 1 }, "the ended session's actor gone after its linger")
}

// A session stopped by a Stop (to sleep, or deleted) has let go of the
// directory by the time the Stop is answered: the next request starts a
// new activation rather than reach the stopping one's mailbox, where
// protoactor drops it unanswered (agent check's restart met that as a
// request that timed out, under load).
func TestStoppedSessionLeavesTheDirectoryBeforeTheAnswer(t *testing.T) {
	u := newUnwatched(t, session.Limits{IdleTimeout: time.Hour})
	for _, reason := range []string{"idle", session.StopDeleted} {
		u.ready()
		old := u.dir.Lookup(u.id)
		if old == nil {
			t.Fatal("no live activation")
		}
		if r := u.req(&pb.Stop{Caller: &pb.Caller{System: true}, Reason: reason}).(*pb.StopResult); !r.GetOk() {
			t.Fatalf("stop %s: %v", reason, r)
		}
		if pid := u.dir.Lookup(u.id); pid != nil {
			t.Fatalf("stop %s answered while the directory still routes to %v", reason, pid)
		}
		if st := u.summary().GetStatus(); reason == "idle" && st == session.StatusEnded {
			t.Fatalf("after stop %s: %s", reason, st)
		}
		if pid := u.dir.Lookup(u.id); pid == nil || pid.Equal(old) {
			t.Fatalf("after stop %s: routed to %v (was %v)", reason, pid, old)
		}
	}
}
