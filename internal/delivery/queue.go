package delivery

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Item is one message on its way to a client: a session frame, which the
// transport renders, or a message already encoded (a WebSocket reply, an ACP
// JSON-RPC message), which it writes as it is.
type Item struct {
	Frame *pb.Frame
	Raw   []byte
	// owed: the frames a subscription begins with (its replay, or the sticky
	// state), which the client is owed rather than behind on.
	owed bool
}

// itemOverhead is what an item costs beyond its payload: its slot and the
// framing a transport adds around it. Every item counts, an empty one too.
const itemOverhead = 24

// Size is what the item counts in a queue's byte bound.
func (it Item) Size() int {
	if it.Frame != nil {
		return int(it.Frame.GetSize()) + len(it.Frame.GetId()) + itemOverhead
	}
	return len(it.Raw) + itemOverhead
}

// Reason is why a stream ends.
type Reason string

// Reasons a stream ends. The browser sees some of them in its client-only
// end frame (end{reason}); see each transport for what it writes.
const (
	// EndFinal: the stream's last item was queued: the session's end frame
	// (it ended the stream), or a per-turn chat stream's finish.
	EndFinal Reason = "final"
	// EndSlowConsumer: the client fell more than the queue's bounds behind,
	// or a write to it stayed blocked for the queue's age bound.
	EndSlowConsumer Reason = "slow_consumer"
	// EndSessionGone: the session actor went away without ending the
	// stream (its node died, it moved); the client reconnects and resumes.
	EndSessionGone Reason = "session_gone"
	// EndShutdown and EndMoved: the daemon is stopping; on one node the
	// session sleeps until it is back, in a cluster another node serves it.
	EndShutdown Reason = "shutdown"
	EndMoved    Reason = "moved"
	// EndRevoked: the credential the stream was opened with was revoked.
	EndRevoked Reason = "revoked"
	// EndClosed: something beside the queue ended the stream (the
	// WebSocket's reader, the ACP connection); what was queued went first.
	EndClosed Reason = "closed"
	// EndClientGone: a write failed or the request ended: nobody reads.
	EndClientGone Reason = "client_gone"
)

// Limits bound a queue. The zero value of a field takes its default.
type Limits struct {
	// MaxBytes bounds the client's backlog: what waits for the writer
	// behind what it is writing, less the largest one item (1 MiB).
	MaxBytes int
	// MaxAge bounds how long the client takes nothing while an item waits
	// for it, the writer's included (10 s).
	MaxAge time.Duration
}

// The browser's defaults (limits.client_queue_bytes and client_queue_age).
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxAge   = 10 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultMaxAge
	}
	return l
}

// Queue is one client's bounded outbound queue. Producers (a subscriber's
// sink, a WebSocket's request handlers, an ACP connection) push; one writer
// at a time takes everything queued, writes it and reports it written.
//
// The bounds are for a client that does not read, not for one that reads
// what it was sent:
//
//   - Bytes bound the backlog: what waits for the writer behind what it is
//     writing, less the largest one item. One frame of any size reaches a
//     client that reads; a second large one behind it, or many small ones,
//     make a backlog.
//   - Age bounds how long the client takes nothing while an item waits for
//     it, the ones the writer holds included: from the oldest unwritten
//     item, or the writer's last progress when that is later (a large frame
//     read slowly but steadily moves). A write that does not move is found
//     by the writer (Writer.SlowAfter), frames piling up behind it by the
//     push.
//   - What a subscription is owed when it begins (PushOwed: the replay of a
//     resume, the sticky state) counts in neither: it is written as the
//     client reads it, and the writer cuts a client that stops reading it.
//     Live items behind it begin to age once it is written.
//
// A push past a bound cuts the client: the queue drops what it holds and
// ends with EndSlowConsumer. The session's final batch never cuts.
type Queue struct {
	lim     Limits
	clock   clock.Clock
	wake    chan struct{}
	handoff chan func() // unbuffered: a subscriber's mailbox run, for the writer while it waits

	mu       sync.Mutex
	items    []Item
	queued   tally  // items, not taken yet
	flight   tally  // items taken by the writer and not yet written
	owed     int    // owed items not written yet (queued or in flight)
	end      Reason // the stream ends after what is queued
	dropped  bool   // ... and nothing is queued: it was cut
	cutBytes int    // what was waiting when the queue was cut
	cutAge   time.Duration
	pushed   uint64 // items ever pushed
	written  uint64 // items ever written
	writers  int    // writers attached (Writer.Run): 0 or 1
	progress chan struct{}
	// moved is when the writer last wrote something (UnixNano on the
	// queue's clock): what waits has not waited longer than since then.
	moved atomic.Int64
}

// tally counts one part of what waits: the queued items or those in flight.
type tally struct {
	items, bytes int
	owed         int       // items of a subscription's beginning
	live         int       // the other items
	liveBytes    int       // their bytes
	liveMax      int       // the largest of them
	liveSince    time.Time // when the oldest of them began to wait
}

