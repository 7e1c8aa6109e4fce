package session

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"golang.org/x/time/rate"

	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/actors/session/internal/hub"
	"github.com/surfaced/surfaced/actors/session/internal/kv"
	"github.com/surfaced/surfaced/actors/session/internal/lease"
	"github.com/surfaced/surfaced/actors/session/internal/turn"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/lograte"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Config is what a session actor is spawned with.
type Config struct {
	// Record is the session; zero when the actor is a cluster grain, which
	// loads it when the cluster names it (ClusterInit).
	Record store.Session
	Deps   *Deps
	// OnStopping is called when the actor decides to leave (before the
	// Stop that asked for it is answered) and again when it begins to
	// stop, so that the directory sends the next request to a new
	// activation. It must be idempotent.
	OnStopping func(pid *actor.PID)
	// MayLeave, when set, is asked before an idle session stops (sleeps,
	// or an ended one after its linger): false while a request is on its
	// way to this activation (it would be lost in a stopping mailbox); the
	// session then looks again a little later. True means the directory
	// has forgotten this activation: the next request starts a new one.
	MayLeave func(pid *actor.PID) bool
}

// Props returns the props of a session actor.
func Props(cfg Config) *actor.Props {
	opts := cfg.Deps.props("session", cfg.Record.ID, "")
	return actor.PropsFromProducer(func() actor.Actor { return newSessionActor(cfg) }, append([]actor.PropsOption{dispatch.Option()}, opts...)...)
}

// sessionActor is one session. Its state lives in types of their own, each
// with one job and its own tests: the frame log and subscribers (hub), the
// KV with its durability rule (kv), the turns, inbox and dialogs (turn), the
// lease (lease). The actor routes messages to them and carries out what they
// say (send to the agent, write to the store, arm a timer).
//
// Its lifecycle is a protoactor behaviour: activating (a cluster grain
// waiting for its identity) → live (the agent starting, ready, or being
// restarted) → ended (answers reads, refuses writes, lingers, stops); or
// refusing (this activation cannot serve the session: every request is
// answered with why, then it stops).
type sessionActor struct {
	cfg      Config
	deps     *Deps
	lim      Limits
	log      *slog.Logger
	clock    clock.Clock
	rec      store.Session
	spec     AgentSpec
	self     *actor.PID
	root     *actor.RootContext
	behavior actor.Behavior

	hub *hub.Hub
	kv  *kv.Table
	// kvRolledBack are KV writes rolled back with an earlier one that failed,
	// waiting for their own answer from the writer to be answered.
	kvRolledBack map[uint64]*kv.Write
	// prompts are the prompts whose record is being written, by id: whom
	// to answer once it is durable.
	prompts map[uint64]*actor.PID
	turns   *turn.Machine
	domains map[string]*domainRef
	agent   agentLink
	limiter *rate.Limiter
	status  statusLine
	tr      transcriptLog
	// idle is the clock that puts an unused session to sleep (idle.go).
	idle idleClock
	// reserved is the highest turn or prompt id the store says may have been
	// handed out (this activation's ids stay at or below it).
	reserved uint64

	// Cluster: the lease this activation writes under, and its renewal.
	lease      *lease.Holder
	leaseTimer clock.Timer
	// stray counts the lease renewals in a row that found the session
	// placed on another node (lease.go).
	stray int
	// refusal is why a refusing activation cannot serve.
	refusal *pb.Error
	// drain is a session finishing what it started before it stops
	// (drain.go); nil until then.
	drain *drainState
	// activated: the session was loaded and counted (Started or ClusterInit).
	activated bool
	// diagLog bounds the log records of diagnostics (the agent's doing).
	diagLog *lograte.Limiter
	// arts carries out the agent's artifact lines (nil until the agent
	// first starts, or without artifacts).
	arts *agentArtifacts
	// loading counts the prompts whose images are being read for a plain pi
	// agent; the commands after them wait in outbox, in order.
	loading int
	outbox  []held
	// waiting are the commands held until the starting agent registers its
	// domains (waiting.go).
	waiting []*waitingCommand
	waitSeq uint64
	// applied holds the stored rows of each domain's memory of applied
	// commands until the domain's actor is spawned.
	applied map[string][]store.KV
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
	s := &sessionActor{
		cfg:   cfg,
		deps:  cfg.Deps,
		lim:   lim,
		rec:   cfg.Record,
		log:   log,
		clock: cfg.Deps.clock(),
		kv:    kv.New(cfg.Deps.Writer.EpochBase()),

		kvRolledBack: map[uint64]*kv.Write{},
		prompts:      map[uint64]*actor.PID{},
		domains:      map[string]*domainRef{},
		limiter:      rate.NewLimiter(rate.Limit(lim.CommandsPerSecond), lim.CommandsPerSecond),
	}
	s.diagLog = s.newDiagLog()
	s.behavior = actor.NewBehavior()
	if cfg.Record.ID == "" {
		s.behavior.Become(s.activating)
	} else {
		s.behavior.Become(s.live)
	}
	return s
}

func (s *sessionActor) newDiagLog() *lograte.Limiter {
	return lograte.New(s.log, "session diagnostics", lograte.Config{Lines: s.lim.AgentLogLines, Interval: s.lim.AgentLogInterval, Clock: s.clock})
}

