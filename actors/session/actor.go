package session

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	agentactor "github.com/surfaced/surfaced/actors/agent"
	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/actors/session/internal/hub"
	"github.com/surfaced/surfaced/actors/session/internal/kv"
	"github.com/surfaced/surfaced/actors/surface"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Session statuses.
const (
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusError    = "error"
	StatusEnded    = "ended"
	// StatusIdle is stored (never streamed) for a session with no live agent.
	StatusIdle = "idle"
)

// Session-level error codes (the request was refused; not a command outcome).
const (
	CodeNotFound      = "not_found"
	CodeEnded         = "session_ended"
	CodeRateLimited   = "rate_limited"
	CodeReadOnly      = "surface_read_only"
	CodeInvalidKey    = "invalid_key"
	CodeInvalidValue  = "invalid_value"
	CodeInboxFull     = "inbox_full"
	CodeUnavailable   = "agent_unavailable"
	CodeUnknownUI     = "unknown_ui_request"
	CodeInvalid       = "invalid_request"
	CodeTooLarge      = "too_large"
	CodeInternal      = "internal"
	CodeImagesRefused = "images_not_supported"
	CodeEmptyPrompt   = "empty_prompt"
	// CodeStoreUnavailable: the store could not take the write; nothing was
	// applied (try again).
	CodeStoreUnavailable = "store_unavailable"
)

// Config is what a session actor is spawned with.
type Config struct {
	// Record is the session; zero when the actor is a cluster grain, which
	// loads it when the cluster names it (ClusterInit).
	Record store.Session
	Deps   *Deps
	// OnStopping is called when the actor begins to stop, so that the
	// directory sends the next request to a new activation.
	OnStopping func(pid *actor.PID)
}

// Props returns the props of a session actor.
func Props(cfg Config) *actor.Props {
	opts := cfg.Deps.props("session", cfg.Record.ID, "")
	return actor.PropsFromProducer(func() actor.Actor { return newSessionActor(cfg) }, append([]actor.PropsOption{dispatch.Option()}, opts...)...)
}

type domainRef struct {
	pid         *actor.PID
	hosted      string
	commands    []string
	rev         uint64
	incarnation uint32 // agent-hosted: the agent incarnation that declared it
	// registered is false for an agent-hosted domain that the running agent
	// has not declared (again). Its actor lives on so that its snapshot and
	// rev continue if the domain comes back.
	registered bool
}

type sessionActor struct {
	cfg  Config
	deps *Deps
	lim  Limits
	log  *slog.Logger
	rec  store.Session
	spec AgentSpec
	self *actor.PID
	root *actor.RootContext
	hub  *hub.Hub

	status string
	code   string
	detail string
	images bool

	kv      *kv.Table
	domains map[string]*domainRef

	// The agent.
	agent       *actor.PID
	incarnation uint32
	announced   bool // surfaced/1 agent (sent agent_ready)
	ready       bool
	stopping    bool // we asked the agent to stop
	restarts    []time.Time
	restartDue  bool
	readyTimer  *time.Timer
	nextReq     uint64

	// Turns.
	inbox    []*queued
	promptID uint64
	turnID   uint64
	turn     *turn
	dialogs  map[string]*dialog

	// Transcript writes: a read waits until the ones submitted are done.
	trSubmit uint64
	trDone   uint64
	trWait   []func()

	// Rate limit (token bucket).
	tokens   float64
	tokensAt time.Time

	// Cluster: the lease this activation writes under, and why it cannot
	// serve when it cannot (no such session, the lease is elsewhere).
	fence      int64
	leaseTimer *time.Timer
	unusable   *pb.Error
	activated  bool
}

func newSessionActor(cfg Config) *sessionActor {
	lim := cfg.Deps.Limits.withDefaults()
	log := cfg.Deps.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Record.ID != "" {
		// A cluster grain learns its id in ClusterInit and adds it there.
		log = log.With("session", cfg.Record.ID)
	}
	return &sessionActor{
		cfg:     cfg,
		deps:    cfg.Deps,
		lim:     lim,
		rec:     cfg.Record,
		log:     log,
		kv:      kv.New(),
		domains: map[string]*domainRef{},
		dialogs: map[string]*dialog{},
		tokens:  float64(lim.CommandsPerSecond),
	}
}

