package store_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// recordingStore records the PutKV calls that reach the store: how many
// entries, under which fence. The first call waits for release, so that
// the ops submitted meanwhile queue up into one batch.
type recordingStore struct {
	*memstore.Store
	release  chan struct{}
	firstErr error // what the first call fails with, after release (nil: it writes)
	mu       sync.Mutex
	calls    []string
	keys     []string
}

// Inline is false: this store blocks on purpose, so writes must go through
// the writer's goroutines (memstore, which it wraps, would say true).
func (r *recordingStore) Inline() bool { return false }

func (r *recordingStore) PutKV(ctx context.Context, id string, fence store.Fence, entries []store.KV) error {
	r.mu.Lock()
	first := len(r.calls) == 0
	call := fmt.Sprintf("%d entries", len(entries))
	if fence != 0 {
		call += fmt.Sprintf(" fence %d", fence)
	}
	r.calls = append(r.calls, call)
	for _, e := range entries {
		r.keys = append(r.keys, e.Key)
	}
	r.mu.Unlock()
	if first {
		<-r.release
		if r.firstErr != nil {
			return r.firstErr
		}
	}
	return r.Store.PutKV(ctx, id, fence, entries)
}

// waitCalls waits until n PutKV calls reached the store.
func (r *recordingStore) waitCalls(t testing.TB, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		r.mu.Lock()
		got := len(r.calls)
		r.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls reached the store, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestWriterCoalescesOnlyUnderOneFence(t *testing.T) {
	ctx := context.Background()
	rs := &recordingStore{Store: memstore.New(), release: make(chan struct{})}
	must(t, rs.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}))
	a, err := rs.AcquireLease(ctx, "s", "node-a", time.Minute)
	must(t, err)

	w := store.NewWriter(rs, 1, quiet())
	defer w.Close()
	results := make([]error, 7)
	var wg sync.WaitGroup
	submit := func(i int, fence store.Fence) {
		wg.Add(1)
		w.Submit(store.Op{SessionID: "s", Fence: fence, KV: []store.KV{{Key: fmt.Sprint("k", i), Value: []byte("1"), Rev: 1}},
			Done: func(err error) { results[i] = err; wg.Done() }})
	}
	submit(0, 0)
	// Wait until op 0 is being written, so that the rest queue behind it.
	for deadline := time.Now().Add(5 * time.Second); ; {
		rs.mu.Lock()
		n := len(rs.calls)
		rs.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("op 0 never reached the store")
		}
		time.Sleep(time.Millisecond)
	}
	submit(1, store.Fence(a.Token))
	submit(2, store.Fence(a.Token))
	submit(3, store.Fence(a.Token+1)) // never issued: fenced
	submit(4, store.Fence(a.Token+1))
	submit(5, 0)
	submit(6, 0)
	close(rs.release)
	wg.Wait()

	want := []string{"1 entries", "2 entries fence 1", "2 entries fence 2", "2 entries"}
	if !slices.Equal(rs.calls, want) {
		t.Errorf("PutKV calls %q, want %q", rs.calls, want)
	}
	for i, err := range results {
		if fenced := i == 3 || i == 4; fenced != errors.Is(err, store.ErrFenced) {
			t.Errorf("op %d: Done(%v)", i, err)
		} else if !fenced && err != nil {
			t.Errorf("op %d: Done(%v), want nil", i, err)
		}
	}
	kv, err := rs.LoadKV(ctx, "s")
	must(t, err)
	var keys []string
	for _, e := range kv {
		keys = append(keys, e.Key)
	}
	if want := []string{"k0", "k1", "k2", "k5", "k6"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v: the fenced ops wrote", keys, want)
	}
}

