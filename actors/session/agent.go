package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/time/rate"

	agentactor "github.com/surfaced/surfaced/actors/internal/agent"
	"github.com/surfaced/surfaced/actors/session/internal/turn"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/lograte"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

type procModel = proc.Model

// agentPhase is where the session's agent process is in its life.
type agentPhase int

const (
	// agentDown: no process runs (not started yet, exited, stopped).
	agentDown agentPhase = iota
	// agentStarting: spawned, not ready yet (no agent_ready, no answer to
	// get_commands).
	agentStarting
	// agentReady: it takes prompts and commands.
	agentReady
)

// agentLink is the session's view of its agent process actor.
type agentLink struct {
	pid         *actor.PID
	incarnation uint32
	phase       agentPhase
	// announced: a surfaced/1 agent (it sent agent_ready).
	announced bool
	// expectExit: the session stopped it on purpose; its exit is no crash.
	expectExit bool
	// restarting: a restart is scheduled after a crash.
	restarting bool
	readyTimer clock.Timer
	nextReq    uint64
	// crashes within the restart window, oldest first.
	crashes []time.Time
	// window is the current incarnation's flow control: what its reader
	// handed over is released here once handled.
	window *agentactor.Window
	// unsolicited meters the lines the agent writes that nobody asked for.
	unsolicited *rate.Limiter
	// ignored counts them since the incarnation started (for the message).
	ignored int
}

func (a *agentLink) stopTimer() {
	if a.readyTimer != nil {
		a.readyTimer.Stop()
		a.readyTimer = nil
	}
}

// running reports whether the current incarnation is up and ready.
func (a *agentLink) ready() bool { return a.pid != nil && a.phase == agentReady }

// startAgent spawns a new incarnation of the agent and asks a plain pi
// agent to show it is ready (get_commands); a surfaced/1 agent announces
// itself first (agent_ready), which wins.
func (s *sessionActor) startAgent(ctx actor.Context) {
	a := &s.agent
	a.incarnation++
	a.phase = agentStarting
	a.announced = false
	a.expectExit = false
	a.restarting = false
	env := append([]string(nil), s.spec.Env...)
	env = append(env, "SURFACED_SESSION_ID="+s.rec.ID)
	cwd := s.rec.Cwd
	if cwd == "" {
		cwd = s.spec.Cwd
	}
	a.window = agentactor.NewWindow(s.lim.AgentWindowBytes)
	a.ignored = 0
	a.unsolicited = nil
	if s.lim.FloodRate > 0 {
		a.unsolicited = rate.NewLimiter(rate.Limit(s.lim.FloodRate), s.lim.FloodBurst)
	}
	if dir := s.scratch(cwd); dir != "" {
		env = append(env, proc.EnvArtifactDir+"="+dir)
	}
	cfg := agentactor.Config{
		SessionID:   s.rec.ID,
		Incarnation: a.incarnation,
		Agent:       s.rec.Agent,
		Node:        s.deps.NodeID,
		Spec: proc.Spec{
			Argv:       s.spec.Argv,
			Dir:        cwd,
			Env:        env,
			MaxLine:    s.lim.MaxLine,
			StdinBytes: s.lim.StdinBytes,
			Logger:     s.log,
			Tracker:    s.deps.Tracker,
		},
		Logger:  s.deps.Logger,
		Window:  a.window,
		LogRate: lograte.Config{Lines: s.lim.AgentLogLines, Interval: s.lim.AgentLogInterval, Clock: s.clock},
	}
	if s.deps.AgentTap != nil {
		cfg.Spec.Tap = s.deps.AgentTap(s.rec.ID)
	}
	props := agentactor.Props(cfg, s.deps.props("agentproc", s.rec.ID, "")...)
	pid, err := ctx.SpawnNamed(props, "agent-"+strconv.FormatUint(uint64(a.incarnation), 10))
	if err != nil {
		pid = ctx.Spawn(props)
	}
	a.pid = pid
	if s.status.status != StatusStarting {
		s.setStatus(StatusStarting, "", "")
	}
	s.sendLine(ctx, proc.SimpleCommand{ID: s.reqID("ready"), Type: proc.CmdGetCommands}, true)
	inc, self, root := a.incarnation, s.self, s.root
	a.stopTimer()
	a.readyTimer = s.clock.AfterFunc(s.lim.ReadyTimeout, func() { root.Send(self, &readyTimeout{incarnation: inc}) })
}