// Local messages (timers and writer callbacks of this actor).
type readyTimeout struct{ incarnation uint32 }
type restartAgent struct{}
type abortGrace struct{ turn uint64 }
type kvPersisted struct {
	wseq uint64
	err  error
}
type trPersisted struct{}
type renewLease struct{}
type fencedOut struct{ err error }

func (s *sessionActor) Receive(ctx actor.Context) {
	if s.unusable != nil && s.refuse(ctx) {
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if s.cfg.Record.ID != "" {
			s.started(ctx)
		}
	case *cluster.ClusterInit:
		s.clusterInit(ctx, m)
	case *renewLease:
		s.renewLease(ctx)
	case *fencedOut:
		s.lostLease(ctx, m.err)
	case *actor.Stopping:
		if s.cfg.OnStopping != nil {
			s.cfg.OnStopping(ctx.Self())
		}
		if s.activated && s.deps.Deactivated != nil {
			s.deps.Deactivated(s.rec.ID, ctx.Self())
		}
		s.stoppingNow(ctx)
	case *actor.Stopped:
		if s.activated {
			s.deps.Metrics.SessionDown()
		}
	case *actor.ReceiveTimeout:
		s.idle(ctx)
	case *actor.Terminated:
		s.terminated(ctx, m)

	// Requests.
	case *pb.Subscribe:
		s.subscribe(ctx, m)
	case *pb.Unsubscribe:
		if p := m.GetSubscriber().Actor(); p != nil {
			s.hub.Unsubscribe(ctx, p)
		}
		s.armIdle(ctx)
	case *pb.GetSummary:
		if !s.allowed(m.GetCaller()) {
			ctx.Respond(&pb.SessionSummary{Error: notFound()})
			return
		}
		ctx.Respond(s.summary())
	case *pb.ListSurfaces:
		if !s.allowed(m.GetCaller()) {
			ctx.Respond(&pb.SurfaceList{Error: notFound()})
			return
		}
		ctx.Respond(&pb.SurfaceList{Surfaces: s.surfaceInfos()})
	case *pb.Prompt:
		s.prompt(ctx, m)
	case *pb.Abort:
		s.abort(ctx, m)
	case *pb.RunCommand:
		s.runCommand(ctx, m)
	case *pb.CommandResult:
		s.agentCommandResult(ctx, m)
	case *pb.SetState:
		s.setState(ctx, m)
	case *pb.GetState:
		s.getState(ctx, m)
	case *pb.GetMessages:
		s.getMessages(ctx, m)
	case *pb.UIResponse:
		s.uiResponse(ctx, m)
	case *pb.Stop:
		s.stop(ctx, m)

	// Children.
	case *pb.StateCommitted:
		s.stateCommitted(ctx, m)
	case *pb.AgentLine:
		if m.GetIncarnation() == s.incarnation && s.agent != nil {
			s.agentLine(ctx, m)
		}
	case *pb.AgentLines:
		for _, l := range m.GetLines() {
			if l.GetIncarnation() == s.incarnation && s.agent != nil {
				s.agentLine(ctx, l)
			}
		}
	case *pb.AgentReply:
		s.agentReply(ctx, m)
	case *pb.AgentDiagnostic:
		if m.GetIncarnation() == s.incarnation {
			s.deps.Metrics.JSONLError(m.GetCode())
			code := "invalid_line"
			if m.GetCode() == "line_too_long" {
				code = "line_too_long"
			}
			s.emit(pb.DiagnosticOf(code, "agent line dropped: "+m.GetMessage()), "")
		}
	case *pb.AgentExited:
		if m.GetIncarnation() == s.incarnation {
			s.agentExited(ctx, m)
		}

	// Own timers and callbacks.
	case *readyTimeout:
		if m.incarnation == s.incarnation && !s.ready && s.agent != nil {
			s.log.Warn("agent not ready in time", "timeout", s.lim.ReadyTimeout)
			s.setStatus(StatusError, "ready_timeout", fmt.Sprintf("the agent did not become ready within %s", s.lim.ReadyTimeout))
			s.stopAgent(ctx)
			s.failInbox(ctx, "the agent did not become ready")
		}
	case *restartAgent:
		s.restartDue = false
		if s.status != StatusEnded && s.agent == nil {
			s.deps.Metrics.Restart()
			s.startAgent(ctx)
		}
	case *abortGrace:
		if s.turn != nil && s.turn.id == m.turn && s.turn.aborted {
			s.log.Warn("agent did not end the cancelled turn; ending it", "turn", m.turn)
			s.endTurn(ctx, "cancelled", "")
		}
	case *kvPersisted:
		s.kvPersisted(ctx, m)
	case *trPersisted:
		s.trDone++
		if s.trDone == s.trSubmit {
			waits := s.trWait
			s.trWait = nil
			for _, f := range waits {
				f()
			}
		}
	}
	s.flush(ctx)
}

