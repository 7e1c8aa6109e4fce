package gateway_test

import (
	"os"
	"testing"
)

// TestMain runs the test binary as the idle SSE clients of
// BenchmarkIdleSSEMemory when asked to (spawnIdleClients).
func TestMain(m *testing.M) {
	if os.Getenv("SURFACED_IDLE_CLIENTS") != "" {
		idleClients()
	}
	os.Exit(m.Run())
}
