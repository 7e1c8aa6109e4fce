// Package agent is the agent process actor: it owns one agent subprocess
// (package agentproc does the process and JSONL work). Every stdin line goes
// through this actor, one record per line; the reader goroutine turns each
// stdout line into a message; responses are correlated by id. What the
// reader hands the session is bounded by a Window (backpressure onto the
// agent's pipe), and what the agent writes reaches the log at a bounded
// rate (lograte).
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/dispatch"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/lograte"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Codes of AgentReply.Error: the command will get no answer although its
// agent runs.
const (
	// CodeWriteFailed: the command could not be written to the agent's
	// stdin (the agent does not read it, or closed it).
	CodeWriteFailed = codes.WriteFailed
	// CodeLineTooLong: the agent's answer was over the line cap and was
	// dropped (its id was read from the line's first bytes).
	CodeLineTooLong = proc.CodeLineTooLong
)

// Config configures one agent process actor.
type Config struct {
	SessionID   string
	Incarnation uint32
	// Agent and Node name the agent and this node on the actor's spans.
	Agent  string
	Node   string
	Spec   proc.Spec
	Logger *slog.Logger
	// OnInvalid counts a dropped line (metrics); optional.
	OnInvalid func(code string)
	// PendingTTL drops a correlation that was never answered (0: 2 minutes).
	PendingTTL time.Duration
	// Window bounds the output handed to the parent and not yet processed;
	// the parent releases each message's Cost once it has handled it. Nil:
	// a window of DefaultWindowBytes that nobody releases, which stalls the
	// reader once full (set it).
	Window *Window
	// LogRate bounds the log records of the agent's stderr lines and of its
	// dropped lines, each (lograte's defaults when zero). Spec.Stderr, when
	// set, takes the stderr lines instead.
	LogRate lograte.Config
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
	// refusals counts, by line type, the lines of the surface extension
	// written to the agent and not yet refused: an agent that is pi with
	// a surfaced/1 extension inside answers each of them, as every line
	// it does not know, with an id-less "Unknown command" failure. Each
	// such answer uses up one line of its type and is dropped here (it is
	// expected, not a line nobody asked for); one more than was sent goes
	// on to the session like any other.
	refusals map[string]int
	exited   bool
	// turn is the span of the prompt in flight while tracing (from its
	// line until the agent's turn ends); tracingTurn says whether there is
	// one, so that the reader looks at nothing else when there is not.
	turn        tracing.Span
	turnDelta   bool // turn has its first text delta event
	tracingTurn atomic.Bool
	sweep       *time.Timer

	window     *Window
	stderrLog  *lograte.Limiter
	invalidLog *lograte.Limiter
}

type waiter struct {
	to    *actor.PID
	since time.Time
	span  tracing.Span // the round trip, while tracing
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
		a.endTurn("agent_stopped")
		// Nobody will process what the reader reads from now on: it stops
		// waiting for room, and drops it.
		a.window.Close()
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
	a.refusals = make(map[string]int)
	a.window = a.cfg.Window
	if a.window == nil {
		a.window = NewWindow(0)
	}
	a.stderrLog = lograte.New(a.log, "agent stderr", a.cfg.LogRate)
	a.invalidLog = lograte.New(a.log, "agent lines dropped", a.cfg.LogRate)
	spec := a.cfg.Spec
	if spec.Stderr == nil {
		// One record per stderr line, within the rate; the stderr ring keeps
		// the detail (and its tail explains an exit).
		spec.Stderr = func(line string) { a.stderrLog.Log(slog.LevelInfo, "agent stderr", "line", line) }
	}
	start := a.cfg.start
	if start == nil {
		start = proc.Start
	}
	p, err := start(spec, &handler{a: a})
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
	line := m.GetLine()
	var span tracing.Span
	if tp := tracing.HeaderOf(ctx); tp != "" {
		line, span = a.traced(tp, line, m.GetExpectId() != "" && to != nil)
	}
	if id := m.GetExpectId(); id != "" && to != nil {
		a.mu.Lock()
		if a.exited {
			a.mu.Unlock()
			span.Fail(codes.AgentUnavailable)
			span.End()
			ctx.Send(to, &pb.AgentReply{Id: id, Failed: true})
			return
		}
		a.pending[id] = waiter{to: to, since: time.Now(), span: span}
		a.mu.Unlock()
	}
	// Counted before the write: the refusal may be read before Write returns.
	refusable := a.expectRefusal(line)
	if err := a.p.Write(line); err != nil {
		a.log.Warn("agent stdin write failed", "bytes", len(m.GetLine()), "err", err)
		if refusable != "" {
			a.mu.Lock()
			a.refusals[refusable]--
			a.mu.Unlock()
		}
		if id := m.GetExpectId(); id != "" && to != nil {
			if w, ok := a.take(id); ok {
				w.span.Fail(CodeWriteFailed)
				w.span.End()
				if errors.Is(err, proc.ErrClosed) || errors.Is(err, syscall.EPIPE) {
					// The process exited (or is being stopped, or closed
					// its stdin on its way out: EPIPE) and this actor has
					// not heard of it yet: the command is failed
					// as after the exit, which ends what waited for it
					// (a turn fails as its agent's exit, not as a lost
					// command).
					ctx.Send(to, &pb.AgentReply{Id: id, Failed: true})
					return
				}
				// The command never reached the agent: whoever waits for
				// its answer learns it now, not from a timeout or an exit.
				ctx.Send(to, &pb.AgentReply{Id: id, Failed: true,
					Error: pb.Err(CodeWriteFailed, fmt.Sprintf("the command (%d bytes) could not be written to the agent: %v", len(m.GetLine()), err))})
			}
		}
	}
}

