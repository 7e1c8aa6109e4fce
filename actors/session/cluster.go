package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// GrainKind is the cluster kind of session grains; identity = session id.
const GrainKind = "session"

// ClusterKind returns the cluster kind hosting session grains with deps. A
// grain loads its session when the cluster names it, takes the session's
// lease (deps.Leaser) and writes under it.
func ClusterKind(deps *Deps) *cluster.Kind {
	props := actor.PropsFromProducer(func() actor.Actor {
		return newSessionActor(Config{Deps: deps})
	}, append([]actor.PropsOption{dispatch.Option()}, deps.props("session", "", "")...)...)
	return cluster.NewKind(GrainKind, props)
}

// Cluster is the Directory of a protoactor cluster: a session is a grain
// placed by the cluster (disthash), activated on demand on its owner node.
//
// It does its own retries rather than cluster.Request's: the library applies
// call options to a package-global default (RequestFuture), its retry
// back-off sleeps nanoseconds, and a call to a node that died waits out its
// whole timeout. Here a call whose target node leaves the topology fails at
// once and is sent again to the new owner, with a real back-off; a call that
// reaches a node where the session cannot run (its lease is still elsewhere)
// is asked again until the lease moves or the caller's deadline passes.
//
// A request reaches a grain only for the session's owner (or the daemon):
// the owner is checked in the store first (and remembered: it never
// changes), so that a foreign or missing id activates nothing anywhere,
// and both cost one store read.
type Cluster struct {
	c        *cluster.Cluster
	log      *slog.Logger
	store    store.Store
	subjects owners // the owner of each session asked about

	mu      sync.Mutex
	gone    map[string]chan struct{} // member address -> closed when it leaves
	members []string                 // addresses of the members in the topology now
	owners  *cluster.Rendezvous      // places sessions on those members
	sub     *eventstreamSub
	member  *actor.PID // this member's directory actor (MemberActorName)

	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// ErrDirectoryClosed is in the error of a request that was in flight when
// its Directory closed: the member it went through left the cluster (a
// rejoin replaces it with a new member and a new Directory, which the
// caller may ask again). It comes wrapped with ErrUnavailable.
var ErrDirectoryClosed = errors.New("the cluster member this request went through has left")

type eventstreamSub = struct{ unsubscribe func() }

// NewCluster returns the Directory of c. It watches the topology and keeps
// the PID cache free of grains that stopped (the library publishes
// ActivationTerminated but never removes the cached PID).
func NewCluster(c *cluster.Cluster, st store.Store, log *slog.Logger) *Cluster {
	if log == nil {
		log = slog.Default()
	}
	d := &Cluster{c: c, log: log, store: st, subjects: owners{m: map[string]string{}},
		gone: map[string]chan struct{}{}, closed: make(chan struct{})}
	es := c.ActorSystem.EventStream
	s := es.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *cluster.ActivationTerminated:
			c.PidCache.RemoveByValue(e.ClusterIdentity.GetIdentity(), e.ClusterIdentity.GetKind(), e.Pid)
		case *cluster.ActivationTerminating:
			c.PidCache.RemoveByValue(e.ClusterIdentity.GetIdentity(), e.ClusterIdentity.GetKind(), e.Pid)
		case *cluster.ClusterTopology:
			d.topology(e)
		}
	})
	d.sub = &eventstreamSub{unsubscribe: func() { es.Unsubscribe(s) }}
	pid, err := c.ActorSystem.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return memberActor{d: d} }), MemberActorName)
	if err != nil {
		log.Error("the session directory's member actor did not start: other members cannot ask this one", "err", err)
	}
	d.member = pid
	// The member has started: its first topology may have been published
	// before the subscription. A topology that came since is newer.
	d.mu.Lock()
	if d.members == nil {
		ms := c.MemberList.Members().Members()
		d.members = addresses(ms)
		d.owners = cluster.NewRendezvous()
		d.owners.UpdateMembers(ms)
	}
	d.mu.Unlock()
	return d
}

