package acpgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	acp "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Messages to an attachment. They come from the HTTP handlers of the same
// node (the attachment stands in for one client's attachment), so they are
// plain Go values.

// promptRequest is a session/prompt whose answer is held until its turn ends.
type promptRequest struct {
	id     json.RawMessage
	text   string
	images []*pb.Image
}

// cancelRequest is a session/cancel.
type cancelRequest struct{}

// holdLive makes the attachment keep its outbound messages until releaseLive
// (a session/load replay goes out first).
type holdLive struct{}

type releaseLive struct{ done chan struct{} }

// detach ends the attachment: held prompts answer cancelled, dialog requests
// are withdrawn, the actor stops (and so unsubscribes). done, when set, is
// closed when that is done.
type detach struct{ done chan struct{} }

// permissionAnswer is the client's answer to a session/request_permission.
type permissionAnswer struct {
	dialogID string
	result   json.RawMessage
	err      *acp.RequestError
}

// subscribed is the end of the attachment's subscription attempt.
type subscribed struct {
	err *acp.RequestError
}

// stopNow stops an attachment that lingered after it ended.
type stopNow struct{}

// command is a request to the session.
type command struct {
	prompt *pb.Prompt
	held   *heldPrompt
	req    *promptRequest // the prompt's request, for another attachment when the session is gone
	abort  bool
}

// heldPrompt is a session/prompt request waiting for the end of the turn
// that answers it.
type heldPrompt struct {
	id       json.RawMessage
	tag      string
	promptID uint64
	done     bool
}

// finishGrace is how long an ended attachment's actor lingers: a prompt sent
// by a handler that found it just before it ended still reaches it, and is
// passed on to a new one.
const finishGrace = 2 * time.Second

// attachment is one ACP session attached to one connection. It is the sink
// of a delivery subscriber actor (client kind "acp"): it renders the
// session's frames as session/update notifications on the connection's
// session stream (render.go), puts the connection's prompts and cancels to
// the session in the order they came, holds each session/prompt request
// until the turn that answers it ends, and puts the agent's dialogs to the
// editor (dialogs.go). Its methods run on the actor's goroutine.
type attachment struct {
	srv       *Server
	conn      *conn
	sessionID string
	agent     string
	entry     *attachedSession
	caller    *pb.Caller
	payloads  bool

	self      *actor.PID
	root      *actor.RootContext
	tagPrefix string
	nextTag   uint64

	subscribed bool
	finished   bool
	gone       bool       // the session actor terminated; frames queued before that still count
	session    *actor.PID // the session actor, once it sent frames
	cmds       []command  // waiting for the subscription and the session's PID
	held       []*heldPrompt
	holding    bool
	parked     []func()
	dialogs    map[string]*dialogCall
	turnError  string
	// turnPrompts are the prompt ids the running turn answers (from its
	// start): whether the turn is this editor's own.
	turnPrompts []uint64
}

var (
	_ delivery.Sink                = (*attachment)(nil)
	_ delivery.Receiver            = (*attachment)(nil)
	_ delivery.TerminationListener = (*attachment)(nil)
)

// spawnAttachment starts the attachment of a session to c; hold starts it
// holding live updates back (session/load).
func spawnAttachment(c *conn, sessionID, agent string, entry *attachedSession, hold bool, q *delivery.Queue) *actor.PID {
	a := &attachment{srv: c.srv, conn: c, sessionID: sessionID, agent: agent, entry: entry, holding: hold,
		caller: &pb.Caller{Subject: c.subject, Via: "acp"}, payloads: !c.srv.opts.WithholdToolPayloads,
		dialogs: map[string]*dialogCall{}}
	var opts []actor.PropsOption
	if c.srv.opts.Props != nil {
		opts = c.srv.opts.Props("acp", sessionID)
	}
	return c.srv.sys().Root.SpawnPrefix(delivery.Props(a, q, opts...), "acp-")
}

func newTagPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "acp-" + hex.EncodeToString(b[:]) + "-"
}

