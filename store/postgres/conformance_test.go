package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testDSN is the package's database, shared by its tests: each store gets
// a schema of its own in it, which is much quicker to make than a database.
func testDSN(t testing.TB) string {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.dsn == "" {
		shared.dsn = pgtest.Start(t) // skips or fails t, and then the next test tries again
	}
	return shared.dsn
}

var (
	shared struct {
		sync.Mutex
		dsn string
	}
	schemas atomic.Int64
)

// newSchema returns a schema name no test used yet.
func newSchema() string { return fmt.Sprintf("test_%d", schemas.Add(1)) }

func testLogger(t testing.TB) Option {
	return WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func mustOpen(t testing.TB, dsn string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, append([]Option{testLogger(t)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dsn := testDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store { return mustOpen(t, dsn, WithSchema(newSchema())) })
}

func TestDurable(t *testing.T) {
	dsn := testDSN(t)
	storetest.RunDurable(t, func(t *testing.T) func(t *testing.T) store.Store {
		schema := newSchema()
		return func(t *testing.T) store.Store { return mustOpen(t, dsn, WithSchema(schema)) }
	})
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestArtifacts(t *testing.T) {
	dsn := testDSN(t)
	storetest.RunArtifacts(t, func(t *testing.T) store.Store { return mustOpen(t, dsn, WithSchema(newSchema())) })
}

// TestArtifactCrash kills a process of this test binary between the two
// steps of an artifact (TestArtifactCrashChild is that process).
func TestArtifactCrash(t *testing.T) {
	dsn, schema := testDSN(t), newSchema()
	storetest.RunArtifactCrash(t, "TestArtifactCrashChild", []string{"STORETEST_PG_DSN=" + dsn, "STORETEST_PG_SCHEMA=" + schema},
		func(t *testing.T) store.Store { return mustOpen(t, dsn, WithSchema(schema)) })
}

func TestArtifactCrashChild(t *testing.T) {
	storetest.ArtifactCrashChild(t, func(t *testing.T) store.Store {
		return mustOpen(t, os.Getenv("STORETEST_PG_DSN"), WithSchema(os.Getenv("STORETEST_PG_SCHEMA")))
	})
}
