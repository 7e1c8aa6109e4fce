//go:build !race

package surfaced_test

import "go.uber.org/goleak"

// What the pinned protoactor cluster leaves running after a member shuts
// down, in the in-process cluster tests (which are built without -race).
func init() {
	leakIgnores = append(leakIgnores,
		// The gossiper's and the gossip actor's log throttles wait out their
		// periods (60 s) on goroutines of their own, as the dead-letter one
		// does.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
		// The library's in-memory test provider never stops its TTL loop.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster/clusterproviders/test.(*Provider).startTtlReport.func1"),
	)
}
