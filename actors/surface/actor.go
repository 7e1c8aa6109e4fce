package surface

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc/panics"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/actors/surface/internal/applied"
	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Hosting of a domain.
const (
	HostedNative = "native"
	HostedAgent  = "agent"
)

// DefaultSettleWindow is how long an agent-hosted command waits for the
// agent's surface_dispatch_result.
const DefaultSettleWindow = 15 * time.Second

// DefaultMaxSnapshot bounds a committed snapshot; larger payloads belong in
// artifacts, referenced from the snapshot.
const DefaultMaxSnapshot = 4 << 20

// Defaults of the command queue of a domain (the commands waiting behind
// the agent-hosted command in flight).
const (
	DefaultQueueMax   = 64
	DefaultQueueBytes = 8 << 20
)

// Config configures one domain actor.
type Config struct {
	SessionID string
	Domain    string
	Hosted    string // HostedNative or HostedAgent

	// Native is the definition of a native domain.
	Native Domain
	// Commands are the actions of an agent-hosted domain, as it declared them.
	Commands []string
	// Schemas are the JSON Schemas of the args of an agent-hosted domain's
	// commands, by action, as it declared them: a command whose args do not
	// fit is answered invalid_args without a dispatch. Schemas that do not
	// compile are left out (the session reported them).
	Schemas map[string][]byte
	// Initial is an agent-hosted domain's initialState, used when nothing is stored.
	Initial json.RawMessage

	// Stored is the persisted snapshot and rev of this domain, if any.
	Stored *store.KV
	// Applied are the domain's stored rows of its memory of applied
	// commands (see IsAppliedKey), loaded with the snapshot.
	Applied []store.KV
	// Idempotency bounds that memory: a command whose idempotency key the
	// domain remembers is answered with the remembered result instead of
	// running again.
	Idempotency IdempotencyLimits

	// Writer persists committed snapshots. Results and snapshots are released
	// only once their write is durable; while it says the store cannot be
	// written, commands are refused at once (store_unavailable).
	Writer *store.Writer
	// Fence is the session's lease token (a cluster); writes carry it, and a
	// write refused because the lease moved fails its command with
	// session_moved (nothing unwritten is acknowledged).
	Fence store.Fence

	SettleWindow time.Duration // 0: DefaultSettleWindow
	MaxSnapshot  int           // 0: DefaultMaxSnapshot
	// QueueMax and QueueBytes bound the commands waiting behind the one in
	// flight, in number and in bytes of their args (0: DefaultQueueMax,
	// DefaultQueueBytes). A command past them is refused queue_full at once.
	QueueMax   int
	QueueBytes int
	Logger     *slog.Logger
	// Clock runs the settle window (nil: the wall clock).
	Clock clock.Clock
	// Outcome, when set, is told the outcome of every command answered:
	// "ok" or the error code (metrics).
	Outcome func(outcome string)
}

// IdempotencyLimits bound a domain's memory of applied commands. Zero values
// take the defaults.
type IdempotencyLimits struct {
	// Window is how long a result is remembered (10 min).
	Window time.Duration
	// Keys is how many results are remembered (256).
	Keys int
	// Bytes bounds the remembered results (256 KiB); a result whose data
	// alone is over a sixteenth of it is remembered without its data.
	Bytes int
}

// IsAppliedKey reports whether key is a row of a domain's memory of applied
// commands (a reserved session KV key, never shown to clients), and whose.
func IsAppliedKey(key string) (domain string, ok bool) { return applied.DomainOf(key) }

// Props returns the props of a domain actor; the session spawns it as a child
// and is its parent: committed snapshots go to the parent as *pb.StateCommitted.
func Props(cfg Config, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return newDomainActor(cfg) }, append([]actor.PropsOption{dispatch.Option()}, opts...)...)
}