func notFound() *pb.Error {
	return pb.Err(CodeNotFound, "no such session")
}

// allowed reports whether caller may see this session: its owner, or the
// daemon itself. Everyone else gets the same answer as for a missing session.
func (s *sessionActor) allowed(c *pb.Caller) bool {
	if c == nil {
		return false
	}
	return c.GetSystem() || c.GetSubject() == s.rec.Owner
}

// ---------------------------------------------------------------------------
// Lifecycle

func (s *sessionActor) started(ctx actor.Context) {
	s.self = ctx.Self()
	s.root = ctx.ActorSystem().Root
	s.activated = true
	s.deps.Metrics.SessionUp()
	if s.deps.Activated != nil {
		s.deps.Activated(s.rec.ID, ctx.Self())
	}
	s.hub = hub.New(s.rec.ID, newEpoch(), s.lim.ReplayFrames, s.lim.ReplayBytes)
	s.hub.OnEmit = func(ev *pb.Event) { s.deps.Metrics.Frame(wire.Kind(ev)) }

	spec, ok := s.deps.Agent(s.rec.Agent)
	s.spec = spec
	s.images = spec.Images

	// Load the KV (surface snapshots included) so that revs continue and the
	// sticky state is there for the first subscriber.
	st := s.deps.Writer.Store()
	loadCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	kvs, err := st.LoadKV(loadCtx, s.rec.ID)
	cancel()
	if err != nil {
		s.log.Error("session KV could not be loaded", "err", err)
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].Key < kvs[j].Key })
	s.kv.Load(kvs)
	for _, e := range kvs {
		s.hub.Seed(pb.StateOf(e.Key, e.Value, e.Rev, e.Deleted), "state:"+e.Key)
	}

	if s.rec.Status == StatusEnded {
		s.status = StatusEnded
		s.emitStatus()
		s.armIdle(ctx)
		return
	}
	if !ok {
		s.status = StatusError
		s.code = "unknown_agent"
		s.detail = fmt.Sprintf("the agent %q is not configured on this daemon", s.rec.Agent)
		s.emitStatus()
		s.persistStatus()
		return
	}
	s.status = StatusStarting
	s.emitStatus()
	s.persistStatus()

	// Native domains first: they exist before the agent can declare anything.
	if s.deps.Domains != nil {
		for _, d := range s.deps.Domains(s.rec.Agent) {
			name := d.Name()
			if _, dup := s.domains[name]; dup {
				s.diagnostic("duplicate_domain", fmt.Sprintf("native domain %q is registered twice; the first registration is kept", name))
				continue
			}
			s.spawnDomain(ctx, surface.Config{Domain: name, Hosted: surface.HostedNative, Native: d}, d.Commands(), 0)
		}
	}
	s.startAgent(ctx)
}

func newEpoch() string {
	return strconv.FormatInt(time.Now().UnixMilli(), 36) + randomSuffix(3)
}

