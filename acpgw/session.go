package acpgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	acp "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/actors/session"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Messages to a session gateway actor. They come from the HTTP handlers of
// the same node (the actor stands in for one client's attachment), so they
// are plain Go values.

// promptRequest is a session/prompt whose answer is held until its turn ends.
type promptRequest struct {
	id     json.RawMessage
	text   string
	images []*pb.Image
}

// cancelRequest is a session/cancel.
type cancelRequest struct{}

// holdLive makes the actor keep its outbound messages until releaseLive (a
// session/load replay goes out first).
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

// Results of the actor's own goroutines.
type subscribed struct {
	err *acp.RequestError
}

type commandDone struct {
	cmd command
	res proto.Message
	err error
}

// command is a request to the session, sent one at a time in order.
type command struct {
	prompt *pb.Prompt
	held   *heldPrompt
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

// dialogCall is an agent dialog put to the client as session/request_permission.
type dialogCall struct {
	callID  json.RawMessage
	method  string
	options []string
}

// sessionGateway is the gateway actor of one ACP session attached to one
// connection: it subscribes to the session actor like a browser's gateway
// actor (client kind "acp"), turns its frames into session/update
// notifications on the connection's session stream, holds session/prompt
// requests until the turn that answers them ends, and puts agent dialogs to
// the editor as session/request_permission.
type sessionGateway struct {
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
	watching   bool
	finished   bool
	gone       bool // the session actor terminated; frames queued before that still count
	cmds       []command
	sending    bool
	held       []*heldPrompt
	holding    bool
	parked     []func()
	dialogs    map[string]*dialogCall
	tools      map[string]string // toolCallId -> tool name, for failed calls
	turnError  string
	// turnPrompts are the prompt ids the running turn answers (from its
	// start chunk): whether the turn is this editor's own.
	turnPrompts []uint64
}

// attach returns the session's attachment on this connection, spawning its
// gateway actor when there is none. The actor checks ownership and
// subscribes; a.ready closes when that is decided (a.err tells how). hold
// starts it holding live updates back (session/load), or asks a running one
// to.
func (c *conn) attach(sessionID, agent string, hold bool) *attachedSession {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		a := &attachedSession{ready: make(chan struct{}), err: errInternal("connection_closed")}
		close(a.ready)
		return a
	}
	if a := c.sessions[sessionID]; a != nil {
		c.mu.Unlock()
		if hold {
			c.srv.sys().Root.Send(a.pid, &holdLive{})
		}
		return a
	}
	a := &attachedSession{ready: make(chan struct{})}
	g := &sessionGateway{srv: c.srv, conn: c, sessionID: sessionID, agent: agent, entry: a, holding: hold,
		caller: &pb.Caller{Subject: c.subject, Via: "acp"}, payloads: !c.srv.opts.WithholdToolPayloads,
		dialogs: map[string]*dialogCall{}, tools: map[string]string{}}
	var opts []actor.PropsOption
	if c.srv.opts.Props != nil {
		opts = c.srv.opts.Props("acp", sessionID)
	}
	a.pid = c.srv.sys().Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return g }, append([]actor.PropsOption{dispatch.Option()}, opts...)...), "acp-")
	c.sessions[sessionID] = a
	c.mu.Unlock()
	return a
}

// lookupSession returns the attachment of a session, or nil.
func (c *conn) lookupSession(sessionID string) *attachedSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[sessionID]
}

// detach ends a session's attachment; the returned channel closes when its
// held prompts were answered. Nil when the session is not attached.
func (c *conn) detach(sessionID string) chan struct{} {
	c.mu.Lock()
	a := c.sessions[sessionID]
	delete(c.sessions, sessionID)
	c.mu.Unlock()
	if a == nil {
		return nil
	}
	done := make(chan struct{})
	c.srv.sys().Root.Send(a.pid, &detach{done: done})
	return done
}

// detached forgets an attachment whose actor stopped on its own.
func (c *conn) detached(sessionID string, a *attachedSession) {
	c.mu.Lock()
	if c.sessions[sessionID] == a {
		delete(c.sessions, sessionID)
	}
	c.mu.Unlock()
}

func newTagPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "acp-" + hex.EncodeToString(b[:]) + "-"
}

func (g *sessionGateway) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.self = ctx.Self()
		g.root = ctx.ActorSystem().Root
		g.tagPrefix = newTagPrefix()
		go g.subscribe()
	case *subscribed:
		g.onSubscribed(ctx, m)
	case *pb.Frames:
		if g.finished {
			return // a lingering attachment shows nothing
		}
		if !g.watching && ctx.Sender() != nil {
			// Know when the session actor goes away without an end frame.
			ctx.Watch(ctx.Sender())
			g.watching = true
		}
		for _, f := range m.GetFrames() {
			g.frame(f)
		}
		if m.GetFinal() {
			g.finish(ctx, "the session ended its stream")
		}
	case *actor.Terminated:
		// A system message: it overtakes the frames the session sent before
		// it stopped (the end of a turn, say) if they still wait in this
		// mailbox. Handle it behind them, as a user message. Meanwhile the
		// connection forgets this attachment, so that a prompt sent now
		// (already queued here, or still to come) goes to a new one, which
		// finds the session where it lives now (its node may have died).
		g.gone = true
		g.conn.detached(g.sessionID, g.entry)
		ctx.Send(ctx.Self(), sessionGone{})
	case sessionGone:
		if !g.finished {
			g.finish(ctx, "the session went away")
		}
	case *promptRequest:
		if g.finished || g.gone {
			// Sent just as this attachment ended (the session slept or
			// went away): a new attachment takes it, or refuses it.
			a := g.conn.attach(g.sessionID, g.agent, false)
			if a.pid == nil {
				g.conn.respond(m.id, nil, a.err)
				return
			}
			ctx.Send(a.pid, m)
			return
		}
		g.onPrompt(m)
	case *cancelRequest:
		if g.finished {
			return
		}
		g.cmds = append(g.cmds, command{abort: true})
		g.pump()
	case *commandDone:
		g.sending = false
		g.onCommandDone(m)
		g.pump()
	case *holdLive:
		if !g.finished {
			g.holding = true
		}
	case *releaseLive:
		g.release()
		close(m.done)
	case *permissionAnswer:
		g.onPermission(m)
	case *detach:
		g.finish(ctx, "")
		if m.done != nil {
			close(m.done)
		}
	case *stopNow:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		if g.subscribed {
			g.srv.rt.Metrics().ClientDown("acp")
		}
	}
}

// subscribe runs on its own goroutine: it checks that the session is the
// caller's and the connection's agent's (in the store, without waking the
// session for a stranger), then subscribes the actor.
func (g *sessionGateway) subscribe() {
	ctx, cancel := context.WithTimeout(g.conn.ctx, requestTimeout)
	defer cancel()
	if e := g.srv.owned(ctx, g.conn, g.sessionID, g.agent); e != nil {
		g.root.Send(g.self, &subscribed{err: e})
		return
	}
	res, err := g.srv.rt.Request(ctx, g.sessionID, &pb.Subscribe{Subscriber: pb.PidOf(g.self), ClientKind: "acp", Subject: g.conn.subject})
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			g.root.Send(g.self, &subscribed{err: errNoSuchSession()})
			return
		}
		g.srv.log.Error("acp subscribe failed", "connection", g.conn.id, "session", g.sessionID, "err", err)
		g.root.Send(g.self, &subscribed{err: errInternal("unavailable")})
		return
	}
	r := res.(*pb.SubscribeResult)
	if e := r.GetError(); e != nil {
		switch e.GetCode() {
		case session.CodeNotFound, session.CodeEnded:
			g.root.Send(g.self, &subscribed{err: errNoSuchSession()})
		default:
			g.srv.log.Error("acp subscribe refused", "connection", g.conn.id, "session", g.sessionID, "code", e.GetCode(), "message", e.GetMessage())
			g.root.Send(g.self, &subscribed{err: errInternal(e.GetCode())})
		}
		return
	}
	g.root.Send(g.self, &subscribed{})
}