type domainActor struct {
	cfg    Config
	log    *slog.Logger
	key    string
	state  json.RawMessage // the newest snapshot, writes in flight included
	rev    uint64          // its rev
	native Instance

	// What the store holds (or, before the first write, what a restart
	// would start from): a failed write rolls the domain back to it.
	durable    json.RawMessage
	durableRev uint64
	// revFloor is the highest rev whose write may have landed without the
	// domain knowing (an unknown outcome): the next rev goes above it, so
	// that the store never skips a new snapshot for one that landed late.
	revFloor uint64
	// epoch is the domain's chain epoch in the writer (store.Op.Chain): it
	// moves on when a failed write is rolled back, so that the writes made
	// on top of it are not written after all.
	epoch uint64
	// fenced: a write was refused because the session moved.
	fenced bool

	agent *actor.PID // agent-hosted: the agent process actor, nil while unavailable
	// schemas are the compiled Config.Schemas (agent-hosted).
	schemas ArgsSchemas

	// An agent-hosted command in flight (the mailbox's "one at a time" spans
	// the round trip to the agent); commands arriving meanwhile wait in queue
	// (queueBytes of args), each until its deadline.
	inflight   *pending
	queue      []pending
	queueBytes int
	queued     uint64 // numbers the queued commands, for their expiry timers
	nextID     uint64

	// Results wait here, in command order, until the snapshots before them are
	// durable.
	release []*outcome
	persist uint64 // sequence of submitted writes

	// applied remembers the results of keyed commands that changed the
	// state; keys maps the key of each keyed command from its arrival to its
	// answer, so that a retry arriving meanwhile shares the answer.
	applied *applied.Memory
	keys    map[string]*keyed
	// vacated are the memory's slots whose rows a rolled-back write may
	// have put in the store (its outcome unknown) for a result the memory
	// forgot: the next writes rewrite them as the memory has them, until
	// one is durable. By slot: the write count when it was vacated.
	vacated map[int]uint64

	// closing is the refusal of every new command once the session is
	// stopping (Drain); drainTo waits for Drained.
	closing *pb.Error
	drainTo *actor.PID
}

// asker is who waits for a command's answer: its sender, and its
// idempotency key (empty: none).
type asker struct {
	sender *actor.PID
	key    string
	trace  string // the traceparent of the command's span ("" untraced)
}

// keyed is a keyed command between its arrival and its answer.
type keyed struct {
	fingerprint string
	dups        []dup // retries that arrived meanwhile
}

// dup is a retry of a command still under way.
type dup struct {
	sender      *actor.PID
	correlation string
}

type pending struct {
	cmd      *pb.RunCommand
	to       asker
	id       string
	timer    clock.Timer // the settle window (in flight) or the deadline (queued)
	deadline time.Time   // when the caller stops waiting; zero: never
	seq      uint64      // queued: its number
	size     int         // bytes of its args
	started  time.Time   // in flight: when it went to the agent
	epoch    uint64      // the domain's epoch when the state was sent to the agent
}

type outcome struct {
	to     asker
	result *pb.CommandResult
	commit *pb.StateCommitted
	wseq   uint64 // the write this outcome waits for (0: none)
	done   bool
	// slot is the memory slot (+1) of the row its write carries (0: none);
	// rewrites are the vacated slots it rewrites.
	slot     int
	rewrites []int
	// rolledBack: refused with an earlier write that failed; its own
	// write's answer (aborted unsent, or sent in the same call) says how.
	rolledBack bool
}

// Local messages from the actor's own timers and writer callbacks.
type settleTimeout struct{ id string }
type queueExpired struct{ seq uint64 }
type persisted struct {
	wseq uint64
	rev  uint64
	err  error
}

func newDomainActor(cfg Config) *domainActor {
	if cfg.SettleWindow <= 0 {
		cfg.SettleWindow = DefaultSettleWindow
	}
	if cfg.MaxSnapshot <= 0 {
		cfg.MaxSnapshot = DefaultMaxSnapshot
	}
	if cfg.QueueMax <= 0 {
		cfg.QueueMax = DefaultQueueMax
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	lim := cfg.Idempotency
	schemas, _ := CompileSchemas(cfg.Schemas)
	var epoch uint64
	if cfg.Writer != nil {
		// The chain of the domain's snapshots may have failed under its
		// previous actor (an earlier incarnation or activation).
		epoch = cfg.Writer.EpochBase()
	}
	return &domainActor{
		cfg:     cfg,
		epoch:   epoch,
		schemas: schemas,
		key:     agentproc.SurfaceKey(cfg.Domain),
		log:     log.With("session", cfg.SessionID, "domain", cfg.Domain),
		applied: applied.New(cfg.Domain, applied.Limits{Window: lim.Window, Keys: lim.Keys, Bytes: lim.Bytes}),
		keys:    map[string]*keyed{},
		vacated: map[int]uint64{},
	}
}

func (d *domainActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.start(ctx)
	case *pb.RunCommand:
		d.command(ctx, m)
	case *pb.AgentAvailable:
		d.agentAvailable(ctx, m)
	case *pb.AgentReply:
		d.dispatchAnswered(ctx, m)
	case *settleTimeout:
		d.settleTimedOut(ctx, m)
	case *queueExpired:
		d.queueExpired(ctx, m)
	case *persisted:
		d.persisted(ctx, m)
	case *Drain:
		d.drain(ctx, m)
	case *actor.Stopping:
		d.stopping(ctx)
	}
	d.drainedCheck(ctx)
}

