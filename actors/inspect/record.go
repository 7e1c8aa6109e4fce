package inspect

import (
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// mailbox is an actor's real mailbox. Posts go straight to it (posted is
// computed: processed + queued + the one being handled); the message loop
// stays the inner mailbox's, which calls the actor context through the
// invoker installed at registration.
type mailbox struct {
	actor.Mailbox
	r *record
}

// RegisterHandlers is where protoactor hands the mailbox its actor context,
// after the process is in the registry: the record learns its PID, becomes
// visible, and wraps the context to time each message.
func (m *mailbox) RegisterHandlers(inv actor.MessageInvoker, d actor.Dispatcher) {
	c, ok := inv.(actor.Context)
	if !ok || c.Self() == nil {
		m.Mailbox.RegisterHandlers(inv, d)
		return
	}
	r := m.r
	r.pid = c.Self()
	r.id = r.pid.Id
	r.started = now(r.in.clk).UTC()
	r.sys = c.ActorSystem()
	r.proc, _ = r.sys.ProcessRegistry.GetLocal(r.id)
	r.in.add(r)
	m.Mailbox.RegisterHandlers(&invoker{inner: inv, r: r}, d)
}

// invoker sits between the mailbox's message loop and the actor context.
type invoker struct {
	inner actor.MessageInvoker
	r     *record
}

func (v *invoker) InvokeUserMessage(msg any) {
	r := v.r
	// Messages still waiting behind this one.
	r.kind.depth.observe(int64(r.mb.UserMessageCount()))
	start := r.in.clock()
	r.begin(msg, start, true)
	v.inner.InvokeUserMessage(msg)
	r.done(start, true)
}

// InvokeSystemMessage times lifecycle work too (Started, stopping, a child's
// Terminated): it shows as the current message, but is not counted as
// posted or processed, which are user messages.
func (v *invoker) InvokeSystemMessage(msg any) {
	r := v.r
	if _, ok := msg.(*actor.Restart); ok {
		r.kind.restarts.Inc()
	}
	start := r.in.clock()
	r.begin(msg, start, false)
	v.inner.InvokeSystemMessage(msg)
	r.done(start, false)
	switch msg.(type) {
	case *actor.Stop, *actor.Terminated:
		// A stop completes while handling one of these (the actor's own Stop,
		// or its last child's Terminated): then its process is gone.
		if !r.alive() {
			r.in.remove(r)
		}
	}
}

// EscalateFailure is called by the mailbox after a handler panicked: the
// message is no longer being handled (the supervisor decides what next).
func (v *invoker) EscalateFailure(reason, message any) {
	v.r.failed()
	v.inner.EscalateFailure(reason, message)
}

// A sample is one handled message, packed in a uint64: when it ended (ms
// since the inspector's epoch, wrapping after 49 days, which only matters
// for an actor idle that long) and how long its handler ran (µs, capped).

// record is the live state of one inspected actor. Everything that changes
// is atomic and written only on the actor's own goroutine (one message runs
// at a time); snapshots read it without stopping the actor, so a snapshot
// taken as a message starts may pair its type with the previous one's start,
// which a once-a-second view does not show. No lock: the inspector costs a
// few atomic stores per message.
type record struct {
	in      *Inspector
	kind    *kindStats
	session string
	domain  string
	mb      actor.Mailbox // the inner mailbox: queue length

	// Set once at registration, before the record is published.
	pid     *actor.PID
	id      string
	started time.Time
	sys     *actor.ActorSystem
	proc    actor.Process

	// busy is 0 while the actor waits; while it handles a message, the
	// message's start on the inspector's clock (ns) plus one, shifted left
	// one bit, with the low bit set for a system message. One word, so that
	// beginning and ending a message are one store each.
	busy    atomic.Int64
	cur     atomic.Value    // reflect.Type of the message being handled
	samples []atomic.Uint64 // ring of the last handled messages: endMS<<32 | durUS
	n       atomic.Uint64   // user messages handled (and samples written)
}

func packBusy(start time.Duration, user bool) int64 {
	v := (int64(start) + 1) << 1
	if !user {
		v |= 1
	}
	return v
}

// unpackBusy returns the start and kind of the message being handled; ok is
// false while the actor waits.
func unpackBusy(v int64) (start time.Duration, user, ok bool) {
	if v == 0 {
		return 0, false, false
	}
	return time.Duration(v>>1 - 1), v&1 == 0, true
}

func (r *record) begin(msg any, start time.Duration, user bool) {
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		msg = env.Message
	}
	if msg == nil {
		msg = struct{}{}
	}
	// A load costs less than a store: most messages are of the type the
	// previous one was.
	if t := reflect.TypeOf(msg); r.cur.Load() != t {
		r.cur.Store(t)
	}
	r.busy.Store(packBusy(start, user))
}

