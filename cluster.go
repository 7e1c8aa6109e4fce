package surfaced

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/store"
)

// ClusterConfig makes a runtime a member of a protoactor cluster. Sessions
// are grains (kind "session", identity = session id, disthash placement),
// activated on demand on their owner node, with their domain and agent
// process actors as children there. Every write of a session carries the
// token of its lease in the shared store, so a session is never written by
// two nodes.
type ClusterConfig struct {
	// Name is the cluster's name: members of one cluster share it.
	Name string
	// Provider returns the membership provider (automanaged, etcd, k8s). It
	// is called again when the member rejoins under a new identity.
	Provider func() (cluster.ClusterProvider, error)
	// Host and Port are where the member's remote (gRPC) listener binds;
	// port 0 picks a free one.
	Host string
	Port int
	// AdvertiseAddr is the host:port other members reach this one at
	// (default: the bound address).
	AdvertiseAddr string
	// LeaseTTL is how long a session's lease lasts unrenewed (default 6 s):
	// after a node dies, its sessions can move after at most this long.
	LeaseTTL time.Duration
	// StartTimeout bounds joining (default 30 s): a provider that cannot
	// reach its backend fails the start with a clear error rather than hang.
	StartTimeout time.Duration
	// Watchdog is how long this member may be missing from its own view of
	// the topology before it rejoins as a new member (default 10 s). A
	// membership outage (etcd down longer than its lease grace) evicts a
	// member for good under its old identity: everyone, itself included,
	// blocks that id.
	Watchdog time.Duration
	// HeartbeatExpiration: a member whose gossip heartbeat is this old is
	// blocked (the library's default is 20 s; never 0).
	HeartbeatExpiration time.Duration
	// Evicted, when set, is called instead of rejoining in process when the
	// watchdog finds this member evicted: for providers that cannot run
	// twice in one process (automanaged keeps its health server bound), the
	// daemon exits and its service manager starts it again.
	Evicted func()
}

func (c *ClusterConfig) withDefaults() ClusterConfig {
	out := *c
	if out.Name == "" {
		out.Name = "surfaced"
	}
	if out.Host == "" {
		out.Host = "127.0.0.1"
	}
	if out.LeaseTTL <= 0 {
		out.LeaseTTL = 6 * time.Second
	}
	if out.StartTimeout <= 0 {
		out.StartTimeout = 30 * time.Second
	}
	if out.Watchdog <= 0 {
		out.Watchdog = 10 * time.Second
	}
	if out.HeartbeatExpiration <= 0 {
		out.HeartbeatExpiration = 20 * time.Second
	}
	return out
}

// clusterNode is this runtime's membership: one actor system and cluster,
// replaced whole when the member rejoins.
type clusterNode struct {
	c     *cluster.Cluster
	prov  cluster.ClusterProvider
	sys   *actor.ActorSystem
	dir   *session.Cluster
	ready atomic.Bool
	done  chan struct{}

	// Lease conflicts with members this node believes alive: the cluster
	// placed a session here while another live member holds its lease.
	// Sustained, it means the views of the topology diverged (this member
	// was cut off and the others blocked it): it must rejoin.
	conflictMu    sync.Mutex
	conflictFirst time.Time
	conflictLast  time.Time
	conflicts     int
}

// ErrClusterStart is wrapped by a failure to join the cluster.
var ErrClusterStart = errors.New("cluster member did not start")

func (r *Runtime) startCluster() error {
	cc := r.cfg.Cluster.withDefaults()
	leaser, ok := r.cfg.Store.(store.Leaser)
	if !ok {
		return fmt.Errorf("surfaced: a cluster needs a store with leases (PostgreSQL), not %T", r.cfg.Store)
	}
	r.deps.Leaser = leaser
	r.deps.LeaseTTL = cc.LeaseTTL
	r.deps.LeaseConflict = r.leaseConflict
	node, err := r.joinCluster(cc)
	if err != nil {
		return err
	}
	r.install(cc, node)
	return nil
}

// install makes node this runtime's membership and watches it.
func (r *Runtime) install(cc ClusterConfig, node *clusterNode) {
	r.swap.Lock()
	r.node, r.sys, r.dir = node, node.sys, node.dir
	r.swap.Unlock()
	go r.watchdog(cc, node)
}

// joinCluster starts an actor system and a cluster member in it.
func (r *Runtime) joinCluster(cc ClusterConfig) (*clusterNode, error) {
	prov, err := cc.Provider()
	if err != nil {
		return nil, fmt.Errorf("%w: provider: %w", ErrClusterStart, err)
	}
	sys := newActorSystem(r.log)
	var ropts []remote.ConfigOption
	if cc.AdvertiseAddr != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cc.AdvertiseAddr))
	}
	kind := session.ClusterKind(r.deps)
	ccfg := cluster.Configure(cc.Name, prov, disthash.New(), remote.Configure(cc.Host, cc.Port, ropts...),
		cluster.WithKinds(kind),
		cluster.WithRequestTimeout(5*time.Second),
		cluster.WithHeartbeatExpiration(cc.HeartbeatExpiration))
	c := cluster.New(sys, ccfg)
	started := make(chan error, 1)
	go func() {
		defer func() {
			// remote.Start panics when it cannot listen.
			if p := recover(); p != nil {
				started <- fmt.Errorf("%v", p)
			}
		}()
		c.StartMember()
		started <- nil
	}()
	select {
	case err := <-started:
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrClusterStart, err)
		}
	case <-time.After(cc.StartTimeout):
		go func() { _ = prov.Shutdown(false) }()
		return nil, fmt.Errorf("%w within %s: the membership provider did not answer (is etcd reachable at the configured endpoints?)",
			ErrClusterStart, cc.StartTimeout)
	}
	// Lease holders are named per start (a restarted member is a new holder).
	r.deps.NodeID = sys.Address() + "#" + sys.ID
	node := &clusterNode{c: c, prov: prov, sys: sys, dir: session.NewCluster(c, r.log), done: make(chan struct{})}
	node.ready.Store(true)
	r.log.Info("cluster member started", "cluster", cc.Name, "address", sys.Address(), "member", sys.ID)
	return node, nil
}

