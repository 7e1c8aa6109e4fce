package surface

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the tests start has ended when they are done, but for
// those that outlive an actor system by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// dispatch.Shared keeps a worker that ran a mailbox warm for 30 s
		// (its goroutine stack already grown) for the next one; only an idle
		// worker, waiting for work, has this function on top of its stack.
		goleak.IgnoreTopFunction("github.com/surfaced/surfaced/actors/dispatch.(*Pool).worker"),
		// protoactor's dead-letter log throttle waits out its 1 s period
		// after a dead letter (one a stopped actor's late message makes), on
		// a goroutine of its own that no shutdown ends.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	)
}
