package daemon

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, failing the test after
// timeout. It waits for what a test can observe; it never stands in for a
// barrier the code under test offers.
//
// It lives here until the shared internal/testkit Eventually lands.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