// command runs a command now, or queues it behind the agent-hosted command
// in flight. The queue is bounded (past it the command is refused at once),
// and a command leaves it unrun when its caller has stopped waiting. A retry
// of a keyed command is answered with the remembered result once the first
// attempt changed the state, or shares the first attempt's answer while it
// is under way; it never runs twice.
func (d *domainActor) command(ctx actor.Context, m *pb.RunCommand) {
	p := pending{cmd: m, to: asker{sender: ctx.Sender(), key: m.GetIdempotencyKey(), trace: tracing.HeaderOf(ctx)}, size: len(m.GetArgs())}
	if ms := m.GetDeadlineMs(); ms > 0 {
		p.deadline = time.UnixMilli(ms)
	}
	var fp string
	if key := p.to.key; key != "" {
		fp = applied.Fingerprint(m.GetAction(), m.GetArgs())
		if k, ok := d.keys[key]; ok {
			// Under way (its write may be in flight): the retry shares its
			// answer, whatever that turns out to be.
			if k.fingerprint != fp {
				d.reply(ctx, asker{sender: p.to.sender}, keyReused(m))
				return
			}
			k.dups = append(k.dups, dup{sender: p.to.sender, correlation: m.GetCorrelation()})
			return
		}
		if e, ok := d.applied.Lookup(d.clock().Now(), key); ok {
			// Answered already, so durable (a failed write forgets its
			// key): the replay stands whatever happens to the writes in
			// flight, and is answered at once.
			d.reply(ctx, asker{sender: p.to.sender}, d.replay(m, e, fp))
			return
		}
	}
	if d.closing != nil {
		// The session is stopping: nothing new runs.
		d.reply(ctx, asker{sender: p.to.sender}, d.closed(m))
		return
	}
	if key := p.to.key; key != "" {
		d.keys[key] = &keyed{fingerprint: fp}
	}
	if d.dropped(ctx, p) {
		return
	}
	if d.inflight == nil {
		d.run(ctx, p)
		return
	}
	if len(d.queue) >= d.cfg.QueueMax || d.queueBytes+p.size > d.cfg.QueueBytes {
		d.reply(ctx, p.to, &pb.CommandResult{Correlation: m.GetCorrelation(), Refused: pb.Err(agentproc.CodeQueueFull,
			fmt.Sprintf("%d commands (%d bytes of args) already wait for surface %q, the limit is %d (%d bytes); try again later",
				len(d.queue), d.queueBytes, d.cfg.Domain, d.cfg.QueueMax, d.cfg.QueueBytes))})
		return
	}
	d.queued++
	p.seq = d.queued
	if !p.deadline.IsZero() {
		// Answered at its deadline even while it waits: its caller learns
		// it was not run, and it never runs after that.
		self, root, seq := ctx.Self(), ctx.ActorSystem().Root, p.seq
		p.timer = d.clock().AfterFunc(p.deadline.Sub(d.clock().Now()), func() { root.Send(self, &queueExpired{seq: seq}) })
	}
	d.queue = append(d.queue, p)
	d.queueBytes += p.size
}

// dropped answers, without running it, a command whose caller has stopped
// waiting: its deadline passed, or (a caller on this node) its request is
// gone (timed out, or the client disconnected). It reports whether it did.
func (d *domainActor) dropped(ctx actor.Context, p pending) bool {
	switch {
	case !p.deadline.IsZero() && !d.clock().Now().Before(p.deadline):
		d.reply(ctx, p.to, d.result(p.cmd, Fail(agentproc.CodeTimeout,
			"the command's deadline passed before it could run; it was not run")))
		return true
	case callerGone(ctx.ActorSystem(), p.to.sender):
		d.reply(ctx, p.to, d.result(p.cmd, Fail(agentproc.CodeCancelled,
			"the caller stopped waiting before the command ran; it was not run")))
		return true
	}
	return false
}