// Receive routes the attachment's own messages; the subscriber actor routes
// the session's frames to Frames and Gone.
func (a *attachment) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case *subscribed:
		a.onSubscribed(ctx, m)
	case *promptRequest:
		a.onPrompt(ctx, m)
	case *cancelRequest:
		a.onCancel(ctx)
	case *holdLive:
		a.hold()
	case *releaseLive:
		a.release()
		close(m.done)
	case *permissionAnswer:
		a.onPermission(m)
	case *detach:
		a.finish(ctx, "")
		if m.done != nil {
			close(m.done)
		}
	case *stopNow:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		if a.subscribed {
			a.srv.rt.Metrics().ClientDown("acp")
		}
	}
}

// Frames implements delivery.Sink: the session's frames, rendered.
func (a *attachment) Frames(ctx actor.Context, b *pb.Frames) bool {
	frames, final := b.GetFrames(), b.GetFinal()
	if a.finished {
		return true // a lingering attachment shows nothing
	}
	if a.session == nil && ctx.Sender() != nil {
		a.session = ctx.Sender()
		a.pump(ctx)
	}
	for _, f := range frames {
		a.frame(f)
	}
	if final {
		a.finish(ctx, "the session ended its stream")
	}
	return true
}

// SessionTerminated implements delivery.TerminationListener: the session
// actor is gone, its last frames may still be on their way here. From now
// on the connection forgets this attachment, so that a prompt sent now
// (already queued here, or still to come) goes to a new one, which finds the
// session where it lives now (its node may have died).
func (a *attachment) SessionTerminated(actor.Context) {
	a.gone = true
	a.conn.detached(a.sessionID, a.entry)
}

// Gone implements delivery.Sink: the session went away, after its last
// frames.
func (a *attachment) Gone(ctx actor.Context) {
	a.finish(ctx, "the session went away")
}

func (a *attachment) started(ctx actor.Context) {
	a.self = ctx.Self()
	a.root = ctx.ActorSystem().Root
	a.tagPrefix = newTagPrefix()
	go a.subscribe()
}

// subscribe runs on its own goroutine: it checks that the session is the
// caller's and the connection's agent's (in the store, without waking the
// session for a stranger), then subscribes the actor.
func (a *attachment) subscribe() {
	ctx, cancel := context.WithTimeout(a.conn.ctx, a.srv.opts.RequestTimeout)
	defer cancel()
	if e := a.srv.owned(ctx, a.conn, a.sessionID, a.agent); e != nil {
		a.root.Send(a.self, &subscribed{err: e})
		return
	}
	r, err := delivery.Subscribe(ctx, a.srv.rt, a.sessionID, a.self, &pb.Subscribe{ClientKind: "acp", Subject: a.conn.subject})
	if err != nil {
		var quota *surfaced.QuotaError
		switch {
		case errors.Is(err, session.ErrNotFound):
			a.root.Send(a.self, &subscribed{err: errNoSuchSession()})
			return
		case errors.As(err, &quota):
			a.root.Send(a.self, &subscribed{err: errTooManySessions(quota)})
			return
		case errors.Is(err, session.ErrTooManySessions):
			a.root.Send(a.self, &subscribed{err: errTooManySessions(&surfaced.QuotaError{Scope: surfaced.QuotaTotal})})
			return
		}
		a.srv.log.Error("acp subscribe failed", "connection", a.conn.id, "session", a.sessionID, "err", err)
		if code := storeErrCode(err); code != "" {
			a.root.Send(a.self, &subscribed{err: errStore(code)})
			return
		}
		a.root.Send(a.self, &subscribed{err: errInternal(codes.Unavailable)})
		return
	}
	if e := r.GetError(); e != nil {
		switch e.GetCode() {
		case codes.NotFound, codes.SessionEnded:
			a.root.Send(a.self, &subscribed{err: errNoSuchSession()})
		default:
			a.srv.log.Error("acp subscribe refused", "connection", a.conn.id, "session", a.sessionID, "code", e.GetCode(), "message", e.GetMessage())
			a.root.Send(a.self, &subscribed{err: errInternal(e.GetCode())})
		}
		return
	}
	a.root.Send(a.self, &subscribed{})
}

