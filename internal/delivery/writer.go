package delivery

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
)

// Transport is a stream's wire: a thin adapter that encodes items its own
// way and writes them. The writer calls it from one goroutine.
type Transport interface {
	// Write encodes one item; it may buffer it until Flush.
	Write(it Item) error
	// Flush sends what Write buffered.
	Flush() error
	// KeepAlive writes and flushes the transport's keep-alive (an SSE
	// comment, a WebSocket ping).
	KeepAlive() error
	// End writes and flushes what the client gets when the stream ends
	// for reason: a client-only end frame, a close frame, a comment, or
	// nothing.
	End(reason Reason) error
	// SetWriteDeadline bounds every write from now on (the zero time: no
	// bound).
	SetWriteDeadline(t time.Time) error
}

// ProgressReporter is a Transport that writes a large item in pieces and
// says when each went out (WriteInPieces): a client that reads one large
// frame slowly but steadily is not taken for one that stopped. The writer
// sets the function before its first write; the transport calls it on the
// writer's goroutine, within Write or Flush.
type ProgressReporter interface {
	SetProgress(progress func())
}

// PieceSize is how much of a large write goes out before the writer hears of
// progress.
const PieceSize = 128 << 10

// WriteInPieces writes b to w in pieces of PieceSize, calling progress (when
// set) after each piece but the last.
func WriteInPieces(w io.Writer, b []byte, progress func()) error {
	for len(b) > PieceSize && progress != nil {
		if _, err := w.Write(b[:PieceSize]); err != nil {
			return err
		}
		b = b[PieceSize:]
		progress()
	}
	_, err := w.Write(b)
	return err
}

// Defaults of Writer.
const (
	DefaultKeepAlive     = 15 * time.Second
	DefaultEndGrace      = 5 * time.Second
	DefaultShutdownGrace = 3 * time.Second
)

// Writer drains a queue into a transport. The zero value of a field takes
// its default.
type Writer struct {
	// KeepAlive is the interval of the transport's keep-alive (15 s).
	KeepAlive time.Duration
	// SlowAfter is how long the client may take no item while the writer
	// has some for it before it is a slow consumer (the queue's MaxAge).
	SlowAfter time.Duration
	// EndGrace is how long a write found slow may still finish, so that the
	// client reading again gets its end frame behind it; past it the write
	// fails (5 s).
	EndGrace time.Duration
	// Shutdown, when closed, starts ShutdownGrace: the sessions say their
	// end as they stop, and a stream that heard nothing by then ends with
	// ShutdownReason.
	Shutdown       <-chan struct{}
	ShutdownGrace  time.Duration // (3 s)
	ShutdownReason Reason        // (EndShutdown)
	// Done, when closed, ends the stream at once with EndClosed (the
	// WebSocket's reader is gone).
	Done <-chan struct{}
	// Clock runs the writer's timers: the keep-alive, the slow-write
	// watchdog, the shutdown grace (nil: the wall clock).
	Clock clock.Clock
	// OnSlow is called once when the client is found to be a slow
	// consumer, however it was found (the metric): by the queue's bounds,
	// or by a write blocked for SlowAfter, at that moment.
	OnSlow func()
	// KeepQueueWhenSlow leaves the queue as it is when a write is found
	// slow: an ACP stream's queue outlives its reader and waits for the next
	// one. Otherwise the queue is cut at once, which frees what it holds
	// and stops its subscriber.
	KeepQueueWhenSlow bool
}

// Run writes what the queue holds as it comes, until the stream ends, and
// returns why it ended. ctx is the request's: its end is the client going
// away, or, when its cause is identity.ErrRevoked, the credential revoked.
//
// A slow consumer always gets its end: whether the queue cut it (too many
// bytes or too old) or the client took no item for SlowAfter, OnSlow is
// called and the transport's End(EndSlowConsumer) is written behind the
// blocked item as soon as the client reads again, within EndGrace (past it
// the write fails and the connection is dropped: nobody reads it).
func (w *Writer) Run(ctx context.Context, q *Queue, t Transport) Reason {
	clk := w.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	r := run{w: w, q: q, t: t, clock: clk, slowAfter: w.SlowAfter, endGrace: w.EndGrace}
	if r.slowAfter <= 0 {
		r.slowAfter = q.Limits().MaxAge
	}
	if r.endGrace <= 0 {
		r.endGrace = DefaultEndGrace
	}
	if p, ok := t.(ProgressReporter); ok {
		p.SetProgress(r.wrote)
	}
	q.attach()
	defer q.detach()
	defer r.stop()
	keepEvery := w.KeepAlive
	if keepEvery <= 0 {
		keepEvery = DefaultKeepAlive
	}
	keep := r.after(keepEvery)
	defer keep.stop()
	shutdown := w.Shutdown
	var grace <-chan struct{}
	// Anything queued before the writer came (an ACP stream's backlog)
	// goes out now.
	if end, done := r.drain(); done {
		return end
	}
	for {
		select {
		case <-q.Wake():
			if end, done := r.drain(); done {
				return end
			}
		case mailbox := <-q.handoff:
			// The subscriber's mailbox runs here: what it queues is
			// written next, without waking another goroutine.
			mailbox()
			if end, done := r.drain(); done {
				return end
			}
		case <-keep.c:
			keep.rearm()
			r.arm()
			err := t.KeepAlive()
			if slow := r.disarm(); err != nil || slow {
				return r.failed(slow)
			}
		case <-shutdown:
			shutdown = nil
			g := w.ShutdownGrace
			if g <= 0 {
				g = DefaultShutdownGrace
			}
			after := r.after(g)
			defer after.stop()
			grace = after.c
		case <-grace:
			reason := w.ShutdownReason
			if reason == "" {
				reason = EndShutdown
			}
			return r.end(reason)
		case <-w.Done:
			return EndClosed
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), identity.ErrRevoked) {
				return r.end(EndRevoked)
			}
			return EndClientGone
		}
	}
}

