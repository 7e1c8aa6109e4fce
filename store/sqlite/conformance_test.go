package sqlite_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
	"github.com/surfaced/surfaced/store/storetest"
)

func openTemp(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dir, sqlite.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t, t.TempDir()) })
}

func TestDurable(t *testing.T) {
	storetest.RunDurable(t, func(t *testing.T) func(t *testing.T) store.Store {
		dir := t.TempDir()
		return func(t *testing.T) store.Store { return openTemp(t, dir) }
	})
}

func TestArtifacts(t *testing.T) {
	storetest.RunArtifacts(t, func(t *testing.T) store.Store { return openTemp(t, t.TempDir()) })
}

// TestArtifactCrash kills a process of this test binary between the two
// steps of an artifact (TestArtifactCrashChild is that process).
func TestArtifactCrash(t *testing.T) {
	dir := t.TempDir()
	storetest.RunArtifactCrash(t, "TestArtifactCrashChild", []string{"STORETEST_SQLITE_DIR=" + dir},
		func(t *testing.T) store.Store { return openTemp(t, dir) })
}

func TestArtifactCrashChild(t *testing.T) {
	storetest.ArtifactCrashChild(t, func(t *testing.T) store.Store { return openTemp(t, os.Getenv("STORETEST_SQLITE_DIR")) })
}
