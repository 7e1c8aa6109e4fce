//go:build !race

// In-process cluster tests: see cluster_rejoin_test.go for why they run
// without the race detector.

package surfaced

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store"
)

// startClusterNode starts a member of the in-process cluster name, whose members
// find each other through agent (protoactor's test provider), on the shared
// store st, with the fake agent, leases of 2 s and no logs; adjust changes
// its Config before it starts. It shuts down when t ends.
func startClusterNode(t *testing.T, st store.Store, agent *test.InMemAgent, name string, adjust ...func(*Config)) *Runtime {
	t.Helper()
	cfg := Config{
		Store: st,
		Cluster: &ClusterConfig{
			Name:     name,
			Provider: func() (cluster.ClusterProvider, error) { return test.NewTestProvider(agent), nil },
			LeaseTTL: 2 * time.Second,
		},
		Agents: []AgentSpec{{Name: "fake", Argv: testkit.FakeAgent(t)}},
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range adjust {
		f(&cfg)
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.ShutdownAtCleanup(t, rt)
	return rt
}
