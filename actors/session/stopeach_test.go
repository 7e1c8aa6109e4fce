package session_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// StopEach asks every session at once and waits for each, without a
// goroutine per session: while a thousand sessions are still stopping, the
// stop costs the caller's goroutine and no other.
func TestStopEachStartsNoGoroutinePerSession(t *testing.T) {
	const n = 1000
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var mu sync.Mutex
	var held []*actor.PID // the Stops asked, not answered yet
	pids := make([]*actor.PID, n)
	for i := range pids {
		pids[i] = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*pb.Stop); ok {
				mu.Lock()
				held = append(held, ctx.Sender())
				mu.Unlock()
			}
		}))
	}
	asked := func() int { mu.Lock(); defer mu.Unlock(); return len(held) }
	base := runtime.NumGoroutine()
	done := make(chan struct{})
	go func() {
		session.StopEach(context.Background(), sys.Root, pids, "test")
		close(done)
	}()
	testkit.Eventually(t, 30*time.Second, func() bool { return asked() == n }, "every session asked to stop")
	// The caller, and slack for the actor system's own (its mailboxes run
	// on goroutines that come and go); never one per session.
	if extra := runtime.NumGoroutine() - base; extra > 50 {
		t.Errorf("%d goroutines while %d sessions stop", extra, n)
	}
	mu.Lock()
	for _, p := range held {
		sys.Root.Send(p, &pb.StopResult{Ok: true})
	}
	mu.Unlock()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("StopEach did not return once every session answered")
	}
	for _, pid := range pids {
		sys.Root.Stop(pid)
	}
}

// A session that is stopping on its own when StopEach asks it (its lease was
// lost just as the node rejoins) never answers the Stop: protoactor drops
// what reaches a stopping mailbox. StopEach returns when it has terminated,
// not when the caller's deadline passes (here an hour).
func TestStopEachReturnsWhenAStoppingSessionTerminates(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	stopping := make(chan struct{})
	release := make(chan struct{})
	answered := make(chan struct{}, 1)
	posted := postedStop{ch: make(chan struct{})}
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Stopping:
			close(stopping)
			<-release // still stopping while the Stop arrives
		case *pb.Stop:
			answered <- struct{}{}
			ctx.Respond(&pb.StopResult{Ok: true})
		}
	}, actor.WithMailbox(actor.Unbounded(posted))))
	sys.Root.Stop(pid)
	<-stopping
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan struct{})
	go func() {
		session.StopEach(ctx, sys.Root, []*actor.PID{pid}, "test")
		close(done)
	}()
	select {
	case <-posted.ch: // the Stop is in the stopping session's mailbox
	case <-time.After(30 * time.Second):
		t.Fatal("the Stop never reached the session's mailbox")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("StopEach waited on a session that had terminated without answering")
	}
	select {
	case <-answered:
		t.Error("the stopping session handled the Stop (the test no longer shows the dropped request)")
	default:
	}
	// A session already gone: the same.
	done2 := make(chan struct{})
	go func() {
		session.StopEach(ctx, sys.Root, []*actor.PID{pid}, "test")
		close(done2)
	}()
	select {
	case <-done2:
	case <-time.After(30 * time.Second):
		t.Fatal("StopEach waited on a session that was gone")
	}
}

// postedStop closes ch when a Stop is posted to the mailbox it watches.
type postedStop struct{ ch chan struct{} }

func (p postedStop) MessagePosted(m any) {
	if _, ok := actor.UnwrapEnvelopeMessage(m).(*pb.Stop); ok {
		close(p.ch)
	}
}
func (postedStop) MailboxStarted()     {}
func (postedStop) MessageReceived(any) {}
func (postedStop) MailboxEmpty()       {}