// Messages of the actor's own timers and store callbacks. They never leave
// the node.
type (
	readyTimeout struct{ incarnation uint32 }
	// imagesRead: the images of a plain pi agent's prompt were read.
	imagesRead struct {
		incarnation uint32
		cmd         turn.Command
	}
	restartAgent struct{}
	abortGrace   struct{ turn uint64 }
	kvPersisted  struct {
		seq uint64
		key string
		rev uint64
		err error
	}
	trPersisted    struct{ err error }
	promptRecorded struct {
		id  uint64
		err error
	}
	renewLease struct{}
	fencedOut  struct{ err error }
)

// Receive routes to the current behaviour, settles the commands waiting for
// the agent, sends what it emitted to the subscribers as one batch, then
// looks at the idle clock.
func (s *sessionActor) Receive(ctx actor.Context) {
	taken := s.clock.Now()
	s.behavior.Receive(ctx)
	s.settleWaiting(ctx)
	s.flush(ctx)
	s.checkIdle(ctx, taken)
}

// activating is a cluster grain before the cluster names it.
func (s *sessionActor) activating(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		s.clusterInit(ctx, m)
	case *actor.Stopping:
		s.stopping(ctx)
	default:
		s.refuseUnknown(ctx)
	}
}

// live is a running session: its agent starting, ready, or being restarted.
func (s *sessionActor) live(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.started(ctx)
	case *actor.Stopping:
		s.stopping(ctx)
	case *actor.Stopped:
		s.stopped()
	case *idleDue:
		s.idleTimerFired(m)
	case *actor.Terminated:
		s.terminated(m)

	// Clients.
	case *pb.Subscribe:
		s.subscribe(ctx, m)
	case *pb.Unsubscribe:
		s.unsubscribe(ctx, m)
	case *pb.GetSummary:
		s.getSummary(ctx, m)
	case *pb.ListSurfaces:
		s.listSurfaces(ctx, m)
	case *pb.Prompt:
		s.prompt(ctx, m)
	case *pb.Abort:
		s.abort(ctx, m)
	case *pb.RunCommand:
		s.runCommand(ctx, m)
	case *pb.SurfaceFetch:
		s.fetchData(ctx, m)
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
	case *pb.ArtifactNotice:
		s.artifactNotice(ctx, m)

	// Children.
	case *pb.StateCommitted:
		s.stateCommitted(ctx, m)
	case *pb.CommandResult:
		s.agentCommandResult(ctx, m)
	case *pb.AgentLine:
		s.agentLine(ctx, m)
	case *pb.AgentLines:
		s.agentLines(ctx, m)
	case *pb.AgentReply:
		s.agentReply(ctx, m)
	case *pb.AgentDiagnostic:
		s.agentDiagnostic(ctx, m)
	case *pb.AgentExited:
		s.agentExited(ctx, m)

	// Own timers and store callbacks.
	case *readyTimeout:
		s.readyTimedOut(ctx, m)
	case *imagesRead:
		s.imagesRead(m)
	case *commandWaitOver:
		s.commandWaitOver(ctx, m)
	case *restartAgent:
		s.restartAgent(ctx)
	case *abortGrace:
		s.turns.AbortGraceExpired(m.turn)
	case *kvPersisted:
		s.kvPersisted(ctx, m)
	case *trPersisted:
		s.trPersisted(m)
	case *promptRecorded:
		s.promptRecorded(ctx, m)
	case *renewLease:
		s.renewLease(ctx)
	case *fencedOut:
		s.lostLease(ctx, m.err)
	}
}

// ended is a session that ended for good: reads are answered, writes are
// refused, and the actor stops once nobody has asked for a while.
func (s *sessionActor) ended(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		s.stopping(ctx)
	case *actor.Stopped:
		s.stopped()
	case *idleDue:
		s.idleTimerFired(m)
	case *actor.Terminated:
		s.terminated(m)
	case *pb.Unsubscribe:
		s.unsubscribe(ctx, m)
	case *pb.GetSummary:
		s.getSummary(ctx, m)
	case *pb.ListSurfaces:
		s.listSurfaces(ctx, m)
	case *pb.GetState:
		s.getState(ctx, m)
	case *pb.GetMessages:
		s.getMessages(ctx, m)
	case *pb.Stop:
		s.stopEnded(ctx, m)
	case *pb.ArtifactNotice:
		// Nobody watches an ended session.
		ctx.Respond(&pb.ArtifactNoticeResult{Ok: true})
	case *pb.Subscribe, *pb.Prompt, *pb.Abort, *pb.RunCommand, *pb.SetState, *pb.UIResponse, *pb.SurfaceFetch:
		s.refuseEnded(ctx)
	case *kvPersisted:
		s.kvPersisted(ctx, m)
	case *trPersisted:
		s.trPersisted(m)
	case *promptRecorded:
		// Recorded as the session ended: in the transcript, and answered
		// as not answered (the machine is closed).
		s.promptRecorded(ctx, m)
	case *renewLease:
		s.renewLease(ctx)
	case *fencedOut:
		s.lostLease(ctx, m.err)
	}
}

// refusing is an activation that cannot serve its session (there is no such
// session, its lease is held elsewhere, or it lost it): requests already
// queued are answered with why, then the actor stops.
func (s *sessionActor) refusing(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Stopping:
		s.stopping(ctx)
	case *actor.Stopped:
		s.stopped()
	case *idleDue, *actor.Terminated:
	default:
		s.refuseUnknown(ctx)
	}
}