// callerGone reports whether pid is a request on this node that nobody
// waits for any more (a future that timed out or was cancelled leaves the
// process registry). A caller on another node is assumed to wait: its
// deadline bounds it.
func callerGone(sys *actor.ActorSystem, pid *actor.PID) bool {
	if pid == nil || (pid.Address != sys.Address() && pid.Address != "nonhost") {
		return false
	}
	_, ok := sys.ProcessRegistry.GetLocal(pid.Id)
	return !ok
}

// queueExpired answers a queued command whose deadline came before its
// turn: it leaves the queue unrun.
func (d *domainActor) queueExpired(ctx actor.Context, m *queueExpired) {
	for i, p := range d.queue {
		if p.seq == m.seq {
			d.queue = append(d.queue[:i], d.queue[i+1:]...)
			d.queueBytes -= p.size
			d.dropped(ctx, p)
			return
		}
	}
}

// CodeKeyReused answers a command whose idempotency key an earlier, different
// command (another action or other args) used.
const CodeKeyReused = codes.IdempotencyKeyReused

func keyReused(m *pb.RunCommand) *pb.CommandResult {
	return &pb.CommandResult{Correlation: m.GetCorrelation(), Refused: pb.Err(CodeKeyReused,
		"this idempotency key was used for another command (another action or other args) in this surface; use a new key")}
}

// replay answers a retry of an applied command with its remembered result.
func (d *domainActor) replay(m *pb.RunCommand, e applied.Entry, fp string) *pb.CommandResult {
	if e.Fingerprint != fp {
		return keyReused(m)
	}
	res := &pb.CommandResult{Ok: e.OK, Data: e.Data, Rev: e.Rev, Correlation: m.GetCorrelation(), Replayed: true}
	if !e.OK {
		res.Data = nil
		res.Error = &pb.Error{Code: e.Code, Message: e.Message}
	}
	return res
}

func (d *domainActor) agentAvailable(ctx actor.Context, m *pb.AgentAvailable) {
	d.agent = m.GetAgent().Actor()
	if len(m.GetCommands()) > 0 {
		d.cfg.Commands = append([]string(nil), m.GetCommands()...)
		d.schemas, _ = CompileSchemas(m.GetSchemas())
	}
	if d.agent == nil && d.inflight != nil {
		d.finishDispatch(ctx, surfaceFail(agentproc.CodeAgentUnavailable, "the agent stopped before answering"), nil)
	}
}

func (d *domainActor) dispatchAnswered(ctx actor.Context, m *pb.AgentReply) {
	if d.inflight == nil || d.inflight.id != m.GetId() {
		d.log.Warn("late or unknown dispatch result ignored", "id", m.GetId())
		return
	}
	if m.GetFailed() {
		d.finishDispatch(ctx, lostDispatch(m.GetError()), nil)
		return
	}
	res, state := parseDispatchResult(m.GetLine())
	d.finishDispatch(ctx, res, state)
}

func (d *domainActor) settleTimedOut(ctx actor.Context, m *settleTimeout) {
	p := d.inflight
	if p == nil || p.id != m.id {
		return
	}
	msg := fmt.Sprintf("the agent did not answer within %s; the state is unchanged", d.cfg.SettleWindow)
	if !p.deadline.IsZero() && p.deadline.Before(p.started.Add(d.cfg.SettleWindow)) {
		msg = "the agent did not answer before the command's deadline; the state is unchanged"
	}
	d.finishDispatch(ctx, surfaceFail(agentproc.CodeTimeout, msg), nil)
}

// persisted releases the outcomes whose snapshot write is durable, or
// rolls back a write that failed.
func (d *domainActor) persisted(ctx actor.Context, m *persisted) {
	if errors.Is(m.err, store.ErrOutcomeUnknown) {
		d.revFloor = max(d.revFloor, m.rev)
	}
	i := slices.IndexFunc(d.release, func(o *outcome) bool { return o.wseq == m.wseq })
	if i < 0 {
		return
	}
	if o := d.release[i]; o.rolledBack {
		err := m.err
		if err == nil {
			// Written, though built on a failed write: the writer aborts
			// such writes, so this cannot be; should it be, the next rev
			// must still go above it.
			d.revFloor = max(d.revFloor, m.rev)
			err = store.ErrOutcomeUnknown
		}
		o.done = true
		o.result = d.refusal(o.result, err)
		d.flush(ctx)
		return
	}
	if m.err == nil {
		o := d.release[i]
		o.done = true
		d.durable, d.durableRev = o.commit.GetValue(), o.commit.GetRev()
		for _, slot := range o.rewrites {
			if d.vacated[slot] < o.wseq {
				delete(d.vacated, slot)
			}
		}
		d.flush(ctx)
		return
	}
	if errors.Is(m.err, store.ErrFenced) {
		d.fenced = true
	}
	d.rollBack(ctx, i, m.err)
	d.flush(ctx)
}

