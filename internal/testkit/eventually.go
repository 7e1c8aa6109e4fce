package testkit

import (
	"fmt"
	"testing"
	"time"
)

// The pauses between two looks at a condition start short, so that a test
// goes on as soon as the state it waits for is there, and grow to at most
// pollEvery, so that a long wait leaves the cores to the code under test.
const (
	firstPause = 50 * time.Microsecond
	pollEvery  = 10 * time.Millisecond
)

// Eventually waits until cond reports true, looking at once and then again
// and again (pauses from 50 µs growing to 10 ms), and fails the test
// (t.Fatalf, so only from the test's own goroutine) when it has not within
// timeout, with the formatted description of what it waited for. It is how
// a test waits for a state that arrives asynchronously, instead of sleeping
// and then asserting.
//
// A test that must show that something did not happen does not use it: it
// waits on a barrier proving that the point where the thing would have
// happened has passed, and asserts then.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	pause := firstPause
	for !cond() {
		if !time.Now().Before(deadline) {
			t.Fatalf("gave up after %s waiting for %s", time.Since(start).Round(time.Millisecond), fmt.Sprintf(format, args...))
			return
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, pollEvery)
	}
}
