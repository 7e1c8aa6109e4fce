// Package dispatch runs actor mailboxes on warm goroutines.
//
// protoactor's default dispatcher starts a new goroutine each time a mailbox
// has messages. A new goroutine starts with a 2 KiB stack, and the daemon's
// handlers (JSON, protobuf, the store writer) need several times that, so
// every message grew a fresh stack through repeated copies: a third of the
// CPU of an in-process command went to runtime.copystack. A Pool hands a
// mailbox run to a goroutine that is idle and already has a grown stack, and
// starts a new one only when none is idle, so it never queues work and never
// blocks the sender; a goroutine idle for a while exits.
package dispatch

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Pool is an actor.Dispatcher. Its zero value is not usable; use New.
type Pool struct {
	throughput int
	idle       time.Duration
	work       chan func() // unbuffered: a send succeeds only to a waiting worker

	// Changed only when a worker starts or exits, never per mailbox run.
	started atomic.Int64 // workers ever started
	live    atomic.Int64 // workers running or idle now
}

// Stats is a snapshot of a pool's workers.
type Stats struct {
	Started int64 // workers started since the pool was made
	Live    int64 // workers alive now (running a mailbox or idle)
}

// Stats reports the pool's workers.
func (p *Pool) Stats() Stats {
	return Stats{Started: p.started.Load(), Live: p.live.Load()}
}

var _ actor.Dispatcher = (*Pool)(nil)

// New returns a pool whose mailboxes process up to throughput messages per
// run (protoactor's default is 300) and whose goroutines exit after idle
// without work.
func New(throughput int, idle time.Duration) *Pool {
	return &Pool{throughput: throughput, idle: idle, work: make(chan func())}
}

// Shared is the pool of every actor the daemon spawns.
var Shared = New(300, 30*time.Second)

// Option is the props option that runs an actor's mailbox on Shared; with
// SURFACED_DISPATCHER=goroutine in the environment, on protoactor's default
// dispatcher instead (to compare, or to rule the pool out).
func Option() actor.PropsOption { return option }

// Dispatcher is the dispatcher Option sets: for a dispatcher of its own that
// passes what it does not run itself on to the daemon's.
func Dispatcher() actor.Dispatcher { return chosen }

var chosen = func() actor.Dispatcher {
	if os.Getenv("SURFACED_DISPATCHER") == "goroutine" {
		return actor.NewDefaultDispatcher(300)
	}
	return Shared
}()

var option = actor.WithDispatcher(chosen)

// Schedule runs fn on an idle worker, or on a new one when none is idle.
func (p *Pool) Schedule(fn func()) {
	if !p.handoff(fn) {
		p.started.Add(1)
		p.live.Add(1)
		go p.worker(fn)
	}
}

// handoff gives fn to a worker waiting for work, if one is.
func (p *Pool) handoff(fn func()) bool {
	select {
	case p.work <- fn:
		return true
	default:
		return false
	}
}

// Throughput implements actor.Dispatcher.
func (p *Pool) Throughput() int { return p.throughput }

func (p *Pool) worker(fn func()) {
	defer p.live.Add(-1)
	fn()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case fn := <-p.work:
			fn()
			t.Reset(p.idle)
		case <-t.C:
			return
		}
	}
}
