package membership_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the tests start has ended when they are done, but for
// those that outlive an actor system by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter log throttle waits out its 1 s period
		// after a dead letter (one a stopped actor's late message makes), on
		// a goroutine of its own that no shutdown ends.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// protoactor's gossip log throttle does the same for 60 s after a
		// cluster member starts gossiping.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
	)
}