// Members returns the addresses of the members in the current topology, as
// the cluster's ClusterTopology events told it. The pinned library's
// MemberList.Members reads the member set without the lock its updates
// hold, so reading it from another goroutine is a data race; this copy is
// kept under the directory's own lock.
func (d *Cluster) Members() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.members)
}

// HasMember reports whether the member at addr is in the current topology.
func (d *Cluster) HasMember(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.members, addr)
}

// Owner returns the address of the member the cluster places session id on,
// in this member's current view of the topology ("" when no member hosts
// sessions): the same rendezvous hash the placement uses.
func (d *Cluster) Owner(id string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owners == nil {
		return ""
	}
	return d.owners.GetByClusterIdentity(&cluster.ClusterIdentity{Identity: id, Kind: GrainKind})
}

func addresses(ms []*cluster.Member) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Address())
	}
	return out
}

// Close stops watching; requests in flight fail at once with
// ErrDirectoryClosed, and so do later ones.
func (d *Cluster) Close() {
	d.closeOnce.Do(func() {
		d.sub.unsubscribe()
		if d.member != nil {
			d.c.ActorSystem.Root.Stop(d.member)
		}
		close(d.closed)
	})
}

// MemberActorName is the name of each member's directory actor, which
// answers the other members about the sessions (ForgetSession,
// PlaceSession).
const MemberActorName = "session-directory"

// memberActor is a member's directory actor: it routes the other members'
// questions to its directory. The questions come wrapped in
// google.protobuf.Any (see ask).
type memberActor struct{ d *Cluster }

func (m memberActor) Receive(ctx actor.Context) {
	a, ok := ctx.Message().(*anypb.Any)
	if !ok {
		return
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		m.d.log.Warn("a member asked this one something it does not know", "type", a.GetTypeUrl(), "err", err)
		return
	}
	switch msg := inner.(type) {
	case *pb.ForgetSession:
		m.d.forget(msg.GetSessionId())
		ctx.Respond(&pb.ForgetSessionResult{})
	case *pb.PlaceSession:
		ctx.Respond(&pb.PlaceSessionResult{Owner: m.d.Owner(msg.GetSessionId())})
	}
}

// forget drops what this member caches about session id: the route to its
// grain and its owner.
func (d *Cluster) forget(id string) {
	d.c.PidCache.Remove(id, GrainKind)
	d.subjects.forget(id)
}

// askTimeout bounds a question to another member when the caller's
// context does not end sooner: a member that does not answer by then (it
// is frozen, cut off, or runs a binary without the directory actor) is
// not waited for.
const askTimeout = 2 * time.Second

// ask sends msg to the directory actor of the member at addr and returns
// its answer. The question travels wrapped in google.protobuf.Any, a type
// every build knows: a member of an earlier build, without the directory
// actor, answers it as a dead letter, whereas a message type it does not
// know would break its connection (rolling upgrades add no message type a
// running node may not know; docs/cluster.md).
func (d *Cluster) ask(ctx context.Context, addr string, msg proto.Message) (any, error) {
	q, err := anypb.New(msg)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", addr, err)
	}
	timeout := askTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, ctx.Err()
	}
	res, err := d.c.ActorSystem.Root.RequestFuture(actor.NewPID(addr, MemberActorName), q, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", addr, err)
	}
	return res, nil
}

