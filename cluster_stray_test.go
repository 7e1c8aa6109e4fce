//go:build !race

package surfaced

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
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
	start := func() *Runtime { return startClusterNode(t, st, agent, "stray-test") }
	// Three nodes (two: TestInProcessClusterStrayOnTwoNodesLeavesTheOwnerInStep).
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

// logLines is a slog handler that keeps the messages and their "why".
type logLines struct {
	mu    *sync.Mutex
	lines *[]string
}

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "why" {
			line += ": " + a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	*l.lines = append(*l.lines, line)
	l.mu.Unlock()
	return nil
}
func (l logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logLines) WithGroup(string) slog.Handler      { return l }

func (l logLines) has(part string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range *l.lines {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

// On a cluster of two, another node holds (and renews) the lease of a
// session the cluster places on the owner — as a stray activation does
// there, while the owner keeps being asked for the session — for longer
// than two leases. The owner is not the node out of step: the holder's own
// view places the session on the owner too. The owner's watchdog asks it,
// and stays, instead of rejoining for nothing as "the odd one out" (every
// other member, here the one, holding a session placed on it).
func TestInProcessClusterStrayOnTwoNodesLeavesTheOwnerInStep(t *testing.T) {
	st := memstore.New()
	agent := test.NewInMemAgent()
	start := func(log *slog.Logger) *Runtime {
		return startClusterNode(t, st, agent, "stray-two", func(c *Config) { c.Logger = log })
	}
	logs := logLines{mu: &sync.Mutex{}, lines: &[]string{}}
	owner := start(slog.New(logs))
	holder := start(slog.New(slog.DiscardHandler))
	testkit.Eventually(t, 20*time.Second, func() bool {
		return len(owner.ClusterMembers()) == 2 && len(holder.ClusterMembers()) == 2
	}, "the members to see each other")

	// A session both views place on the owner.
	ctx := context.Background()
	var id string
	for {
		id = session.NewID()
		owner.swap.RLock()
		placed := owner.node.dir.Owner(id)
		owner.swap.RUnlock()
		if placed == owner.System().Address() {
			break
		}
	}
	now := time.Now()
	if err := st.CreateSession(ctx, store.Session{ID: id, Owner: "alice", Agent: "fake", Cwd: t.TempDir(),
		Status: session.StatusIdle, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	member := owner.System().ID

	// The other node holds the lease and renews it, alive.
	holder.swap.RLock()
	holderNode := holder.deps.NodeID
	holder.swap.RUnlock()
	l, err := st.AcquireLease(ctx, id, holderNode, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				_ = st.ReleaseLease(ctx, id, l.Token)
				return
			case <-time.After(300 * time.Millisecond):
				_, _ = st.RenewLease(ctx, id, l.Token, 2*time.Second)
			}
		}
	}()
	// The owner keeps being asked for the session: each activation finds
	// the lease held, a conflict.
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, _ = owner.Request(c, id, &pb.GetSummary{Caller: &pb.Caller{System: true}})
			cancel()
		}
	}()
	// The watchdog judges the conflict (held for more than two leases by
	// every other member): the holder places the session here.
	testkit.Eventually(t, 30*time.Second, func() bool { return logs.has("its activation is a stray") || logs.has("OUT OF STEP") },
		"the owner's watchdog to judge the conflict")
	close(stop)
	wg.Wait()
	if logs.has("OUT OF STEP") || owner.System().ID != member {
		t.Fatalf("the owner rejoined for a stray activation elsewhere (member %s, now %s)", member, owner.System().ID)
	}
	// The lease released, the owner serves the session.
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if r, err := owner.Request(c, id, &pb.GetSummary{Caller: &pb.Caller{System: true}}); err != nil {
		t.Fatalf("the owner after the holder let go: %v", err)
	} else if _, ok := r.(*pb.SessionSummary); !ok {
		t.Fatalf("answer %T %v", r, r)
	}
}