// TestWriterFencedOp checks every part of an op under a fence, after a
// takeover: none is written, Done gets ErrFenced, and the new holder's ops
// pass.
func TestWriterFencedOp(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New()
	must(t, ms.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}))
	a, err := ms.AcquireLease(ctx, "s", "node-a", time.Minute)
	must(t, err)
	w := store.NewWriter(ms, 2, quiet())
	defer w.Close()

	title := "by a"
	op := func(fence store.Fence, title *string, text string) store.Op {
		return store.Op{SessionID: "s", Fence: fence, KV: []store.KV{{Key: text, Value: []byte("1"), Rev: 1}},
			Transcript: []store.Entry{{Role: "user", Text: text}}, Update: &store.SessionUpdate{Title: title}}
	}
	done := make(chan error, 1)
	o := op(store.Fence(a.Token), &title, "a1")
	o.Done = func(err error) { done <- err }
	w.Submit(o)
	must(t, <-done)

	must(t, ms.ReleaseLease(ctx, "s", a.Token))
	b, err := ms.AcquireLease(ctx, "s", "node-b", time.Minute)
	must(t, err)
	stale := "stale"
	o = op(store.Fence(a.Token), &stale, "a2")
	o.Done = func(err error) { done <- err }
	w.Submit(o)
	if err := <-done; !errors.Is(err, store.ErrFenced) {
		t.Fatalf("op under the old token: Done(%v), want ErrFenced", err)
	}
	fresh := "by b"
	o = op(store.Fence(b.Token), &fresh, "b1")
	o.Done = func(err error) { done <- err }
	w.Submit(o)
	must(t, <-done)

	sess, err := ms.GetSession(ctx, "s")
	must(t, err)
	tr, err := ms.Transcript(ctx, "s")
	must(t, err)
	kv, err := ms.LoadKV(ctx, "s")
	must(t, err)
	if sess.Title != "by b" || len(tr) != 2 || tr[1].Text != "b1" || len(kv) != 2 {
		t.Errorf("after a fenced op: title %q, transcript %v, kv %v", sess.Title, tr, kv)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// failingStore fails each kind of write the first fail[kind] times with err[kind].
type failingStore struct {
	*memstore.Store
	mu    sync.Mutex
	fail  map[string]int
	err   map[string]error
	calls map[string]int
}

func (f *failingStore) Inline() bool { return false }

func (f *failingStore) check(kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[kind]++
	if f.fail[kind] > 0 {
		f.fail[kind]--
		return f.err[kind]
	}
	return nil
}

func (f *failingStore) PutKV(ctx context.Context, id string, fence store.Fence, entries []store.KV) error {
	if err := f.check("kv"); err != nil {
		return err
	}
	return f.Store.PutKV(ctx, id, fence, entries)
}

func (f *failingStore) AppendTranscript(ctx context.Context, id string, fence store.Fence, entries []store.Entry) error {
	if err := f.check("transcript"); err != nil {
		return err
	}
	return f.Store.AppendTranscript(ctx, id, fence, entries)
}

func (f *failingStore) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	if err := f.check("session"); err != nil {
		return err
	}
	return f.Store.UpdateSession(ctx, id, fence, u)
}

// maybe is an error of a write whose outcome the store does not know.
func maybe(err error) error { return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err) }