// rollBack undoes the write of release[i], which failed with err, and every
// change made after it: the domain is back at its durable snapshot and
// rev, those commands are refused (they were not applied; their results
// were computed on top of the failed write), and the domain's chain moves
// to a new epoch so that the writes queued after it are not written.
func (d *domainActor) rollBack(ctx actor.Context, i int, err error) {
	for k, o := range d.release[i:] {
		o.commit = nil
		if o.to.key != "" {
			// Not applied: a retry with its key runs it.
			d.applied.Forget(o.to.key)
		}
		if o.slot > 0 {
			// Its row may have landed all the same (an unknown outcome, or
			// a write already sent): the next write rewrites the slot.
			d.vacated[o.slot-1] = d.persist
		}
		switch {
		case k == 0 || o.wseq == 0:
			// The failed write; or a command that wrote nothing, answered
			// from the state that is rolled back.
			o.done = true
			o.result = d.refusal(o.result, err)
		default:
			o.rolledBack = true
		}
	}
	if !d.fenced {
		d.log.Error("snapshot write failed; back at the last durable rev", "rev", d.rev, "durableRev", d.durableRev,
			"refused", len(d.release)-i, "err", err)
	}
	d.state, d.rev = d.durable, d.durableRev
	d.epoch++
	if d.cfg.Hosted == HostedNative && d.native != nil {
		in, nerr := d.cfg.Native.New(d.durable)
		if nerr != nil {
			d.log.Error("native domain cannot return to its durable snapshot", "err", nerr)
			in = nil
		}
		d.native = in
	}
}

// refusal turns the result of a command whose write failed with err (or
// that was built on one that did) into its refusal; nil stays nil (a
// commit of the domain's own).
func (d *domainActor) refusal(res *pb.CommandResult, err error) *pb.CommandResult {
	if res == nil {
		return nil
	}
	code, msg := agentproc.CodeStoreUnavailable, "the store could not be written; the command was not applied"
	switch {
	case d.fenced:
		// The session lives on another node now: these revs were never
		// written, so they are neither published nor acked.
		code, msg = "session_moved", "the session moved to another node; send the command again"
	case errors.Is(err, store.ErrOutcomeUnknown):
		code, msg = agentproc.CodeOutcomeUnknown, "the store did not answer in time: the command may or may not have been applied"
	}
	return &pb.CommandResult{Correlation: res.Correlation, Refused: pb.Err(code, msg)}
}

func surfaceFail(code, msg string) Result { return Fail(code, msg) }

// lostDispatch is the result of a dispatch that will get no answer: the
// agent exited (why is nil), the dispatch could not be written to it, or its
// answer was over the line cap.
func lostDispatch(why *pb.Error) Result {
	switch why.GetCode() {
	case "":
		return Fail(agentproc.CodeAgentUnavailable, "the agent stopped before answering")
	case agentproc.CodeLineTooLong:
		return Fail(agentproc.CodeLineTooLong, why.GetMessage()+"; the state is unchanged")
	default:
		return Fail(agentproc.CodeAgentUnavailable, why.GetMessage())
	}
}

func (d *domainActor) clock() clock.Clock {
	if d.cfg.Clock != nil {
		return d.cfg.Clock
	}
	return clock.Real{}
}