// alarm is a timer on the writer's clock that signals a channel; the
// keep-alive's is rearmed each time it was handled.
type alarm struct {
	clock clock.Clock
	d     time.Duration
	c     chan struct{}
	t     clock.Timer
}

func (r *run) after(d time.Duration) *alarm {
	a := &alarm{clock: r.clock, d: d, c: make(chan struct{}, 1)}
	a.rearm()
	return a
}

func (a *alarm) rearm() {
	a.t = a.clock.AfterFunc(a.d, func() {
		select {
		case a.c <- struct{}{}:
		default:
		}
	})
}

func (a *alarm) stop() { a.t.Stop() }

// run is one Run's state.
type run struct {
	w         *Writer
	q         *Queue
	t         Transport
	clock     clock.Clock
	buf       []Item
	slowAfter time.Duration
	endGrace  time.Duration
	extended  time.Time    // when the write deadline last moved (the writer's clock)
	moved     atomic.Int64 // when the last item went out (UnixNano, the writer's clock)
	blocked   atomic.Bool  // the watchdog found no item written for slowAfter
	reported  atomic.Bool  // OnSlow was called

	wmu      sync.Mutex // the watchdog's timer, which rearms itself
	watchdog clock.Timer
	armed    bool
}

// errSlow stops a batch once the client was found slow: the end frame goes
// behind the item that was blocked, not the rest of the batch.
var errSlow = errors.New("the client stopped reading")

// drain writes everything queued; done reports that the stream ended.
func (r *run) drain() (Reason, bool) {
	items, end := r.q.Take(r.buf)
	if len(items) > 0 {
		r.arm()
		err := r.writeAll(items)
		slow := r.disarm()
		clear(items)
		if err != nil || slow {
			return r.failed(slow), true
		}
		r.q.Written()
	}
	// A burst's large slice is not kept by an idle stream.
	if cap(items) > 256 {
		items = nil
	}
	r.buf = items
	if end != "" {
		return r.end(end), true
	}
	return "", false
}

func (r *run) writeAll(items []Item) error {
	for _, it := range items {
		if err := r.t.Write(it); err != nil {
			return err
		}
		if r.blocked.Load() {
			return errSlow
		}
		r.wrote()
	}
	return r.t.Flush()
}

// arm starts the slow-write watchdog and bounds the write: a client that
// takes no item for slowAfter is slow; a write blocked endGrace longer fails
// (the socket's deadline is wall time, whatever the writer's clock). A client
// that keeps taking items is never slow, however long the batch: the
// watchdog measures from the last item written, and the deadline moves on.
func (r *run) arm() {
	r.blocked.Store(false)
	now := r.clock.Now()
	r.moved.Store(now.UnixNano())
	r.extended = now
	r.wmu.Lock()
	r.armed = true
	r.watchdog = r.clock.AfterFunc(r.slowAfter, r.check)
	r.wmu.Unlock()
	_ = r.t.SetWriteDeadline(time.Now().Add(r.slowAfter + r.endGrace))
}

// wrote records that an item, or a piece of one, went out.
func (r *run) wrote() {
	now := r.clock.Now()
	r.moved.Store(now.UnixNano())
	r.q.markMoved()
	if now.Sub(r.extended) >= r.slowAfter/2 {
		r.extended = now
		_ = r.t.SetWriteDeadline(time.Now().Add(r.slowAfter + r.endGrace))
	}
}

// check runs on the watchdog's goroutine: unless an item went out within
// slowAfter (then it looks again when that one is slowAfter old), a write
// has been blocked for slowAfter.
func (r *run) check() {
	r.wmu.Lock()
	if !r.armed {
		r.wmu.Unlock()
		return
	}
	if idle := r.clock.Now().Sub(time.Unix(0, r.moved.Load())); idle < r.slowAfter {
		r.watchdog = r.clock.AfterFunc(r.slowAfter-idle, r.check)
		r.wmu.Unlock()
		return
	}
	r.wmu.Unlock()
	r.stalled()
}

// stalled: the client is slow now, whether or not it reads again later.
func (r *run) stalled() {
	r.blocked.Store(true)
	if !r.w.KeepQueueWhenSlow {
		r.q.Cut(EndSlowConsumer)
	}
	r.reportSlow()
}

func (r *run) reportSlow() {
	if !r.reported.Swap(true) && r.w.OnSlow != nil {
		r.w.OnSlow()
	}
}

// disarm stops the watchdog and reports whether it found the client slow.
func (r *run) disarm() bool {
	r.wmu.Lock()
	r.armed = false
	r.watchdog.Stop()
	r.wmu.Unlock()
	return r.blocked.Load()
}

func (r *run) stop() {
	r.wmu.Lock()
	r.armed = false
	if r.watchdog != nil {
		r.watchdog.Stop()
	}
	r.wmu.Unlock()
}

// failed ends a stream whose write failed, or finished only after the
// client was found slow.
func (r *run) failed(slow bool) Reason {
	if slow {
		return r.end(EndSlowConsumer)
	}
	return EndClientGone
}

// end writes the transport's end for reason; a slow consumer is reported.
func (r *run) end(reason Reason) Reason {
	if reason == EndSlowConsumer {
		r.reportSlow()
	}
	_ = r.t.SetWriteDeadline(time.Now().Add(time.Second))
	_ = r.t.End(reason)
	return reason
}