// reqID returns a fresh id for a command the session itself sends the agent.
func (s *sessionActor) reqID(purpose string) string {
	s.agent.nextReq++
	return purpose + "-" + strconv.FormatUint(uint64(s.agent.incarnation), 10) + "-" + strconv.FormatUint(s.agent.nextReq, 10)
}

// sendLine writes one record to the agent; with expect, its answer comes
// back to this actor as *pb.AgentReply.
func (s *sessionActor) sendLine(ctx actor.Context, v any, expect bool) {
	if s.agent.pid == nil {
		return
	}
	line, err := proc.Marshal(v)
	if err != nil {
		s.log.Error("record not marshalable", "err", err)
		return
	}
	msg := &pb.AgentSend{Line: line}
	if expect {
		msg.ReplyTo = pb.PidOf(s.self)
		if r, ok := v.(proc.SimpleCommand); ok {
			msg.ExpectId = r.ID
		}
	}
	ctx.Send(s.agent.pid, msg)
}

// becomeReady: the agent takes prompts and commands now.
func (s *sessionActor) becomeReady(ctx actor.Context) {
	a := &s.agent
	// A late answer (get_commands after the agent was stopped, or after the
	// session ended) must not revive anything.
	if a.phase != agentStarting || a.pid == nil {
		return
	}
	a.phase = agentReady
	a.stopTimer()
	s.retireUndeclaredDomains()
	s.log.Info("session ready", "announced", a.announced, "incarnation", a.incarnation)
	s.setStatus(StatusReady, "", "")
	s.turns.AgentReady()
}

// stopAgent stops the agent on purpose (the session ends or sleeps, or the
// agent did not become ready).
func (s *sessionActor) stopAgent(ctx actor.Context) {
	a := &s.agent
	a.stopTimer()
	if a.pid == nil {
		return
	}
	a.expectExit = true
	ctx.Stop(a.pid)
	a.pid = nil
	a.phase = agentDown
	s.turns.AgentStopped()
	s.tellDomainsAgent(ctx, nil)
}

func (s *sessionActor) readyTimedOut(ctx actor.Context, m *readyTimeout) {
	a := &s.agent
	if m.incarnation != a.incarnation || a.phase != agentStarting || a.pid == nil {
		return
	}
	s.log.Warn("agent not ready in time", "timeout", s.lim.ReadyTimeout)
	s.setStatus(StatusError, codes.ReadyTimeout, fmt.Sprintf("the agent did not become ready within %s", s.lim.ReadyTimeout))
	s.stopAgent(ctx)
	s.turns.FailInbox("the agent did not become ready")
}

func (s *sessionActor) restartAgent(ctx actor.Context) {
	if !s.agent.restarting || s.agent.pid != nil {
		return
	}
	s.deps.Metrics.Restart()
	s.startAgent(ctx)
}

// agentExited handles the exit of the agent process: expected (stopped on
// purpose), before it was ready (the session shows why), on its own with
// success (the session ends), or a crash (restarted with back-off, within
// the restart policy).
func (s *sessionActor) agentExited(ctx actor.Context, m *pb.AgentExited) {
	a := &s.agent
	if m.GetIncarnation() != a.incarnation {
		return
	}
	wasReady := a.phase == agentReady
	onPurpose := a.expectExit || a.pid == nil
	a.pid = nil
	a.phase = agentDown
	a.expectExit = false
	a.stopTimer()
	s.tellDomainsAgent(ctx, nil)
	how := describeExit(m)
	s.turns.AgentGone(how, onPurpose)
	if onPurpose {
		return
	}
	s.log.Warn("agent exited", "how", how, "ready", wasReady, "stderr_tail", m.GetStderrTail())
	switch {
	case m.GetExitCode() == -1 && m.GetError() != "" && !wasReady && m.GetSignal() == "":
		s.deps.Metrics.AgentExit(codes.SpawnFailed)
		s.setStatus(StatusError, codes.SpawnFailed, "the agent could not start: "+m.GetError())
		s.turns.FailInbox("the agent could not start")
	case !wasReady:
		s.deps.Metrics.AgentExit(codes.ExitBeforeReady)
		detail := "the agent exited before it was ready (" + how + ")"
		if t := lastLine(m.GetStderrTail()); t != "" {
			detail += ": " + t
		}
		s.setStatus(StatusError, codes.ExitBeforeReady, detail)
		s.turns.FailInbox("the agent exited before it was ready")
	case m.GetExitCode() == 0 && m.GetSignal() == "":
		s.deps.Metrics.AgentExit("stopped")
		s.log.Info("agent exited on its own; the session ends")
		s.end(ctx, "stopped", "", "")
	default:
		s.deps.Metrics.AgentExit("crashed")
		s.crashed(ctx, how)
	}
}