// Forget tells every member in the topology, this one included, that
// session id was purged (ForgetSession), and waits for their answers: once
// it returns, a request about the session through any member that
// answered reads the store (not found) instead of a cached route to a
// grain that is gone. The error names the members that did not answer.
func (d *Cluster) Forget(ctx context.Context, id string) error {
	d.forget(id)
	members := d.Members()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, addr := range members {
		if addr == d.c.ActorSystem.Address() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := d.ask(ctx, addr, &pb.ForgetSession{SessionId: id})
			if _, ok := res.(*pb.ForgetSessionResult); err == nil && !ok {
				err = fmt.Errorf("member %s: unexpected answer %T", addr, res)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// PlacementAt asks the member at addr where its own view of the members
// places session id (PlaceSession): the address of the owner there.
func (d *Cluster) PlacementAt(ctx context.Context, addr, id string) (string, error) {
	res, err := d.ask(ctx, addr, &pb.PlaceSession{SessionId: id})
	if err != nil {
		return "", err
	}
	r, ok := res.(*pb.PlaceSessionResult)
	if !ok {
		return "", fmt.Errorf("member %s: unexpected answer %T", addr, res)
	}
	return r.GetOwner(), nil
}

func (d *Cluster) topology(t *cluster.ClusterTopology) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.members = addresses(t.GetMembers())
	d.owners = cluster.NewRendezvous()
	d.owners.UpdateMembers(t.GetMembers())
	for _, m := range t.GetLeft() {
		addr := m.Address()
		if ch, ok := d.gone[addr]; ok {
			close(ch)
			delete(d.gone, addr)
		}
		d.c.PidCache.RemoveByMember(m)
	}
}

// goneCh is closed when the member at addr leaves the topology.
func (d *Cluster) goneCh(addr string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.gone[addr]
	if !ok {
		ch = make(chan struct{})
		d.gone[addr] = ch
	}
	return ch
}

// Request implements Directory.
func (d *Cluster) Request(ctx context.Context, id string, msg proto.Message) (proto.Message, error) {
	if err := store.CheckSessionID(id); err != nil {
		return nil, ErrNotFound
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	msg = WithDeadline(msg, dl)
	if err := d.checkOwner(ctx, id, msg); err != nil {
		return nil, err
	}
	backoff := 25 * time.Millisecond
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, last)
			case <-d.closed:
				return nil, fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, ErrDirectoryClosed)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
		if d.isClosed() {
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, ErrDirectoryClosed)
		}
		pid := d.pid(id)
		if pid == nil {
			last = errors.New("no member hosts sessions")
			continue
		}
		res, err := d.call(ctx, id, attempt, pid, msg)
		switch {
		case errors.Is(err, ErrDirectoryClosed):
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, err)
		case err == nil:
			if code := refusal(res); code != "" {
				switch code {
				case CodeNotFound:
					return nil, ErrNotFound
				case CodeStoreUnavailable:
					d.c.PidCache.Remove(id, GrainKind)
					return nil, fmt.Errorf("session %s: %w", id, ErrStoreUnavailable)
				case CodeTooManySessions:
					return nil, fmt.Errorf("session %s: %w", id, ErrTooManySessions)
				}
				// The session cannot run there (yet): its lease is elsewhere
				// or it is stopping. Ask the owner again.
				d.c.PidCache.Remove(id, GrainKind)
				last = fmt.Errorf("%s", code)
				continue
			}
			return res, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, ctx.Err())
		default:
			d.c.PidCache.Remove(id, GrainKind)
			last = err
			d.log.Debug("session request retried", "session", id, "pid", pid, "err", err, "attempt", attempt)
		}
	}
}

// checkOwner lets msg through when its caller owns the session (or is the
// daemon); anyone else gets ErrNotFound. An owner seen before costs
// nothing; a first request, a missing id and a foreign caller cost one
// store read each.
func (d *Cluster) checkOwner(ctx context.Context, id string, msg proto.Message) error {
	subject, system := callerOf(msg)
	if system {
		return nil
	}
	if owner, ok := d.subjects.get(id); ok && may(owner, subject, false) {
		return nil
	}
	rec, err := d.store.GetSession(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, err)
	}
	d.subjects.put(id, rec.Owner)
	if !may(rec.Owner, subject, false) {
		return ErrNotFound
	}
	return nil
}

// owners remembers the owners of sessions (an owner never changes). It is
// bounded: when full it starts over.
type owners struct {
	mu sync.Mutex
	m  map[string]string
}

const maxOwners = 100_000