func (g *sessionGateway) onSubscribed(ctx actor.Context, m *subscribed) {
	if m.err != nil {
		g.entry.err = m.err
		close(g.entry.ready)
		g.holding = false
		// Prompts that came before the refusal get it too.
		for _, h := range slices.Clone(g.held) {
			g.answer(h, nil, m.err)
		}
		g.finished = true
		g.conn.detached(g.sessionID, g.entry)
		self, root := ctx.Self(), g.root
		time.AfterFunc(finishGrace, func() { root.Send(self, &stopNow{}) })
		return
	}
	g.subscribed = true
	g.srv.rt.Metrics().ClientUp("acp")
	close(g.entry.ready)
	g.pump()
}

func (g *sessionGateway) onPrompt(m *promptRequest) {
	if g.finished {
		g.conn.respond(m.id, nil, errNoSuchSession())
		return
	}
	g.nextTag++
	h := &heldPrompt{id: m.id, tag: g.tagPrefix + strconv.FormatUint(g.nextTag, 10)}
	g.held = append(g.held, h)
	g.cmds = append(g.cmds, command{held: h, prompt: &pb.Prompt{Caller: g.caller, Message: m.text, Images: m.images, ClientTag: h.tag}})
	g.pump()
}

// pump sends the next command to the session, one at a time, so that the
// session sees this client's prompts and cancels in the order it sent them.
func (g *sessionGateway) pump() {
	if !g.subscribed || g.sending || len(g.cmds) == 0 || g.finished {
		return
	}
	cmd := g.cmds[0]
	g.cmds = g.cmds[1:]
	g.sending = true
	var msg proto.Message = cmd.prompt
	if cmd.abort {
		msg = &pb.Abort{Caller: g.caller}
	}
	go func() {
		ctx, cancel := context.WithTimeout(g.conn.ctx, requestTimeout)
		defer cancel()
		res, err := g.srv.rt.Request(ctx, g.sessionID, msg)
		g.root.Send(g.self, &commandDone{cmd: cmd, res: res, err: err})
	}()
}

func (g *sessionGateway) onCommandDone(m *commandDone) {
	if m.cmd.abort {
		if m.err != nil {
			g.srv.log.Warn("acp cancel did not reach the session", "connection", g.conn.id, "session", g.sessionID, "err", m.err)
		}
		return
	}
	h := m.cmd.held
	if h.done {
		return
	}
	if m.err != nil {
		if errors.Is(m.err, session.ErrNotFound) {
			g.answer(h, nil, errNoSuchSession())
			return
		}
		g.srv.log.Error("acp prompt did not reach the session", "connection", g.conn.id, "session", g.sessionID, "err", m.err)
		g.answer(h, nil, errInternal("unavailable"))
		return
	}
	r, _ := m.res.(*pb.PromptResult)
	if e := r.GetError(); e != nil {
		switch e.GetCode() {
		case session.CodeNotFound, session.CodeEnded:
			g.answer(h, nil, errNoSuchSession())
		case session.CodeImagesRefused:
			g.answer(h, nil, errInvalidParams("prompt", `This agent does not accept "image" content in a prompt.`))
		case session.CodeEmptyPrompt:
			g.answer(h, nil, errInvalidParams("prompt", "The prompt carried no text."))
		default:
			g.srv.log.Warn("acp prompt refused by the session", "connection", g.conn.id, "session", g.sessionID, "code", e.GetCode(), "message", e.GetMessage())
			g.answer(h, nil, errInternal(e.GetCode()))
		}
		return
	}
	if h.promptID == 0 {
		h.promptID = r.GetPromptId()
	}
}

// answer responds to a held prompt once.
func (g *sessionGateway) answer(h *heldPrompt, result any, rerr *acp.RequestError) {
	if h.done {
		return
	}
	h.done = true
	g.deliver(func() { g.conn.respond(h.id, result, rerr) })
	g.held = slices.DeleteFunc(g.held, func(x *heldPrompt) bool { return x == h })
}

