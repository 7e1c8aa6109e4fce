package testkit

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What a test needs from the machine (besides Node, Python3 and Browser).
// Each finds it or ends the test with Missing: a failure on CI, where
// scripts/test-setup and the CI image install everything, and a skip
// elsewhere.

// NPM returns the absolute directory of an npm tree of the repository
// (dir relative to its root: "web", "testdata/npm/ai-sdk"), once node is
// there and the tree is installed: installed, a path below its
// node_modules ("esbuild", "ai/package.json"), exists. scripts/test-setup
// installs every tree from its lock file.
func NPM(t testing.TB, dir, installed string) string {
	t.Helper()
	Node(t)
	abs := filepath.Join(RepoRoot(), filepath.FromSlash(dir))
	if _, err := os.Stat(filepath.Join(abs, "node_modules", filepath.FromSlash(installed))); err != nil {
		Missing(t, "%s/node_modules is not installed (run scripts/test-setup, npm ci from its lock file): %v", dir, err)
	}
	return abs
}

// Shutdowner is what ShutdownAtCleanup stops: a *surfaced.Runtime, a
// daemon's server.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
}

// ShutdownAtCleanup shuts s down when the test ends, giving it 10 s; an
// error of the shutdown is not the test's business (the test may have shut
// it down itself).
func ShutdownAtCleanup(t testing.TB, s Shutdowner) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
}
