package dispatch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Work scheduled one after the other reuses one warm worker; work that
// blocks never holds up the next schedule (a new worker takes it); idle
// workers exit.
func TestPool(t *testing.T) {
	p := New(7, 200*time.Millisecond)
	if p.Throughput() != 7 {
		t.Fatalf("throughput %d", p.Throughput())
	}
	const runs = 1000
	first := make(chan struct{})
	p.Schedule(func() { close(first) })
	<-first
	// Each next run is handed to the worker as soon as it waits again (the
	// hand-off Schedule tries first): one warm worker serves every run.
	for i := 1; i < runs; i++ {
		done := make(chan struct{})
		fn := func() { close(done) }
		waitFor(t, "the warm worker to take the next run", func() bool { return p.handoff(fn) })
		<-done
	}
	if st := p.Stats(); st.Started != 1 {
		t.Fatalf("%d workers started for %d sequential runs (want one warm worker reused)", st.Started, runs)
	}

	release := make(chan struct{})
	var started sync.WaitGroup
	for i := 0; i < 50; i++ {
		started.Add(1)
		p.Schedule(func() { started.Done(); <-release })
	}
	started.Wait() // 50 blocked at once: Schedule never waited for a worker
	if st := p.Stats(); st.Live < 50 {
		t.Fatalf("%d live workers while 50 runs block", st.Live)
	}
	close(release)

	waitFor(t, "idle workers to exit", func() bool { return p.Stats().Live == 0 })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, ok, "%s", what)
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