func (s *sessionActor) spawnDomain(ctx actor.Context, cfg surface.Config, commands []string, inc uint32) {
	cfg.SessionID = s.rec.ID
	cfg.Writer = s.deps.Writer
	cfg.Fence = s.fence
	cfg.SettleWindow = s.lim.SettleWindow
	cfg.MaxSnapshot = s.lim.MaxSnapshot
	cfg.Logger = s.deps.Logger
	cfg.Outcome = s.deps.Metrics.Command
	key := proc.SurfaceKey(cfg.Domain)
	var rev uint64
	if e, ok := s.kv.Durable(key); ok {
		cfg.Stored = &store.KV{Key: key, Value: e.Value, Rev: e.Rev, Deleted: e.Deleted}
		rev = e.Rev
	}
	props := surface.Props(cfg, s.deps.props("surface", s.rec.ID, cfg.Domain)...)
	pid, err := ctx.SpawnNamed(props, "surface-"+cfg.Domain)
	if err != nil {
		pid = ctx.Spawn(props)
	}
	s.domains[cfg.Domain] = &domainRef{pid: pid, hosted: cfg.Hosted, commands: commands, rev: rev, incarnation: inc, registered: true}
	if cfg.Hosted == surface.HostedAgent && s.agent != nil {
		ctx.Send(pid, &pb.AgentAvailable{Agent: pb.PidOf(s.agent), Incarnation: inc})
	}
}

func (s *sessionActor) startAgent(ctx actor.Context) {
	s.incarnation++
	s.ready = false
	s.announced = false
	s.stopping = false
	env := append([]string(nil), s.spec.Env...)
	env = append(env, "SURFACED_SESSION_ID="+s.rec.ID)
	cwd := s.rec.Cwd
	if cwd == "" {
		cwd = s.spec.Cwd
	}
	cfg := agentactor.Config{
		SessionID:   s.rec.ID,
		Incarnation: s.incarnation,
		Spec: proc.Spec{
			Argv:    s.spec.Argv,
			Dir:     cwd,
			Env:     env,
			MaxLine: s.lim.MaxLine,
			Stderr: func(line string) {
				s.log.Info("agent stderr", "line", line)
			},
			Logger: s.log,
		},
		Logger:    s.deps.Logger,
		OnInvalid: nil,
	}
	pid, err := ctx.SpawnNamed(agentactor.Props(cfg, s.deps.props("agentproc", s.rec.ID, "")...), "agent-"+strconv.FormatUint(uint64(s.incarnation), 10))
	if err != nil {
		pid = ctx.Spawn(agentactor.Props(cfg, s.deps.props("agentproc", s.rec.ID, "")...))
	}
	s.agent = pid
	if s.status != StatusStarting {
		s.setStatus(StatusStarting, "", "")
	}
	// Plain pi agents become ready when they answer get_commands; surfaced/1
	// agents announce themselves first (agent_ready), which wins.
	s.send(ctx, proc.SimpleCommand{ID: s.reqID("ready"), Type: proc.CmdGetCommands}, true)
	inc := s.incarnation
	self, root := s.self, s.root
	if s.readyTimer != nil {
		s.readyTimer.Stop()
	}
	s.readyTimer = time.AfterFunc(s.lim.ReadyTimeout, func() { root.Send(self, &readyTimeout{incarnation: inc}) })
}

// reqID returns a fresh id for a command the session sends to the agent.
func (s *sessionActor) reqID(purpose string) string {
	s.nextReq++
	return purpose + "-" + strconv.FormatUint(uint64(s.incarnation), 10) + "-" + strconv.FormatUint(s.nextReq, 10)
}

// send writes one record to the agent; with expect, its answer comes back to
// this actor as *pb.AgentReply.
func (s *sessionActor) send(ctx actor.Context, v any, expect bool) {
	if s.agent == nil {
		return
	}
	line, err := json.Marshal(v)
	if err != nil {
		s.log.Error("record not marshalable", "err", err)
		return
	}
	msg := &pb.AgentSend{Line: line}
	if expect {
		msg.ReplyTo = pb.PidOf(s.self)
		switch r := v.(type) {
		case proc.SimpleCommand:
			msg.ExpectId = r.ID
		case proc.PromptCommand:
			msg.ExpectId = r.ID
		}
	}
	ctx.Send(s.agent, msg)
}