func (a *attachment) onSubscribed(ctx actor.Context, m *subscribed) {
	if m.err != nil {
		a.entry.err = m.err
		close(a.entry.ready)
		a.holding = false
		// Prompts that came before the refusal get it too.
		for _, h := range slices.Clone(a.held) {
			a.answer(h, nil, m.err)
		}
		a.finished = true
		a.conn.detached(a.sessionID, a.entry)
		a.stopLater(ctx)
		return
	}
	a.subscribed = true
	a.srv.rt.Metrics().ClientUp("acp")
	close(a.entry.ready)
	a.pump(ctx)
}

// onPrompt holds a session/prompt request and queues its prompt for the
// session. A prompt sent just as this attachment ended (the session slept
// or went away) goes to a new attachment, which takes it or refuses it.
func (a *attachment) onPrompt(ctx actor.Context, m *promptRequest) {
	if a.finished || a.gone {
		next := a.conn.attach(a.sessionID, a.agent, false)
		if next.pid == nil {
			a.conn.respond(m.id, nil, next.err)
			return
		}
		ctx.Send(next.pid, m)
		return
	}
	a.nextTag++
	h := &heldPrompt{id: m.id, tag: a.tagPrefix + strconv.FormatUint(a.nextTag, 10)}
	a.held = append(a.held, h)
	a.cmds = append(a.cmds, command{held: h, req: m, prompt: &pb.Prompt{Caller: a.caller, Message: m.text, Images: m.images, ClientTag: h.tag}})
	a.pump(ctx)
}

func (a *attachment) onCancel(ctx actor.Context) {
	if a.finished {
		return
	}
	a.cmds = append(a.cmds, command{abort: true})
	a.pump(ctx)
}

// pump sends the waiting commands to the session actor, straight from this
// actor: the session sees this client's prompts and cancels in the order it
// sent them, and each answer comes back here.
func (a *attachment) pump(ctx actor.Context) {
	if !a.subscribed || a.finished || a.session == nil {
		return
	}
	cmds := a.cmds
	a.cmds = nil
	for _, cmd := range cmds {
		var msg proto.Message = cmd.prompt
		if cmd.abort {
			msg = &pb.Abort{Caller: a.caller}
		}
		fut := ctx.RequestFuture(a.session, msg, a.srv.opts.RequestTimeout)
		ctx.ReenterAfter(fut, func(res any, err error) { a.commandDone(ctx, cmd, res, err) })
	}
}

func (a *attachment) commandDone(ctx actor.Context, cmd command, res any, err error) {
	if cmd.abort {
		if err != nil {
			a.srv.log.Warn("acp cancel did not reach the session", "connection", a.conn.id, "session", a.sessionID, "err", err)
		}
		return
	}
	h := cmd.held
	if h.done {
		return
	}
	switch {
	case errors.Is(err, actor.ErrDeadLetter):
		// The session actor stopped as the prompt went out (it slept, or
		// moved): a new attachment finds it where it lives now.
		a.held = slices.DeleteFunc(a.held, func(x *heldPrompt) bool { return x == h })
		h.done = true
		a.gone = true
		a.conn.detached(a.sessionID, a.entry)
		a.onPrompt(ctx, cmd.req)
		return
	case err != nil:
		a.srv.log.Error("acp prompt did not reach the session", "connection", a.conn.id, "session", a.sessionID, "err", err)
		a.answer(h, nil, errInternal(codes.Unavailable))
		return
	}
	r, _ := res.(*pb.PromptResult)
	if e := r.GetError(); e != nil {
		switch e.GetCode() {
		case codes.NotFound, codes.SessionEnded:
			a.answer(h, nil, errNoSuchSession())
		case codes.ImagesNotSupported:
			a.answer(h, nil, errInvalidParams("prompt", `This agent does not accept "image" content in a prompt.`))
		case codes.EmptyPrompt:
			a.answer(h, nil, errInvalidParams("prompt", "The prompt carried no text."))
		case codes.StoreUnavailable, codes.OutcomeUnknown:
			a.answer(h, nil, errStore(e.GetCode()))
		case codes.ShuttingDown:
			// The session is stopping with the daemon: the prompt was not
			// recorded (as the connection's own shutdown answers).
			a.answer(h, nil, errInternal(codes.ShuttingDown))
		case codes.TooLarge:
			// The session names the limit: "the prompt is N bytes, over the
			// M-byte limit (limits.prompt_bytes)".
			a.answer(h, nil, errInvalidParams("prompt", "%s", upperFirst(e.GetMessage())+"."))
		default:
			a.srv.log.Warn("acp prompt refused by the session", "connection", a.conn.id, "session", a.sessionID, "code", e.GetCode(), "message", e.GetMessage())
			a.answer(h, nil, errInternal(e.GetCode()))
		}
		return
	}
	if h.promptID == 0 {
		h.promptID = r.GetPromptId()
	}
}

