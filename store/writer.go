package store

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"
)

// Op is one write for Writer. Exactly the non-empty parts are written, in the
// order KV, Transcript, Update. Done, when set, is called once with the
// outcome from a writer goroutine (it must not block: actors turn it into a
// message to themselves).
//
// Fence is passed to each of the op's writes (see Fence): when not zero,
// once the session's lease has moved on, the op fails with an error
// wrapping ErrFenced, and the actor should stop the session. The
// parts of an op are separate writes: a takeover between two of them keeps
// the ones before it.
type Op struct {
	SessionID  string
	KV         []KV
	Transcript []Entry
	Update     *SessionUpdate
	Fence      Fence
	Done       func(error)
}

// Writer persists ops off the actors' goroutines so that a slow store never
// blocks a mailbox. Ops of one session are written in submission order (a
// session always maps to the same worker); consecutive KV-only ops of one
// session are coalesced into one PutKV call (group commit) when they carry the
// same Fence. The zero value is not usable; use NewWriter.
type Writer struct {
	store   Store
	log     *slog.Logger
	workers []*writerWorker
	wg      sync.WaitGroup
	timeout time.Duration
	retry   time.Duration // how long a write that failed for a passing reason is tried again
	inline  bool          // the store writes in memory: write on the caller's goroutine when idle
}

// RetryWindow is how long Writer tries a write again after it failed for a
// reason that may pass (a lost connection, a database restarting, a busy
// SQLite file), backing off from 50 ms to 1 s. KV writes and session
// updates are idempotent (a KV entry never lowers its key's rev), so they
// are tried again on any such failure; a transcript append only when the
// store's error says nothing reached the server (pgx's SafeToRetry), since
// a second append could duplicate entries. A write refused for what it is
// (fenced, not found, invalid) is never tried again.
const RetryWindow = 5 * time.Second

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
}

// NewWriter starts workers goroutines (0 means 4) writing to s.
func NewWriter(s Store, workers int, log *slog.Logger) *Writer {
	if workers <= 0 {
		workers = 4
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{store: s, log: log, timeout: 30 * time.Second, retry: RetryWindow}
	if in, ok := s.(Inliner); ok && in.Inline() {
		w.inline = true
	}
	for i := 0; i < workers; i++ {
		ww := &writerWorker{wake: make(chan struct{}, 1)}
		ww.idle = sync.NewCond(&ww.mu)
		w.workers = append(w.workers, ww)
		w.wg.Add(1)
		go w.run(ww)
	}
	return w
}

// Store returns the store the writer writes to.
func (w *Writer) Store() Store { return w.store }

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
		w.write([]Op{op})
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

// Flush waits until every op submitted before the call is written.
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

// Close writes what is queued and stops the workers.
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
		w.write(batch)
		ww.mu.Lock()
		ww.running = false
		ww.idle.Broadcast()
		ww.mu.Unlock()
	}
}

func (w *Writer) write(batch []Op) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	for i := 0; i < len(batch); {
		op := batch[i]
		if len(op.KV) > 0 && len(op.Transcript) == 0 && op.Update == nil {
			// Coalesce a run of KV-only ops of this session, under the same
			// fence, into one call.
			j := i + 1
			kv := op.KV
			for j < len(batch) && batch[j].SessionID == op.SessionID && batch[j].Fence == op.Fence && len(batch[j].KV) > 0 &&
				len(batch[j].Transcript) == 0 && batch[j].Update == nil {
				if j == i+1 {
					kv = append([]KV(nil), kv...)
				}
				kv = append(kv, batch[j].KV...)
				j++
			}
			err := w.try(ctx, op, "kv", true, func(ctx context.Context) error { return w.store.PutKV(ctx, op.SessionID, op.Fence, kv) })
			if err != nil {
				w.logFailure(op, "kv", err)
			}
			for k := i; k < j; k++ {
				if batch[k].Done != nil {
					batch[k].Done(err)
				}
			}
			i = j
			continue
		}
		err := w.writeOne(ctx, op)
		if err != nil {
			w.logFailure(op, "op", err)
		}
		if op.Done != nil {
			op.Done(err)
		}
		i++
	}
}

// logFailure logs a failed write: a fenced one is expected when a session
// moves to another node, so it is a warning.
func (w *Writer) logFailure(op Op, what string, err error) {
	if errors.Is(err, ErrFenced) {
		w.log.Warn("store write fenced", "session", op.SessionID, "what", what, "fence", op.Fence, "err", err)
		return
	}
	w.log.Error("store write failed", "session", op.SessionID, "what", what, "err", err)
}

func (w *Writer) writeOne(ctx context.Context, op Op) error {
	if len(op.KV) > 0 {
		if err := w.try(ctx, op, "kv", true, func(ctx context.Context) error { return w.store.PutKV(ctx, op.SessionID, op.Fence, op.KV) }); err != nil {
			return err
		}
	}
	if len(op.Transcript) > 0 {
		if err := w.try(ctx, op, "transcript", false, func(ctx context.Context) error {
			return w.store.AppendTranscript(ctx, op.SessionID, op.Fence, op.Transcript)
		}); err != nil {
			return err
		}
	}
	if op.Update != nil {
		if err := w.try(ctx, op, "session", true, func(ctx context.Context) error { return w.store.UpdateSession(ctx, op.SessionID, op.Fence, *op.Update) }); err != nil {
			return err
		}
	}
	return nil
}

// try runs write, and runs it again while it fails for a reason that may
// pass, within the retry window and ctx (see RetryWindow).
func (w *Writer) try(ctx context.Context, op Op, what string, idempotent bool, write func(context.Context) error) error {
	deadline := time.Now().Add(w.retry)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := write(ctx)
		if err == nil || !mayPass(err) || (!idempotent && !nothingSent(err)) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		w.log.Warn("store write failed; trying again", "session", op.SessionID, "what", what, "attempt", attempt, "in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// mayPass reports whether a failed write may succeed if tried again: not
// when the store refused it for what it is, nor when the writer's own
// deadline passed.
func mayPass(err error) bool {
	return !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) &&
		!errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// nothingSent reports whether the error says the write never reached the
// server (pgx's errors have a SafeToRetry method).
func nothingSent(err error) bool {
	var e interface{ SafeToRetry() bool }
	return errors.As(err, &e) && e.SafeToRetry()
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
