package testkit

import (
	"os/exec"
	"testing"
)

// Python3 returns the path of python3 for the tests of the Python example
// agent. Without one the test is skipped, except on CI (CI set), where the
// setup installs it and its absence is a failure.
func Python3(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err == nil {
		return p
	}
	Missing(t, "python3 not found; the Python example agent is not tested (install Debian's python3 to run it): %v", err)
	return ""
}

// Node returns the path of node for the tests of the Node agents (the
// @surfaced/agent package's examples). Without it the test is skipped,
// except on CI, where it fails (testkit.Missing).
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed; the Node agents need Node 20 or newer: %v", err)
	}
	return p
}
