package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// recordingStore records the PutKV calls that reach the store: how many
// entries, under which fence. The first call waits for release, so that
// the ops submitted meanwhile queue up into one batch.
type recordingStore struct {
	*memstore.Store
	release chan struct{}
	mu      sync.Mutex
	calls   []string
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
	r.mu.Unlock()
	if first {
		<-r.release
	}
	return r.Store.PutKV(ctx, id, fence, entries)
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

// unsent is an error that says nothing reached the server, as pgx's do.
type unsent struct{ error }

func (unsent) SafeToRetry() bool { return true }

// A write that fails for a passing reason is tried again within the retry
// window: KV writes and session updates always (they are idempotent), a
// transcript append only when nothing reached the server. A write refused
// for what it is is not tried again.
func TestWriterRetriesPassingFailures(t *testing.T) {
	ctx := context.Background()
	lost := errors.New("conn closed: unexpected EOF")
	cases := []struct {
		name      string
		kind      string
		fail      int
		err       error
		op        store.Op
		wantErr   error // nil: the write succeeds in the end
		wantCalls int
	}{
		{"kv after a lost connection", "kv", 2, lost, store.Op{KV: []store.KV{{Key: "k", Value: []byte(`1`), Rev: 1}}}, nil, 3},
		{"session update after a lost connection", "session", 1, lost,
			store.Op{Update: &store.SessionUpdate{Title: ptr("t")}}, nil, 2},
		{"transcript, nothing sent", "transcript", 2, unsent{lost},
			store.Op{Transcript: []store.Entry{{Role: "user", Text: "hi"}}}, nil, 3},
		{"transcript, maybe written: not again", "transcript", 1, lost,
			store.Op{Transcript: []store.Entry{{Role: "user", Text: "hi"}}}, lost, 1},
		{"fenced: not again", "kv", 1, fmt.Errorf("token 1: %w", store.ErrFenced),
			store.Op{KV: []store.KV{{Key: "k", Value: []byte(`1`), Rev: 1}}}, store.ErrFenced, 1},
		{"not found: not again", "kv", 1, store.ErrNotFound,
			store.Op{KV: []store.KV{{Key: "k", Value: []byte(`1`), Rev: 1}}}, store.ErrNotFound, 1},
		{"kv failing for longer than the window", "kv", 1000, lost,
			store.Op{KV: []store.KV{{Key: "k", Value: []byte(`1`), Rev: 1}}}, lost, -1},
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
