package postgres

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surfaced/surfaced/store"
)

// A KV write through the Writer survives the store's connections being cut
// under it (as when PostgreSQL restarts or a proxy drops idle connections):
// the write on a dead connection fails, and the writer tries it again on a
// new one.
func TestWriterSurvivesLostConnections(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	s := mustOpen(t, dsn, WithSchema(newSchema()))
	defer s.Close()
	if err := s.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(s, 1, slog.New(slog.NewTextHandler(t.Output(), nil)))
	defer w.Close()
	put := func(rev uint64) error {
		done := make(chan error, 1)
		w.Submit(store.Op{SessionID: "s", KV: []store.KV{{Key: "k", Value: []byte(`"v"`), Rev: rev}},
			Done: func(err error) { done <- err }})
		return <-done
	}
	for rev := uint64(1); rev <= 3; rev++ { // warm the pool: several open connections
		if err := put(rev); err != nil {
			t.Fatal(err)
		}
	}

	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var cut int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend') t`).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	if cut == 0 {
		t.Fatal("no connection of the store to cut")
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // the backends are gone, the pool does not know yet
		var left int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still there", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := put(4); err != nil {
		t.Fatalf("the write after the connections were cut: %v", err)
	}
	kv, err := s.LoadKV(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(kv) != 1 || kv[0].Rev != 4 {
		t.Fatalf("stored %+v", kv)
	}
}
