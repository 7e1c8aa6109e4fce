package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// PutKVBatch writes several sessions' entries in one transaction; an item
// refused for what it is (a stale fence, a missing session, a bad entry)
// fails alone and writes nothing, the others commit.
func TestPutKVBatch(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, testDSN(t), WithSchema(newSchema()))
	defer s.Close()
	for _, id := range []string{"a", "b", "c"} {
		if err := s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	old, err := s.AcquireLease(ctx, "c", "node-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, "c", old.Token); err != nil {
		t.Fatal(err)
	}
	kv := func(key string, rev uint64) []store.KV { return []store.KV{{Key: key, Value: []byte(`1`), Rev: rev}} }
	errs, err := s.PutKVBatch(ctx, []store.KVBatch{
		{SessionID: "a", Entries: append(kv("x", 1), kv("y", 1)...)},
		{SessionID: "missing", Entries: kv("x", 1)},
		{SessionID: "b", Entries: kv("x", 1)},
		{SessionID: "c", Fence: store.Fence(old.Token), Entries: kv("x", 1)},
		{SessionID: "b", Entries: []store.KV{{Key: "", Rev: 2}}},
		{SessionID: "a", Entries: kv("x", 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, store.ErrNotFound, nil, store.ErrFenced, store.ErrInvalid, nil}
	for i, w := range want {
		if w == nil && errs[i] != nil || w != nil && !errors.Is(errs[i], w) {
			t.Errorf("item %d: %v, want %v", i, errs[i], w)
		}
	}
	for id, want := range map[string]string{"a": "x:2 y:1", "b": "x:1", "c": ""} {
		got, err := s.LoadKV(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var str string
		for i, e := range got {
			if i > 0 {
				str += " "
			}
			str += fmt.Sprintf("%s:%d", e.Key, e.Rev)
		}
		if str != want {
			t.Errorf("session %s holds %q, want %q", id, str, want)
		}
	}
}

// The writer writes the KV ops of many sessions queued behind one another
// as one batch, each op answered with its own outcome.
func TestWriterGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, testDSN(t), WithSchema(newSchema()))
	defer s.Close()
	const n = 50
	for i := range n {
		if err := s.CreateSession(ctx, store.Session{ID: fmt.Sprint("s", i), Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	w := store.NewWriter(s, 1, quietLogger())
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
