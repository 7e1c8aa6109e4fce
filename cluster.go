package surfaced

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
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

	// start and ticked (nanoseconds after start, on the monotonic clock)
	// say when the watchdog last ran: a node that has not run for longer
	// than its session lease (frozen with SIGSTOP, stalled) is not ready
	// until the watchdog has looked at it.
	start  time.Time
	ticked atomic.Int64
	ttl    time.Duration // the session lease

	// conflicts are the sessions the cluster placed here while other nodes
	// held their leases: sustained with live holders, they mean that this
	// node's view of the members disagrees with the others' (it must rejoin).
	conflicts *leaseConflicts
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
	r.deps.Owns = r.ownsSession
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
	r.writer.SetNode(r.deps.NodeID)
	node := &clusterNode{c: c, prov: prov, sys: sys, dir: session.NewCluster(c, r.cfg.Store, r.log), done: make(chan struct{}),
		start: time.Now(), ttl: cc.LeaseTTL, conflicts: newLeaseConflicts(cc.LeaseTTL)}
	node.ready.Store(true)
	r.log.Info("cluster member started", "cluster", cc.Name, "address", sys.Address(), "member", sys.ID)
	return node, nil
}

// watchdog keeps this member in step with the cluster. Once a second it
// checks that the node ran at all (a node frozen or stalled for longer than
// its session lease has lost its sessions, and the others may have blocked
// it for good), that the node is in its own view of the topology (after a
// membership outage every member, itself included, blocks its id for good,
// and says nothing), and that the sessions the cluster places here are not
// held by live nodes (its view of the members diverged from the others').
// Out of step, the node says so loudly, is not ready, and rejoins as a new
// member, or leaves for its service manager to start it again.
func (r *Runtime) watchdog(cc ClusterConfig, node *clusterNode) {
	t := time.NewTicker(watchdogEvery)
	defer t.Stop()
	var missingSince time.Time
	var outOfStep string // once out of step, until the rejoin succeeds
	last := time.Now()
	for {
		select {
		case <-node.done:
			return
		case <-t.C:
		}
		now := time.Now()
		if gap := now.Sub(last); gap > cc.LeaseTTL && outOfStep == "" {
			node.ready.Store(false)
			outOfStep = fmt.Sprintf("this node did not run for %s, longer than the session lease (%s): it was frozen or stalled, its sessions may live on other nodes now and the others may have blocked it",
				gap.Round(100*time.Millisecond), cc.LeaseTTL)
		}
		last = now
		node.tick(now)
		if outOfStep == "" {
			switch ok, why := node.conflicts.outOfStep(now, node.sys.Address(), node.dir.Members(), node.placementAt); {
			case ok:
				outOfStep = why
			case why != "":
				r.log.Info("cluster: in step despite a lease conflict", "member", node.sys.ID, "why", why)
			}
		}
		if outOfStep != "" {
			node.ready.Store(false)
			if cc.Evicted != nil {
				r.log.Error("CLUSTER: THIS MEMBER IS OUT OF STEP WITH THE CLUSTER; stopping so that the service manager starts it again",
					"member", node.sys.ID, "why", outOfStep)
				cc.Evicted()
				return
			}
			r.log.Error("CLUSTER: THIS MEMBER IS OUT OF STEP WITH THE CLUSTER; rejoining as a new member", "member", node.sys.ID, "why", outOfStep)
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
			missingSince = now
			node.ready.Store(false)
			r.log.Warn("cluster: this member is missing from its own view of the topology", "member", node.sys.ID)
			continue
		}
		if now.Sub(missingSince) < cc.Watchdog {
			continue
		}
		if cc.Evicted != nil {
			r.log.Error("CLUSTER: THIS MEMBER WAS EVICTED (missing from its own topology view); stopping so that the service manager starts it again",
				"member", node.sys.ID, "missing_for", now.Sub(missingSince).Round(time.Second))
			cc.Evicted()
			return
		}
		r.log.Error("CLUSTER: THIS MEMBER WAS EVICTED (missing from its own topology view); rejoining as a new member",
			"member", node.sys.ID, "missing_for", now.Sub(missingSince).Round(time.Second))
		if err := r.rejoin(cc, node); err != nil {
			r.log.Error("cluster: rejoin failed; retrying", "err", err)
			continue
		}
		return
	}
}

// watchdogEvery is how often the watchdog looks.
const watchdogEvery = time.Second

// placementAsk bounds the watchdog's question to a lease holder (see
// leaseConflicts): short beside watchdogEvery, so that a holder that does
// not answer cannot make the watchdog's own gap look like a freeze.
const placementAsk = 300 * time.Millisecond

// placementAt asks the member at addr where its view places session id.
func (n *clusterNode) placementAt(addr, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), placementAsk)
	defer cancel()
	return n.dir.PlacementAt(ctx, addr, id)
}

// tick records that the watchdog ran at now.
func (n *clusterNode) tick(now time.Time) { n.ticked.Store(int64(now.Sub(n.start))) }

// isReady reports whether the node serves: the watchdog finds it in step, and
// has looked within the session lease (right after a freeze, before the
// watchdog has run again, the node is not ready).
func (n *clusterNode) isReady() bool {
	since := time.Since(n.start) - time.Duration(n.ticked.Load())
	return n.ready.Load() && since <= max(n.ttl, 2*watchdogEvery)
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
	stopRemoting(old.c.Remote, r.log)
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

// stopRemoting stops a member's remoting after its gRPC server was stopped
// (the endpoint manager and the connections it redials). The pinned
// library's endpoint manager, as it stops, sends on the channel of each
// endpoint reader it still lists, a channel the reader closes when its
// stream ends: with the server already stopped a reader can end between
// the two, and the send panics ("send on closed channel"; it took a node
// down in the frozen-node test). By then the part of the stop that matters
// is done (the endpoint writers and their redialling are stopped before
// that loop); what the panic skips is telling the readers of streams that
// are gone to say goodbye. So the panic is recovered here, and only here.
func stopRemoting(rem *remote.Remote, log *slog.Logger) {
	defer func() {
		if p := recover(); p != nil {
			log.Warn("cluster: the old member's remoting stopped on a race of the library's (a peer's stream ended as it stopped); its connections were already stopped", "panic", p)
		}
	}()
	rem.Shutdown(true)
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

// ownsSession reports whether this node is where the cluster places the
// session, in its own view of the members (true while that cannot be told).
func (r *Runtime) ownsSession(sessionID string) bool {
	r.swap.RLock()
	n := r.node
	r.swap.RUnlock()
	if n == nil {
		return true
	}
	owner := n.dir.Owner(sessionID)
	return owner == "" || owner == n.sys.Address()
}

// leaseConflict records a session placed here whose lease holder holds
// until expires (see leaseConflicts).
func (r *Runtime) leaseConflict(sessionID, holder string, expires time.Time) {
	r.swap.RLock()
	n := r.node
	r.swap.RUnlock()
	if n == nil {
		return
	}
	n.conflicts.observe(time.Now(), sessionID, holder, expires)
}
