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