// deliver sends now, or parks while a load replay goes out.
func (g *sessionGateway) deliver(send func()) {
	if g.holding {
		g.parked = append(g.parked, send)
		return
	}
	send()
}

func (g *sessionGateway) release() {
	g.holding = false
	parked := g.parked
	g.parked = nil
	for _, send := range parked {
		send()
	}
}

func (g *sessionGateway) update(u acp.SessionUpdate) {
	n := acp.SessionNotification{SessionId: acp.SessionId(g.sessionID), Update: u}
	g.deliver(func() { g.conn.notify(g.sessionID, "session/update", n) })
}

// finish ends the attachment: held prompts answer cancelled (the session
// cannot answer them here any more), dialog requests are withdrawn.
func (g *sessionGateway) finish(ctx actor.Context, why string) {
	if g.finished {
		return
	}
	g.finished = true
	for _, h := range slices.Clone(g.held) {
		g.answer(h, map[string]string{"stopReason": string(acp.StopReasonCancelled)}, nil)
	}
	for id, d := range g.dialogs {
		g.conn.withdraw(d.callID)
		delete(g.dialogs, id)
	}
	g.release()
	g.conn.detached(g.sessionID, g.entry)
	if why != "" {
		g.srv.log.Info("acp session detached", "connection", g.conn.id, "session", g.sessionID, "why", why)
	}
	// Stop a moment later: a prompt sent by a handler that found this
	// attachment just before it ended still reaches it, and is passed on.
	self, root := ctx.Self(), g.root
	time.AfterFunc(finishGrace, func() { root.Send(self, &stopNow{}) })
}

// finishGrace is how long an ended attachment's actor lingers.
const finishGrace = 2 * time.Second

type stopNow struct{}

// ---------------------------------------------------------------------------
// Frames

func (g *sessionGateway) frame(f *pb.Frame) {
	switch e := f.GetEvent().GetEvent().(type) {
	case *pb.Event_Chat:
		g.chat(e.Chat)
	case *pb.Event_UiRequest:
		g.ui(e.UiRequest)
	}
}

// chat renders one chat event as ACP session/update notifications and
// keeps the turn's bookkeeping (held prompts, the failure text).
func (g *sessionGateway) chat(c *pb.ChatEvent) {
	switch e := c.GetChunk().(type) {
	case *pb.ChatEvent_UserMessage:
		um := e.UserMessage
		for _, h := range g.held {
			if h.tag == um.GetTag() {
				h.promptID = um.GetPromptId()
				return // the editor shows its own prompt already
			}
		}
		if strings.HasPrefix(um.GetTag(), g.tagPrefix) {
			return
		}
		// Someone else's prompt (a browser, another editor): show it.
		g.update(acp.UpdateUserMessageText(um.GetText()))
	case *pb.ChatEvent_TurnStart:
		g.turnError = ""
		g.turnPrompts = e.TurnStart.GetPromptIds()
	case *pb.ChatEvent_PartDelta:
		d := e.PartDelta
		if d.GetDelta() == "" {
			return
		}
		if d.GetKind() == pb.PartKind_PART_KIND_REASONING {
			g.update(acp.UpdateAgentThoughtText(d.GetDelta()))
		} else {
			g.update(acp.UpdateAgentMessageText(d.GetDelta()))
		}
	case *pb.ChatEvent_ToolInput:
		t := e.ToolInput
		g.tools[t.GetToolCallId()] = t.GetToolName()
		opts := []acp.ToolCallStartOpt{acp.WithStartKind(kindOf(t.GetToolName())), acp.WithStartStatus(acp.ToolCallStatusInProgress)}
		if g.payloads {
			if v := rawValue(t.GetInput()); v != nil {
				opts = append(opts, acp.WithStartRawInput(v))
			}
		}
		title := t.GetToolName()
		if title == "" {
			title = "tool"
		}
		g.update(acp.StartToolCall(acp.ToolCallId(t.GetToolCallId()), title, opts...))
	case *pb.ChatEvent_ToolOutput:
		t := e.ToolOutput
		id := acp.ToolCallId(t.GetToolCallId())
		if t.GetPreliminary() {
			opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusInProgress)}
			if g.payloads {
				if content := textContent(toolResultText(t.GetOutput())); content != nil {
					opts = append(opts, acp.WithUpdateContent(content))
				}
			}
			g.update(acp.UpdateToolCall(id, opts...))
			return
		}
		delete(g.tools, t.GetToolCallId())
		opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusCompleted)}
		if g.payloads {
			if v := rawValue(t.GetOutput()); v != nil {
				opts = append(opts, acp.WithUpdateRawOutput(v))
			}
			if content := textContent(toolResultText(t.GetOutput())); content != nil {
				opts = append(opts, acp.WithUpdateContent(content))
			}
		}
		g.update(acp.UpdateToolCall(id, opts...))
	case *pb.ChatEvent_ToolError:
		t := e.ToolError
		delete(g.tools, t.GetToolCallId())
		opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusFailed),
			acp.WithUpdateContent(textContent(failedText(t, g.payloads)))}
		if g.payloads {
			if v := rawValue(t.GetOutput()); v != nil {
				opts = append(opts, acp.WithUpdateRawOutput(v))
			}
		}
		g.update(acp.UpdateToolCall(acp.ToolCallId(t.GetToolCallId()), opts...))
	case *pb.ChatEvent_TurnError:
		g.turnError = e.TurnError.GetErrorText()
		// The editor shows why the turn failed in the conversation, once: the
		// answer to the prompt is then the bare -32603.
		if g.turnError != "" {
			g.update(acp.UpdateAgentMessageText("\n\n⚠ " + g.turnError))
		}
	case *pb.ChatEvent_TurnFinish:
		g.turnEnded(e.TurnFinish.GetPromptIds(), e.TurnFinish.GetStopReason())
	}
}