func (t *tally) add(it Item, since time.Time) {
	n := it.Size()
	t.items++
	t.bytes += n
	if it.owed {
		t.owed++
		return
	}
	if t.live == 0 {
		t.liveSince = since
	}
	t.live++
	t.liveBytes += n
	t.liveMax = max(t.liveMax, n)
}

// merge adds the items of u, which came after t's.
func (t *tally) merge(u tally) {
	if t.live == 0 {
		t.liveSince = u.liveSince
	}
	t.items += u.items
	t.bytes += u.bytes
	t.owed += u.owed
	t.live += u.live
	t.liveBytes += u.liveBytes
	t.liveMax = max(t.liveMax, u.liveMax)
}

// NewQueue returns an empty queue whose age bound runs on c (nil: the wall
// clock).
func NewQueue(l Limits, c clock.Clock) *Queue {
	if c == nil {
		c = clock.Real{}
	}
	return &Queue{lim: l.withDefaults(), clock: c, wake: make(chan struct{}, 1), handoff: make(chan func())}
}

// Dispatcher is the actor.Dispatcher of the actor that fills the queue (its
// subscriber): a mailbox run goes to the queue's writer when the writer is
// waiting for work, so that a batch of frames is taken in, queued and written
// by one goroutine, with no hand-off between the subscriber and the writer;
// otherwise (no writer, or it is busy writing) it goes to the daemon's
// dispatcher, and a slow client never holds up its subscriber.
func (q *Queue) Dispatcher() actor.Dispatcher { return handoffDispatcher{q.handoff} }

type handoffDispatcher struct{ handoff chan func() }

func (d handoffDispatcher) Schedule(fn func()) {
	select {
	case d.handoff <- fn:
	default:
		dispatch.Dispatcher().Schedule(fn)
	}
}

func (d handoffDispatcher) Throughput() int { return dispatch.Dispatcher().Throughput() }

// Limits are the queue's bounds, defaults filled in.
func (q *Queue) Limits() Limits { return q.lim }

// Wake is signalled (capacity 1) whenever there is something for the writer:
// items, or the end of the stream.
func (q *Queue) Wake() <-chan struct{} { return q.wake }

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// PushFrames queues a batch of session frames; final marks the stream's
// last batch (the session's end frame, a chat turn's finish is in it). It
// reports false when the stream has ended or the client is now too far
// behind (then it was cut).
func (q *Queue) PushFrames(fs []*pb.Frame, final bool) bool {
	return q.pushFrames(fs, final, false)
}

// PushOwed queues the frames a subscription begins with (the replay of a
// resume, the sticky state, a running turn from its start): they count in
// neither bound, and are written as the client reads them. final as for
// PushFrames.
func (q *Queue) PushOwed(fs []*pb.Frame, final bool) bool {
	return q.pushFrames(fs, final, true)
}

func (q *Queue) pushFrames(fs []*pb.Frame, final, owed bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.end != "" {
		return false
	}
	now := q.clock.Now()
	for _, f := range fs {
		q.addLocked(Item{Frame: f, owed: owed}, now)
	}
	if final {
		q.end = EndFinal
		q.signal()
		return true
	}
	if owed {
		q.signal()
		return true
	}
	return q.checkLocked(now)
}

// PushRaw queues a message already encoded. It reports false when the
// stream has ended or the client is now too far behind (then it was cut).
func (q *Queue) PushRaw(b []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.end != "" {
		return false
	}
	now := q.clock.Now()
	q.addLocked(Item{Raw: b}, now)
	return q.checkLocked(now)
}

func (q *Queue) addLocked(it Item, now time.Time) {
	q.items = append(q.items, it)
	q.queued.add(it, now)
	if it.owed {
		q.owed++
	}
	q.pushed++
}

// checkLocked cuts the client when it is past a bound, else wakes the writer.
func (q *Queue) checkLocked(now time.Time) bool {
	if q.backlogLocked() > q.lim.MaxBytes || q.ageLocked(now) > q.lim.MaxAge {
		q.dropLocked(EndSlowConsumer)
		return false
	}
	q.signal()
	return true
}

// backlogLocked is what the byte bound counts: the live items waiting for
// the writer, less the largest one.
func (q *Queue) backlogLocked() int {
	return q.queued.liveBytes - q.queued.liveMax
}

// ageLocked is how long the client has taken nothing while a live item
// waited: since the oldest unwritten live item was pushed, or since the
// writer last wrote something, whichever is later (a large frame written
// slowly but steadily is not a client behind). Live items behind owed ones
// do not wait until those are written.
func (q *Queue) ageLocked(now time.Time) time.Duration {
	var since time.Time
	switch {
	case q.owed > 0:
		return 0
	case q.flight.live > 0:
		since = q.flight.liveSince
	case q.queued.live > 0:
		since = q.queued.liveSince
	default:
		return 0
	}
	if moved := time.Unix(0, q.moved.Load()); moved.After(since) {
		since = moved
	}
	return now.Sub(since)
}

