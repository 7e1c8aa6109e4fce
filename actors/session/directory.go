package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// ErrNotFound is returned for a session id the store does not hold.
var ErrNotFound = errors.New("session not found")

// ErrUnavailable is returned when the session could not be reached in time.
var ErrUnavailable = errors.New("session unavailable")

// ErrStoreUnavailable is returned when the session could not be brought up
// because the store could not be read.
var ErrStoreUnavailable = errors.New("the store could not be read")

// DefaultRequestTimeout bounds a request without a context deadline. It is
// longer than the settle window so that an agent-hosted command times out in
// its domain actor, with a clear result, before the request does.
const DefaultRequestTimeout = 30 * time.Second

// Directory addresses sessions by id, wherever they live. A session actor is
// activated on demand from the store (a virtual actor): any request to a
// stored session reaches a live actor.
type Directory interface {
	// Request sends msg to the session's actor and waits for its answer.
	Request(ctx context.Context, sessionID string, msg proto.Message) (proto.Message, error)
	// Send delivers msg without waiting.
	Send(ctx context.Context, sessionID string, msg proto.Message) error
}

// Local is the single-node Directory: session actors live in this process.
//
// A request activates a stored session only for its owner (or the daemon
// itself): the owner is checked in the store before the actor is spawned,
// so that a guessed or foreign id never starts someone's agent, and the
// refusal costs what a missing id's does (one store read, whether the
// session is asleep, live or absent).
type Local struct {
	sys  *actor.ActorSystem
	deps *Deps

	mu     sync.Mutex
	active map[string]*liveSession
	// activating serializes activation per session id.
	activating map[string]*sync.Mutex
	spawned    uint64
	closed     bool
}

// ErrClosed is returned once the directory is shutting down.
var ErrClosed = errors.New("shutting down")

// Close refuses every new activation (requests to live sessions still go).
func (l *Local) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// liveSession is an activated session: its actor, whose it is, and the
// requests on their way to it (an idle session does not stop under them:
// mayLeave).
type liveSession struct {
	pid      *actor.PID
	owner    string
	inFlight int
}

// NewLocal returns a Directory hosting sessions in sys.
func NewLocal(sys *actor.ActorSystem, deps *Deps) *Local {
	return &Local{sys: sys, deps: deps, active: map[string]*liveSession{}, activating: map[string]*sync.Mutex{}}
}

// callerOf is who sends msg: the subject of its Caller (or of a
// Subscribe), and whether it is the daemon itself. A message that names
// no caller activates nothing.
func callerOf(msg proto.Message) (subject string, system bool) {
	switch m := msg.(type) {
	case interface{ GetCaller() *pb.Caller }:
		c := m.GetCaller()
		return c.GetSubject(), c.GetSystem()
	case *pb.Subscribe:
		return m.GetSubject(), false
	}
	return "", false
}

// may reports whether a caller may reach a session of owner.
func may(owner, subject string, system bool) bool {
	return system || (subject != "" && subject == owner)
}

// Request implements Directory. A command carries the request's deadline
// (see WithDeadline); when ctx ends first (the client went away) the
// request is withdrawn, so that a domain never runs a command nobody waits
// for.
func (l *Local) Request(ctx context.Context, id string, msg proto.Message) (proto.Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	msg = WithDeadline(msg, dl)
	subject, system := callerOf(msg)
	for attempt := 0; ; attempt++ {
		pid, err := l.activate(ctx, id, subject, system, true)
		if err != nil {
			return nil, err
		}
		timeout := time.Until(dl)
		if timeout <= 0 {
			l.arrived(id, pid)
			return nil, fmt.Errorf("session %s: %w", id, context.DeadlineExceeded)
		}
		res, err := request(ctx, l.sys.Root, pid, msg, timeout)
		l.arrived(id, pid)
		if errors.Is(err, actor.ErrDeadLetter) && attempt == 0 {
			// The actor stopped (slept or ended) between lookup and delivery.
			l.forget(id, pid)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("session %s: %w: %w", id, ErrUnavailable, err)
		}
		if e, ok := res.(*pb.Error); ok {
			// The activation could not serve: it answered why.
			l.forget(id, pid)
			switch e.GetCode() {
			case CodeNotFound:
				return nil, ErrNotFound
			case CodeStoreUnavailable:
				return nil, fmt.Errorf("session %s: %w: %s", id, ErrStoreUnavailable, e.GetMessage())
			}
			return nil, fmt.Errorf("session %s: %w: %s", id, ErrUnavailable, e.GetMessage())
		}
		pm, ok := res.(proto.Message)
		if !ok {
			return nil, fmt.Errorf("session %s: unexpected answer %T", id, res)
		}
		return pm, nil
	}
}