// crashed restarts a crashed agent with back-off, or ends the session when
// it crashed too often within the restart window.
func (s *sessionActor) crashed(ctx actor.Context, how string) {
	a := &s.agent
	now := s.clock.Now()
	kept := a.crashes[:0]
	for _, t := range a.crashes {
		if now.Sub(t) < s.lim.RestartWindow {
			kept = append(kept, t)
		}
	}
	a.crashes = kept
	if s.lim.RestartMax < 0 || len(a.crashes) >= s.lim.RestartMax {
		s.turns.FailInbox("the agent crashed and will not be restarted")
		s.end(ctx, "crashed", codes.RestartExhausted,
			fmt.Sprintf("the agent crashed (%s) %d times within %s; it is not restarted again", how, len(a.crashes)+1, s.lim.RestartWindow))
		return
	}
	backoff := s.lim.RestartBackoff << len(a.crashes)
	a.crashes = append(a.crashes, now)
	s.setStatus(StatusError, codes.AgentCrashed, fmt.Sprintf("the agent crashed (%s); restarting in %s", how, backoff))
	a.restarting = true
	self, root := s.self, s.root
	s.clock.AfterFunc(backoff, func() { root.Send(self, &restartAgent{}) })
}

func describeExit(m *pb.AgentExited) string {
	switch {
	case m.GetSignal() != "":
		return "signal " + m.GetSignal()
	case m.GetExitCode() == -1 && m.GetError() != "":
		return m.GetError()
	default:
		return "exit code " + strconv.Itoa(int(m.GetExitCode()))
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// ---------------------------------------------------------------------------
// Agent lines

// agentLines handles a batch the reader handed over, then gives its room in
// the window back.
func (s *sessionActor) agentLines(ctx actor.Context, m *pb.AgentLines) {
	lines := m.GetLines()
	for _, l := range lines {
		s.routeLine(ctx, l)
	}
	if len(lines) > 0 {
		s.release(lines[0].GetIncarnation(), m)
	}
}

// agentLine handles one line the reader handed over, then gives its room in
// the window back.
func (s *sessionActor) agentLine(ctx actor.Context, m *pb.AgentLine) {
	s.routeLine(ctx, m)
	s.release(m.GetIncarnation(), m)
}

// release gives a handled message's room in the window back to the reader
// of its incarnation (an older incarnation's reader is gone).
func (s *sessionActor) release(incarnation uint32, m any) {
	if incarnation == s.agent.incarnation && s.agent.window != nil {
		s.agent.window.Release(agentactor.Cost(m))
	}
}

// routeLine routes one line the agent wrote that nobody waited for: its
// announcement, surface and KV lines, dialogs, and the turn's events.
// Lines that nobody asked for are metered (unsolicited).
func (s *sessionActor) routeLine(ctx actor.Context, m *pb.AgentLine) {
	if m.GetIncarnation() != s.agent.incarnation || s.agent.pid == nil {
		return
	}
	line := m.GetLine()
	typ := m.GetType()
	switch typ {
	case proc.TypeAgentReady:
		s.agentReady(ctx, line)
	case proc.TypeResponse:
		var r proc.Response
		_ = json.Unmarshal(line, &r)
		if r.ID == "" && !r.Success {
			// pi answers lines it does not know with an id-less failure.
			s.log.Debug("agent refused a line", "command", r.Command, "error", r.Error)
		} else {
			s.log.Debug("uncorrelated response", "id", r.ID, "command", r.Command)
		}
		s.unsolicitedLine(ctx, "an answer to no command")
	case proc.TypeExtensionUIRequest:
		if err := s.turns.UIRequest(line); err != nil {
			s.diagnostic(codes.InvalidLine, err.Error())
		}
	case proc.TypeSurfaceCommand, proc.TypeSurfaceGet, proc.TypeStateSet, proc.TypeStateDelete:
		if !s.agent.announced {
			s.diagnostic(codes.InvalidLine, typ+" from an agent that did not announce "+proc.Protocol)
			s.unsolicitedLine(ctx, "surface lines without "+proc.Protocol)
			return
		}
		s.surfaceLine(ctx, typ, line)
	case proc.TypeArtifactPut, proc.TypeArtifactGet, proc.TypeArtifactList, proc.TypeArtifactURL:
		if !s.agent.announced {
			s.diagnostic(codes.InvalidLine, typ+" from an agent that did not announce "+proc.Protocol)
			s.unsolicitedLine(ctx, "artifact lines without "+proc.Protocol)
			return
		}
		s.artifactLine(typ, line)
	case proc.TypeSurfaceDispatchResult, proc.TypeSurfaceFetchResult:
		s.log.Debug("late answer ignored", "type", typ, "id", m.GetId())
		s.unsolicitedLine(ctx, "an answer to no command")
	default:
		if !agentEvent(typ) {
			// An unknown type, or a line only the daemon writes.
			s.unsolicitedLine(ctx, "lines of a type nobody reads")
			return
		}
		busy := s.turns.Busy()
		if err := s.turns.AgentLine(typ, line); err != nil {
			s.diagnostic(codes.InvalidLine, err.Error())
		}
		if !busy && !s.turns.Busy() && typ != proc.EventSessionInfoChanged {
			// An event that belongs to no turn and started none.
			s.unsolicitedLine(ctx, "events outside a turn")
		}
	}
}

// agentEvent reports whether typ is one of pi's events (the turn machine's
// lines).
func agentEvent(typ string) bool {
	switch typ {
	case proc.EventAgentStart, proc.EventAgentEnd, proc.EventTurnStart, proc.EventTurnEnd,
		proc.EventMessageStart, proc.EventMessageUpdate, proc.EventMessageEnd,
		proc.EventToolExecutionStart, proc.EventToolExecutionUpdate, proc.EventToolExecutionEnd,
		proc.EventQueueUpdate, proc.EventCompactionStart, proc.EventCompactionEnd,
		proc.EventAutoCompactionStart, proc.EventAutoCompactionEnd, proc.EventAutoRetryStart, proc.EventAutoRetryEnd,
		proc.EventExtensionError, proc.EventSessionInfoChanged, proc.EventThinkingLevelChanged:
		return true
	}
	return false
}

// unsolicitedLine meters a line the agent wrote that nobody asked for. An
// agent that keeps writing them past the flood limits is stopped: it would
// otherwise keep the session (and the daemon's log, and its clients) busy
// with nothing.
func (s *sessionActor) unsolicitedLine(ctx actor.Context, what string) {
	a := &s.agent
	a.ignored++
	if a.unsolicited == nil || a.pid == nil || a.unsolicited.AllowN(s.clock.Now(), 1) {
		return
	}
	detail := fmt.Sprintf("the agent wrote %d lines nobody asked for (%s, among others), more than %d at once and %d a second after; it was stopped",
		a.ignored, what, s.lim.FloodBurst, s.lim.FloodRate)
	s.log.Warn("agent flooding its output; stopping it", "ignored", a.ignored, "last", what,
		"burst", s.lim.FloodBurst, "rate", s.lim.FloodRate)
	s.deps.Metrics.AgentExit("flooding")
	s.emit(pb.DiagnosticOf(CodeAgentFlooding, detail), "")
	s.setStatus(StatusError, CodeAgentFlooding, detail)
	s.stopAgent(ctx)
	// The agent is stopped on purpose, but its turn did not end well.
	s.turns.AgentGone("stopped for flooding its output", false)
	s.turns.FailInbox("the agent was stopped for flooding its output")
}

// agentReply routes the answer to a command with an id: the turn machine's,
// or the session's readiness and model probes.
func (s *sessionActor) agentReply(ctx actor.Context, m *pb.AgentReply) {
	id := m.GetId()
	switch {
	case strings.HasPrefix(id, turn.ReplyPrefix) && m.GetError() != nil:
		s.turns.Lost(id, m.GetError().GetMessage())
	case strings.HasPrefix(id, turn.ReplyPrefix):
		s.turns.Reply(id, m.GetLine(), m.GetFailed())
	case strings.HasPrefix(id, "ready-"):
		s.readyAnswered(ctx, m)
	case strings.HasPrefix(id, "model-"):
		s.modelProbed(m)
	}
}

// readyAnswered reads the answer to get_commands: a plain pi agent is ready.
func (s *sessionActor) readyAnswered(ctx actor.Context, m *pb.AgentReply) {
	if m.GetFailed() || !strings.HasPrefix(m.GetId(), "ready-"+strconv.FormatUint(uint64(s.agent.incarnation), 10)+"-") {
		return
	}
	var r proc.Response
	if err := json.Unmarshal(m.GetLine(), &r); err != nil || !r.Success {
		s.log.Warn("get_commands failed; waiting for readiness", "err", r.Error)
		return
	}
	if !s.agent.announced {
		// A plain pi agent: ask which model it runs (images or not)
		// before any prompt goes out.
		s.sendLine(ctx, proc.SimpleCommand{ID: s.reqID("model"), Type: proc.CmdGetState}, true)
	}
	s.becomeReady(ctx)
}

func (s *sessionActor) modelProbed(m *pb.AgentReply) {
	if m.GetFailed() || s.agent.announced {
		return
	}
	var r proc.Response
	var st proc.SessionState
	if json.Unmarshal(m.GetLine(), &r) != nil || !r.Success || json.Unmarshal(r.Data, &st) != nil {
		s.log.Info("the agent did not describe its model; images stay as configured", "images", s.status.images)
		return
	}
	s.learnModel(st.Model)
}

// agentReady reads a surfaced/1 agent's announcement: its domains, then
// readiness.
func (s *sessionActor) agentReady(ctx actor.Context, line []byte) {
	var r proc.AgentReady
	if err := json.Unmarshal(line, &r); err != nil {
		s.diagnostic(codes.InvalidLine, "agent_ready is not valid: "+err.Error())
		return
	}
	if s.agent.announced {
		s.diagnostic(codes.InvalidLine, "agent_ready sent twice; the second is ignored")
		return
	}
	s.agent.announced = true
	if r.Images {
		s.status.images = true
	}
	s.declareDomains(ctx, r.Surfaces)
	s.becomeReady(ctx)
}

func (s *sessionActor) agentDiagnostic(ctx actor.Context, m *pb.AgentDiagnostic) {
	defer s.release(m.GetIncarnation(), m)
	if m.GetIncarnation() != s.agent.incarnation {
		return
	}
	s.deps.Metrics.JSONLError(m.GetCode())
	code := "invalid_line"
	if m.GetCode() == "line_too_long" {
		code = "line_too_long"
	}
	s.emit(pb.DiagnosticOf(code, "agent line dropped: "+m.GetMessage()), "")
	s.unsolicitedLine(ctx, "invalid lines")
}

// ---------------------------------------------------------------------------
// The turn machine's outputs

// turnOut carries out what the turn machine says.
type turnOut struct{ s *sessionActor }

func (o turnOut) Emit(ev *pb.Event, sticky string)    { o.s.emit(ev, sticky) }
func (o turnOut) Unstick(key string)                  { o.s.hub.Unstick(key) }
func (o turnOut) Transcript(entries []store.Entry)    { o.s.appendTranscript(entries) }
func (o turnOut) Record(id uint64, entry store.Entry) { o.s.recordPrompt(id, entry) }
func (o turnOut) Title(title string)                  { o.s.setTitle(title) }
func (o turnOut) Model(m *proc.Model)                 { o.s.learnModel(m) }

// Send needs the actor's context for the hop; the agent actor is a child, so
// the system's root sends it just as well and in the same order. A prompt's
// attachments go as the agent takes them (prompt.go).
func (o turnOut) Send(c turn.Command) {
	s := o.s
	if s.agent.pid == nil {
		return
	}
	if s.loading > 0 {
		// Behind the prompt whose images are being read.
		s.outbox = append(s.outbox, held{incarnation: s.agent.incarnation, cmd: c})
		return
	}
	if len(c.Attachments) > 0 {
		s.sendPrompt(c)
		return
	}
	s.sendCommand(c)
}

// sendCommand writes a command to the agent now.
func (s *sessionActor) sendCommand(c turn.Command) {
	if s.agent.pid == nil {
		return
	}
	msg := &pb.AgentSend{Line: c.Line}
	if c.ReplyID != "" {
		msg.ExpectId = c.ReplyID
		msg.ReplyTo = pb.PidOf(s.self)
	}
	s.root.Send(s.agent.pid, tracing.Envelope(msg, c.Trace))
}

// Status: busy or queued changed (the idle clock sees it after the message).
func (o turnOut) Status() { o.s.emitStatus() }

func (o turnOut) AbortGrace(turnID uint64) {
	s := o.s
	self, root := s.self, s.root
	s.clock.AfterFunc(s.lim.AbortGrace, func() { root.Send(self, &abortGrace{turn: turnID}) })
}