// answer responds to a held prompt once.
func (a *attachment) answer(h *heldPrompt, result any, rerr *acp.RequestError) {
	if h.done {
		return
	}
	h.done = true
	a.deliver(func() { a.conn.respond(h.id, result, rerr) })
	a.held = slices.DeleteFunc(a.held, func(x *heldPrompt) bool { return x == h })
}

// turnEnded answers, in the order they were sent, the held prompts the
// turn consumed. Every update of the turn was delivered before this.
func (a *attachment) turnEnded(promptIDs []uint64, stop string) {
	var result any
	var rerr *acp.RequestError
	switch stop {
	case "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled":
		result = map[string]string{"stopReason": stop}
	case "error":
		// The detail stays in the log; the editor gets the code only.
		a.srv.log.Warn("acp turn failed", "connection", a.conn.id, "session", a.sessionID, "error", a.turnError)
		rerr = errInternal(codes.TurnFailed)
	default:
		result = map[string]string{"stopReason": "end_turn"}
	}
	for _, h := range slices.Clone(a.held) {
		if h.promptID != 0 && slices.Contains(promptIDs, h.promptID) {
			a.answer(h, result, rerr)
		}
	}
	a.turnError = ""
}

// ownTurn reports whether the running turn answers a prompt this editor sent.
func (a *attachment) ownTurn() bool {
	for _, h := range a.held {
		if h.promptID != 0 && slices.Contains(a.turnPrompts, h.promptID) {
			return true
		}
	}
	return false
}

// send sends an encoded message on the session's stream.
func (a *attachment) send(msg []byte) {
	a.deliver(func() { a.conn.push(a.sessionID, msg) })
}

// update sends one session/update on the session's stream.
func (a *attachment) update(u acp.SessionUpdate) {
	n := acp.SessionNotification{SessionId: acp.SessionId(a.sessionID), Update: u}
	a.deliver(func() { a.conn.notify(a.sessionID, "session/update", n) })
}

// deliver sends now, or parks while a load replay goes out.
func (a *attachment) deliver(send func()) {
	if a.holding {
		a.parked = append(a.parked, send)
		return
	}
	send()
}

func (a *attachment) hold() {
	if !a.finished {
		a.holding = true
	}
}

func (a *attachment) release() {
	a.holding = false
	parked := a.parked
	a.parked = nil
	for _, send := range parked {
		send()
	}
}

// finish ends the attachment: held prompts answer cancelled (the session
// cannot answer them here any more), dialog requests are withdrawn.
func (a *attachment) finish(ctx actor.Context, why string) {
	if a.finished {
		return
	}
	a.finished = true
	for _, h := range slices.Clone(a.held) {
		a.answer(h, map[string]string{"stopReason": string(acp.StopReasonCancelled)}, nil)
	}
	a.withdrawDialogs()
	a.release()
	a.conn.detached(a.sessionID, a.entry)
	if why != "" {
		a.srv.log.Info("acp session detached", "connection", a.conn.id, "session", a.sessionID, "why", why)
	}
	a.stopLater(ctx)
}

// stopLater stops the actor after finishGrace.
func (a *attachment) stopLater(ctx actor.Context) {
	self, root := ctx.Self(), a.root
	time.AfterFunc(finishGrace, func() { root.Send(self, &stopNow{}) })
}

// upperFirst makes a session's message ("the prompt is …") an editor's
// sentence.
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