// request sends msg to pid and waits for its answer, the timeout
// (actor.ErrTimeout) or the end of ctx (its cause). A request whose caller
// left is withdrawn at once (see replyBox): a domain on this node then drops
// the command unrun.
func request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg proto.Message, timeout time.Duration) (any, error) {
	b := newReplyBox(root.ActorSystem())
	defer b.close()
	// The envelope carries the request's trace context, if any (headers
	// are nil otherwise: the same envelope RequestWithCustomSender makes).
	root.Send(pid, &actor.MessageEnvelope{Header: tracing.Headers(ctx), Message: msg, Sender: b.pid})
	return b.wait(ctx, timeout)
}

// WithDeadline stamps a command with the moment its caller stops waiting,
// a little before dl (see answerMargin) so that the command's own answer
// (timeout, not run) reaches the caller before the caller gives up. Other
// messages, and a command that has a deadline already, are returned as they
// are.
func WithDeadline(msg proto.Message, dl time.Time) proto.Message {
	rc, ok := msg.(*pb.RunCommand)
	if !ok || rc.GetDeadlineMs() != 0 || dl.IsZero() {
		return msg
	}
	c := proto.CloneOf(rc)
	c.DeadlineMs = dl.Add(-answerMargin(time.Until(dl))).UnixMilli()
	return c
}

// answerMargin is how much before the caller's deadline a command must be
// answered: a tenth of the time it has, at most a second.
func answerMargin(d time.Duration) time.Duration {
	return min(time.Second, max(d/10, 0))
}

// Send implements Directory.
func (l *Local) Send(ctx context.Context, id string, msg proto.Message) error {
	subject, system := callerOf(msg)
	pid, err := l.activate(ctx, id, subject, system, false)
	if err != nil {
		return err
	}
	l.sys.Root.Send(pid, msg)
	return nil
}

// Lookup returns the PID of a live session actor (nil when it is not active).
func (l *Local) Lookup(id string) *actor.PID {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.active[id]; ok {
		return a.pid
	}
	return nil
}

// Live returns the ids of the active sessions.
func (l *Local) Live() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.active))
	for id := range l.active {
		out = append(out, id)
	}
	return out
}

// StopAll asks every active session to stop for reason (shutdown: they sleep
// and wake on the next start) and waits for them.
func (l *Local) StopAll(ctx context.Context, reason string) {
	l.mu.Lock()
	pids := make([]*actor.PID, 0, len(l.active))
	for _, a := range l.active {
		pids = append(pids, a.pid)
	}
	l.mu.Unlock()
	StopEach(ctx, l.sys.Root, pids, reason)
}

// StopEach asks each session actor to stop for reason, all at once, and
// waits until each has answered or terminated, or ctx's deadline (10 s
// without one) passes. One actor sends the requests and watches the
// sessions; their answers come back to it as continuations, so stopping ten
// thousand sessions starts no goroutine per session. A session finishes
// what it started first (the writes in flight for a request) for at most
// three quarters of that time: the rest is for the writes and the stops
// that follow.
//
// A session that is already stopping on its own (its lease lost, idle,
// ended) never answers: protoactor drops what reaches a stopping mailbox.
// Its termination counts as its answer (a stopping actor answers a Watch
// with Terminated at once, a gone one through its dead letters); waiting
// for the answer alone, a rejoin waited its whole 30 s on such a session
// while every request through the node waited for the rejoin.
func StopEach(ctx context.Context, root *actor.RootContext, pids []*actor.PID, reason string) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if len(pids) == 0 || timeout <= 0 {
		return
	}
	s := &stopper{pids: pids, timeout: timeout, done: make(chan struct{}), pending: make(map[string]bool, len(pids)),
		stop: &pb.Stop{Caller: &pb.Caller{System: true}, Reason: reason, DeadlineMs: time.Now().Add(timeout * 3 / 4).UnixMilli()}}
	pid := root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))
	select {
	case <-s.done:
	case <-time.After(timeout + time.Second): // the futures time out first; this only bounds a stopper that was never run
		root.Stop(pid)
	}
}

// stopper is StopEach's actor: it asks every session to stop and watches
// each, and is done when each has answered, terminated or timed out.
type stopper struct {
	pids    []*actor.PID
	stop    *pb.Stop
	timeout time.Duration
	pending map[string]bool // by PID key
	done    chan struct{}
}

func (s *stopper) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.ask(ctx)
	case *actor.Terminated:
		s.settled(ctx, m.GetWho())
	}
}

func (s *stopper) ask(ctx actor.Context) {
	for _, pid := range s.pids {
		s.pending[pid.String()] = true
	}
	for _, pid := range s.pids {
		ctx.Watch(pid)
		f := ctx.RequestFuture(pid, s.stop, s.timeout)
		ctx.ReenterAfter(f, func(any, error) { s.settled(ctx, pid) })
	}
}

