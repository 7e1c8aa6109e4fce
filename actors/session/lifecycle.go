package session

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/session/internal/hub"
	"github.com/surfaced/surfaced/actors/session/internal/turn"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// loadTimeout bounds the reads that bring a session up: a store that does
// not answer by then is unavailable, and the activation is refused.
const loadTimeout = 10 * time.Second

// idBlock is how many turn and prompt ids an activation reserves at a time:
// the store keeps the highest id reserved, so that ids handed out before a
// crash are never handed out again (gaps are fine, repeats are not).
const idBlock = 64

// started brings a loaded session up: its KV (revs continue, sticky state
// for the first subscriber), its id block, its native domains and its agent.
func (s *sessionActor) started(ctx actor.Context) {
	s.self = ctx.Self()
	s.root = ctx.ActorSystem().Root
	s.activated = true
	s.idle.since = s.clock.Now()
	s.deps.Metrics.SessionUp()
	if s.deps.Activated != nil {
		s.deps.Activated(s.rec.ID, ctx.Self())
	}
	s.hub = hub.New(s.rec.ID, newEpoch(s.clock.Now()), s.lim.ReplayFrames, s.lim.ReplayBytes)
	s.hub.OnEmit = func(ev *pb.Event) { s.deps.Metrics.Frame(pb.KindOf(ev)) }

	spec, known := s.deps.Agent(s.rec.Agent)
	s.spec = spec
	s.status.images = spec.Images

	loadCtx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	kvs, err := s.deps.Writer.Store().LoadKV(loadCtx, s.rec.ID)
	cancel()
	if err != nil {
		// Without its KV the session would write revs the store already
		// holds (and skips): it must not serve. The next request tries a
		// new activation.
		s.log.Error("session KV could not be loaded; not activating", "err", err)
		s.refuseFor(ctx, pb.Err(CodeStoreUnavailable, "the session's state could not be read from the store; try again"))
		return
	}
	s.kv.Load(s.splitApplied(kvs))
	for _, k := range s.kv.Keys() {
		e, _ := s.kv.Durable(k)
		s.hub.Seed(pb.StateOf(k, e.Value, e.Rev, e.Deleted), "state:"+k)
	}

	s.reserved = s.loadReservedIDs()
	s.turns = turn.New(turn.Config{
		Out:         turnOut{s},
		LastID:      s.reserved,
		Reserve:     s.reserveIDs,
		InboxMax:    s.lim.InboxMax,
		PromptBytes: s.lim.PromptBytes,
		InboxBytes:  s.lim.InboxBytes,
		Images:      func() bool { return s.status.images },
		Now:         s.clock.Now,
		Logger:      s.log,
	})

	if s.rec.Status == StatusEnded {
		s.status.status = StatusEnded
		s.listEndedDomains()
		s.emitStatus()
		s.behavior.Become(s.ended)
		return
	}
	if !known {
		s.setStatus(StatusError, codes.UnknownAgent, fmt.Sprintf("the agent %q is not configured on this daemon", s.rec.Agent))
		return
	}
	// The native domains exist before the first status, which lists them.
	s.spawnNativeDomains(ctx)
	s.setStatus(StatusStarting, "", "")
	s.startAgent(ctx)
}

func newEpoch(now time.Time) string {
	return strconv.FormatInt(now.UnixMilli(), 36) + randomSuffix(3)
}

// loadReservedIDs is the highest turn or prompt id the session may have
// handed out before this activation.
func (s *sessionActor) loadReservedIDs() uint64 {
	if s.rec.IDsReserved > 0 {
		return s.rec.IDsReserved
	}
	// A session from before ids were reserved: continue above every id its
	// transcript holds (one read, once).
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entries, err := s.deps.Writer.Store().Transcript(c, s.rec.ID)
	if err != nil {
		s.log.Error("the transcript could not be read to continue its ids", "err", err)
	}
	var last uint64
	for _, en := range entries {
		last = max(last, en.TurnID, en.PromptID)
	}
	return last
}

