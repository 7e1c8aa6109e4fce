// Package agent is the agent process actor: it owns one agent subprocess
// (package agentproc does the process and JSONL work). Every stdin line goes
// through this actor, one record per line; the reader goroutine turns each
// stdout line into a message; responses are correlated by id.
package agent

import (
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/dispatch"
	proc "github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Config configures one agent process actor.
type Config struct {
	SessionID   string
	Incarnation uint32
	Spec        proc.Spec
	Logger      *slog.Logger
	// OnInvalid counts a dropped line (metrics); optional.
	OnInvalid func(code string)
	// PendingTTL drops a correlation that was never answered (0: 2 minutes).
	PendingTTL time.Duration
	// start replaces proc.Start in tests.
	start func(proc.Spec, proc.Handler) (*proc.Process, error)
}

// Props returns the props of an agent process actor. Its parent (the session
// actor) receives *pb.AgentLine for every uncorrelated line, *pb.AgentDiagnostic
// for dropped lines and, exactly once, *pb.AgentExited — including when the
// process could not start (Error set, ExitCode -1).
func Props(cfg Config, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &agentActor{cfg: cfg} }, append([]actor.PropsOption{dispatch.Option()}, opts...)...)
}

type agentActor struct {
	cfg    Config
	log    *slog.Logger
	p      *proc.Process
	parent *actor.PID
	root   *actor.RootContext

	// The correlation table is shared with the reader goroutine, which routes
	// answers straight to whoever waits for them (one hop, not two).
	mu      sync.Mutex
	pending map[string]waiter
	exited  bool
	sweep   *time.Timer
}

type waiter struct {
	to    *actor.PID
	since time.Time
}

type sweepTick struct{}

func (a *agentActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case *pb.AgentSend:
		a.send(ctx, m)
	case *sweepTick:
		a.sweepPending()
		a.sweep.Reset(a.cfg.PendingTTL / 2)
	case *actor.Stopping:
		if a.sweep != nil {
			a.sweep.Stop()
		}
		if a.p != nil {
			p := a.p
			// Close ends stdin, SIGTERMs the group and SIGKILLs it after the
			// grace period; it must not block the actor system.
			go func() { _ = p.Close() }()
		}
	}
}

func (a *agentActor) started(ctx actor.Context) {
	a.log = a.cfg.Logger
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("session", a.cfg.SessionID, "incarnation", a.cfg.Incarnation)
	a.parent = ctx.Parent()
	a.root = ctx.ActorSystem().Root
	a.pending = make(map[string]waiter)
	start := a.cfg.start
	if start == nil {
		start = proc.Start
	}
	p, err := start(a.cfg.Spec, &handler{a: a})
	if err != nil {
		a.log.Error("agent failed to start", "argv", a.cfg.Spec.Argv, "err", err)
		ctx.Send(a.parent, &pb.AgentExited{Incarnation: a.cfg.Incarnation, ExitCode: -1, Error: err.Error()})
		return
	}
	a.p = p
	a.log.Info("agent started", "pid", p.Pid(), "argv", a.cfg.Spec.Argv)
	ttl := a.cfg.PendingTTL
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	a.cfg.PendingTTL = ttl
	// Unanswered correlations are swept now and then; a timer, not a
	// goroutine, so that an idle session costs nothing here.
	self, root := ctx.Self(), a.root
	a.sweep = time.AfterFunc(ttl/2, func() { root.Send(self, &sweepTick{}) })
}

func (a *agentActor) send(ctx actor.Context, m *pb.AgentSend) {
	to := m.GetReplyTo().Actor()
	if a.p == nil {
		if m.GetExpectId() != "" && to != nil {
			ctx.Send(to, &pb.AgentReply{Id: m.GetExpectId(), Failed: true})
		}
		return
	}
	if id := m.GetExpectId(); id != "" && to != nil {
		a.mu.Lock()
		if a.exited {
			a.mu.Unlock()
			ctx.Send(to, &pb.AgentReply{Id: id, Failed: true})
			return
		}
		a.pending[id] = waiter{to: to, since: time.Now()}
		a.mu.Unlock()
	}
	if err := a.p.Write(m.GetLine()); err != nil {
		a.log.Warn("agent stdin write failed", "err", err)
		if id := m.GetExpectId(); id != "" && to != nil {
			a.mu.Lock()
			_, ok := a.pending[id]
			delete(a.pending, id)
			a.mu.Unlock()
			if ok {
				ctx.Send(to, &pb.AgentReply{Id: id, Failed: true})
			}
		}
	}
}

func (a *agentActor) sweepPending() {
	cut := time.Now().Add(-a.cfg.PendingTTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, w := range a.pending {
		if w.since.Before(cut) {
			delete(a.pending, id)
		}
	}
}

// handler runs on the process's reader goroutine. Uncorrelated lines are
// batched until the reader has nothing more buffered (Flush).
type handler struct {
	a     *agentActor
	batch []*pb.AgentLine
}

func (h *handler) Line(env proc.Envelope, line []byte) {
	a := h.a
	if env.ID != "" && (env.Type == proc.TypeResponse || env.Type == proc.TypeSurfaceDispatchResult) {
		a.mu.Lock()
		w, ok := a.pending[env.ID]
		if ok {
			delete(a.pending, env.ID)
		}
		a.mu.Unlock()
		if ok {
			// Lines the agent wrote before this answer reach the session first.
			h.Flush()
			a.root.Send(w.to, &pb.AgentReply{Id: env.ID, Type: env.Type, Line: line})
			return
		}
	}
	h.batch = append(h.batch, &pb.AgentLine{Incarnation: a.cfg.Incarnation, Type: env.Type, Id: env.ID, Line: line})
	if len(h.batch) >= maxBatch {
		h.Flush()
	}
}

// maxBatch bounds a batch of lines (and so the frames of one session turn).
const maxBatch = 256

// Flush sends the batched lines to the session.
func (h *handler) Flush() {
	switch len(h.batch) {
	case 0:
		return
	case 1:
		h.a.root.Send(h.a.parent, h.batch[0])
	default:
		h.a.root.Send(h.a.parent, &pb.AgentLines{Lines: h.batch})
	}
	h.batch = nil
}

func (h *handler) Invalid(d proc.Diagnostic) {
	a := h.a
	h.Flush()
	a.log.Warn("agent line dropped", "code", d.Code, "reason", d.Message, "bytes", d.Len)
	if a.cfg.OnInvalid != nil {
		a.cfg.OnInvalid(d.Code)
	}
	a.root.Send(a.parent, &pb.AgentDiagnostic{Incarnation: a.cfg.Incarnation, Code: d.Code, Message: d.Message})
}

func (h *handler) Exited(st proc.ExitStatus) {
	a := h.a
	h.Flush()
	a.mu.Lock()
	a.exited = true
	pending := a.pending
	a.pending = map[string]waiter{}
	a.mu.Unlock()
	for id, w := range pending {
		a.root.Send(w.to, &pb.AgentReply{Id: id, Failed: true})
	}
	msg := &pb.AgentExited{Incarnation: a.cfg.Incarnation, ExitCode: int32(st.Code), Signal: st.Signal, StderrTail: st.StderrTail}
	if st.Err != nil {
		msg.Error = st.Err.Error()
	}
	a.log.Info("agent exited", "code", st.Code, "signal", st.Signal)
	a.root.Send(a.parent, msg)
}
