package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// flakyStore fails the artifact writes the test says, as a store that
// lost its server would, and counts the commits that reach it. Inline is
// false: the writer treats it as a store that can fail.
type flakyStore struct {
	*memstore.Store
	mu         sync.Mutex
	commitErr  error
	lostDelete bool // the next delete lands, and its answer is lost
	commits    int
	probeFails bool
}

func (f *flakyStore) Inline() bool { return false }

func (f *flakyStore) CommitArtifact(ctx context.Context, a store.Artifact, b store.Blob, quota int64) (store.Artifact, error) {
	f.mu.Lock()
	f.commits++
	err := f.commitErr
	f.mu.Unlock()
	if err != nil {
		return store.Artifact{}, err
	}
	return f.Store.CommitArtifact(ctx, a, b, quota)
}

func (f *flakyStore) DeleteArtifact(ctx context.Context, id string) (store.Artifact, error) {
	f.mu.Lock()
	lost := f.lostDelete
	f.lostDelete = false
	f.mu.Unlock()
	a, err := f.Store.DeleteArtifact(ctx, id)
	if lost && err == nil {
		return store.Artifact{}, errors.Join(store.ErrOutcomeUnknown, errors.New("connection lost after the commit"))
	}
	return a, err
}

func (f *flakyStore) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	f.mu.Lock()
	fails := f.probeFails
	f.mu.Unlock()
	if fails {
		return errors.New("connection refused")
	}
	return f.Store.UpdateSession(ctx, id, fence, u)
}

func (f *flakyStore) set(fn func(f *flakyStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// countingReader says whether it was read.
type countingReader struct {
	r    io.Reader
	read atomic.Bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.read.Store(true)
	return c.r.Read(p)
}

// With the runtime's writer, a put, a delete and their refusals keep the
// store's promise: a record the store did not take is store_unavailable
// (nothing was put, and the writer knows the store is down), after which
// a put is refused before a byte is read; a record whose answer never
// came is unknown, and not sent twice; the quota stays the quota, and
// says nothing of the store's health.
func TestServiceWritesThroughTheWriter(t *testing.T) {
	ctx := context.Background()
	fs := &flakyStore{Store: memstore.New()}
	for _, id := range []string{"s1", "s2"} {
		if err := fs.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	w := store.NewWriter(fs, 1, slog.New(slog.DiscardHandler), store.WithRetryWindow(200*time.Millisecond),
		store.WithProbe(10*time.Millisecond, 20*time.Millisecond, time.Second))
	defer w.Close()
	svc, err := artifact.New(ctx, artifact.Config{Store: fs, Writer: w, Limits: artifact.Limits{SessionBytes: 100}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	put := func(session string, data []byte) (artifact.Artifact, error) {
		return svc.Put(ctx, session, bytes.NewReader(data), artifact.PutOptions{MediaType: "text/plain", Size: -1})
	}

	kept, err := put("s1", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	// Over the quota: 413, a definite answer; the store is fine.
	if _, err := put("s1", bytes.Repeat([]byte("x"), 200)); !errors.Is(err, artifact.ErrQuotaExceeded) ||
		errors.Is(err, store.ErrOutcomeUnknown) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a put over the quota: %v, want ErrQuotaExceeded only", err)
	}
	if !w.Available() {
		t.Fatal("a quota refusal made the store unavailable")
	}

	// The record's answer never came: unknown, and sent once.
	fs.set(func(f *flakyStore) {
		f.commits = 0
		f.commitErr = errors.Join(store.ErrOutcomeUnknown, errors.New("connection lost"))
	})
	if _, err := put("s1", []byte("maybe")); !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("a put whose record's answer never came: %v, want ErrOutcomeUnknown", err)
	}
	if fs.commits != 1 {
		t.Errorf("the record was sent %d times after an unknown outcome, want once", fs.commits)
	}
	fs.set(func(f *flakyStore) { f.commitErr = nil })
	eventually(t, "the store available again", w.Available)

	// The store refuses the record (no server): store_unavailable; then
	// the writer knows, and the next put is refused before its body is read.
	fs.set(func(f *flakyStore) {
		f.commitErr = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
		f.probeFails = true
	})
	if _, err := put("s1", []byte("refused")); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("a put the store could not take: %v, want ErrUnavailable", err)
	}
	if w.Available() {
		t.Fatal("available after the store failed a record")
	}
	body := &countingReader{r: bytes.NewReader([]byte("unread"))}
	if _, err := svc.Put(ctx, "s1", body, artifact.PutOptions{MediaType: "text/plain", Size: -1}); !errors.Is(err, store.ErrUnavailable) || body.read.Load() {
		t.Fatalf("a put while the store is down: %v (body read: %v), want ErrUnavailable before reading", err, body.read.Load())
	}
	if _, err := svc.Delete(ctx, "s1", kept.ID); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a delete while the store is down: %v, want ErrUnavailable", err)
	}
	fs.set(func(f *flakyStore) { f.commitErr, f.probeFails = nil, false })
	eventually(t, "the store available again", w.Available)
	if _, err := svc.Get(ctx, "s1", kept.ID); err != nil {
		t.Fatalf("the artifact whose delete was refused: %v", err)
	}
	page, _, err := svc.List(ctx, "s1", artifact.Query{})
	if err != nil || len(page) != 1 || page[0].ID != kept.ID {
		t.Fatalf("the session's artifacts: %v %v, want only the one put before the faults", page, err)
	}

	// A delete that lands and whose answer is lost: tried again (it is
	// idempotent), the artifact is gone, which is what was asked: deleted.
	fs.set(func(f *flakyStore) { f.lostDelete = true })
	if _, err := svc.Delete(ctx, "s1", kept.ID); err != nil {
		t.Fatalf("a delete whose first answer was lost: %v, want it deleted", err)
	}
	if _, err := svc.Get(ctx, "s1", kept.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("the deleted artifact: %v", err)
	}
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
