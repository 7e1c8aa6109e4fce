package artifact_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the tests start (the clock's timers, the key reloads)
// has ended when they are done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
