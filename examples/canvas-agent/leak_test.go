package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the tests start has ended when they are done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
