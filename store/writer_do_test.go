package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// probedStore counts and records the probes (UpdateSession) that reach it,
// answering them with probeErr; its writes go where the test says.
type probedStore struct {
	*memstore.Store
	mu       sync.Mutex
	probeErr error
	probes   chan string
}

func (p *probedStore) Inline() bool { return false }

func (p *probedStore) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	p.mu.Lock()
	err := p.probeErr
	p.mu.Unlock()
	select {
	case p.probes <- id:
	default:
	}
	if err != nil {
		return err
	}
	return p.Store.UpdateSession(ctx, id, fence, u)
}

func newProbedStore(t *testing.T) *probedStore {
	t.Helper()
	p := &probedStore{Store: memstore.New(), probes: make(chan string, 16)}
	must(t, p.CreateSession(context.Background(), store.Session{ID: "s", Owner: "alice"}))
	return p
}

// logWatch is a slog handler that hands the messages it gets to the test.
type logWatch struct{ msgs chan string }

func (l logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l logWatch) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.msgs <- r.Message:
	default:
	}
	return nil
}
func (l logWatch) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logWatch) WithGroup(string) slog.Handler      { return l }

// waitLog waits for a log message containing part.
func waitLog(t *testing.T, msgs chan string, part string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-msgs:
			if strings.Contains(m, part) {
				return
			}
		case <-deadline:
			t.Fatalf("no log message with %q", part)
		}
	}
}

// Do runs a write of the caller's own under the writer's health and
// outcomes: refused unsent while the store is unavailable; the write's own
// answers (the quota, not found) neither retried nor taken for the store
// failing; a store's failure tried again within the window and making the
// store unavailable; an attempt of unknown outcome tried again only when
// the write is idempotent.
func TestWriterDo(t *testing.T) {
	ctx := context.Background()
	ps := newProbedStore(t)
	ps.probeErr = errors.New("connection refused")
	w := store.NewWriter(ps, 1, quiet(), store.WithRetryWindow(300*time.Millisecond),
		store.WithProbe(10*time.Millisecond, 20*time.Millisecond, time.Second))
	defer w.Close()

	calls := 0
	for _, own := range []error{store.ErrQuotaExceeded, store.ErrNotFound, store.ErrTooLarge, store.ErrSourceFailed} {
		calls = 0
		err := w.Do(ctx, "s", "test write", false, func(context.Context) error {
			calls++
			return errors.Join(errors.New("the store says"), own)
		})
		if !errors.Is(err, own) || errors.Is(err, store.ErrOutcomeUnknown) {
			t.Errorf("%v: Do = %v, want it as it is", own, err)
		}
		if calls != 1 {
			t.Errorf("%v: tried %d times, want once", own, calls)
		}
		if !w.Available() {
			t.Fatalf("%v made the store unavailable", own)
		}
	}

	// Unknown, not idempotent: not tried again.
	calls = 0
	err := w.Do(ctx, "s", "test write", false, func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.Join(store.ErrOutcomeUnknown, errors.New("connection lost"))
		}
		return nil
	})
	if !errors.Is(err, store.ErrOutcomeUnknown) || calls != 1 {
		t.Errorf("an unknown attempt of a write that is not idempotent: %v after %d calls, want unknown after 1", err, calls)
	}
	// The unknown attempt made the store unavailable; a probe that gets
	// through makes it available again.
	if w.Available() {
		t.Fatal("available after an unknown outcome")
	}
	calls = 0
	if err := w.Do(ctx, "s", "test write", true, func(context.Context) error { calls++; return nil }); !errors.Is(err, store.ErrUnavailable) || calls != 0 {
		t.Fatalf("a write while the store is unavailable: %v after %d calls, want ErrUnavailable unsent", err, calls)
	}
	ps.mu.Lock()
	ps.probeErr = nil
	ps.mu.Unlock()
	eventually(t, "a probe makes the store available", w.Available)

	// Unknown, idempotent: tried again, and a later success settles it.
	calls = 0
	err = w.Do(ctx, "s", "test write", true, func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.Join(store.ErrOutcomeUnknown, errors.New("connection lost"))
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Errorf("an idempotent write after an unknown attempt: %v after %d calls, want success after 2", err, calls)
	}
	if !w.Available() {
		t.Error("unavailable after a write succeeded")
	}
	// A caller gone before the write: not sent.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Do(cctx, "s", "test write", true, func(context.Context) error { t.Error("sent"); return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a write whose caller went: %v", err)
	}
}