func (o *owners) get(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.m[id]
	return owner, ok
}

func (o *owners) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
}

func (o *owners) put(id, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.m) >= maxOwners {
		clear(o.m)
	}
	o.m[id] = owner
}

func (d *Cluster) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// Send implements Directory (it waits for the session to take the message).
func (d *Cluster) Send(ctx context.Context, id string, msg proto.Message) error {
	if d.isClosed() {
		return fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, ErrDirectoryClosed)
	}
	pid := d.pid(id)
	if pid == nil {
		return fmt.Errorf("session %s: %w", id, ErrUnavailable)
	}
	d.c.ActorSystem.Root.Send(pid, msg)
	return nil
}

func (d *Cluster) pid(id string) *actor.PID {
	if pid, ok := d.c.PidCache.Get(id, GrainKind); ok && pid != nil {
		return pid
	}
	pid := d.c.Get(id, GrainKind)
	if pid != nil {
		d.c.PidCache.Set(id, GrainKind, pid)
	}
	return pid
}

// Attributes of a cluster hop's span.
const (
	attrPeer    = attribute.Key("surfaced.cluster.peer")
	attrAttempt = attribute.Key("surfaced.cluster.attempt")
	attrRemote  = attribute.Key("surfaced.cluster.remote")
)

// errMemberGone: the node hosting the grain left the topology mid-call.
var errMemberGone = errors.New("the session's node left the cluster")

// call sends one request and waits for the answer, the caller's deadline, or
// the target node leaving the topology, whichever comes first.
func (d *Cluster) call(ctx context.Context, id string, attempt int, pid *actor.PID, msg proto.Message) (res proto.Message, err error) {
	timeout := DefaultRequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	// The hop is a span of the request's trace: the session's node
	// continues it from the envelope's headers. (Guarded: off, not even
	// the attributes are made.)
	var span tracing.Span
	if tracing.On() {
		ctx, span = tracing.Start(ctx, "cluster hop", tracing.Client, tracing.AttrNode.String(d.c.ActorSystem.Address()+"#"+d.c.ActorSystem.ID),
			tracing.AttrSession.String(id), attrPeer.String(pid.Address), attrAttempt.Int(attempt),
			attrRemote.Bool(pid.Address != d.c.ActorSystem.Address()))
	}
	defer func() {
		if err != nil {
			span.Fail("unanswered")
		}
		span.End()
	}()
	b := newReplyBox(d.c.ActorSystem)
	// Closing the box withdraws the request (see request): a domain on this
	// node drops the command unrun; one on another node has its deadline.
	defer b.close()
	d.c.ActorSystem.Root.Send(pid, &actor.MessageEnvelope{Header: tracing.Headers(ctx), Message: msg, Sender: b.pid})
	var gone chan struct{}
	if pid.Address != d.c.ActorSystem.Address() {
		gone = d.goneCh(pid.Address)
	}
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-gone:
			cancel(errMemberGone)
		case <-d.closed:
			cancel(ErrDirectoryClosed)
		case <-waitCtx.Done():
		}
	}()
	ans, err := b.wait(waitCtx, timeout)
	if err != nil {
		if errors.Is(err, errMemberGone) || errors.Is(err, ErrDirectoryClosed) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if e, ok := ans.(*pb.Error); ok {
		return e, nil
	}
	pm, ok := ans.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", ans)
	}
	return pm, nil
}

// refusal is the code of an answer that says "not here": a grain with no
// session (not_found) or one that cannot run it here now (session_moved), as
// a bare *pb.Error or as a command refused because its write was fenced.
func refusal(res proto.Message) string {
	switch r := res.(type) {
	case *pb.Error:
		return r.GetCode()
	case *pb.CommandResult:
		if r.GetRefused().GetCode() == CodeMoved {
			return CodeMoved
		}
	case interface{ GetError() *pb.Error }:
		if r.GetError().GetCode() == CodeMoved {
			return CodeMoved
		}
	}
	return ""
}