// turnEnded answers, in the order they were sent, the held prompts the
// turn consumed. Every update of the turn was delivered before this.
func (g *sessionGateway) turnEnded(promptIDs []uint64, stop string) {
	var result any
	var rerr *acp.RequestError
	switch stop {
	case "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled":
		result = map[string]string{"stopReason": stop}
	case "error":
		// The detail stays in the log; the editor gets the code only.
		g.srv.log.Warn("acp turn failed", "connection", g.conn.id, "session", g.sessionID, "error", g.turnError)
		rerr = errInternal("turn_failed")
	default:
		result = map[string]string{"stopReason": "end_turn"}
	}
	for _, h := range slices.Clone(g.held) {
		if h.promptID != 0 && slices.Contains(promptIDs, h.promptID) {
			g.answer(h, result, rerr)
		}
	}
	g.turnError = ""
}

// ---------------------------------------------------------------------------
// Dialogs

func (g *sessionGateway) ui(ev *pb.UIRequestEvent) {
	r := struct {
		ID, Method, Title, Message string
		Options                    []string
		Resolved                   bool
	}{ev.GetId(), ev.GetMethod(), ev.GetTitle(), ev.GetMessage(), ev.GetOptions(), ev.GetResolved()}
	if r.Resolved {
		if d := g.dialogs[r.ID]; d != nil {
			delete(g.dialogs, r.ID)
			g.deliver(func() { g.conn.withdraw(d.callID) })
		}
		return
	}
	switch r.Method {
	case "setTitle":
		if r.Title != "" {
			t := r.Title
			g.update(acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{Title: &t}})
		}
	case "input", "editor":
		// ACP has no way to ask for free text. When the turn is this
		// editor's own, nobody else is going to answer: cancel the dialog
		// (the agent hears cancelled) and say so in the conversation. A
		// turn someone else started is left to them (a browser answers it).
		if r.ID == "" || !g.ownTurn() {
			return
		}
		g.update(acp.UpdateAgentMessageText(fmt.Sprintf("\n\n⚠ The agent asked for text (%s%s), which this editor cannot show; the request was cancelled.",
			r.Method, titleSuffix(r.Title))))
		resp := &pb.UIResponse{Caller: g.caller, Id: r.ID, Which: "cancelled"}
		sid, rt, log := g.sessionID, g.srv.rt, g.srv.log
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			defer cancel()
			if _, err := rt.Request(ctx, sid, resp); err != nil {
				log.Warn("acp: cancelling a dialog the editor cannot show failed", "session", sid, "err", err)
			}
		}()
	case "confirm", "select":
		if r.ID == "" || g.dialogs[r.ID] != nil {
			return
		}
		d := &dialogCall{method: r.Method, options: r.Options}
		var options []acp.PermissionOption
		if r.Method == "confirm" {
			options = []acp.PermissionOption{
				{OptionId: "allow", Name: "Yes", Kind: acp.PermissionOptionKindAllowOnce},
				{OptionId: "reject", Name: "No", Kind: acp.PermissionOptionKindRejectOnce},
			}
		} else {
			if len(r.Options) == 0 {
				return
			}
			for i, o := range r.Options {
				options = append(options, acp.PermissionOption{OptionId: acp.PermissionOptionId("choice-" + strconv.Itoa(i)),
					Name: o, Kind: acp.PermissionOptionKindAllowOnce})
			}
		}
		title := r.Title
		if r.Message != "" {
			if title != "" {
				title += ": "
			}
			title += r.Message
		}
		if title == "" {
			title = "The agent asks"
		}
		kind := acp.ToolKindOther
		status := acp.ToolCallStatusPending
		params := acp.RequestPermissionRequest{SessionId: acp.SessionId(g.sessionID), Options: options,
			ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId("dialog-" + r.ID), Title: &title, Kind: &kind, Status: &status}}
		g.dialogs[r.ID] = d
		dialogID, self, root := r.ID, g.self, g.root
		g.deliver(func() {
			d.callID = g.conn.call(g.sessionID, "session/request_permission", params, func(res json.RawMessage, err *acp.RequestError) {
				root.Send(self, &permissionAnswer{dialogID: dialogID, result: res, err: err})
			})
		})
	}
}

