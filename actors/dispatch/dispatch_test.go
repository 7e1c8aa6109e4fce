package dispatch

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Work scheduled one after the other reuses one warm worker; work that
// blocks never holds up the next schedule (a new worker takes it); idle
// workers exit.
func TestPool(t *testing.T) {
	p := New(7, 200*time.Millisecond)
	if p.Throughput() != 7 {
		t.Fatalf("throughput %d", p.Throughput())
	}
	base := runtime.NumGoroutine()
	for i := 0; i < 1000; i++ {
		done := make(chan struct{})
		p.Schedule(func() { close(done) })
		<-done
		runtime.Gosched() // let the worker get back to waiting
	}
	// A schedule may come before the worker is back and start another one;
	// a few, not a thousand.
	if n := runtime.NumGoroutine() - base; n > 8 {
		t.Fatalf("%d goroutines for sequential work (want a warm worker reused)", n)
	}

	release := make(chan struct{})
	var started sync.WaitGroup
	for i := 0; i < 50; i++ {
		started.Add(1)
		p.Schedule(func() { started.Done(); <-release })
	}
	started.Wait() // 50 blocked at once: Schedule never waited for a worker
	close(release)

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("idle workers did not exit: %d goroutines over the base", runtime.NumGoroutine()-base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Actors on the pool keep their mailbox order.
func TestPoolRunsActorsInOrder(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var got []int
	var n atomic.Int64
	done := make(chan struct{})
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if v, ok := ctx.Message().(int); ok {
			got = append(got, v)
			if n.Add(1) == 10000 {
				close(done)
			}
		}
	}, Option()))
	for i := 0; i < 10000; i++ {
		sys.Root.Send(pid, i)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of 10000 messages", n.Load())
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("message %d is %d", i, v)
		}
	}
}
