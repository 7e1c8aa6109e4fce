package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
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

// NewWriter starts workers goroutines (0 means 4) writing to s.
func NewWriter(s Store, workers int, log *slog.Logger, opts ...WriterOption) *Writer {
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
		stall := w.clock.AfterFunc(w.stallAfter, func() {
			w.markDown(fmt.Errorf("a %s write of session %s has been in flight for %s", what, op.SessionID, w.stallAfter), op)
		})
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
			w.markDown(err, op)
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

// mayPass reports whether a failed write may succeed if tried again: not
// when the store refused it for what it is or for a full disk, nor when
// the writer's own deadline passed.
func mayPass(err error) bool {
	return !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) &&
		!errors.Is(err, ErrClosed) && !errors.Is(err, ErrExists) && !errors.Is(err, ErrFull) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// storeFailure reports whether a failed write says the store cannot be
// written (rather than that this write was wrong).
func storeFailure(err error) bool {
	return !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) &&
		!errors.Is(err, ErrClosed) && !errors.Is(err, ErrExists) && !errors.Is(err, context.Canceled)
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
		if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrFenced) {
			// Answered: the store takes writes (a missing session or a
			// moved lease is the store's answer too). One step, so that a
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