func (s *sessionActor) becomeReady(ctx actor.Context) {
	// A late answer (get_commands after the agent was stopped, or after the
	// session ended) must not revive anything.
	if s.ready || s.agent == nil || s.status == StatusEnded {
		return
	}
	s.ready = true
	if s.readyTimer != nil {
		s.readyTimer.Stop()
	}
	// Agent-hosted domains the new incarnation did not declare again are no
	// longer registered.
	for _, d := range s.domains {
		if d.hosted == surface.HostedAgent && d.incarnation != s.incarnation {
			d.registered = false
		}
	}
	s.log.Info("session ready", "announced", s.announced, "incarnation", s.incarnation)
	s.setStatus(StatusReady, "", "")
	s.maybeStartTurn(ctx)
}

func (s *sessionActor) stopAgent(ctx actor.Context) {
	if s.agent == nil {
		return
	}
	s.stopping = true
	ctx.Stop(s.agent)
	s.agent = nil
	s.ready = false
	s.tellDomainsAgent(ctx, nil)
}

func (s *sessionActor) tellDomainsAgent(ctx actor.Context, agent *actor.PID) {
	for _, d := range s.domains {
		if d.hosted == surface.HostedAgent {
			ctx.Send(d.pid, &pb.AgentAvailable{Agent: pb.PidOf(agent), Incarnation: s.incarnation})
		}
	}
}

func (s *sessionActor) agentExited(ctx actor.Context, m *pb.AgentExited) {
	wasReady := s.ready
	s.agent = nil
	s.ready = false
	if s.readyTimer != nil {
		s.readyTimer.Stop()
	}
	s.tellDomainsAgent(ctx, nil)
	s.cancelDialogs(ctx, 0)
	if s.stopping {
		s.stopping = false
		return
	}
	how := describeExit(m)
	s.log.Warn("agent exited", "how", how, "ready", wasReady, "stderr_tail", m.GetStderrTail())
	if s.turn != nil {
		s.emitChat(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: "The agent stopped during the turn (" + how + ")."}})
		s.endTurn(ctx, "error", "")
	}
	switch {
	case m.GetExitCode() == -1 && m.GetError() != "" && !wasReady && m.GetSignal() == "":
		s.deps.Metrics.AgentExit("spawn_failed")
		s.setStatus(StatusError, "spawn_failed", "the agent could not start: "+m.GetError())
		s.failInbox(ctx, "the agent could not start")
	case !wasReady:
		s.deps.Metrics.AgentExit("exit_before_ready")
		detail := "the agent exited before it was ready (" + how + ")"
		if t := lastLine(m.GetStderrTail()); t != "" {
			detail += ": " + t
		}
		s.setStatus(StatusError, "exit_before_ready", detail)
		s.failInbox(ctx, "the agent exited before it was ready")
	case m.GetExitCode() == 0 && m.GetSignal() == "":
		s.deps.Metrics.AgentExit("stopped")
		s.log.Info("agent exited on its own; the session ends")
		s.end(ctx, "stopped", "", "")
	default:
		s.deps.Metrics.AgentExit("crashed")
		now := time.Now()
		kept := s.restarts[:0]
		for _, t := range s.restarts {
			if now.Sub(t) < s.lim.RestartWindow {
				kept = append(kept, t)
			}
		}
		s.restarts = kept
		if s.lim.RestartMax < 0 || len(s.restarts) >= s.lim.RestartMax {
			s.failInbox(ctx, "the agent crashed and will not be restarted")
			s.end(ctx, "crashed", "restart_exhausted",
				fmt.Sprintf("the agent crashed (%s) %d times within %s; it is not restarted again", how, len(s.restarts)+1, s.lim.RestartWindow))
			return
		}
		backoff := s.lim.RestartBackoff << len(s.restarts)
		s.restarts = append(s.restarts, now)
		s.setStatus(StatusError, "agent_crashed", fmt.Sprintf("the agent crashed (%s); restarting in %s", how, backoff))
		s.restartDue = true
		self, root := s.self, s.root
		time.AfterFunc(backoff, func() { root.Send(self, &restartAgent{}) })
	}
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
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			s = s[i+1:]
			break
		}
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// end ends the session for good: the agent stops, every client gets end.
func (s *sessionActor) end(ctx actor.Context, reason, code, detail string) {
	s.stopAgent(ctx)
	s.closeTurnAndInbox(ctx, "the session ended")
	for name, d := range s.domains {
		ctx.Stop(d.pid)
		delete(s.domains, name)
	}
	s.setStatus(StatusEnded, code, detail)
	s.persistStatus()
	s.emitEnd(reason)
	s.armIdle(ctx)
}