// DoStream watches the time a streamed write spends in the store, not the
// time it waits for its source: a slow source is no stall; a store that
// holds the bytes for StallAfter makes the store unavailable, and for the
// attempt's bound ends the write; a source that fails is the source's
// failure, not the store's.
func TestWriterDoStream(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ps := newProbedStore(t)
	w := store.NewWriter(ps, 1, quiet(), store.WithClock(fake), store.WithStallAfter(2*time.Second), store.WithRetryWindow(5*time.Second),
		store.WithProbe(time.Hour, time.Hour, time.Second))
	defer w.Close()

	// A slow source: the write waits in Read for long; nothing is armed.
	pr, feed := io.Pipe()
	src := &enteringReader{r: pr, entered: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		done <- w.DoStream(ctx, "s", "bytes", src, func(ctx context.Context, r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		})
	}()
	<-src.entered
	if n := fake.Pending(); n != 0 {
		t.Fatalf("%d timers armed while the write waits for its source", n)
	}
	fake.Advance(time.Minute)
	feed.Write([]byte("some bytes"))
	feed.Close()
	if err := <-done; err != nil {
		t.Fatalf("a slow source: %v", err)
	}
	if !w.Available() {
		t.Fatal("a slow source made the store unavailable")
	}

	// A failing source: its failure, not the store's.
	boom := errors.New("connection reset by peer")
	err := w.DoStream(ctx, "s", "bytes", io.MultiReader(strings.NewReader("x"), iotestErr{boom}), func(ctx context.Context, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if !errors.Is(err, store.ErrSourceFailed) || !errors.Is(err, boom) {
		t.Errorf("a failing source: %v, want ErrSourceFailed and its error", err)
	}
	if !w.Available() {
		t.Fatal("a failing source made the store unavailable")
	}

	// The store holds the bytes: unavailable after StallAfter, the write
	// ended at its bound.
	inStore := make(chan struct{})
	go func() {
		done <- w.DoStream(ctx, "s", "bytes", bytes.NewReader([]byte("abc")), func(ctx context.Context, r io.Reader) error {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return err
			}
			close(inStore)
			<-ctx.Done() // the store never answers
			return ctx.Err()
		})
	}()
	<-inStore
	if !fake.WaitPending(1, 5*time.Second) {
		t.Fatal("the watch is not armed while the store works")
	}
	fake.Advance(2 * time.Second)
	eventually(t, "the store unavailable after StallAfter in the store", func() bool { return !w.Available() })
	if !fake.WaitPending(1, 5*time.Second) {
		t.Fatal("the bound is not armed after the stall")
	}
	fake.Advance(4 * time.Second)
	err = <-done
	if err == nil || errors.Is(err, store.ErrSourceFailed) || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("a write the store held past its bound: %v, want the store's failure", err)
	}
	// While unavailable, a streamed write is refused before a byte is read.
	read := atomic.Bool{}
	err = w.DoStream(ctx, "s", "bytes", readFlag{&read}, func(ctx context.Context, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if !errors.Is(err, store.ErrUnavailable) || read.Load() {
		t.Errorf("a streamed write while unavailable: %v (source read: %v), want ErrUnavailable, unread", err, read.Load())
	}
}

// enteringReader says when a Read of it begins.
type enteringReader struct {
	r       io.Reader
	entered chan struct{}
}

func (e *enteringReader) Read(p []byte) (int, error) {
	select {
	case e.entered <- struct{}{}:
	default:
	}
	return e.r.Read(p)
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

type readFlag struct{ b *atomic.Bool }

func (r readFlag) Read([]byte) (int, error) { r.b.Store(true); return 0, io.EOF }

// blockingStore blocks PutKV until release gets an error to answer with.
type blockingStore struct {
	*probedStore
	entered chan struct{}
	release chan error
}

func (b *blockingStore) PutKV(ctx context.Context, id string, fence store.Fence, entries []store.KV) error {
	b.entered <- struct{}{}
	if err := <-b.release; err != nil {
		return err
	}
	return b.Store.PutKV(ctx, id, fence, entries)
}

// A write in flight while the process itself stalls (a node frozen with
// SIGSTOP for 25 s, then resumed): the stall watch fires far later than
// it was due, and the write ends long after its own deadline. Neither says
// anything of the store: the writer probes it first, and it stays
// available when the probe is answered. A store that stalls while the
// process runs (the watch fires on time), or does not answer the probe
// after the process's stall, is unavailable as before.
func TestWriterAfterAStallOfTheProcess(t *testing.T) {
	for _, tc := range []struct {
		name        string
		advance     time.Duration // how far the clock jumps with the write in flight
		probeErr    error
		answer      error // what the write answers after the jump
		unavailable bool
	}{
		{"frozen 25 s, the store answers", 25 * time.Second, nil, errors.Join(store.ErrOutcomeUnknown, context.DeadlineExceeded), false},
		{"frozen 25 s, the write lands", 25 * time.Second, nil, nil, false},
		{"frozen 25 s, the store does not answer either", 25 * time.Second, errors.New("connection refused"), nil, true},
		{"the store stalls while the process runs", 2 * time.Second, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			ps := newProbedStore(t)
			ps.probeErr = tc.probeErr
			bs := &blockingStore{probedStore: ps, entered: make(chan struct{}, 1), release: make(chan error, 1)}
			msgs := make(chan string, 64)
			w := store.NewWriter(bs, 1, slog.New(logWatch{msgs}), store.WithClock(fake), store.WithStallAfter(2*time.Second),
				store.WithRetryWindow(5*time.Second), store.WithProbe(time.Hour, time.Hour, time.Second))
			defer func() {
				// A write still held (the test failed) lets Close return.
				select {
				case bs.release <- nil:
				default:
				}
				w.Close()
			}()
			done := make(chan error, 1)
			w.Submit(store.Op{SessionID: "s", KV: []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}, Done: func(err error) { done <- err }})
			<-bs.entered
			if !fake.WaitPending(1, 5*time.Second) {
				t.Fatal("the stall watch is not armed")
			}
			fake.Advance(tc.advance)
			if tc.unavailable {
				eventually(t, "the store unavailable", func() bool { return !w.Available() })
				bs.release <- tc.answer
				<-done
				return
			}
			waitLog(t, msgs, "the store answered a probe")
			if !w.Available() {
				t.Fatal("unavailable after the process's stall, though the store answered")
			}
			bs.release <- tc.answer
			err := <-done
			if tc.answer != nil {
				// The write ended long past its deadline: probed again.
				waitLog(t, msgs, "the store answered a probe")
			}
			if !errors.Is(err, tc.answer) && err != tc.answer {
				t.Errorf("the write: %v, want %v", err, tc.answer)
			}
			if !w.Available() {
				t.Error("unavailable after the write that spanned the process's stall")
			}
		})
	}
}
