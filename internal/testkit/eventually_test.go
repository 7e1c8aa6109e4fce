package testkit

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the calling goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually on its own goroutine (Fatalf ends it) and
// returns the failure message, "" when it returned.
func eventually(timeout time.Duration, cond func() bool, format string, args ...any) string {
	r := &fatalRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(r, timeout, cond, format, args...)
	}()
	<-done
	return r.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	msg := eventually(10*time.Second, func() bool { return calls.Add(1) == 5 }, "the fifth look")
	if msg != "" || calls.Load() != 5 {
		t.Fatalf("message %q after %d looks", msg, calls.Load())
	}
}

func TestEventuallyLooksAtOnce(t *testing.T) {
	// A zero timeout still looks once: a condition that holds passes.
	if msg := eventually(0, func() bool { return true }, "true"); msg != "" {
		t.Fatalf("a condition true at once failed: %q", msg)
	}
}

func TestEventuallyFailsWithWhatItWaitedFor(t *testing.T) {
	var calls atomic.Int32
	start := time.Now()
	msg := eventually(50*time.Millisecond, func() bool { calls.Add(1); return false }, "the %s to reach %d", "counter", 3)
	if !strings.Contains(msg, "waiting for the counter to reach 3") || !strings.HasPrefix(msg, "gave up after ") {
		t.Errorf("failure message %q", msg)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", el)
	}
	// It polls: several looks within the timeout, not one.
	if calls.Load() < 3 {
		t.Errorf("%d looks in 50ms", calls.Load())
	}
}