// A write that fails for a passing reason is tried again within the retry
// window: KV writes and session updates always (they are idempotent), a
// transcript append only while its attempts surely failed. A write refused
// for what it is, or for a full disk, is not tried again. An op whose
// attempt may have landed ends unknown unless a later attempt succeeds.
func TestWriterRetriesPassingFailures(t *testing.T) {
	ctx := context.Background()
	lost := errors.New("conn closed: unexpected EOF")
	kv := store.Op{KV: []store.KV{{Key: "k", Value: []byte(`1`), Rev: 1}}}
	tr := store.Op{Transcript: []store.Entry{{Role: "user", Text: "hi"}}}
	cases := []struct {
		name        string
		kind        string
		fail        int
		err         error
		op          store.Op
		wantErr     error // nil: the write succeeds in the end
		wantUnknown bool
		wantCalls   int
	}{
		{"kv after a lost connection", "kv", 2, lost, kv, nil, false, 3},
		{"kv after an attempt that may have landed: a success settles it", "kv", 1, maybe(lost), kv, nil, false, 2},
		{"session update after a lost connection", "session", 1, lost,
			store.Op{Update: &store.SessionUpdate{Title: ptr("t")}}, nil, false, 2},
		{"transcript, surely not written", "transcript", 2, lost, tr, nil, false, 3},
		{"transcript, maybe written: not again", "transcript", 1, maybe(lost), tr, lost, true, 1},
		{"fenced: not again", "kv", 1, fmt.Errorf("token 1: %w", store.ErrFenced), kv, store.ErrFenced, false, 1},
		{"not found: not again", "kv", 1, store.ErrNotFound, kv, store.ErrNotFound, false, 1},
		{"disk full: not again", "kv", 1, fmt.Errorf("%w: database or disk is full", store.ErrFull), kv, store.ErrFull, false, 1},
		{"kv failing for longer than the window", "kv", 1000, lost, kv, lost, false, -1},
		{"kv that may have landed, then failing to the end: unknown", "kv", 1000, maybe(lost), kv, lost, true, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &failingStore{Store: memstore.New(), fail: map[string]int{tc.kind: tc.fail},
				err: map[string]error{tc.kind: tc.err}, calls: map[string]int{}}
			must(t, fs.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}))
			w := store.NewWriter(fs, 1, quiet())
			defer w.Close()
			done := make(chan error, 1)
			op := tc.op
			op.SessionID = "s"
			op.Done = func(err error) { done <- err }
			w.Submit(op)
			var err error
			select {
			case err = <-done:
			case <-time.After(store.RetryWindow + 10*time.Second):
				t.Fatal("the write never finished")
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, store.ErrOutcomeUnknown) != tc.wantUnknown {
				t.Fatalf("err %v: unknown outcome %v, want %v", err, !tc.wantUnknown, tc.wantUnknown)
			}
			fs.mu.Lock()
			calls := fs.calls[tc.kind]
			fs.mu.Unlock()
			if tc.wantCalls >= 0 && calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantCalls < 0 {
				// Tried again with back-off until the window closed, then
				// given up: the back-off (50 ms doubling to 1 s) fits at most
				// nine tries in the 5 s window, so more means it hammered.
				if calls < 4 || calls > 9 {
					t.Fatalf("%d tries; want back-off within the window (4 to 9)", calls)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Once an op of a chain fails, the later ops of the chain in the same epoch
// fail unsent (they were built on it), other chains and later epochs are
// written.
func TestWriterAbortsTheRestOfAFailedChain(t *testing.T) {
	ctx := context.Background()
	rs := &recordingStore{Store: memstore.New(), release: make(chan struct{}), firstErr: store.ErrNotFound}
	must(t, rs.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}))
	w := store.NewWriter(rs, 1, quiet())
	defer w.Close()
	ops := []struct {
		chain string
		epoch uint64
		want  error
	}{
		{"a", 0, store.ErrNotFound}, // fails
		{"a", 0, store.ErrAborted},  // built on it
		{"b", 0, nil},               // another chain
		{"", 0, nil},                // no chain
		{"a", 0, store.ErrAborted},
		{"a", 1, nil}, // the chain's owner rolled back: a new epoch
		{"a", 1, nil},
	}
	results := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Add(1)
		w.Submit(store.Op{SessionID: "s", Chain: o.chain, Epoch: o.epoch, KV: []store.KV{{Key: fmt.Sprint("k", i), Value: []byte("1"), Rev: 1}},
			Done: func(err error) { results[i] = err; wg.Done() }})
		if i == 0 {
			rs.waitCalls(t, 1) // the rest queue behind it
		}
	}
	close(rs.release)
	wg.Wait()
	for i, o := range ops {
		if o.want == nil && results[i] != nil || o.want != nil && !errors.Is(results[i], o.want) {
			t.Errorf("op %d (chain %q, epoch %d): %v, want %v", i, o.chain, o.epoch, results[i], o.want)
		}
	}
	if want := []string{"k0", "k2", "k3", "k5", "k6"}; !slices.Equal(rs.keys, want) {
		t.Errorf("keys sent %v, want %v: an aborted op reached the store", rs.keys, want)
	}
	if !w.Available() {
		t.Error("a write refused for what it is made the store unavailable")
	}
}

