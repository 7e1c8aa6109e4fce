package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/tracing"
)

// Op is one write for Writer. Exactly the non-empty parts are written, in the
// order KV, Transcript, Update; each part is a write of its own, so a failure
// of a later part leaves the earlier ones applied (the daemon's ops have one
// part each). Done, when set, is called once with the outcome (see Writer),
// from a writer goroutine or the submitting one; it must not block: actors
// turn it into a message to themselves.
//
// Fence is passed to each of the op's writes (see Fence): when not zero,
// once the session's lease has moved on, the op fails with an error
// wrapping ErrFenced, and the actor should stop the session.
//
// Chain and Epoch put the op in a chain (see Writer): Chain names a
// sequence of ops of the session in which each is built on the ones before
// it; Epoch is the chain's epoch when the op was made. An empty Chain is an
// op that nothing is built on.
type Op struct {
	SessionID  string
	KV         []KV
	Transcript []Entry
	Update     *SessionUpdate
	Fence      Fence
	Chain      string
	Epoch      uint64
	Done       func(error)
	// Trace, when set, is the W3C traceparent of the change the op makes
	// (a command's span): the op's write is a span in that trace, named
	// with the commit it joined (see writer_trace.go).
	Trace string
	span  tracing.Span
}

// Writer persists ops off the actors' goroutines so that a slow store never
// blocks a mailbox. Ops of one session are written in submission order (a
// session always maps to the same worker). A worker writes what queued up
// while it wrote the last batch in one go (group commit): a run of KV-only
// ops is one PutKV per session (its consecutive ops under one Fence
// coalesced), or, when the store is a Batcher, one transaction for the
// whole run, every session's ops in it. The zero value is not usable; use
// NewWriter.
//
// # Outcomes
//
// Done gets nil only once every part of the op is committed: a caller
// acknowledges a change to its client only then. An error wrapping
// ErrOutcomeUnknown means the op may have been applied (its commit was in
// flight when the connection died or its retry window ended); any other
// error means it was not. A write that fails for a reason that may pass is
// tried again within RetryWindow (see there), each attempt bounded by the
// window and AttemptGrace, so that every op has its outcome by then,
// whatever the store does.
//
// # Chains
//
// A chain is a sequence of ops of one session, each computed on top of the
// ones before it: the snapshots of a surface domain, the writes of the
// session KV. Once an op of a chain fails, every later op of the chain with
// the same Epoch fails too, unsent, with an error wrapping ErrAborted:
// they were built on a change that did not happen (or may not have), and
// writing them would make it happen after all. The chain's owner, told of
// the failure, rolls back to what is durable and makes its next ops under a
// greater Epoch, which the writer writes again. The writer remembers a
// failed chain until an op of a newer epoch comes.
//
// A chain outlives its owner: the next activation of the session on this
// node, or the domain of the agent's next incarnation, writes the same
// chain. A new owner takes its first epoch from EpochBase, above every
// epoch of the owners before it, so that a failure under an earlier owner
// never aborts its writes.
//
// # Health
//
// The writer tells whether the store can be written (Available, Health).
// It becomes unavailable as soon as a write fails for a reason that is not
// the op's own (the store is unreachable, locked, full, or the outcome of a
// write is unknown) or a write has been in flight for StallAfter, and
// available again when a write succeeds or a probe is answered: an empty
// UpdateSession of the session whose write failed, first after
// ProbeEvery, then backing off to ProbeMax. While it is unavailable,
// queued ops are not sent: they fail at once with ErrUnavailable (the op
// whose failure made it unavailable goes on trying within its window).
// Callers check Available before they apply a change, so that a command is
// refused at once, not queued behind a store that cannot take it.
//
// A failure or a stall seen across a stall of the process itself (the
// stall watch firing, or an attempt ending, much later than it was due:
// the process was stopped or starved, as a frozen node is until it wakes)
// says nothing of the store: the writer probes the store first, on the
// spot, and makes it unavailable only if the probe fails too. A node woken
// from a freeze does not refuse its first changes for nothing.
//
// # Writes of the caller's own
//
// Do and DoStream run a write that is not an Op, on the caller's
// goroutine, under the same health and outcomes: an artifact's record, the
// deletion of an artifact or of a session, an artifact's bytes.
type Writer struct {
	store   Store
	log     *slog.Logger
	clock   clock.Clock
	workers []*writerWorker
	wg      sync.WaitGroup
	inline  bool // the store writes in memory: write on the caller's goroutine when idle

	retry        time.Duration
	stallAfter   time.Duration
	probeEvery   time.Duration
	probeMax     time.Duration
	probeTimeout time.Duration

	up     atomic.Bool
	hmu    sync.Mutex
	health Health
	// The session (and fence) whose write made the store unavailable: the
	// probe writes it.
	probeSession string
	probeFence   Fence
	probing      bool
	probes       sync.WaitGroup
	closing      chan struct{}
	closeOnce    sync.Once
	node         atomic.Pointer[string] // on the spans of traced ops (SetNode)
	// epochBases counts the bases handed out by EpochBase.
	epochBases atomic.Uint64
	// life ends at Close: a probe in flight ends with it.
	life context.Context
	end  context.CancelFunc
}