// reserveIDs makes the store hold a new id block before any id in it is
// handed out (the session row's IDsReserved, which never goes down). The
// write is synchronous: it happens once per idBlock ids.
func (s *sessionActor) reserveIDs(need uint64) uint64 {
	next := max(need, s.reserved) + idBlock - 1
	if !s.deps.Writer.Available() {
		// Prompts are refused meanwhile; a run the agent starts on its own
		// still needs a turn id, and the actor must not wait on a store
		// that does not answer.
		s.log.Error("turn ids could not be reserved: the store is unavailable", "upTo", next)
		s.reserved = next
		return next
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.deps.Writer.Store().UpdateSession(c, s.rec.ID, s.fence(), store.SessionUpdate{IDsReserved: &next}); err != nil {
		// The ids are handed out anyway (refusing the prompt is worse); a
		// crash before the next reservation could repeat them.
		s.log.Error("turn ids could not be reserved", "err", err, "upTo", next)
	}
	s.reserved = next
	return next
}

// end ends the session for good: the agent stops, the turn and the inbox
// are answered, every client gets end, and the actor becomes ended.
func (s *sessionActor) end(ctx actor.Context, reason, code, detail string) {
	s.stopAgent(ctx)
	s.dropScratch(true)
	s.turns.Close("the session ended")
	for _, d := range s.domains {
		// The domain stays listed (unavailable, its snapshot readable);
		// its actors go: an ended session takes no commands.
		ctx.Stop(d.pid)
		if d.data != nil {
			ctx.Stop(d.data)
		}
		d.pid, d.data, d.hasData = nil, nil, false
	}
	s.setStatus(StatusEnded, code, detail)
	s.endStream(reason)
	s.behavior.Become(s.ended)
	s.used() // it lingers from its end
}

// sleep stops the agent without ending the session (shutdown, idle, moved):
// the next request wakes it, here or on another node.
func (s *sessionActor) sleep(ctx actor.Context, why string) {
	s.stopAgent(ctx)
	s.turns.Close("the session was put to sleep (" + why + ")")
	s.status.status = StatusIdle
	s.persistStatus()
}

// stop answers Stop: DELETE ends the session; shutdown, idle and moved put
// it to sleep and stop the actor once it has finished what it started
// (drain.go); deleted (DELETE ?purge=true) ends it and
// stops the actor, whose rows are deleted next.
func (s *sessionActor) stop(ctx actor.Context, m *pb.Stop) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.StopResult{Error: notFound()})
		return
	}
	switch m.GetReason() {
	case StopDeleted:
		s.end(ctx, StopDeleted, "", "")
		s.flush(ctx)
		s.leave(ctx)
		ctx.Respond(&pb.StopResult{Ok: true})
	case "shutdown", "idle", "moved":
		s.startDrain(ctx, m)
	default:
		s.end(ctx, "stopped", "", "")
		ctx.Respond(&pb.StopResult{Ok: true})
	}
}

// stopEnded answers Stop for an ended session: it is over already; a
// shutdown stops the actor.
func (s *sessionActor) stopEnded(ctx actor.Context, m *pb.Stop) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.StopResult{Error: notFound()})
		return
	}
	switch m.GetReason() {
	case "shutdown", "idle", "moved", StopDeleted:
		s.endStream(m.GetReason())
		s.flush(ctx)
		s.leave(ctx)
		ctx.Respond(&pb.StopResult{Ok: true})
	default:
		ctx.Respond(&pb.StopResult{Ok: true})
	}
}

// stopping runs as the actor stops, whatever the reason.
func (s *sessionActor) stopping(ctx actor.Context) {
	if s.cfg.OnStopping != nil {
		s.cfg.OnStopping(ctx.Self())
	}
	if s.activated && s.deps.Deactivated != nil {
		s.deps.Deactivated(s.rec.ID, ctx.Self())
	}
	if s.deps.Leaser != nil && s.hub != nil && !s.hub.Ending() && s.refusal == nil {
		// A cluster grain stopped without saying goodbye: the cluster moved
		// its identity to another member (rebalancing) or this member is
		// leaving. Its clients reconnect and find it there.
		s.endStream("moved")
		s.flush(ctx)
	}
	// Prompts whose record is in flight: it may land, or not, after this.
	s.answerPrompts(ctx, pb.Err(CodeOutcomeUnknown, "the session stopped before the prompt's record was confirmed: it may or may not be in the transcript"))
	s.refuseWaiting(ctx, pb.Err(CodeMoved, "the session stopped here before its agent was ready; try again"))
	s.idle.off = true
	s.stopIdleTimer()
	s.releaseLease()
	s.dropScratch(false)
	s.agent.stopTimer()
	if s.agent.pid != nil {
		s.agent.expectExit = true
		ctx.Stop(s.agent.pid)
		s.agent.pid = nil
	}
}