// settled marks pid as stopped (it answered, terminated, or its time ran
// out); the last one ends the wait.
func (s *stopper) settled(ctx actor.Context, pid *actor.PID) {
	if !s.pending[pid.String()] {
		return
	}
	delete(s.pending, pid.String())
	if len(s.pending) == 0 {
		close(s.done)
		ctx.Stop(ctx.Self())
	}
}

func (l *Local) forget(id string, pid *actor.PID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.active[id]; ok && cur.pid.Equal(pid) {
		delete(l.active, id)
	}
}

// arrived: a request counted by activate has its answer (or gave up).
func (l *Local) arrived(id string, pid *actor.PID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.active[id]; ok && cur.pid.Equal(pid) && cur.inFlight > 0 {
		cur.inFlight--
	}
}

// mayLeave is the session's question before it stops idle: no while a
// request is on its way to it; yes, and the activation is forgotten at
// once, so that the next request starts a new one rather than reach a
// stopping mailbox, where protoactor drops what is left unanswered.
//
// An activation runs as soon as it is spawned, before activate records it
// with the request that spawned it: while the session's activation is
// being recorded the answer is no (that request is on its way), not the
// yes of an activation the directory has forgotten.
func (l *Local) mayLeave(id string, pid *actor.PID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.active[id]
	if !ok {
		_, recording := l.activating[id]
		return !recording
	}
	if !cur.pid.Equal(pid) {
		return true
	}
	if cur.inFlight > 0 {
		return false
	}
	delete(l.active, id)
	return true
}

// activate returns the actor of session id for a caller, spawning it from
// the store when it is not live. A caller that may not reach the session
// gets ErrNotFound, as for a missing id, after the same store read. With
// count, the request is counted on its way (the caller calls arrived).
func (l *Local) activate(ctx context.Context, id, subject string, system, count bool) (*actor.PID, error) {
	l.mu.Lock()
	if a, ok := l.active[id]; ok {
		if may(a.owner, subject, system) {
			if count {
				a.inFlight++
			}
			l.mu.Unlock()
			return a.pid, nil
		}
		l.mu.Unlock()
		_, _ = l.load(ctx, id)
		return nil, ErrNotFound
	}
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	gate, ok := l.activating[id]
	if !ok {
		gate = &sync.Mutex{}
		l.activating[id] = gate
	}
	l.mu.Unlock()

	gate.Lock()
	defer func() {
		gate.Unlock()
		l.mu.Lock()
		delete(l.activating, id)
		l.mu.Unlock()
	}()
	l.mu.Lock()
	if a, ok := l.active[id]; ok {
		if may(a.owner, subject, system) {
			if count {
				a.inFlight++
			}
			l.mu.Unlock()
			return a.pid, nil
		}
		l.mu.Unlock()
		_, _ = l.load(ctx, id)
		return nil, ErrNotFound
	}
	l.mu.Unlock()

	rec, err := l.load(ctx, id)
	if err != nil {
		return nil, err
	}
	// Ownership before activation: a foreign caller starts nothing.
	if !may(rec.Owner, subject, system) {
		return nil, ErrNotFound
	}
	if err := l.deps.admit(); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	var pid *actor.PID
	props := Props(Config{Record: rec, Deps: l.deps, OnStopping: func(p *actor.PID) { l.forget(id, p) },
		MayLeave: func(p *actor.PID) bool { return l.mayLeave(id, p) }})
	// Each activation has its own name: the previous one may still be
	// finishing its stop.
	l.mu.Lock()
	l.spawned++
	name := fmt.Sprintf("session-%s-%d", id, l.spawned)
	l.mu.Unlock()
	pid, err = l.sys.Root.SpawnNamed(props, name)
	if err != nil {
		return nil, fmt.Errorf("session %s: spawn: %w", id, err)
	}
	a := &liveSession{pid: pid, owner: rec.Owner}
	if count {
		a.inFlight = 1
	}
	l.mu.Lock()
	l.active[id] = a
	l.mu.Unlock()
	return pid, nil
}

// load reads a session's record, after the writes this node still has
// queued for it (a session that just slept): ErrNotFound when the store
// does not hold it.
func (l *Local) load(ctx context.Context, id string) (store.Session, error) {
	if err := store.CheckSessionID(id); err != nil {
		return store.Session{}, ErrNotFound
	}
	if err := l.deps.Writer.FlushSession(ctx, id); err != nil {
		return store.Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	rec, err := l.deps.Writer.Store().GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, ErrNotFound
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("session %s: load: %w: %w", id, ErrStoreUnavailable, err)
	}
	return rec, nil
}