// expectRefusal counts a line of the surface extension as one that pi would
// refuse, and returns its type ("" for any other line). The daemon writes
// "type" within a line's first bytes.
func (a *agentActor) expectRefusal(line []byte) string {
	typ := proc.LeadingEnvelope(line[:min(len(line), 256)]).Type
	if !proc.DaemonSurfaceLine(typ) {
		return ""
	}
	a.mu.Lock()
	a.refusals[typ]++
	a.mu.Unlock()
	return typ
}

// refusal reports whether line, an id-less response, is pi's refusal of a
// surface line the daemon wrote and has not yet seen refused, and uses that
// line up.
func (a *agentActor) refusal(line []byte) bool {
	var r struct {
		Command string `json:"command"`
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(line, &r) != nil || r.Success || r.Error != proc.UnknownCommand(r.Command) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refusals[r.Command] <= 0 {
		return false
	}
	a.refusals[r.Command]--
	return true
}

// take removes and returns the waiter of id.
func (a *agentActor) take(id string) (waiter, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.pending[id]
	if ok {
		delete(a.pending, id)
	}
	return w, ok
}

func (a *agentActor) sweepPending() {
	cut := time.Now().Add(-a.cfg.PendingTTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, w := range a.pending {
		if w.since.Before(cut) {
			w.span.Fail("unanswered")
			w.span.End()
			delete(a.pending, id)
		}
	}
}

// handler runs on the process's reader goroutine. Uncorrelated lines are
// batched until the reader has nothing more buffered (Flush).
type handler struct {
	a     *agentActor
	batch []*pb.AgentLine
	bytes int // of the lines in batch
}

func (h *handler) Line(env proc.Envelope, line []byte) {
	a := h.a
	if a.tracingTurn.Load() {
		a.turnLine(env, line)
	}
	if isAnswer(env.Type) && env.ID != "" {
		if w, ok := a.take(env.ID); ok {
			w.span.End()
			// Lines the agent wrote before this answer reach the session first.
			h.Flush()
			a.root.Send(w.to, &pb.AgentReply{Id: env.ID, Type: env.Type, Line: line})
			return
		}
	}
	if env.Type == proc.TypeResponse && env.ID == "" && a.refusal(line) {
		a.log.Debug("agent refused a surface line, as pi refuses lines it does not know", "line", string(line))
		return
	}
	h.batch = append(h.batch, &pb.AgentLine{Incarnation: a.cfg.Incarnation, Type: env.Type, Id: env.ID, Line: line})
	h.bytes += len(line)
	if len(h.batch) >= maxBatch || h.bytes >= maxBatchBytes {
		h.Flush()
	}
}

// isAnswer reports whether a line of type typ may answer a command with an
// id ("" for a line too long to read its type).
func isAnswer(typ string) bool {
	return typ == proc.TypeResponse || typ == proc.TypeSurfaceDispatchResult || typ == proc.TypeSurfaceFetchResult
}

// A batch of lines is bounded in lines (and so the frames of one session
// turn) and in bytes (so that it fits the window many times over).
const (
	maxBatch      = 256
	maxBatchBytes = 256 << 10
)

// Flush sends the batched lines to the session, once the window has room
// for them: this is where the reader waits for a session that is behind.
func (h *handler) Flush() {
	var msg any
	switch len(h.batch) {
	case 0:
		return
	case 1:
		msg = h.batch[0]
	default:
		msg = &pb.AgentLines{Lines: h.batch}
	}
	h.batch, h.bytes = nil, 0
	h.send(msg)
}

// send hands msg to the session within the window; once the window is
// closed (the actor stops) it is dropped.
func (h *handler) send(msg any) {
	if h.a.window.acquire(Cost(msg)) {
		h.a.root.Send(h.a.parent, msg)
	}
}

func (h *handler) Invalid(d proc.Diagnostic) {
	a := h.a
	h.Flush()
	if d.Code == proc.CodeLineTooLong && d.ID != "" && (d.Type == "" || isAnswer(d.Type)) {
		if w, ok := a.take(d.ID); ok {
			w.span.Fail(CodeLineTooLong)
			w.span.End()
			// The answer was too long to keep, but it named its command:
			// that command fails now rather than when it times out.
			a.root.Send(w.to, &pb.AgentReply{Id: d.ID, Type: d.Type, Failed: true,
				Error: pb.Err(CodeLineTooLong, fmt.Sprintf("the agent's answer was %d bytes, over the line limit; it was dropped", d.Len))})
		}
	}
	a.invalidLog.Log(slog.LevelWarn, "agent line dropped", "code", d.Code, "reason", d.Message, "bytes", d.Len)
	if a.cfg.OnInvalid != nil {
		a.cfg.OnInvalid(d.Code)
	}
	h.send(&pb.AgentDiagnostic{Incarnation: a.cfg.Incarnation, Code: d.Code, Message: d.Message})
}

func (h *handler) Exited(st proc.ExitStatus) {
	a := h.a
	h.Flush()
	a.stderrLog.Close()
	a.invalidLog.Close()
	a.mu.Lock()
	a.exited = true
	pending := a.pending
	a.pending = map[string]waiter{}
	a.mu.Unlock()
	for id, w := range pending {
		w.span.Fail(codes.AgentUnavailable)
		w.span.End()
		a.root.Send(w.to, &pb.AgentReply{Id: id, Failed: true})
	}
	a.endTurn("agent_exited")
	msg := &pb.AgentExited{Incarnation: a.cfg.Incarnation, ExitCode: int32(st.Code), Signal: st.Signal, StderrTail: st.StderrTail}
	if st.Err != nil {
		msg.Error = st.Err.Error()
	}
	a.log.Info("agent exited", "code", st.Code, "signal", st.Signal)
	a.root.Send(a.parent, msg)
}