func (d *domainActor) start(ctx actor.Context) {
	d.applied.Load(d.clock().Now(), d.cfg.Applied)
	d.cfg.Applied = nil
	var stored json.RawMessage
	if kv := d.cfg.Stored; kv != nil && !kv.Deleted && kv.Value != nil {
		stored = kv.Value
		d.rev = kv.Rev
	} else if kv != nil {
		d.rev = kv.Rev
	}
	var initial json.RawMessage
	switch d.cfg.Hosted {
	case HostedNative:
		in, err := d.cfg.Native.New(stored)
		if err != nil && stored != nil {
			// A snapshot that no longer fits the type (the domain's code
			// changed): start from the initial state at the next rev rather
			// than refuse the session, and say so.
			d.log.Error("stored snapshot does not fit; starting from the initial state", "err", err)
			in, err = d.cfg.Native.New(nil)
			stored = nil
		}
		if err != nil {
			d.log.Error("native domain cannot start", "err", err)
			return
		}
		d.native = in
		if stored == nil {
			snap, err := in.Snapshot()
			if err != nil {
				d.log.Error("native domain initial state", "err", err)
				return
			}
			initial = snap
		}
	case HostedAgent:
		if stored == nil {
			initial = d.cfg.Initial
			if len(initial) == 0 || string(initial) == "null" {
				initial = json.RawMessage("{}")
			}
		}
	}
	if stored != nil {
		d.state = stored
		d.durable, d.durableRev = stored, d.rev
		return
	}
	// Nothing stored: the initial state is what a restart would start from
	// too, so it counts as durable at the rev before its first write (a
	// failed first write loses nothing).
	d.state, d.durable, d.durableRev = initial, initial, d.rev
	d.commit(ctx, initial, asker{}, nil)
}

func (d *domainActor) result(cmd *pb.RunCommand, r Result) *pb.CommandResult {
	out := &pb.CommandResult{Ok: r.OK, Data: r.Data, Correlation: cmd.GetCorrelation()}
	if !r.OK {
		e := r.Err
		if e == nil {
			e = &Error{Code: agentproc.CodeDispatchFailed, Message: "the command failed"}
		}
		out.Error = &pb.Error{Code: e.Code, Message: e.Message}
		out.Data = nil
	}
	return out
}

func (d *domainActor) run(ctx actor.Context, p pending) {
	cmd := p.cmd
	if cmd.GetAction() == agentproc.SurfaceKey(d.cfg.Domain) {
		d.respondAfterWrites(ctx, p.to, d.result(cmd, Result{OK: true}))
		return
	}
	if w := d.cfg.Writer; w != nil && !w.Available() {
		// Refused before anything is applied: a change the store cannot
		// take now would only be rolled back.
		d.respondAfterWrites(ctx, p.to, &pb.CommandResult{Correlation: cmd.GetCorrelation(),
			Refused: pb.Err(agentproc.CodeStoreUnavailable, "the store cannot be written now; the command was not applied, try again")})
		return
	}
	switch d.cfg.Hosted {
	case HostedNative:
		if d.native == nil {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, Fail(agentproc.CodeDispatchFailed, "the domain failed to start")))
			return
		}
		res, changed := d.dispatchNative(cmd.GetAction(), cmd.GetArgs())
		if !changed {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, res))
			return
		}
		snap, err := d.native.Snapshot()
		if err != nil {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, Fail(agentproc.CodeDispatchFailed, err.Error())))
			return
		}
		d.commit(ctx, snap, p.to, d.result(cmd, res))
	case HostedAgent:
		if !d.declared(cmd.GetAction()) {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, Fail(agentproc.CodeUnknownAction,
				fmt.Sprintf("surface %q has no command %q", d.cfg.Domain, cmd.GetAction()))))
			return
		}
		if e := d.schemas.Check(d.cfg.Domain, cmd.GetAction(), cmd.GetArgs()); e != nil {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, Result{Err: e}))
			return
		}
		if d.agent == nil {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, Fail(agentproc.CodeAgentUnavailable,
				"the agent that hosts this surface is not running")))
			return
		}
		d.nextID++
		p.id = d.cfg.Domain + "#" + strconv.FormatUint(d.nextID, 10)
		args := cmd.GetArgs()
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		// The agent has until the settle window ends, or the caller's
		// deadline when that comes first; it is told which.
		now := d.clock().Now()
		p.started = now
		deadline := now.Add(d.cfg.SettleWindow)
		if !p.deadline.IsZero() && p.deadline.Before(deadline) {
			deadline = p.deadline
		}
		at := deadline.UTC().Truncate(time.Millisecond)
		// The line is sized once: its fixed members take under 128 bytes.
		size := 128 + 2*len(p.id) + len(d.cfg.Domain) + len(cmd.GetAction()) + len(args) + len(d.state)
		line, err := agentproc.AppendSurfaceDispatch(make([]byte, 0, size), agentproc.SurfaceDispatch{
			Type: agentproc.TypeSurfaceDispatch, ID: p.id, Domain: d.cfg.Domain,
			Action: cmd.GetAction(), Args: args, State: d.state, Rev: d.rev, Deadline: &at,
		})
		if err != nil {
			d.respondAfterWrites(ctx, p.to, d.result(cmd, Fail(agentproc.CodeInvalidArgs, "the args are not JSON")))
			return
		}
		self := ctx.Self()
		root := ctx.ActorSystem().Root
		id := p.id
		p.timer = d.clock().AfterFunc(deadline.Sub(now), func() { root.Send(self, &settleTimeout{id: id}) })
		p.epoch = d.epoch
		d.inflight = &p
		// Sent in the command's trace, which may not be the message being
		// handled now (a command that waited in the queue).
		ctx.Send(d.agent, tracing.Envelope(&pb.AgentSend{Line: line, ExpectId: p.id, ReplyTo: pb.PidOf(self)}, p.to.trace))
	}
}

