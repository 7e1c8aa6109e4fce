package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/surfaced/surfaced/store"
)

// The writer writes through one worker (the store's one writer
// connection), and the KV ops of many sessions queued behind one another
// go as one batch, each op answered with its own outcome.
func TestWriterGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, t.TempDir())
	defer s.Close()
	if n := s.ConcurrentWrites(); n != 1 {
		t.Fatalf("ConcurrentWrites() = %d, want 1", n)
	}
	const n = 50
	for i := range n {
		if err := s.CreateSession(ctx, store.Session{ID: fmt.Sprint("s", i), Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	w := store.NewWriter(s, 0, nil)
	defer w.Close()
	var wg sync.WaitGroup
	errs := make([]error, 2*n+1)
	put := func(i int, id string, rev uint64) {
		wg.Add(1)
		w.Submit(store.Op{SessionID: id, Chain: "k", KV: []store.KV{{Key: "k", Value: []byte(fmt.Sprint(rev)), Rev: rev}},
			Done: func(err error) { errs[i] = err; wg.Done() }})
	}
	for i := range n {
		put(2*i, fmt.Sprint("s", i), 1)
		put(2*i+1, fmt.Sprint("s", i), 2)
	}
	put(2*n, "missing", 1)
	wg.Wait()
	for i, err := range errs[:2*n] {
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if !errors.Is(errs[2*n], store.ErrNotFound) {
		t.Fatalf("the op of a missing session: %v", errs[2*n])
	}
	for i := range n {
		kv, err := s.LoadKV(ctx, fmt.Sprint("s", i))
		if err != nil || len(kv) != 1 || kv[0].Rev != 2 || string(kv[0].Value) != "2" {
			t.Fatalf("session s%d: %+v %v", i, kv, err)
		}
	}
}