// markMoved records that the writer wrote something now.
func (q *Queue) markMoved() { q.moved.Store(q.clock.Now().UnixNano()) }

// dropLocked ends the stream for reason, dropping what is queued.
func (q *Queue) dropLocked(reason Reason) {
	q.cutBytes, q.cutAge = q.queued.bytes+q.flight.bytes, q.ageLocked(q.clock.Now())
	clear(q.items)
	q.items = nil
	q.owed -= q.queued.owed
	q.queued = tally{}
	q.end = reason
	q.dropped = true
	q.progressLocked()
	q.signal()
}

// End ends the stream for reason after what is queued (EndSessionGone: the
// session went away). A stream that has ended already keeps its reason.
func (q *Queue) End(reason Reason) {
	q.mu.Lock()
	if q.end == "" {
		q.end = reason
		q.progressLocked()
	}
	q.mu.Unlock()
	q.signal()
}

// Cut ends the stream for reason at once: what is queued is dropped.
func (q *Queue) Cut(reason Reason) {
	q.mu.Lock()
	if !q.dropped {
		q.dropLocked(reason)
	}
	q.mu.Unlock()
}

// Take hands the writer everything queued, in order, and how the stream
// ends after it ("" when it goes on). buf is the slice the writer got from
// the previous Take, for the queue to fill next. The items count as
// waiting until Written.
func (q *Queue) Take(buf []Item) ([]Item, Reason) {
	clear(buf)
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = buf[:0]
	if len(items) > 0 {
		q.flight.merge(q.queued)
		q.queued = tally{}
	}
	return items, q.end
}

// Written tells the queue that the writer wrote and flushed everything it
// took.
func (q *Queue) Written() {
	q.markMoved()
	q.mu.Lock()
	q.written += uint64(q.flight.items)
	q.settleLocked()
	q.progressLocked()
	q.mu.Unlock()
}

// settleLocked forgets what was in flight. Once the owed items are gone,
// the live items behind them begin to wait now.
func (q *Queue) settleLocked() {
	if q.flight.owed > 0 {
		q.owed -= q.flight.owed
		if q.owed == 0 && q.queued.live > 0 {
			q.queued.liveSince = q.clock.Now()
		}
	}
	q.flight = tally{}
}

// attach records a writer draining the queue (Writer.Run).
func (q *Queue) attach() {
	q.mu.Lock()
	q.writers++
	q.mu.Unlock()
}

// detach records that the writer went away. What it took and did not
// write is lost (an ACP stream's reader left mid-write); the rest waits
// for the next writer, who is woken.
func (q *Queue) detach() {
	q.mu.Lock()
	q.writers--
	q.settleLocked()
	q.progressLocked()
	q.mu.Unlock()
	q.signal()
}

// Ended reports how the stream ended ("" while it goes on).
func (q *Queue) Ended() Reason {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.end
}

// Waiting reports what waits for the client: items (queued and in flight),
// their bytes, and the age of the oldest. After a cut, the bytes and age are
// those that cut it.
func (q *Queue) Waiting() (items, bytes int, age time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dropped {
		return 0, q.cutBytes, q.cutAge
	}
	return q.queued.items + q.flight.items, q.queued.bytes + q.flight.bytes, q.ageLocked(q.clock.Now())
}

// Mark is the count of items pushed so far, for WaitWritten.
func (q *Queue) Mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushed
}

// WaitWritten waits until a writer has written every item pushed before
// mark. It reports false when no writer is attached (now, or any more), the
// queue was cut, or ctx is done.
func (q *Queue) WaitWritten(ctx context.Context, mark uint64) bool {
	return q.wait(ctx, func() (bool, bool) { return q.written >= mark, q.writers > 0 })
}

// WaitRoom waits until what waits for the client is at most half the byte
// bound, so that a producer of a long series (an ACP session/load replay)
// goes at the reader's pace instead of tripping the bound. It reports false
// when the queue was cut or ctx is done.
func (q *Queue) WaitRoom(ctx context.Context) bool {
	return q.wait(ctx, func() (bool, bool) { return q.queued.bytes+q.flight.bytes <= q.lim.MaxBytes/2, true })
}

// wait waits until cond reports done, or that waiting is no use.
func (q *Queue) wait(ctx context.Context, cond func() (done, worth bool)) bool {
	for {
		q.mu.Lock()
		done, worth := cond()
		switch {
		case done:
			q.mu.Unlock()
			return true
		case q.dropped || !worth:
			q.mu.Unlock()
			return false
		}
		if q.progress == nil {
			q.progress = make(chan struct{})
		}
		ch := q.progress
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// progressLocked wakes the waiters, if any.
func (q *Queue) progressLocked() {
	if q.progress != nil {
		close(q.progress)
		q.progress = nil
	}
}