// stallingStore blocks every write (PutKV, and UpdateSession, the probe's)
// until stall is closed; then it fails the next fails of them with a
// store's error.
type stallingStore struct {
	*memstore.Store
	stall   chan struct{}
	mu      sync.Mutex
	fails   int
	entered chan struct{}
}

func (s *stallingStore) Inline() bool { return false }

func (s *stallingStore) PutKV(ctx context.Context, id string, fence store.Fence, entries []store.KV) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.stall:
	case <-ctx.Done():
		return maybe(ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return errors.New("connection refused")
	}
	return s.Store.PutKV(ctx, id, fence, entries)
}

func (s *stallingStore) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	select {
	case <-s.stall:
	case <-ctx.Done():
		return maybe(ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return errors.New("connection refused")
	}
	return s.Store.UpdateSession(ctx, id, fence, u)
}

// A write in flight for longer than the stall bound makes the store
// unavailable at once: ops queued meanwhile fail unsent, and a write that
// then succeeds makes it available again. A store failure makes it
// unavailable until a probe is answered.
func TestWriterHealth(t *testing.T) {
	ctx := context.Background()
	ss := &stallingStore{Store: memstore.New(), stall: make(chan struct{}), entered: make(chan struct{}, 1)}
	// Two sessions on the writer's two workers.
	other := "t"
	for i := 0; workerOf("s", 2) == workerOf(other, 2); i++ {
		other = fmt.Sprint("t", i)
	}
	must(t, ss.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}))
	must(t, ss.CreateSession(ctx, store.Session{ID: other, Owner: "alice"}))
	w := store.NewWriter(ss, 2, quiet(), store.WithStallAfter(50*time.Millisecond),
		store.WithProbe(10*time.Millisecond, 40*time.Millisecond, time.Second))
	defer w.Close()
	put := func(id string) chan error {
		done := make(chan error, 1)
		w.Submit(store.Op{SessionID: id, KV: []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}, Done: func(err error) { done <- err }})
		return done
	}

	first := put("s")
	<-ss.entered
	eventually(t, "the stalled write makes the store unavailable", func() bool { return !w.Available() })
	h := w.Health()
	if h.Available || h.Err == nil || h.Since.IsZero() {
		t.Errorf("health while stalled: %+v", h)
	}
	// Another worker refuses an op at once, unsent.
	if err := <-put(other); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("an op submitted while the store was unavailable: %v, want ErrUnavailable", err)
	}
	// One queued behind the stalled write is written once the store is back.
	queued := put("s")
	close(ss.stall)
	if err := <-first; err != nil {
		t.Fatalf("the stalled write: %v", err)
	}
	if err := <-queued; err != nil {
		t.Errorf("an op queued behind the stalled write: %v", err)
	}
	eventually(t, "the store available again", w.Available)

	// A store failure: unavailable until a probe gets through (the store
	// fails the write and the next two calls, then answers).
	ss.mu.Lock()
	ss.fails = 3
	ss.mu.Unlock()
	second := put("s")
	eventually(t, "the failure makes the store unavailable", func() bool { return !w.Available() })
	eventually(t, "a probe makes it available again", w.Available)
	if err := <-second; err != nil {
		t.Errorf("the failed write, tried again: %v", err)
	}
}

// workerOf is the writer's worker of a session (its FNV-1a hash).
func workerOf(id string, workers int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32()) % workers
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, cond, "%s", what)
}