// RetryWindow is how long Writer tries an op after its first attempt when
// it fails for a reason that may pass (a lost connection, a database
// restarting, a busy SQLite file), backing off from 50 ms to 1 s. KV writes
// and session updates are idempotent (a KV entry never lowers its key's
// rev), so they are tried again even after an attempt whose outcome is
// unknown (a later success settles it); a transcript append only after
// attempts that surely failed, since a second append could duplicate
// entries. A write refused for what it is (fenced, not found, invalid) or
// for a full disk is not tried again.
const RetryWindow = 5 * time.Second

// AttemptGrace is how long an attempt may run past the retry window: a
// store whose own bound equals the window (SQLite's busy timeout) answers
// with its definite error before the writer's deadline interrupts it.
// Every op has its outcome by RetryWindow + AttemptGrace.
const AttemptGrace = time.Second

// Defaults of the writer's health watch (see Writer).
const (
	StallAfter   = 2 * time.Second        // a write in flight this long makes the store unavailable
	ProbeEvery   = 200 * time.Millisecond // the first probe after the store became unavailable
	ProbeMax     = 2 * time.Second        // the longest wait between probes
	ProbeTimeout = 2 * time.Second        // a probe not answered by then failed
)

// Health is what a Writer knows of its store.
type Health struct {
	// Available: writes are being made. When false, the rest says since
	// when and why not.
	Available bool
	Since     time.Time
	Err       error
}

// WriterOption configures NewWriter.
type WriterOption func(*Writer)

// WithRetryWindow sets the retry window of an op (default RetryWindow).
func WithRetryWindow(d time.Duration) WriterOption { return func(w *Writer) { w.retry = d } }

// WithStallAfter sets how long a write may be in flight before the store
// counts as unavailable (default StallAfter).
func WithStallAfter(d time.Duration) WriterOption { return func(w *Writer) { w.stallAfter = d } }

// WithProbe sets the first and the longest wait between probes, and a
// probe's timeout (defaults ProbeEvery, ProbeMax, ProbeTimeout).
func WithProbe(every, most, timeout time.Duration) WriterOption {
	return func(w *Writer) { w.probeEvery, w.probeMax, w.probeTimeout = every, most, timeout }
}

// WithClock sets the clock of the writer's timers: back-off, stall watch,
// probes (default the wall clock). Attempts' deadlines are the wall clock's.
func WithClock(c clock.Clock) WriterOption { return func(w *Writer) { w.clock = c } }

// Inliner is implemented by stores whose writes are cheap and never block
// (memstore): Writer then writes an op on the submitting goroutine when that
// session's worker is idle, instead of handing it to the worker. Order and
// the Done contract are the same; only a goroutine hand-off is saved.
type Inliner interface {
	Inline() bool
}

