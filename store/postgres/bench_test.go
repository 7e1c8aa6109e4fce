package postgres

import (
	"context"
	"testing"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
	"github.com/surfaced/surfaced/store/storetest"
)

// BenchmarkStore runs the store benchmarks on SQLite, the single-node
// default and the baseline, and on PostgreSQL in the same run: a server of
// its own with PostgreSQL's durable defaults (fsync, synchronous_commit=on:
// every commit waits for its WAL flush), and the same server with
// synchronous_commit=off per connection, the durability of SQLite's
// synchronous=NORMAL (a crash may lose the last commits, never
// consistency). The server is on loopback: a real deployment adds a
// network round trip to every call.
func BenchmarkStore(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		storetest.Bench(b, func(b *testing.B) store.Store {
			s, err := sqlite.Open(context.Background(), b.TempDir(), sqlite.WithLogger(quietLogger()))
			if err != nil {
				b.Fatal(err)
			}
			return s
		})
	})
	if _, err := pgtest.BinDir(); err != nil {
		b.Skip(err)
	}
	srv, err := pgtest.NewServer(context.Background(), pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	dsn, err := srv.CreateDatabase(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, dsn string }{
		{"postgres", dsn},
		{"postgres-async", dsn + "&synchronous_commit=off"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			storetest.Bench(b, func(b *testing.B) store.Store {
				s, err := Open(context.Background(), tc.dsn, WithSchema(newSchema()), WithLogger(quietLogger()))
				if err != nil {
					b.Fatal(err)
				}
				return s
			})
		})
	}
}