func (d *domainActor) declared(action string) bool {
	for _, c := range d.cfg.Commands {
		if c == action {
			return true
		}
	}
	return false
}

// finishDispatch completes the agent-hosted command in flight and starts the
// next queued one.
func (d *domainActor) finishDispatch(ctx actor.Context, res Result, state json.RawMessage) {
	p := d.inflight
	d.inflight = nil
	p.timer.Stop()
	switch {
	case p.epoch != d.epoch:
		// The agent computed on a state that was rolled back meanwhile (its
		// write failed): its answer is not applied.
		d.respondAfterWrites(ctx, p.to, &pb.CommandResult{Correlation: p.cmd.GetCorrelation(),
			Refused: pb.Err(agentproc.CodeStoreUnavailable, "the store could not be written; the command was not applied")})
	case state != nil:
		d.commit(ctx, state, p.to, d.result(p.cmd, res))
	default:
		d.respondAfterWrites(ctx, p.to, d.result(p.cmd, res))
	}
	for d.inflight == nil && len(d.queue) > 0 {
		next := d.queue[0]
		d.queue[0] = pending{}
		d.queue = d.queue[1:]
		d.queueBytes -= next.size
		if next.timer != nil {
			next.timer.Stop()
		}
		if d.dropped(ctx, next) {
			continue
		}
		d.run(ctx, next)
	}
}

// commit assigns the next rev to snap, persists it, and releases the result
// and the snapshot once the write is durable (see persisted). A keyed
// command's result is remembered as applied, durably: its row goes in the
// same write as the snapshot, and a failed write forgets it (rollBack).
func (d *domainActor) commit(ctx actor.Context, snap json.RawMessage, to asker, res *pb.CommandResult) {
	if len(snap) > d.cfg.MaxSnapshot {
		if res != nil {
			res = &pb.CommandResult{Correlation: res.Correlation, Error: &pb.Error{Code: agentproc.CodeDispatchFailed,
				Message: fmt.Sprintf("the new snapshot is %d bytes, over the %d-byte limit; keep large payloads in artifacts", len(snap), d.cfg.MaxSnapshot)}}
		}
		d.respondAfterWrites(ctx, to, res)
		return
	}
	d.rev = max(d.rev, d.revFloor) + 1
	d.state = snap
	if res != nil {
		res.Rev = d.rev
	}
	d.persist++
	wseq, rev := d.persist, d.rev
	o := &outcome{
		to: to, result: res, wseq: wseq,
		commit: &pb.StateCommitted{Key: d.key, Value: snap, Rev: rev},
	}
	d.release = append(d.release, o)
	op := store.Op{
		SessionID: d.cfg.SessionID,
		Fence:     d.cfg.Fence,
		KV:        []store.KV{{Key: d.key, Value: snap, Rev: rev}},
		Chain:     d.key,
		Epoch:     d.epoch,
		Trace:     to.trace,
	}
	if k := d.keys[to.key]; k != nil && res != nil {
		now := d.clock().Now()
		e := applied.Entry{Key: to.key, Fingerprint: k.fingerprint, At: now.UnixMilli(), Rev: rev, OK: res.GetOk(), Data: res.GetData()}
		if !res.GetOk() {
			e.Code, e.Message = res.GetError().GetCode(), res.GetError().GetMessage()
		}
		if row, err := d.applied.Remember(now, e); err != nil {
			d.log.Error("the command's result cannot be remembered; a retry would run it again", "rev", rev, "err", err)
		} else {
			op.KV = append(op.KV, row)
			o.slot = d.applied.Slot(rev) + 1
		}
	}
	for slot := range d.vacated {
		if slot == o.slot-1 {
			o.rewrites = append(o.rewrites, slot) // this write's own row overwrites it
			continue
		}
		row, err := d.applied.Row(slot, rev)
		if err != nil {
			d.log.Error("a slot of the memory of applied commands cannot be rewritten", "rev", rev, "slot", slot, "err", err)
			continue
		}
		op.KV = append(op.KV, row)
		o.rewrites = append(o.rewrites, slot)
	}
	if done, err := submit(ctx, d.cfg.Writer, op, func(err error) *persisted { return &persisted{wseq: wseq, rev: rev, err: err} }); done {
		// Written before Submit returned (an in-memory store): release now
		// rather than after a round trip through the mailbox.
		d.persisted(ctx, &persisted{wseq: wseq, rev: rev, err: err})
	}
	d.log.Debug("surface committed", "rev", d.rev, "bytes", len(snap))
}

