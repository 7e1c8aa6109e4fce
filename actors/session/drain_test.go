package session_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/metrics"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

// draining is a ready session on SQLite whose write lock another process
// holds: a prompt's record stays in flight until the lock is released.
type draining struct {
	t       *testing.T
	clock   *clock.Fake
	st      store.Store
	id      string
	answers chan any
	root    *actor.RootContext
	client  *actor.PID
	release func()
}

func newDraining(t *testing.T) *draining {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, dir, sqlite.WithLogger(slog.New(slog.DiscardHandler)), sqlite.WithBusyTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The writes wait for the lock (retried within the window) rather than
	// fail.
	w := store.NewWriter(st, 1, slog.New(slog.DiscardHandler), store.WithRetryWindow(time.Minute), store.WithStallAfter(time.Minute))
	sys := actor.NewActorSystem()
	d := &draining{t: t, clock: clock.NewFake(time.Unix(1_700_000_000, 0)), st: st, id: session.NewID(), answers: make(chan any, 16)}
	argv := testkit.FakeAgent(t)
	dirc := session.NewLocal(sys, &session.Deps{
		NodeID:  "test",
		Writer:  w,
		Agent:   func(string) (session.AgentSpec, bool) { return session.AgentSpec{Name: "a", Argv: argv}, true },
		Metrics: metrics.New(prometheus.NewRegistry()),
		Clock:   d.clock,
	})
	if err := st.CreateSession(ctx, store.Session{ID: d.id, Owner: "o", Agent: "a", Status: session.StatusStarting}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.release != nil {
			d.release()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dirc.Close()
		dirc.StopAll(ctx, "shutdown")
		w.Close()
		sys.Shutdown()
		st.Close()
	})
	testkit.Eventually(t, 10*time.Second, func() bool {
		res, err := dirc.Request(ctx, d.id, &pb.GetSummary{Caller: &pb.Caller{Subject: "o"}})
		return err == nil && res.(*pb.SessionSummary).GetStatus() == session.StatusReady
	}, "the agent ready")
	pid := dirc.Lookup(d.id)
	d.root = sys.Root
	// One client sends everything, so that the session takes it in order.
	d.client = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *pb.Prompt, *pb.Stop:
			ctx.Request(pid, m)
		case *pb.PromptResult, *pb.StopResult:
			d.answers <- m
		}
	}))
	d.release = testkit.LockSQLite(t, filepath.Join(dir, sqlite.FileName))
	return d
}

func (d *draining) send(m any) { d.root.Send(d.client, m) }

func (d *draining) next() any {
	d.t.Helper()
	select {
	case a := <-d.answers:
		return a
	case <-time.After(30 * time.Second):
		d.t.Fatal("no answer")
		return nil
	}
}

// start sends a prompt whose record cannot land yet, then the shutdown's
// Stop (deadline 10 s on the session's clock), then a second prompt, which
// is refused as not done while the first waits.
func (d *draining) start() {
	d.t.Helper()
	caller := &pb.Caller{Subject: "o"}
	d.send(&pb.Prompt{Caller: caller, Message: "first"})
	d.send(&pb.Stop{Caller: &pb.Caller{System: true}, Reason: "shutdown", DeadlineMs: d.clock.Now().Add(10 * time.Second).UnixMilli()})
	d.send(&pb.Prompt{Caller: caller, Message: "second"})
	if r, ok := d.next().(*pb.PromptResult); !ok || r.GetError().GetCode() != codes.ShuttingDown {
		d.t.Fatalf("the prompt after the Stop: %v, want refused shutting_down", r)
	}
}

// A session asked to stop with a prompt's record in flight waits for the
// record: the prompt is answered accepted once it is durable, and only then
// does the session stop. It used to stop at once and answer the prompt
// outcome_unknown.
func TestStopWaitsForThePromptsRecord(t *testing.T) {
	d := newDraining(t)
	d.start()
	d.release()
	if r, ok := d.next().(*pb.PromptResult); !ok || !r.GetAccepted() {
		t.Fatalf("the prompt in flight at the Stop: %v, want accepted", r)
	}
	if r, ok := d.next().(*pb.StopResult); !ok || !r.GetOk() {
		t.Fatalf("the Stop: %v, want ok", r)
	}
	entries, err := d.st.Transcript(context.Background(), d.id)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, e := range entries {
		if e.Role == "user" {
			said = append(said, e.Text)
		}
	}
	if !slices.Equal(said, []string{"first"}) {
		t.Fatalf("the transcript's prompts: %q, want only the accepted one", said)
	}
}

// The wait is bounded by the Stop's deadline: past it, the session stops
// and the prompt whose record is still in flight is told its outcome is
// not known (the write may land after).
func TestStopPastItsDeadlineAnswersWhatIsInFlightUnknown(t *testing.T) {
	d := newDraining(t)
	d.start()
	if !d.clock.WaitPending(1, 10*time.Second) {
		t.Fatal("no drain deadline armed")
	}
	d.clock.Advance(10 * time.Second)
	if r, ok := d.next().(*pb.StopResult); !ok || !r.GetOk() {
		t.Fatalf("the Stop past its deadline: %v, want ok", r)
	}
	if r, ok := d.next().(*pb.PromptResult); !ok || r.GetError().GetCode() != codes.OutcomeUnknown {
		t.Fatalf("the prompt in flight past the deadline: %v, want outcome_unknown", r)
	}
}