// watchdog notices this member missing from its own view of the topology:
// after a membership outage every member, itself included, has blocked its
// id for good, silently. It rejoins as a new member and says so loudly.
func (r *Runtime) watchdog(cc ClusterConfig, node *clusterNode) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var missingSince time.Time
	for {
		select {
		case <-node.done:
			return
		case <-t.C:
		}
		if node.diverged(cc.LeaseTTL) {
			r.log.Error("CLUSTER: THIS MEMBER'S VIEW OF THE TOPOLOGY DISAGREES WITH THE OTHERS' (its sessions are leased to live members)",
				"member", node.sys.ID)
			if cc.Evicted != nil {
				cc.Evicted()
				return
			}
			if err := r.rejoin(cc, node); err != nil {
				r.log.Error("cluster: rejoin failed; retrying", "err", err)
				continue
			}
			return
		}
		if node.inOwnView() {
			if !missingSince.IsZero() {
				r.log.Warn("cluster: this member is back in its topology view", "member", node.sys.ID)
			}
			missingSince = time.Time{}
			node.ready.Store(true)
			continue
		}
		if missingSince.IsZero() {
			missingSince = time.Now()
			node.ready.Store(false)
			r.log.Warn("cluster: this member is missing from its own view of the topology", "member", node.sys.ID)
			continue
		}
		if time.Since(missingSince) < cc.Watchdog {
			continue
		}
		if cc.Evicted != nil {
			r.log.Error("CLUSTER: THIS MEMBER WAS EVICTED (missing from its own topology view); stopping so that the service manager starts it again",
				"member", node.sys.ID, "missing_for", time.Since(missingSince).Round(time.Second))
			cc.Evicted()
			return
		}
		r.log.Error("CLUSTER: THIS MEMBER WAS EVICTED (missing from its own topology view); rejoining as a new member",
			"member", node.sys.ID, "missing_for", time.Since(missingSince).Round(time.Second))
		if err := r.rejoin(cc, node); err != nil {
			r.log.Error("cluster: rejoin failed; retrying", "err", err)
			continue
		}
		return
	}
}

// rejoin replaces the member: its sessions stop (releasing their leases, so
// they can move at once), the old member leaves, a new one joins.
func (r *Runtime) rejoin(cc ClusterConfig, old *clusterNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.stopLiveSessions(ctx, "moved")
	close(old.done)
	old.dir.Close()
	old.c.Shutdown(false) // also shuts its actor system down
	// A non-graceful shutdown stops only the member's gRPC server: its
	// endpoint manager, with a client connection to every peer (redialled
	// for ever once the peer is gone), would outlive it. Stop it too.
	old.c.Remote.Shutdown(true)
	// A non-graceful cluster shutdown leaves the provider running: its
	// registration would linger (etcd: the keep-alive loop renews the old
	// member's key), and the others would see a fourth member.
	if err := old.prov.Shutdown(false); err != nil {
		r.log.Warn("cluster: the old member's registration was not removed", "member", old.sys.ID, "err", err)
	}
	node, err := r.joinCluster(cc)
	if err != nil {
		return err
	}
	r.log.Warn("cluster: rejoined as a new member", "member", node.sys.ID)
	r.install(cc, node)
	return nil
}

// inOwnView reports whether this member is in its own view of the topology.
// Members are matched by address, not id: the Kubernetes provider names
// members with ids of its own.
func (n *clusterNode) inOwnView() bool {
	return n.dir.HasMember(n.sys.Address())
}

// shutdown leaves the cluster gracefully.
func (n *clusterNode) shutdown() {
	select {
	case <-n.done:
	default:
		close(n.done)
	}
	n.dir.Close()
	n.c.Shutdown(true)
}

// HostPort splits a listen address for ClusterConfig.
func HostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	return h, port, nil
}

// ClusterMembers returns the addresses of the members in this node's view of
// the topology (nil on a single node).
func (r *Runtime) ClusterMembers() []string {
	r.swap.RLock()
	n := r.node
	r.swap.RUnlock()
	if n == nil {
		return nil
	}
	return n.dir.Members()
}

// leaseConflict records a session placed here whose lease a live member
// holds (see clusterNode.diverged).
func (r *Runtime) leaseConflict(sessionID, holder string) {
	r.swap.RLock()
	n := r.node
	r.swap.RUnlock()
	if n == nil {
		return
	}
	addr, _, _ := strings.Cut(holder, "#")
	// An earlier incarnation of this node is not alive.
	alive := addr != n.sys.Address() && n.dir.HasMember(addr)
	if !alive {
		return // a dead member's lease: it expires, then the session moves here
	}
	n.conflictMu.Lock()
	defer n.conflictMu.Unlock()
	now := time.Now()
	if n.conflicts == 0 || now.Sub(n.conflictLast) > 10*time.Second {
		n.conflictFirst, n.conflicts = now, 0
	}
	n.conflicts++
	n.conflictLast = now
}

// diverged reports lease conflicts with live members that lasted longer than
// two lease lifetimes: a hand-over during rebalancing takes a moment, a
// split view does not go away.
func (n *clusterNode) diverged(ttl time.Duration) bool {
	n.conflictMu.Lock()
	defer n.conflictMu.Unlock()
	return n.conflicts >= 3 && n.conflictLast.Sub(n.conflictFirst) > 2*ttl
}