type writerWorker struct {
	mu      sync.Mutex
	queue   []Op
	wake    chan struct{}
	closed  bool
	idle    *sync.Cond
	running bool

	// aborted holds the failed epoch of each chain that failed; it is
	// touched only by whoever is running (the worker or an inline write).
	aborted map[chainKey]uint64
}

type chainKey struct{ session, chain string }

// NewWriter starts workers goroutines writing to s; 0 means what s says it
// can write at once (ConcurrentWrites), else 4.
func NewWriter(s Store, workers int, log *slog.Logger, opts ...WriterOption) *Writer {
	if c, ok := s.(ConcurrentWrites); ok && workers <= 0 {
		workers = c.ConcurrentWrites()
	}
	if workers <= 0 {
		workers = 4
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{store: s, log: log, clock: clock.Real{}, retry: RetryWindow, stallAfter: StallAfter,
		probeEvery: ProbeEvery, probeMax: ProbeMax, probeTimeout: ProbeTimeout, closing: make(chan struct{})}
	for _, o := range opts {
		o(w)
	}
	w.life, w.end = context.WithCancel(context.Background())
	w.up.Store(true)
	w.health.Available = true
	if in, ok := s.(Inliner); ok && in.Inline() {
		w.inline = true
	}
	for i := 0; i < workers; i++ {
		ww := &writerWorker{wake: make(chan struct{}, 1), aborted: map[chainKey]uint64{}}
		ww.idle = sync.NewCond(&ww.mu)
		w.workers = append(w.workers, ww)
		w.wg.Add(1)
		go w.run(ww)
	}
	return w
}

// Store returns the store the writer writes to.
func (w *Writer) Store() Store { return w.store }

// Available reports whether the store can be written now (see Writer). It
// is one atomic load: callers ask it before every change they apply.
func (w *Writer) Available() bool { return w.up.Load() }

// Health returns what the writer knows of the store.
func (w *Writer) Health() Health {
	w.hmu.Lock()
	defer w.hmu.Unlock()
	return w.health
}

func (w *Writer) worker(sessionID string) *writerWorker {
	h := fnv.New32a()
	h.Write([]byte(sessionID))
	return w.workers[int(h.Sum32())%len(w.workers)]
}

// Submit queues op. It never blocks. After Close, op.Done gets ErrClosed.
func (w *Writer) Submit(op Op) {
	op.span = w.startOpSpan(op)
	ww := w.worker(op.SessionID)
	ww.mu.Lock()
	if w.inline && !ww.closed && !ww.running && len(ww.queue) == 0 {
		// Idle: write here. running keeps the worker (and other inline
		// writers of this worker) out until it is done, so order holds.
		ww.running = true
		ww.mu.Unlock()
		w.write(ww, []Op{op})
		ww.mu.Lock()
		ww.running = false
		queued := len(ww.queue) > 0
		ww.idle.Broadcast()
		ww.mu.Unlock()
		if queued {
			select {
			case ww.wake <- struct{}{}:
			default:
			}
		}
		return
	}
	if ww.closed {
		ww.mu.Unlock()
		if op.Done != nil {
			op.Done(ErrClosed)
		}
		return
	}
	ww.queue = append(ww.queue, op)
	ww.mu.Unlock()
	select {
	case ww.wake <- struct{}{}:
	default:
	}
}

// Flush waits until every op submitted before the call is written (or has
// failed).
func (w *Writer) Flush(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		for _, ww := range w.workers {
			ww.mu.Lock()
			for len(ww.queue) > 0 || ww.running {
				ww.idle.Wait()
			}
			ww.mu.Unlock()
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued (or fails it, while the store is
// unavailable) and stops the workers and the probe.
func (w *Writer) Close() {
	for _, ww := range w.workers {
		ww.mu.Lock()
		ww.closed = true
		ww.mu.Unlock()
		select {
		case ww.wake <- struct{}{}:
		default:
		}
	}
	w.wg.Wait()
	w.closeOnce.Do(func() { close(w.closing); w.end() })
	w.probes.Wait()
}

func (w *Writer) run(ww *writerWorker) {
	defer w.wg.Done()
	for {
		ww.mu.Lock()
		for ww.running {
			// An inline write is in progress (see Submit).
			ww.idle.Wait()
		}
		batch := ww.queue
		ww.queue = nil
		closed := ww.closed
		ww.running = len(batch) > 0
		ww.mu.Unlock()
		if len(batch) == 0 {
			ww.mu.Lock()
			ww.idle.Broadcast()
			ww.mu.Unlock()
			if closed {
				return
			}
			<-ww.wake
			continue
		}
		w.write(ww, batch)
		ww.mu.Lock()
		ww.running = false
		ww.idle.Broadcast()
		ww.mu.Unlock()
	}
}

func kvOnly(op Op) bool { return len(op.KV) > 0 && len(op.Transcript) == 0 && op.Update == nil }

// write writes a batch taken from a worker's queue, in order.
func (w *Writer) write(ww *writerWorker, batch []Op) {
	for i := 0; i < len(batch); {
		op := batch[i]
		if err := w.refusal(ww, op); err != nil {
			w.finish(ww, op, err)
			i++
			continue
		}
		if !kvOnly(op) {
			traceCommit(batch[i:i+1], 1, false) // a transaction of its own
			w.finish(ww, op, w.writeOne(op))
			i++
			continue
		}
		// A run of KV-only ops, of any sessions; those refused are answered
		// on the way.
		run := []Op{op}
		j := i + 1
		for ; j < len(batch) && kvOnly(batch[j]); j++ {
			if err := w.refusal(ww, batch[j]); err != nil {
				w.finish(ww, batch[j], err)
				continue
			}
			run = append(run, batch[j])
		}
		w.putRun(ww, run)
		i = j
	}
}

// putRun writes a run of KV-only ops: one item per session and fence (a
// session's ops in order; a change of fence starts a new item), all in one
// transaction when the store is a Batcher, else one PutKV per item.
func (w *Writer) putRun(ww *writerWorker, run []Op) {
	if len(run) == 1 {
		// The common case of a quiet store (one command in flight): its
		// entries as they are, without the grouping's map and copies.
		op := run[0]
		traceCommit(run, 1, false)
		w.finish(ww, op, w.try(op, "kv", true, func(ctx context.Context) error {
			return w.store.PutKV(ctx, op.SessionID, op.Fence, op.KV)
		}))
		return
	}
	type item struct {
		KVBatch
		ops []Op
	}
	var items []*item
	last := map[string]*item{} // a session's latest item
	for _, op := range run {
		if it := last[op.SessionID]; it != nil && it.Fence == op.Fence {
			it.Entries = append(it.Entries, op.KV...)
			it.ops = append(it.ops, op)
			continue
		}
		it := &item{KVBatch: KVBatch{SessionID: op.SessionID, Fence: op.Fence, Entries: append([]KV(nil), op.KV...)}, ops: []Op{op}}
		items = append(items, it)
		last[op.SessionID] = it
	}
	b, batcher := w.store.(Batcher)
	traceCommit(run, len(items), batcher)
	if !batcher || len(items) == 1 {
		for _, it := range items {
			err := w.try(it.ops[0], "kv", true, func(ctx context.Context) error {
				return w.store.PutKV(ctx, it.SessionID, it.Fence, it.Entries)
			})
			for _, op := range it.ops {
				w.finish(ww, op, err)
			}
		}
		return
	}
	parts := make([]KVBatch, len(items))
	for i, it := range items {
		parts[i] = it.KVBatch
	}
	var itemErrs []error
	err := w.try(run[0], "kv batch", true, func(ctx context.Context) error {
		var err error
		itemErrs, err = b.PutKVBatch(ctx, parts)
		return err
	})
	for i, it := range items {
		opErr := err
		if err == nil && i < len(itemErrs) {
			opErr = itemErrs[i]
		}
		for _, op := range it.ops {
			w.finish(ww, op, opErr)
		}
	}
}

// EpochBase returns the first epoch of a chain's new owner (a surface
// domain, a session's KV): above every epoch counted from an earlier base
// (see Chains), with room below the next base for 2^32 epochs of its own.
func (w *Writer) EpochBase() uint64 { return w.epochBases.Add(1) << 32 }

// refusal is the error an op fails with unsent: its chain failed in its
// epoch, or the store cannot be written now. Nil: write it.
func (w *Writer) refusal(ww *writerWorker, op Op) error {
	if op.Chain != "" {
		k := chainKey{op.SessionID, op.Chain}
		if e, ok := ww.aborted[k]; ok {
			if op.Epoch <= e {
				return fmt.Errorf("%w (session %s, chain %s, epoch %d)", ErrAborted, op.SessionID, op.Chain, op.Epoch)
			}
			delete(ww.aborted, k)
		}
	}
	return w.unavailable()
}

// unavailable is the refusal of a write while the store cannot be written;
// nil when it can.
func (w *Writer) unavailable() error {
	if !w.up.Load() {
		h := w.Health()
		return fmt.Errorf("%w since %s: %v", ErrUnavailable, h.Since.Format(time.RFC3339Nano), h.Err)
	}
	return nil
}

// finish reports an op's outcome; a failed op fails its chain's epoch.
func (w *Writer) finish(ww *writerWorker, op Op, err error) {
	if err != nil {
		if op.Chain != "" {
			k := chainKey{op.SessionID, op.Chain}
			if e, ok := ww.aborted[k]; !ok || op.Epoch > e {
				ww.aborted[k] = op.Epoch
			}
		}
		w.logFailure(op, err)
	}
	endOpSpan(op, err)
	if op.Done != nil {
		op.Done(err)
	}
}

// logFailure logs a failed op: a fenced one is expected when a session
// moves to another node, and one refused unsent follows a failure logged
// already.
func (w *Writer) logFailure(op Op, err error) {
	switch {
	case errors.Is(err, ErrFenced):
		w.log.Warn("store write fenced", "session", op.SessionID, "fence", op.Fence, "err", err)
	case errors.Is(err, ErrAborted), errors.Is(err, ErrUnavailable):
		w.log.Debug("store write refused unsent", "session", op.SessionID, "chain", op.Chain, "err", err)
	case errors.Is(err, ErrOutcomeUnknown):
		w.log.Error("store write outcome unknown", "session", op.SessionID, "chain", op.Chain, "err", err)
	default:
		w.log.Error("store write failed", "session", op.SessionID, "chain", op.Chain, "err", err)
	}
}

func (w *Writer) writeOne(op Op) error {
	if len(op.KV) > 0 {
		if err := w.try(op, "kv", true, func(ctx context.Context) error { return w.store.PutKV(ctx, op.SessionID, op.Fence, op.KV) }); err != nil {
			return err
		}
	}
	if len(op.Transcript) > 0 {
		if err := w.try(op, "transcript", false, func(ctx context.Context) error {
			return w.store.AppendTranscript(ctx, op.SessionID, op.Fence, op.Transcript)
		}); err != nil {
			return err
		}
	}
	if op.Update != nil {
		if err := w.try(op, "session", true, func(ctx context.Context) error { return w.store.UpdateSession(ctx, op.SessionID, op.Fence, *op.Update) }); err != nil {
			return err
		}
	}
	return nil
}

// try runs write, and runs it again while it fails for a reason that may
// pass, within the retry window (see RetryWindow). Every attempt is
// bounded by the window and AttemptGrace. It keeps the store's health: a success makes the
// store available, a failure for a store's reason or a stalled attempt
// unavailable.
func (w *Writer) try(op Op, what string, idempotent bool, write func(context.Context) error) error {
	if w.inline {
		// An in-memory store: no stall, nothing unknown, nothing to retry.
		return write(context.Background())
	}
	deadline := time.Now().Add(w.retry)
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(AttemptGrace))
	defer cancel()
	backoff := 50 * time.Millisecond
	unknown := false
	for attempt := 1; ; attempt++ {
		start := w.clock.Now()
		stall := w.watchStall(what, op)
		err := write(ctx)
		stall.Stop()
		if err == nil {
			w.markUp()
			return nil
		}
		if errors.Is(err, ErrOutcomeUnknown) {
			unknown = true
		}
		if storeFailure(err) {
			// An attempt that ended long after its own deadline did not run
			// all that time: the process was stopped meanwhile.
			w.failed(err, op, w.clock.Now().Sub(start) > w.retry+AttemptGrace+w.stallAfter)
		}
		if !mayPass(err) || (!idempotent && unknown) || time.Now().Add(backoff).After(deadline) {
			return settled(err, unknown)
		}
		w.log.Warn("store write failed; trying again", "session", op.SessionID, "what", what, "attempt", attempt, "in", backoff, "err", err)
		if !w.sleep(ctx, backoff) {
			return settled(err, unknown)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// sleep waits d on the writer's clock; false if ctx ended first.
func (w *Writer) sleep(ctx context.Context, d time.Duration) bool {
	ch := make(chan struct{})
	t := w.clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// settled is an op's error once it is given up: unknown if any attempt's
// outcome was (a later attempt failing surely does not undo an earlier one
// that may have landed).
func settled(err error, unknown bool) error {
	if unknown && !errors.Is(err, ErrOutcomeUnknown) {
		return fmt.Errorf("%w: an earlier attempt's outcome is unknown; the last one failed: %w", ErrOutcomeUnknown, err)
	}
	return err
}

// ownAnswer reports whether a failed write was refused for what it is: the
// store answered it, and would answer it the same way again. Such a
// failure is not retried and says nothing of the store's health: a write
// fenced, of a session or a blob that is not there, invalid, an id taken,
// an artifact over its session's quota or its size limit, bytes whose
// source failed, or a store closed.
func ownAnswer(err error) bool {
	for _, e := range [...]error{ErrFenced, ErrNotFound, ErrInvalid, ErrClosed, ErrExists,
		ErrQuotaExceeded, ErrTooLarge, ErrBlobGone, ErrSourceFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// mayPass reports whether a failed write may succeed if tried again: not
// when the store refused it for what it is or for a full disk, nor when
// the writer's own deadline passed.
func mayPass(err error) bool {
	return !ownAnswer(err) && !errors.Is(err, ErrFull) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// storeFailure reports whether a failed write says the store cannot be
// written (rather than that this write was wrong).
func storeFailure(err error) bool {
	return !ownAnswer(err) && !errors.Is(err, context.Canceled)
}

// watchStall arms the stall watch of an attempt: in flight for stallAfter,
// it makes the store unavailable, unless the watch fired so late that the
// process itself did not run meanwhile (see failed).
func (w *Writer) watchStall(what string, op Op) clock.Timer {
	armed := w.clock.Now()
	return w.clock.AfterFunc(w.stallAfter, func() {
		late := w.clock.Now().Sub(armed) > 2*w.stallAfter
		w.failed(fmt.Errorf("a %s write of session %s has been in flight for %s", what, op.SessionID, w.stallAfter), op, late)
	})
}

// failed makes the store unavailable for cause, a failure or a stall of a
// write of op. When the evidence spans a stall of the process (late), it
// says nothing of the store: a probe is made first, here, and the store
// stays available if it is answered.
func (w *Writer) failed(cause error, op Op, late bool) {
	if !w.up.Load() {
		return
	}
	if late {
		ctx, cancel := context.WithTimeout(w.life, w.probeTimeout)
		err := w.store.UpdateSession(ctx, op.SessionID, op.Fence, SessionUpdate{})
		cancel()
		if answered(err) {
			w.log.Warn("a store write failed or stalled across a stall of this process; the store answered a probe, so it stays available",
				"session", op.SessionID, "cause", cause)
			return
		}
		cause = fmt.Errorf("%w (and the probe made after this process stalled failed: %v)", cause, err)
	}
	w.markDown(cause, op)
}

// answered reports whether a probe's outcome says the store takes writes:
// a missing session or a moved lease is the store's answer too.
func answered(err error) bool {
	return err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrFenced)
}

// markDown makes the store unavailable, and starts the probe.
func (w *Writer) markDown(cause error, op Op) {
	w.hmu.Lock()
	defer w.hmu.Unlock()
	if !w.health.Available {
		return
	}
	w.health = Health{Since: w.clock.Now(), Err: cause}
	w.up.Store(false)
	w.probeSession, w.probeFence = op.SessionID, op.Fence
	w.log.Error("store unavailable: changes are refused until it can be written again", "err", cause)
	if !w.probing {
		select {
		case <-w.closing:
			return // closed: nobody needs to know any more
		default:
		}
		w.probing = true
		w.probes.Add(1)
		go w.probe()
	}
}

// markUp makes the store available.
func (w *Writer) markUp() {
	if w.up.Load() {
		return
	}
	w.hmu.Lock()
	defer w.hmu.Unlock()
	w.markUpLocked()
}

func (w *Writer) markUpLocked() {
	if w.health.Available {
		return
	}
	w.log.Info("store available again", "after", w.clock.Now().Sub(w.health.Since).Round(time.Millisecond))
	w.health = Health{Available: true}
	w.up.Store(true)
}

// probe writes while the store is unavailable, backing off, until a write
// is answered (see Writer).
func (w *Writer) probe() {
	defer w.probes.Done()
	delay := w.probeEvery
	for {
		ch := make(chan struct{})
		t := w.clock.AfterFunc(delay, func() { close(ch) })
		select {
		case <-ch:
		case <-w.closing:
			t.Stop()
			w.hmu.Lock()
			w.probing = false
			w.hmu.Unlock()
			return
		}
		w.hmu.Lock()
		if w.health.Available {
			w.probing = false
			w.hmu.Unlock()
			return
		}
		id, fence := w.probeSession, w.probeFence
		w.hmu.Unlock()
		ctx, cancel := context.WithTimeout(w.life, w.probeTimeout)
		err := w.store.UpdateSession(ctx, id, fence, SessionUpdate{})
		cancel()
		if answered(err) {
			// Answered: the store takes writes. One step, so that a
			// markDown right after finds no probe running and starts one.
			w.hmu.Lock()
			w.markUpLocked()
			w.probing = false
			w.hmu.Unlock()
			return
		}
		w.log.Debug("store probe failed", "session", id, "err", err)
		delay = min(2*delay, w.probeMax)
	}
}

// Do runs write now, on the calling goroutine, under the writer's health
// and outcomes (see Writer): while the store is unavailable it fails at
// once, unsent, with an error wrapping ErrUnavailable; otherwise it is
// tried, and tried again within RetryWindow while it fails for a reason
// that may pass (after an attempt whose outcome is unknown only when
// idempotent: a second attempt cannot apply it twice), each attempt
// watched for a stall and bounded as an op's. Its error wraps
// ErrOutcomeUnknown when it may have been applied; any other error means
// it was not. The write's own answers (see ownAnswer: not found, exists,
// over the quota, ...) come back as they are, neither retried nor taken
// as the store's failure.
//
// sessionID is the session the write is of (the probe writes it if the
// write makes the store unavailable); what names the write in logs. ctx
// is checked before the first attempt only: an attempt in flight is not
// abandoned for the caller (its outcome would become unknown); it ends
// within RetryWindow + AttemptGrace whatever the store does.
func (w *Writer) Do(ctx context.Context, sessionID, what string, idempotent bool, write func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s of session %s: %w", what, sessionID, err)
	}
	if err := w.unavailable(); err != nil {
		return fmt.Errorf("%s of session %s: %w", what, sessionID, err)
	}
	return w.try(Op{SessionID: sessionID}, what, idempotent, write)
}

// DoStream runs write, a write of the bytes it reads from src as it writes
// them (an artifact's bytes), under the writer's health as Do does, with
// two differences that the source makes: it is tried once (src is read
// once), under ctx (its pace is src's, which may be a slow client's). The
// time it spends in the store between two reads of src is watched as an
// attempt is: StallAfter of it makes the store unavailable, and
// RetryWindow + AttemptGrace of it ends the write (write's ctx is
// canceled), so that a store that froze fails the write within the bound
// of every other write. A failure of src (its Read's error) comes back
// wrapping ErrSourceFailed, whatever the store made of it, and says
// nothing of the store. Other errors are the store's: nothing of the
// write is kept then (a blob is not an artifact until it is committed).
func (w *Writer) DoStream(ctx context.Context, sessionID, what string, src io.Reader, write func(ctx context.Context, src io.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s of session %s: %w", what, sessionID, err)
	}
	if err := w.unavailable(); err != nil {
		return fmt.Errorf("%s of session %s: %w", what, sessionID, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ts := &timedSource{r: src, w: w, what: what, op: Op{SessionID: sessionID}, cancel: cancel}
	if w.inline {
		ts.w = nil // an in-memory store: nothing to watch
	}
	ts.storeWorks()
	err := write(ctx, ts)
	ts.srcReads()
	switch {
	case err == nil:
		w.markUp()
		return nil
	case ts.err != nil:
		if errors.Is(err, ErrSourceFailed) {
			return err
		}
		return fmt.Errorf("%w: %w (the store said: %v)", ErrSourceFailed, ts.err, err)
	case errors.Is(context.Cause(ctx), errStoreTooSlow):
		err = fmt.Errorf("%s of session %s: %w: %w", what, sessionID, errStoreTooSlow, err)
	}
	if storeFailure(err) && !w.inline {
		w.failed(err, ts.op, false)
	}
	return err
}

// errStoreTooSlow ends a DoStream whose store took longer than an
// attempt may between two reads of the source.
var errStoreTooSlow = errors.New("the store did not take the bytes within the write's bound")

// timedSource is a DoStream's source: while the write is not reading it,
// the store is working, and that time is watched (see DoStream).
type timedSource struct {
	r      io.Reader
	w      *Writer // nil: not watched
	what   string
	op     Op
	cancel context.CancelCauseFunc
	err    error // the source's failure

	mu      sync.Mutex
	timer   clock.Timer
	stalled bool // the stall was reported in this stretch of store time
}

func (t *timedSource) Read(p []byte) (int, error) {
	t.srcReads()
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	t.storeWorks()
	return n, err
}

// srcReads stops the watch: the write waits for its source.
func (t *timedSource) srcReads() {
	if t.w == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.stalled = false
}

// storeWorks starts the watch: the store works until the next read.
func (t *timedSource) storeWorks() {
	if t.w == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.arm(t.w.stallAfter)
}

// arm sets the watch to fire in d; the caller holds mu.
func (t *timedSource) arm(d time.Duration) {
	armed := t.w.clock.Now()
	var tm clock.Timer
	tm = t.w.clock.AfterFunc(d, func() {
		t.mu.Lock()
		if t.timer != tm {
			t.mu.Unlock()
			return // stopped, or re-armed, meanwhile
		}
		late := t.w.clock.Now().Sub(armed) > 2*d
		if !t.stalled {
			// In the store for stallAfter: unavailable (after a probe when
			// the process itself stalled); the write goes on until its
			// bound.
			t.stalled = true
			t.arm(t.w.retry + AttemptGrace - t.w.stallAfter)
			t.mu.Unlock()
			t.w.failed(fmt.Errorf("a %s of session %s has been in the store for %s", t.what, t.op.SessionID, t.w.stallAfter), t.op, late)
			return
		}
		if late {
			// The process did not run: the store gets its bound again.
			t.arm(t.w.retry + AttemptGrace)
			t.mu.Unlock()
			return
		}
		t.timer = nil
		t.mu.Unlock()
		t.cancel(errStoreTooSlow)
	})
	t.timer = tm
}

// FlushSession waits until every op of sessionID submitted before the call
// is written (it waits for the session's worker, which may hold other
// sessions' ops too).
func (w *Writer) FlushSession(ctx context.Context, sessionID string) error {
	ww := w.worker(sessionID)
	done := make(chan struct{})
	go func() {
		ww.mu.Lock()
		for len(ww.queue) > 0 || ww.running {
			ww.idle.Wait()
		}
		ww.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
