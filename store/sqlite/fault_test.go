package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store"
)

// writerPut submits one KV write in the chain of key k, in epoch, and
// returns where its outcome arrives.
func writerPut(w *store.Writer, id string, epoch, rev uint64, value string) chan error {
	done := make(chan error, 1)
	w.Submit(store.Op{SessionID: id, Chain: "k", Epoch: epoch, KV: []store.KV{{Key: "k", Value: []byte(value), Rev: rev}},
		Done: func(err error) { done <- err }})
	return done
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, cond, "%s", what)
}

// Another process holds the database's write lock: the write in flight
// fails (SQLITE_BUSY after the busy timeout, retried within its window)
// and was not applied, the store is unavailable meanwhile, and ops
// submitted then are refused unsent; once the lock is released, a probe
// makes the store available again, with no restart.
func TestWriterWhileAnotherProcessHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithLogger(quietLogger()), WithBusyTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"a", "b"} {
		if err := s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	w := store.NewWriter(s, 2, quietLogger(), store.WithRetryWindow(time.Second), store.WithStallAfter(100*time.Millisecond),
		store.WithProbe(50*time.Millisecond, 200*time.Millisecond, time.Second))
	defer w.Close()
	if err := <-writerPut(w, "a", 0, 1, "1"); err != nil {
		t.Fatal(err)
	}

	release := testkit.LockSQLite(t, filepath.Join(dir, FileName))
	err = <-writerPut(w, "a", 0, 2, "2")
	if err == nil || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("a write under another process's lock: %v, want a failure that surely did not apply", err)
	}
	if w.Available() {
		t.Fatal("the store is available while another process holds its lock")
	}
	if err := <-writerPut(w, "b", 0, 1, "1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write while the store is unavailable: %v, want ErrUnavailable at once", err)
	}
	release()
	waitFor(t, "the store available again after the lock was released", w.Available)
	// The chain's owner rolled back: its next write is of a new epoch.
	if err := <-writerPut(w, "a", 1, 2, "3"); err != nil {
		t.Fatalf("the write after the lock was released: %v", err)
	}
	kv, err := s.LoadKV(ctx, "a")
	if err != nil || len(kv) != 1 || kv[0].Rev != 2 || string(kv[0].Value) != "3" {
		t.Fatalf("stored %+v %v: want rev 2 = 3 (the refused write never landed)", kv, err)
	}
}

// The data directory's filesystem fills up: the write fails at once with
// ErrFull (not retried) and was not applied, and the store is unavailable
// until space is freed. Needs root to mount a small tmpfs.
func TestWriterOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := smallFilesystem(t, "4m")
	s, err := Open(ctx, dir, WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSession(ctx, store.Session{ID: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(s, 1, quietLogger(), store.WithProbe(50*time.Millisecond, 200*time.Millisecond, time.Second))
	defer w.Close()
	filler := filepath.Join(dir, "filler")
	fill(t, filler)

	value := []byte(`"` + string(bytesOf('x', 256<<10)) + `"`)
	var rev uint64
	var failed error
	for rev = 1; rev < 100; rev++ {
		done := make(chan error, 1)
		w.Submit(store.Op{SessionID: "a", KV: []store.KV{{Key: "k" + string(rune('a'+rev%26)), Value: value, Rev: rev}},
			Done: func(err error) { done <- err }})
		if failed = <-done; failed != nil {
			break
		}
	}
	if !errors.Is(failed, store.ErrFull) || errors.Is(failed, store.ErrOutcomeUnknown) {
		t.Fatalf("writes on a full disk: %v, want ErrFull", failed)
	}
	if w.Available() {
		t.Fatal("the store is available on a full disk")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the store available again once space was freed", w.Available)
	done := make(chan error, 1)
	w.Submit(store.Op{SessionID: "a", KV: []store.KV{{Key: "after", Value: []byte("1"), Rev: 1}}, Done: func(err error) { done <- err }})
	if err := <-done; err != nil {
		t.Fatalf("a write once space was freed: %v", err)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// smallFilesystem mounts a tmpfs of size for the test (root only; skipped
// otherwise) and returns its directory.
func smallFilesystem(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes to path until the filesystem is full, but for a little room
// (SQLite then fails on a larger write, not on its first page).
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytesOf('f', 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// Leave a little room.
	fi, _ := f.Stat()
	if err := f.Truncate(fi.Size() - 256<<10); err != nil {
		t.Fatal(err)
	}
}
