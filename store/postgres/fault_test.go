package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store"
)

// faultServer is a PostgreSQL server of the test's own, which it may freeze
// and stop, with synchronous commit (a committed write survives the
// server's immediate stop).
func faultServer(t *testing.T) (*pgtest.Server, string) {
	t.Helper()
	return pgtest.FaultServer(t, time.Second)
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, cond, "%s", what)
}

func put(w *store.Writer, id string, epoch, rev uint64, value string) chan error {
	done := make(chan error, 1)
	w.Submit(store.Op{SessionID: id, Chain: "k", Epoch: epoch, KV: []store.KV{{Key: "k", Value: []byte(value), Rev: rev}},
		Done: func(err error) { done <- err }})
	return done
}

// The server freezes (SIGSTOP) with a write in flight: the write ends
// within its window with an unknown outcome, never as a success; the store
// is unavailable meanwhile and refuses other writes unsent; after the thaw
// a probe makes it available again. The next write of the chain goes above
// the unknown rev, so that it cannot be skipped for the one that may have
// landed.
func TestWriterWhileTheServerIsFrozen(t *testing.T) {
	ctx := context.Background()
	srv, dsn := faultServer(t)
	s := mustOpen(t, dsn)
	defer s.Close()
	for _, id := range []string{"a", "b"} {
		if err := s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	w := store.NewWriter(s, 2, quietLogger(), store.WithRetryWindow(time.Second), store.WithStallAfter(200*time.Millisecond),
		store.WithProbe(50*time.Millisecond, 200*time.Millisecond, 500*time.Millisecond))
	defer w.Close()
	if err := <-put(w, "a", 0, 1, "1"); err != nil {
		t.Fatal(err)
	}

	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := <-put(w, "a", 0, 2, "2")
	if !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("a write in flight on a frozen server: %v, want an unknown outcome", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the write took %s to end, past its 1 s window", took)
	}
	if w.Available() {
		t.Fatal("available while the server is frozen")
	}
	if err := <-put(w, "b", 0, 1, "1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write while the store is unavailable: %v, want ErrUnavailable", err)
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the store available again after the thaw", w.Available)
	// The rev of the unknown write is burned: the next goes above it.
	if err := <-put(w, "a", 1, 3, "3"); err != nil {
		t.Fatalf("the write after the thaw: %v", err)
	}
	kv, err := s.LoadKV(ctx, "a")
	if err != nil || len(kv) != 1 || kv[0].Rev != 3 || string(kv[0].Value) != "3" {
		t.Fatalf("stored %+v %v, want rev 3 = 3", kv, err)
	}
}

// The server stops (an immediate shutdown) and comes back: writes fail
// meanwhile, never as a success, the store is unavailable, and it is
// available again once the server is back, with no restart of the writer.
func TestWriterWhileTheServerIsStopped(t *testing.T) {
	ctx := context.Background()
	srv, dsn := faultServer(t)
	s := mustOpen(t, dsn)
	defer s.Close()
	if err := s.CreateSession(ctx, store.Session{ID: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(s, 1, quietLogger(), store.WithRetryWindow(time.Second),
		store.WithProbe(50*time.Millisecond, 200*time.Millisecond, 500*time.Millisecond))
	defer w.Close()
	if err := <-put(w, "a", 0, 1, "1"); err != nil {
		t.Fatal(err)
	}
	if err := srv.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	if err := <-put(w, "a", 0, 2, "2"); err == nil {
		t.Fatal("a write to a stopped server succeeded")
	} else {
		t.Logf("the write to the stopped server: %v (unknown: %v)", err, errors.Is(err, store.ErrOutcomeUnknown))
	}
	if w.Available() {
		t.Fatal("available while the server is stopped")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the store available again after the restart", w.Available)
	if err := <-put(w, "a", 1, 3, "3"); err != nil {
		t.Fatalf("the write after the restart: %v", err)
	}
	kv, err := s.LoadKV(ctx, "a")
	if err != nil || len(kv) != 1 || kv[0].Rev != 3 {
		t.Fatalf("stored %+v %v, want rev 3", kv, err)
	}
}