// submit hands op to the writer. When the write completes before Submit
// returns it reports done with the write's error, and nothing is sent;
// otherwise the outcome arrives later as the message msg makes.
func submit[M any](ctx actor.Context, w *store.Writer, op store.Op, msg func(error) M) (done bool, err error) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	var state atomic.Int32 // 0 submitting, 1 Submit returned first, 2 Done ran first
	var inlineErr error
	op.Done = func(err error) {
		if state.Load() == 0 {
			inlineErr = err
			if state.CompareAndSwap(0, 2) {
				return
			}
		}
		root.Send(self, msg(err))
	}
	w.Submit(op)
	if state.CompareAndSwap(0, 1) {
		return false, nil
	}
	return true, inlineErr
}

// respondAfterWrites answers a command that changed nothing, after the results
// of earlier commands (whose writes may still be in flight).
func (d *domainActor) respondAfterWrites(ctx actor.Context, to asker, res *pb.CommandResult) {
	if len(d.release) == 0 {
		d.reply(ctx, to, res)
		return
	}
	d.release = append(d.release, &outcome{to: to, result: res, done: true})
}

func (d *domainActor) flush(ctx actor.Context) {
	n := 0
	for _, o := range d.release {
		if !o.done {
			break
		}
		if o.commit != nil {
			ctx.Send(ctx.Parent(), o.commit)
		}
		d.reply(ctx, o.to, o.result)
		n++
	}
	if n > 0 {
		copy(d.release, d.release[n:])
		for i := len(d.release) - n; i < len(d.release); i++ {
			d.release[i] = nil
		}
		d.release = d.release[:len(d.release)-n]
	}
}

// reply answers a command, and the retries of it that arrived while it was
// under way.
func (d *domainActor) reply(ctx actor.Context, to asker, res *pb.CommandResult) {
	if res == nil {
		return
	}
	if d.cfg.Outcome != nil {
		d.cfg.Outcome(Outcome(res))
	}
	if to.sender != nil {
		ctx.Send(to.sender, res)
	}
	k := d.keys[to.key]
	if k == nil {
		return
	}
	delete(d.keys, to.key)
	for _, dp := range k.dups {
		r := proto.Clone(res).(*pb.CommandResult)
		r.Correlation, r.Replayed = dp.correlation, true
		if d.cfg.Outcome != nil {
			d.cfg.Outcome(Outcome(r))
		}
		if dp.sender != nil {
			ctx.Send(dp.sender, r)
		}
	}
}

// Outcome is a command result's outcome as metrics count it: "ok", the
// error code, or the code it was refused with.
func Outcome(res *pb.CommandResult) string {
	switch {
	case res.GetRefused() != nil:
		return res.GetRefused().GetCode()
	case res.GetOk():
		return "ok"
	case res.GetError().GetCode() != "":
		return res.GetError().GetCode()
	}
	return agentproc.CodeDispatchFailed
}

// dispatchNative runs a native command. A handler that panics changes
// nothing (its half-done state is dropped): the command answers
// dispatch_failed and the panic is logged with the stack where it happened,
// whatever Instance the domain has.
func (d *domainActor) dispatchNative(action string, args json.RawMessage) (res Result, changed bool) {
	if r := panics.Try(func() { res, changed = d.native.Dispatch(action, args) }); r != nil {
		d.log.Error("a native command panicked", "action", action, "panic", fmt.Sprint(r.Value), "stack", string(r.Stack))
		return Fail(agentproc.CodeDispatchFailed, fmt.Sprintf("command %q panicked: %v", action, r.Value)), false
	}
	return res, changed
}