// ownTurn reports whether the running turn answers a prompt this editor sent.
func (g *sessionGateway) ownTurn() bool {
	for _, h := range g.held {
		if h.promptID != 0 && slices.Contains(g.turnPrompts, h.promptID) {
			return true
		}
	}
	return false
}

func titleSuffix(title string) string {
	if title == "" {
		return ""
	}
	return ": " + title
}

// onPermission sends the client's choice to the agent as its dialog answer.
// Anything but a valid selection of an offered option is a cancel (fail
// closed).
func (g *sessionGateway) onPermission(m *permissionAnswer) {
	d := g.dialogs[m.dialogID]
	if d == nil {
		return // answered elsewhere, or withdrawn
	}
	delete(g.dialogs, m.dialogID)
	resp := &pb.UIResponse{Caller: g.caller, Id: m.dialogID, Which: "cancelled"}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if m.err == nil && json.Unmarshal(m.result, &r) == nil && r.Outcome.Outcome == "selected" {
		switch {
		case d.method == "confirm" && (r.Outcome.OptionID == "allow" || r.Outcome.OptionID == "reject"):
			resp.Which, resp.Confirmed = "confirmed", r.Outcome.OptionID == "allow"
		case d.method == "select":
			for i, o := range d.options {
				if r.Outcome.OptionID == "choice-"+strconv.Itoa(i) {
					resp.Which, resp.Value = "value", o
				}
			}
		}
	}
	sid, rt, log, conn := g.sessionID, g.srv.rt, g.srv.log, g.conn
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		res, err := rt.Request(ctx, sid, resp)
		if err != nil {
			log.Warn("acp dialog answer did not reach the session", "connection", conn.id, "session", sid, "err", err)
			return
		}
		if r, ok := res.(*pb.UIResponseResult); ok && r.GetError() != nil {
			// Someone else answered first, or the turn ended.
			log.Debug("acp dialog answer refused", "session", sid, "code", r.GetError().GetCode())
		}
	}()
}

// sessionGone is what an attachment sends itself when the session actor it
// watches has terminated, so that it is handled after the frames already
// queued. It never leaves the node.
type sessionGone struct{}