// closeTurnAndInbox answers what the agent, stopped on purpose, will not:
// its exit does not close the running turn, so it is closed here as
// cancelled (what it said so far is kept in the transcript), or its clients
// never see it finish and the actor, still "busy", never goes idle; queued
// messages are answered as not answered.
func (s *sessionActor) closeTurnAndInbox(ctx actor.Context, why string) {
	if s.turn != nil {
		s.turn.aborted = true
		s.endTurn(ctx, "cancelled", "")
	}
	s.failInbox(ctx, why)
}

func (s *sessionActor) emitEnd(reason string) {
	s.hub.End(reason)
}

func (s *sessionActor) stop(ctx actor.Context, m *pb.Stop) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.StopResult{Error: notFound()})
		return
	}
	switch m.GetReason() {
	case "shutdown", "idle", "moved":
		// The session sleeps: it is not ended, its next request wakes it
		// (here, or, when it moved, on another node of the cluster).
		if s.status != StatusEnded {
			s.stopAgent(ctx)
			s.closeTurnAndInbox(ctx, "the session was put to sleep ("+m.GetReason()+")")
			s.status = StatusIdle
			s.persistStatus()
		}
		s.emitEnd(m.GetReason())
		s.flush(ctx)
		ctx.Respond(&pb.StopResult{Ok: true})
		ctx.Stop(ctx.Self())
	default:
		if s.status != StatusEnded {
			s.end(ctx, "stopped", "", "")
		}
		ctx.Respond(&pb.StopResult{Ok: true})
	}
}

func (s *sessionActor) stoppingNow(ctx actor.Context) {
	if s.deps.Leaser != nil && s.hub != nil && !s.hub.Ending() {
		// A cluster grain stopped without saying goodbye: the cluster moved
		// its identity to another member (rebalancing) or this member is
		// leaving. Its clients reconnect and find it there.
		s.emitEnd("moved")
		s.flush(ctx)
	}
	s.releaseLease()
	if s.readyTimer != nil {
		s.readyTimer.Stop()
	}
	if s.agent != nil {
		s.stopping = true
		ctx.Stop(s.agent)
		s.agent = nil
	}
}

// armIdle sets the receive timeout that lets an unused actor stop: an ended
// session after EndedLinger, a live one after IdleTimeout (when configured)
// while nobody watches and no turn runs.
func (s *sessionActor) armIdle(ctx actor.Context) {
	switch {
	case s.status == StatusEnded && s.hub.Len() == 0:
		ctx.SetReceiveTimeout(s.lim.EndedLinger)
	case s.lim.IdleTimeout > 0 && s.hub.Len() == 0 && s.turn == nil && len(s.inbox) == 0:
		ctx.SetReceiveTimeout(s.lim.IdleTimeout)
	default:
		ctx.CancelReceiveTimeout()
	}
}

func (s *sessionActor) idle(ctx actor.Context) {
	if s.hub.Len() > 0 || s.turn != nil || len(s.inbox) > 0 || s.kv.Pending() > 0 {
		ctx.CancelReceiveTimeout()
		return
	}
	if s.status != StatusEnded {
		s.log.Info("session idle; stopping its agent until the next request")
		s.stopAgent(ctx)
		s.status = StatusIdle
		s.persistStatus()
	}
	ctx.Stop(ctx.Self())
}

func (s *sessionActor) terminated(ctx actor.Context, m *actor.Terminated) {
	if s.hub != nil && s.hub.Gone(m.Who) {
		s.armIdle(ctx)
	}
}