func (s *sessionActor) stopped() {
	s.diagLog.Close()
	if s.activated {
		s.deps.Metrics.SessionDown()
	}
}

// ---------------------------------------------------------------------------
// Delivery

func (s *sessionActor) emit(ev *pb.Event, sticky string) { s.hub.Emit(ev, sticky) }

// diagnostic tells every client that something the agent did was refused
// or dropped. Its log records are rate-limited: the agent decides how many
// there are.
func (s *sessionActor) diagnostic(code, message string) {
	s.diagLog.Log(slog.LevelWarn, "diagnostic", "code", code, "message", message)
	s.emit(pb.DiagnosticOf(code, message), "")
}

// flush sends what was emitted while handling this message to every
// subscriber in one batch.
func (s *sessionActor) flush(ctx actor.Context) {
	s.sendStatus()
	if s.hub != nil {
		s.hub.Flush(ctx)
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
	sub := hub.Subscriber{PID: pid, Kind: m.GetClientKind(), Subject: m.GetSubject()}
	var res *pb.SubscribeResult
	switch m.GetFrom() {
	case pb.SubscribeFrom_SUBSCRIBE_FROM_NOW:
		res = s.hub.SubscribeNow(ctx, sub)
	case pb.SubscribeFrom_SUBSCRIBE_FROM_TURN_START:
		var ok bool
		if res, ok = s.hub.SubscribeTurn(ctx, sub); !ok {
			ctx.Respond(&pb.SubscribeResult{Error: pb.Err(CodeTurnNotReplayable, fmt.Sprintf(
				"the running turn began before the session's replay window (the last %d frames, %d bytes): its chunks so far are gone; read the session's messages once it ends",
				s.lim.ReplayFrames, s.lim.ReplayBytes))})
			return
		}
		if res.GetMode() == hub.ModeIdle {
			ctx.Respond(res)
			return
		}
	default:
		res = s.hub.Subscribe(ctx, sub, m.GetLastEventId())
	}
	s.deps.Metrics.Subscribed(res.GetMode())
	ctx.Respond(res)
}

func (s *sessionActor) unsubscribe(ctx actor.Context, m *pb.Unsubscribe) {
	if p := m.GetSubscriber().Actor(); p != nil {
		s.hub.Unsubscribe(ctx, p)
	}
}

func (s *sessionActor) terminated(m *actor.Terminated) {
	if s.hub != nil {
		s.hub.Gone(m.Who)
	}
}

// ---------------------------------------------------------------------------
// Refusals

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

// refuseEnded answers a write (or a subscription) to an ended session.
func (s *sessionActor) refuseEnded(ctx actor.Context) {
	ended := pb.Err(CodeEnded, "the session has ended")
	var caller *pb.Caller
	if c, ok := ctx.Message().(interface{ GetCaller() *pb.Caller }); ok {
		caller = c.GetCaller()
	}
	if sub, ok := ctx.Message().(*pb.Subscribe); ok {
		caller = &pb.Caller{Subject: sub.GetSubject()}
	}
	if !s.allowed(caller) {
		ended = notFound()
	}
	switch ctx.Message().(type) {
	case *pb.Subscribe:
		ctx.Respond(&pb.SubscribeResult{Error: ended})
	case *pb.Prompt:
		ctx.Respond(&pb.PromptResult{Error: ended})
	case *pb.Abort:
		ctx.Respond(&pb.AbortResult{Error: ended})
	case *pb.RunCommand:
		s.deps.Metrics.Command(ended.GetCode())
		ctx.Respond(&pb.CommandResult{Refused: ended})
	case *pb.SetState:
		ctx.Respond(&pb.SetStateResult{Error: ended})
	case *pb.UIResponse:
		ctx.Respond(&pb.UIResponseResult{Error: ended})
	case *pb.SurfaceFetch:
		ctx.Respond(&pb.SurfaceFetchResult{Refused: ended})
	}
}

// refuseUnknown answers a request this activation cannot serve with why (a
// bare *pb.Error, which the cluster directory reads as "ask again" or "no
// such session").
func (s *sessionActor) refuseUnknown(ctx actor.Context) {
	if _, ok := ctx.Message().(proto.Message); !ok || ctx.Sender() == nil {
		return
	}
	e := s.refusal
	if e == nil {
		e = pb.Err(CodeMoved, "the session is not active here yet; try again")
	}
	ctx.Respond(e)
}

// refuseFor makes this activation answer every request with e, then stop.
func (s *sessionActor) refuseFor(ctx actor.Context, e *pb.Error) {
	s.refusal = e
	s.behavior.Become(s.refusing)
	// Requests already queued are answered first (poison is a user message).
	ctx.Poison(ctx.Self())
}

// ---------------------------------------------------------------------------
// Status

// statusLine is the session's status as its clients see it.
type statusLine struct {
	status string
	code   string
	detail string
	// images: prompts may carry images (the agent's model takes them).
	images bool
	// due: the status changed while handling this message; its frame has
	// not gone out yet.
	due bool
}

// emitStatus says that the session's status changed (its status, busy,
// queued, title, images, or a domain's availability). Its frame goes out
// once per message, behind what the message emitted (sendStatus, from
// flush), built from the state as the message leaves it: the state GET
// /api/sessions/{id} reads next. Built at once, it would show what the
// message changes after (an agent stopped just after its session was set
// to error still looked available), and nothing might send it again.
func (s *sessionActor) emitStatus() { s.status.due = true }

// sendStatus emits the session frame now, when one is due.
func (s *sessionActor) sendStatus() {
	if !s.status.due || s.hub == nil {
		return
	}
	s.status.due = false
	surfaces := s.surfaceInfos()
	for _, d := range surfaces {
		d.Rev = 0 // revs travel in state frames; the status changes when availability does
	}
	st := s.status
	s.emit(pb.StatusOf(&pb.StatusEvent{Status: st.status, Busy: s.turns.Busy(), Code: st.code, Detail: st.detail,
		Title: s.rec.Title, Queued: uint32(s.turns.Queued()), Images: st.images, Surfaces: surfaces}), "session")
}

// endStream ends every subscription: the status due goes first, the end
// frame last.
func (s *sessionActor) endStream(reason string) {
	s.sendStatus()
	s.hub.End(reason)
}

func (s *sessionActor) setStatus(status, code, detail string) {
	changed := status != s.status.status
	s.status.status, s.status.code, s.status.detail = status, code, detail
	s.emitStatus()
	if changed {
		s.persistStatus()
	}
}

func (s *sessionActor) persistStatus() {
	st := s.status.status
	s.submit(store.Op{Update: &store.SessionUpdate{Status: &st}})
}

func (s *sessionActor) setTitle(title string) {
	if title == s.rec.Title {
		return
	}
	s.rec.Title = title
	s.submit(store.Op{Update: &store.SessionUpdate{Title: &title}})
	s.emitStatus()
}

func (s *sessionActor) summary() *pb.SessionSummary {
	return &pb.SessionSummary{
		SessionId:   s.rec.ID,
		Agent:       s.rec.Agent,
		Title:       s.rec.Title,
		Status:      s.status.status,
		Busy:        s.turns.Busy(),
		Owner:       s.rec.Owner,
		Cwd:         s.rec.Cwd,
		CreatedAtMs: s.rec.Created.UnixMilli(),
		UpdatedAtMs: s.rec.Updated.UnixMilli(),
		Surfaces:    s.surfaceInfos(),
		Code:        s.status.code,
		Detail:      s.status.detail,
		Queued:      uint32(s.turns.Queued()),
		Images:      s.status.images,
		Epoch:       s.hub.Log().Epoch(),
		Head:        s.hub.Log().Head(),
		Node:        s.deps.NodeID,
	}
}

// learnModel sets whether prompts may carry images from the model a plain pi
// agent runs (its models.json input ["text","image"]). An agent configured
// with images: true keeps them whatever the model says; one that announced
// surfaced/1 said so itself.
func (s *sessionActor) learnModel(m *procModel) {
	if s.agent.announced {
		return
	}
	images := s.spec.Images || m.AcceptsImages()
	if m != nil {
		s.log.Info("agent model", "provider", m.Provider, "model", m.ID, "images", images)
	}
	if images != s.status.images {
		s.status.images = images
		s.emitStatus()
	}
}

var _ = surface.HostedAgent