func (r *record) done(start time.Duration, user bool) {
	end := r.in.clock()
	d := end - start
	if user {
		// Counted as processed before it stops being current: a snapshot
		// between the two sees the message twice in posted rather than not
		// at all.
		n := r.n.Load()
		r.samples[n%uint64(len(r.samples))].Store(uint64(uint32(end.Milliseconds()))<<32 | uint64(clampUS(d)))
		r.n.Store(n + 1)
		r.kind.handling.observe(int64(d))
	}
	r.busy.Store(0)
}

// failed ends the current message after its handler panicked.
func (r *record) failed() {
	if start, user, ok := unpackBusy(r.busy.Load()); ok {
		r.done(start, user)
	}
}

func clampUS(d time.Duration) uint32 {
	us := d.Microseconds()
	if us > math.MaxUint32 {
		return math.MaxUint32
	}
	if us < 0 {
		return 0
	}
	return uint32(us)
}

// alive reports whether the actor's process is still the registered one.
func (r *record) alive() bool {
	p, ok := r.sys.ProcessRegistry.GetLocal(r.id)
	return ok && p == r.proc
}

// snapshot reads the record at now.
func (r *record) snapshot(now time.Time, buf []uint32) Actor {
	processed := r.n.Load()
	depth := r.mb.UserMessageCount()
	a := Actor{
		ID:        r.id,
		Kind:      r.kind.name,
		Session:   r.session,
		Domain:    r.domain,
		Depth:     depth,
		Processed: processed,
		Started:   r.started,
	}
	a.Posted = processed + uint64(max(depth, 0))
	nowMS := uint32(now.Sub(r.in.epoch).Milliseconds())
	ageMS := uint32(r.in.age.Milliseconds())

	if start, user, ok := unpackBusy(r.busy.Load()); ok {
		if user {
			a.Posted++
		}
		if t, ok := r.cur.Load().(reflect.Type); ok {
			a.Current = t.String()
		}
		ms := (now.Sub(r.in.epoch) - start).Milliseconds()
		if ms < 0 {
			ms = 0
		}
		a.CurrentForMS = &ms
	}
	count := r.n.Load()
	if count > uint64(len(r.samples)) {
		count = uint64(len(r.samples))
	}
	buf = buf[:0]
	for i := uint64(0); i < count; i++ {
		v := r.samples[i].Load()
		endMS, durUS := uint32(v>>32), uint32(v)
		// Wrapping arithmetic: the sample's age in ms.
		if nowMS-endMS <= ageMS {
			buf = append(buf, durUS)
		}
	}
	a.P50US, a.P99US = percentiles(buf)
	return a
}

// percentiles returns the nearest-rank 50th and 99th percentiles of v
// (sorted in place); zeros when v is empty.
func percentiles(v []uint32) (p50, p99 int64) {
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	rank := func(p float64) int64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		if i < 0 {
			i = 0
		}
		return int64(v[i])
	}
	return rank(0.50), rank(0.99)
}
