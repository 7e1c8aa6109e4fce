//go:build !race

package surfaced

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// A session activated on a node the cluster does not place it on (the
// placement activates wherever it is asked, and a request can reach a node
// whose view of the members changed before the sender's) gives itself up
// within a lease or so: the requests every node sends to the session's owner
// are then served there, instead of being refused for good because the stray
// activation keeps renewing the lease.
func TestInProcessClusterStrayActivationGivesUp(t *testing.T) {
	st := memstore.New()
	agent := test.NewInMemAgent()
	start := func() *Runtime {
		cc := ClusterConfig{
			Name:     "stray-test",
			Provider: func() (cluster.ClusterProvider, error) { return test.NewTestProvider(agent), nil },
			LeaseTTL: 2 * time.Second,
		}
		rt, err := New(Config{Store: st, Cluster: &cc, Agents: []AgentSpec{{Name: "fake", Argv: testkit.FakeAgent(t)}},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rt.Shutdown(ctx)
		})
		return rt
	}
	// Three nodes: with two, the owner is the odd one out of the view that
	// disagrees, and rejoins.
	nodes := []*Runtime{start(), start(), start()}
	testkit.Eventually(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if len(n.ClusterMembers()) != 3 {
				return false
			}
		}
		return true
	}, "the members to see each other")
	a := nodes[0]

	ctx := context.Background()
	now := time.Now()
	id := session.NewID()
	if err := st.CreateSession(ctx, store.Session{ID: id, Owner: "alice", Agent: "fake", Cwd: t.TempDir(),
		Status: session.StatusIdle, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	a.swap.RLock()
	owner := a.node.dir.Owner(id)
	a.swap.RUnlock()
	var stray *Runtime
	for _, n := range nodes {
		if n.System().Address() != owner {
			stray = n
		}
	}
	// Activate the session on the node that does not own it, as a request
	// racing a topology change does.
	sys := stray.System()
	res, err := sys.Root.RequestFuture(actor.NewPID(sys.Address(), "partition-activator"), &cluster.ActivationRequest{
		ClusterIdentity: &cluster.ClusterIdentity{Identity: id, Kind: session.GrainKind}, RequestId: "stray",
	}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	pid := res.(*cluster.ActivationResponse).GetPid()
	if _, err := sys.Root.RequestFuture(pid, &pb.GetSummary{Caller: &pb.Caller{System: true}}, 10*time.Second).Result(); err != nil {
		t.Fatalf("the stray activation: %v", err)
	}
	if _, err := st.AcquireLease(ctx, id, "127.0.0.1:1#probe", time.Millisecond); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("the stray activation holds no lease: %v", err)
	}

	// Through the owner's directory, as every node asks.
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	t0 := time.Now()
	r, err := stray.Request(c, id, &pb.GetSummary{Caller: &pb.Caller{System: true}})
	if err != nil {
		t.Fatalf("a request to the session's owner while a stray activation held it: %v after %s", err, time.Since(t0).Round(time.Millisecond))
	}
	if _, ok := r.(*pb.SessionSummary); !ok {
		t.Fatalf("answer %T %v", r, r)
	}
	t.Logf("served by the owner after %s", time.Since(t0).Round(time.Millisecond))
}