// ---------------------------------------------------------------------------
// Frames

// emit appends a frame to the log; flush sends what was emitted during this
// message to every subscriber in one batch.
func (s *sessionActor) emit(ev *pb.Event, stickyKey string) *pb.Frame {
	return s.hub.Emit(ev, stickyKey)
}

func (s *sessionActor) flush(ctx actor.Context) {
	if s.hub != nil && s.hub.Flush(ctx) {
		// Nobody watches any more: an ended session may now linger and go.
		s.armIdle(ctx)
	}
}

func (s *sessionActor) subscribe(ctx actor.Context, m *pb.Subscribe) {
	pid := m.GetSubscriber().Actor()
	if pid == nil {
		ctx.Respond(&pb.SubscribeResult{Error: pb.Err(CodeInvalid, "subscribe needs a subscriber")})
		return
	}
	if !s.allowed(&pb.Caller{Subject: m.GetSubject()}) {
		ctx.Respond(&pb.SubscribeResult{Error: notFound()})
		return
	}
	if s.status == StatusEnded {
		ctx.Respond(&pb.SubscribeResult{Error: pb.Err(CodeEnded, "the session has ended")})
		return
	}
	res := s.hub.Subscribe(ctx, hub.Subscriber{PID: pid, Kind: m.GetClientKind(), Subject: m.GetSubject()}, m.GetLastEventId())
	s.deps.Metrics.Subscribed(res.GetMode())
	ctx.Respond(res)
	ctx.CancelReceiveTimeout()
}

func (s *sessionActor) emitStatus() {
	surfaces := s.surfaceInfos()
	for _, d := range surfaces {
		d.Rev = 0 // revs travel in state frames; the status changes when availability does
	}
	s.emit(pb.StatusOf(&pb.StatusEvent{Status: s.status, Busy: s.turn != nil, Code: s.code, Detail: s.detail,
		Title: s.rec.Title, Queued: uint32(len(s.inbox)), Images: s.images, Surfaces: surfaces}), "session")
}

func (s *sessionActor) setStatus(status, code, detail string) {
	changed := status != s.status
	s.status, s.code, s.detail = status, code, detail
	s.emitStatus()
	if changed {
		s.persistStatus()
	}
}

func (s *sessionActor) persistStatus() {
	st := s.status
	s.submit(store.Op{Update: &store.SessionUpdate{Status: &st}})
}

func (s *sessionActor) diagnostic(code, message string) {
	s.log.Warn("diagnostic", "code", code, "message", message)
	s.emit(pb.DiagnosticOf(code, message), "")
}

func (s *sessionActor) summary() *pb.SessionSummary {
	return &pb.SessionSummary{
		SessionId:   s.rec.ID,
		Agent:       s.rec.Agent,
		Title:       s.rec.Title,
		Status:      s.status,
		Busy:        s.turn != nil,
		Owner:       s.rec.Owner,
		Cwd:         s.rec.Cwd,
		CreatedAtMs: s.rec.Created.UnixMilli(),
		UpdatedAtMs: s.rec.Updated.UnixMilli(),
		Surfaces:    s.surfaceInfos(),
		Code:        s.code,
		Detail:      s.detail,
		Queued:      uint32(len(s.inbox)),
		Images:      s.images,
		Epoch:       s.hub.Log().Epoch(),
		Head:        s.hub.Log().Head(),
		Node:        s.deps.NodeID,
	}
}

// available reports whether a registered domain takes commands now: a
// native one always, an agent-hosted one while the agent that declared it
// runs and is ready.
func (s *sessionActor) available(d *domainRef) bool {
	if d.hosted != surface.HostedAgent {
		return true
	}
	return s.agent != nil && s.ready && d.incarnation == s.incarnation
}

func (s *sessionActor) surfaceInfos() []*pb.SurfaceInfo {
	out := make([]*pb.SurfaceInfo, 0, len(s.domains))
	for name, d := range s.domains {
		if d.registered {
			out = append(out, &pb.SurfaceInfo{Domain: name, Commands: d.commands, Hosted: d.hosted, Rev: d.rev, Available: s.available(d)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}
