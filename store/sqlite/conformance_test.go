package sqlite_test

import (
	"context"
	"log/slog"
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
