package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/surface"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// queued is a prompt waiting in the inbox.
type queued struct {
	id     uint64
	text   string
	images []*pb.Image
	via    string
	tag    string
}

// turn is the turn in progress: one prompt command to the agent answering
// every message that was queued when it started, or a run the agent started
// on its own (an extension, a retry after the turn had ended).
type turn struct {
	id        uint64
	promptIDs []uint64
	reqID     string
	aborted   bool
	started   time.Time

	// The agent's runs (agent_start … agent_end) within the turn: a retry
	// or a compaction after a failed run starts another one.
	runs int
	// retrying: the agent announced another run (auto_retry_start, an
	// overflow compaction that will retry); the turn stays open.
	retrying   bool
	compacting bool // an overflow compaction after a failed run
	retries    int  // retries the agent made (auto_retry_start attempts)
	// settleID is the get_state sent as a barrier (see settle); settleFor
	// says what its answer decides.
	settleID  string
	settleFor settleReason
	// endErr is the error of the failed run being settled.
	endErr string

	// Streaming parts of the assistant message in progress.
	lastPart  string // partID's memo
	lastKind  pb.PartKind
	lastIndex int
	lastMsg   int
	msgN      int
	open      map[string]pb.PartKind // part ids open (text-start without text-end)
	text      strings.Builder
	thinking  strings.Builder
	lastStop  string
	lastError string
	tools     map[string]json.RawMessage // toolCallId -> args
}

// dialog is an agent dialog waiting for an answer.
type dialog struct {
	id     string
	method string
	turn   uint64
}

func (s *sessionActor) prompt(ctx actor.Context, m *pb.Prompt) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.PromptResult{Error: notFound()})
		return
	}
	switch {
	case s.status == StatusEnded:
		ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeEnded, "the session has ended")})
		return
	case s.status == StatusError && !s.restartDue:
		ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeUnavailable, "the agent is not running: "+s.detail)})
		return
	case strings.TrimSpace(m.GetMessage()) == "" && len(m.GetImages()) == 0:
		ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeEmptyPrompt, "the prompt has no text")})
		return
	case len(m.GetImages()) > 0 && !s.images:
		ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeImagesRefused, "this agent does not accept images")})
		return
	case len(s.inbox) >= s.lim.InboxMax:
		ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeInboxFull, fmt.Sprintf("%d prompts are already waiting", len(s.inbox)))})
		return
	}
	s.promptID++
	q := &queued{id: s.promptID, text: m.GetMessage(), images: m.GetImages(), via: m.GetCaller().GetVia(), tag: m.GetClientTag()}
	willQueue := s.turn != nil || !s.ready || len(s.inbox) > 0
	s.inbox = append(s.inbox, q)
	s.deps.Metrics.Prompt()
	s.emitChat(&pb.ChatEvent_UserMessage{UserMessage: &pb.UserMessage{
		PromptId: q.id, Text: q.text, Via: q.via, Tag: q.tag, Queued: willQueue, Images: uint32(len(q.images))}})
	ctx.Respond(&pb.PromptResult{Accepted: true, Queued: willQueue, PromptId: q.id})
	if willQueue {
		s.emitStatus() // queued count changed
	}
	s.maybeStartTurn(ctx)
	ctx.CancelReceiveTimeout()
}

func (s *sessionActor) maybeStartTurn(ctx actor.Context) {
	if s.turn != nil || !s.ready || len(s.inbox) == 0 || s.agent == nil {
		return
	}
	batch := s.inbox
	s.inbox = nil
	t := s.newTurn()
	var texts []string
	var images []proc.ImageContent
	var entries []store.Entry
	now := time.Now()
	for _, q := range batch {
		t.promptIDs = append(t.promptIDs, q.id)
		texts = append(texts, q.text)
		for _, im := range q.images {
			images = append(images, proc.ImageContent{Type: "image", Data: im.GetData(), MimeType: im.GetMimeType()})
		}
		entries = append(entries, store.Entry{Role: "user", Text: q.text, Via: q.via, TurnID: t.id, PromptID: q.id, At: now})
	}
	s.turn = t
	s.appendTranscript(entries)
	t.reqID = s.reqID("prompt")
	s.emitStatus()
	s.emitChat(turnStart(t.id, t.promptIDs))
	s.send(ctx, proc.PromptCommand{ID: t.reqID, Type: proc.CmdPrompt, Message: strings.Join(texts, "\n\n"), Images: images}, true)
	s.log.Info("turn started", "turn", t.id, "prompts", len(batch))
}

// endTurn closes the turn: busy goes false before finish, so a client that
// stops reading at finish has already seen the session idle.
func (s *sessionActor) endTurn(ctx actor.Context, stopReason, errorText string) {
	t := s.turn
	if t == nil {
		return
	}
	if t.aborted && stopReason != "error" {
		// Whatever the agent made of it, a turn the user cancelled answers
		// cancelled (ACP requires it of session/cancel).
		stopReason, errorText = "cancelled", ""
	}
	s.closeParts()
	s.recordAssistant()
	s.turn = nil
	s.cancelDialogs(ctx, t.id)
	s.emitStatus()
	switch stopReason {
	case "cancelled":
		s.emitChat(&pb.ChatEvent_TurnAbort{TurnAbort: &pb.TurnAbort{}})
	case "error":
		if errorText != "" {
			s.emitChat(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: errorText}})
		}
	}
	s.emitChat(&pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: t.id, PromptIds: t.promptIDs, StopReason: stopReason}})
	s.log.Info("turn ended", "turn", t.id, "stop", stopReason, "took", time.Since(t.started).Round(time.Millisecond))
	s.maybeStartTurn(ctx)
	s.armIdle(ctx)
}

// failInbox answers every queued prompt with an error turn (nothing can run them).
func (s *sessionActor) failInbox(ctx actor.Context, why string) {
	if len(s.inbox) == 0 {
		return
	}
	batch := s.inbox
	s.inbox = nil
	s.turnID++
	ids := make([]uint64, 0, len(batch))
	for _, q := range batch {
		ids = append(ids, q.id)
	}
	s.emitChat(turnStart(s.turnID, ids))
	s.emitChat(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: "The message was not answered: " + why + "."}})
	s.emitChat(&pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: s.turnID, PromptIds: ids, StopReason: "cancelled"}})
	s.emitStatus()
}

func (s *sessionActor) abort(ctx actor.Context, m *pb.Abort) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.AbortResult{Error: notFound()})
		return
	}
	if s.status == StatusEnded {
		ctx.Respond(&pb.AbortResult{Error: pb.Err(CodeEnded, "the session has ended")})
		return
	}
	t := s.turn
	if t == nil {
		ctx.Respond(&pb.AbortResult{Ok: true})
		return
	}
	if !t.aborted {
		t.aborted = true
		s.cancelDialogs(ctx, t.id)
		s.send(ctx, proc.SimpleCommand{ID: s.reqID("abort"), Type: proc.CmdAbort}, false)
		self, root, id := s.self, s.root, t.id
		time.AfterFunc(s.lim.AbortGrace, func() { root.Send(self, &abortGrace{turn: id}) })
	}
	ctx.Respond(&pb.AbortResult{Ok: true, WasBusy: true})
}

// emitChat emits one chat chunk (a *pb.ChatEvent_… value).
func (s *sessionActor) emitChat(chunk pb.ChatChunk) {
	s.emit(pb.ChatOf(chunk), "")
}

func turnStart(id uint64, promptIDs []uint64) *pb.ChatEvent_TurnStart {
	return &pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: id, PromptIds: promptIDs, MessageId: wire.MessageID(id)}}
}

// ---------------------------------------------------------------------------
// Agent lines

func (s *sessionActor) agentReply(ctx actor.Context, m *pb.AgentReply) {
	id := m.GetId()
	switch {
	case strings.HasPrefix(id, "ready-"):
		if m.GetFailed() || !strings.HasPrefix(id, "ready-"+strconv.FormatUint(uint64(s.incarnation), 10)+"-") {
			return
		}
		var r proc.Response
		if err := json.Unmarshal(m.GetLine(), &r); err != nil || !r.Success {
			s.log.Warn("get_commands failed; waiting for readiness", "err", r.Error)
			return
		}
		if !s.announced {
			// A plain pi agent: ask which model it runs (images or not)
			// before any prompt goes out.
			s.probeModel(ctx)
		}
		s.becomeReady(ctx)
	case strings.HasPrefix(id, "model-"):
		s.modelProbed(m)
	case strings.HasPrefix(id, "settle-"):
		s.settled(ctx, m)
	case strings.HasPrefix(id, "prompt-"):
		t := s.turn
		if m.GetFailed() || t == nil || t.reqID != id {
			return
		}
		var r proc.Response
		if err := json.Unmarshal(m.GetLine(), &r); err != nil {
			s.endTurn(ctx, "error", "The agent answered the prompt with an invalid response.")
			return
		}
		if !r.Success {
			// The agent refused the prompt (no model, bad request): say so,
			// rather than wait for a turn that will never come.
			msg := r.Error
			if msg == "" {
				msg = "the agent refused the prompt"
			}
			s.endTurn(ctx, "error", msg)
			return
		}
		if t.runs == 0 {
			// Accepted, and no run has started: pi answers an extension
			// command (or input an extension handled) this way, with no
			// run at all. The barrier tells which.
			s.settle(ctx, settleRun)
		}
	}
}

func (s *sessionActor) agentLine(ctx actor.Context, m *pb.AgentLine) {
	line := m.GetLine()
	switch m.GetType() {
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
	case proc.TypeExtensionUIRequest:
		s.uiRequest(ctx, line)
	case proc.TypeSurfaceCommand, proc.TypeSurfaceGet, proc.TypeStateSet, proc.TypeStateDelete:
		if !s.announced {
			s.diagnostic("invalid_line", m.GetType()+" from an agent that did not announce "+proc.Protocol)
			return
		}
		s.surfaceLine(ctx, m.GetType(), line)
	case proc.TypeSurfaceDispatchResult:
		s.log.Debug("late surface_dispatch_result ignored", "id", m.GetId())
	default:
		s.agentEvent(ctx, m.GetType(), line)
	}
}

func (s *sessionActor) agentReady(ctx actor.Context, line []byte) {
	var r proc.AgentReady
	if err := json.Unmarshal(line, &r); err != nil {
		s.diagnostic("invalid_line", "agent_ready is not valid: "+err.Error())
		return
	}
	if s.announced {
		s.diagnostic("invalid_line", "agent_ready sent twice; the second is ignored")
		return
	}
	s.announced = true
	if r.Images {
		s.images = true
	}
	for _, decl := range r.Surfaces {
		if decl.Domain == "" {
			s.diagnostic("invalid_line", "agent_ready declares a surface without a domain")
			continue
		}
		d, exists := s.domains[decl.Domain]
		if exists && d.registered && (d.hosted != surface.HostedAgent || d.incarnation == s.incarnation) {
			who := "natively"
			if d.hosted == surface.HostedAgent {
				who = "earlier in agent_ready"
			}
			msg := fmt.Sprintf("domain %q is already registered %s; the first registration is kept", decl.Domain, who)
			s.send(ctx, proc.SurfaceRegisterResult{Type: proc.TypeSurfaceRegisterResult, Domain: decl.Domain, OK: false,
				Error: &proc.ErrorBody{Code: proc.CodeDuplicateDomain, Message: msg}}, false)
			s.diagnostic(proc.CodeDuplicateDomain, msg)
			continue
		}
		cmds := append([]string(nil), decl.Commands...)
		if exists && d.hosted == surface.HostedAgent {
			// The restarted agent hosts its domain again: same actor, same
			// snapshot and rev, new agent.
			d.incarnation = s.incarnation
			d.commands = cmds
			d.registered = true
			ctx.Send(d.pid, &pb.AgentAvailable{Agent: pb.PidOf(s.agent), Incarnation: s.incarnation, Commands: cmds})
			continue
		}
		s.spawnDomain(ctx, surface.Config{Domain: decl.Domain, Hosted: surface.HostedAgent, Commands: cmds, Initial: decl.InitialState}, cmds, s.incarnation)
	}
	s.becomeReady(ctx)
}

func (s *sessionActor) agentEvent(ctx actor.Context, typ string, line []byte) {
	if typ == proc.EventMessageUpdate {
		// The hot path (one line per token): pi repeats the whole message
		// so far twice in every update; read only the delta.
		var u messageUpdateLine
		if err := json.Unmarshal(line, &u); err != nil {
			s.diagnostic("invalid_line", typ+" is not a valid event: "+err.Error())
			return
		}
		if s.turn != nil && u.Event != nil {
			s.messageUpdate(u.event())
		}
		return
	}
	var ev proc.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		s.diagnostic("invalid_line", typ+" is not a valid event: "+err.Error())
		return
	}
	t := s.turn
	switch typ {
	case proc.EventAgentStart:
		if t == nil {
			if !s.ready {
				return
			}
			t = s.startAgentTurn(ctx)
		}
		t.runs++
		t.retrying = false
		if t.aborted {
			// The abort reached the agent before this run began (while the
			// prompt was in preflight, or between a failure and its retry):
			// this run is cancelled too.
			s.send(ctx, proc.SimpleCommand{ID: s.reqID("abort"), Type: proc.CmdAbort}, false)
		}
	case proc.EventTurnStart:
		if t != nil {
			s.emitChat(&pb.ChatEvent_StepStart{StepStart: &pb.StepStart{}})
		}
	case proc.EventTurnEnd:
		if t != nil {
			s.closeParts()
			s.emitChat(&pb.ChatEvent_StepFinish{StepFinish: &pb.StepFinish{}})
		}
	case proc.EventMessageStart:
		if t != nil && ev.Message != nil && ev.Message.Role == "assistant" {
			t.msgN++
		}
	case proc.EventMessageEnd:
		if t != nil && ev.Message != nil && ev.Message.Role == "assistant" {
			s.closeParts()
			t.lastStop = ev.Message.StopReason
			t.lastError = ev.Message.ErrorMessage
			// The final message is the truth for the transcript (deltas may
			// have been partial when a stream was resumed).
			t.text.Reset()
			t.thinking.Reset()
			for _, b := range ev.Message.Blocks() {
				switch b.Type {
				case "text":
					t.text.WriteString(b.Text)
				case "thinking":
					t.thinking.WriteString(b.Thinking)
				}
			}
			s.recordAssistant()
		}
	case proc.EventToolExecutionStart:
		if t != nil {
			t.tools[ev.ToolCallID] = ev.Args
		}
		s.emitChat(&pb.ChatEvent_ToolInput{ToolInput: &pb.ToolInputAvailable{ToolCallId: ev.ToolCallID, ToolName: ev.ToolName, Input: rawOrEmpty(ev.Args)}})
	case proc.EventToolExecutionUpdate:
		s.emitChat(&pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: ev.ToolCallID, Output: rawOrNull(ev.PartialResult), Preliminary: true}})
	case proc.EventToolExecutionEnd:
		var args json.RawMessage
		if t != nil {
			args = t.tools[ev.ToolCallID]
			delete(t.tools, ev.ToolCallID)
		}
		if ev.IsError {
			s.emitChat(&pb.ChatEvent_ToolError{ToolError: &pb.ToolError{ToolCallId: ev.ToolCallID, ErrorText: toolText(ev.Result),
				ErrorCode: toolErrorCode(ev.Result), Output: ev.Result}})
		} else {
			s.emitChat(&pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: ev.ToolCallID, Output: rawOrNull(ev.Result)}})
		}
		var turnID uint64
		if t != nil {
			turnID = t.id
		}
		s.appendTranscript([]store.Entry{{Role: "tool", ToolCallID: ev.ToolCallID, ToolName: ev.ToolName,
			ToolArgs: args, ToolResult: ev.Result, IsError: ev.IsError, TurnID: turnID, At: time.Now()}})
	case proc.EventAgentEnd:
		if t == nil {
			return
		}
		if ev.WillRetry {
			t.retrying = true
			return
		}
		stop, errText := runOutcome(t, ev.Messages)
		if stop == "error" {
			// pi announces a retry (auto_retry_start) or an overflow
			// compaction right after a failed agent_end, in the same write;
			// the barrier's answer comes after either.
			t.endErr = errText
			s.settle(ctx, settleEnd)
			return
		}
		s.endTurn(ctx, stop, errText)
	case proc.EventAutoRetryStart:
		s.emitAgentEvent(line)
		if t != nil {
			t.retrying = true
			t.retries = ev.Attempt
		}
	case proc.EventAutoRetryEnd:
		s.emitAgentEvent(line)
		if t == nil {
			return
		}
		t.retrying = false
		if !ev.Success {
			// The last attempt failed (or the user cancelled the wait): no
			// run follows.
			msg := ev.FinalError
			if msg == "" {
				msg = t.endErr
			}
			s.failRun(ctx, msg, ev.Attempt)
		}
	case proc.EventCompactionStart, proc.EventAutoCompactionStart:
		s.emitAgentEvent(line)
		if t != nil && t.settleID != "" && t.settleFor == settleEnd && ev.Reason == "overflow" {
			// The failed run overflowed the context: pi compacts and runs again.
			t.retrying, t.compacting = true, true
		}
	case proc.EventCompactionEnd, proc.EventAutoCompactionEnd:
		s.emitAgentEvent(line)
		if t != nil && t.compacting {
			t.compacting = false
			if !ev.WillRetry {
				t.retrying = false
				msg := ev.ErrorMessage
				if msg == "" {
					msg = t.endErr
				}
				s.failRun(ctx, msg, t.retries)
			}
		}
	case proc.EventSessionInfoChanged:
		if ev.Name != "" {
			s.setTitle(ev.Name)
		}
	case proc.EventExtensionError:
		s.log.Warn("agent extension error", "extension", ev.ExtensionPath, "event", ev.Event, "error", ev.Error)
		s.emitAgentEvent(line)
	case proc.EventQueueUpdate, proc.EventThinkingLevelChanged:
		s.emitAgentEvent(line)
	default:
		s.log.Debug("agent line of unknown type ignored", "type", typ)
	}
}

// partID names a text or reasoning part of the turn's current message. The
// last one is remembered: a stream of deltas asks for the same id each time.
func (s *sessionActor) partID(kind pb.PartKind, index int) string {
	t := s.turn
	if t.lastPart != "" && t.lastKind == kind && t.lastIndex == index && t.lastMsg == t.msgN {
		return t.lastPart
	}
	letter := "t"
	if kind == pb.PartKind_PART_KIND_REASONING {
		letter = "r"
	}
	id := strconv.FormatUint(t.id, 10) + "-" + strconv.Itoa(t.msgN) + "-" + letter + strconv.Itoa(index)
	t.lastPart, t.lastKind, t.lastIndex, t.lastMsg = id, kind, index, t.msgN
	return id
}

func (s *sessionActor) messageUpdate(e *proc.AssistantMessageEvent) {
	t := s.turn
	switch e.Type {
	case proc.AMETextStart:
		s.openPart(pb.PartKind_PART_KIND_TEXT, e.ContentIndex)
	case proc.AMETextDelta:
		id := s.openPart(pb.PartKind_PART_KIND_TEXT, e.ContentIndex)
		t.text.WriteString(e.Delta)
		s.emitChat(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: id, Kind: pb.PartKind_PART_KIND_TEXT, Delta: e.Delta}})
	case proc.AMETextEnd:
		s.endPart(pb.PartKind_PART_KIND_TEXT, e.ContentIndex)
	case proc.AMEThinkingStart:
		s.openPart(pb.PartKind_PART_KIND_REASONING, e.ContentIndex)
	case proc.AMEThinkingDelta:
		id := s.openPart(pb.PartKind_PART_KIND_REASONING, e.ContentIndex)
		t.thinking.WriteString(e.Delta)
		s.emitChat(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: id, Kind: pb.PartKind_PART_KIND_REASONING, Delta: e.Delta}})
	case proc.AMEThinkingEnd:
		s.endPart(pb.PartKind_PART_KIND_REASONING, e.ContentIndex)
	case proc.AMEError:
		if e.Reason == "aborted" {
			t.lastStop = "aborted"
		} else {
			t.lastStop = "error"
			if e.Error != nil {
				t.lastError = e.Error.ErrorMessage
			}
		}
	}
}

// openPart returns the id of a text or reasoning part, starting it when it
// is not open.
func (s *sessionActor) openPart(kind pb.PartKind, index int) string {
	id := s.partID(kind, index)
	t := s.turn
	if _, ok := t.open[id]; !ok {
		t.open[id] = kind
		s.emitChat(&pb.ChatEvent_PartStart{PartStart: &pb.PartStart{Id: id, Kind: kind}})
	}
	return id
}

func (s *sessionActor) endPart(kind pb.PartKind, index int) {
	id := s.partID(kind, index)
	if _, ok := s.turn.open[id]; ok {
		delete(s.turn.open, id)
		s.emitChat(&pb.ChatEvent_PartEnd{PartEnd: &pb.PartEnd{Id: id, Kind: kind}})
	}
}

// closeParts ends every open text/reasoning part (a message that ended or
// was cut without its *_end events).
func (s *sessionActor) closeParts() {
	t := s.turn
	if t == nil {
		return
	}
	for id, kind := range t.open {
		s.emitChat(&pb.ChatEvent_PartEnd{PartEnd: &pb.PartEnd{Id: id, Kind: kind}})
	}
	clear(t.open)
}

// recordAssistant moves the text gathered so far into the transcript.
func (s *sessionActor) recordAssistant() {
	t := s.turn
	if t == nil {
		return
	}
	var entries []store.Entry
	now := time.Now()
	if t.thinking.Len() > 0 {
		entries = append(entries, store.Entry{Role: "thinking", Text: t.thinking.String(), TurnID: t.id, At: now})
	}
	if t.text.Len() > 0 {
		entries = append(entries, store.Entry{Role: "assistant", Text: t.text.String(), TurnID: t.id, At: now})
	}
	t.text.Reset()
	t.thinking.Reset()
	s.appendTranscript(entries)
}

func (s *sessionActor) appendTranscript(entries []store.Entry) {
	if len(entries) == 0 {
		return
	}
	s.trSubmit++
	self, root := s.self, s.root
	s.submit(store.Op{Transcript: entries,
		Done: func(error) { root.Send(self, &trPersisted{}) }})
}

func (s *sessionActor) setTitle(title string) {
	if title == s.rec.Title {
		return
	}
	s.rec.Title = title
	s.submit(store.Op{Update: &store.SessionUpdate{Title: &title}})
	s.emitStatus()
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

func rawOrNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// toolErrorCode is a failed tool call's class: the code the tool gave in its
// result's details ({details:{code}}), else tool_error. It is what an editor
// that is not shown tool payloads sees of the failure.
func toolErrorCode(r json.RawMessage) string {
	var tr struct {
		Details struct {
			Code string `json:"code"`
		} `json:"details"`
	}
	if json.Unmarshal(r, &tr) == nil && proc.ValidCode(tr.Details.Code) {
		return tr.Details.Code
	}
	return "tool_error"
}

// toolText is the text of a tool result ({content:[{type:text,text}]}), or
// its JSON when it has no text.
func toolText(r json.RawMessage) string {
	var tr proc.ToolResult
	if json.Unmarshal(r, &tr) == nil {
		var b strings.Builder
		for _, c := range tr.Content {
			if c.Type == "text" {
				b.WriteString(c.Text)
			}
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	return string(r)
}

// ---------------------------------------------------------------------------
// Agent dialogs and notices

func (s *sessionActor) uiRequest(ctx actor.Context, line []byte) {
	var r proc.ExtensionUIRequest
	if err := json.Unmarshal(line, &r); err != nil || r.Method == "" {
		s.diagnostic("invalid_line", "extension_ui_request without a method")
		return
	}
	ev := pb.UIRequestOf(&pb.UIRequestEvent{Id: r.ID, Method: r.Method, Title: r.Title, Message: r.Message,
		Options: r.Options, Request: uiFrame(line)})
	switch {
	case proc.IsDialog(r.Method):
		if r.ID == "" {
			s.diagnostic("invalid_line", "a dialog without an id cannot be answered")
			return
		}
		var turnID uint64
		if s.turn != nil {
			turnID = s.turn.id
		}
		s.dialogs[r.ID] = &dialog{id: r.ID, method: r.Method, turn: turnID}
		s.emit(ev, "ui:"+r.ID)
	case r.Method == "setStatus":
		s.emit(ev, "uistatus:"+r.StatusKey)
	case r.Method == "setWidget":
		s.emit(ev, "uiwidget:"+r.WidgetKey)
	case r.Method == "setTitle":
		s.emit(ev, "uititle")
		if r.Title != "" {
			s.setTitle(r.Title)
		}
	default:
		s.emit(ev, "")
	}
}

// uiFrame is the request as the agent sent it, without its line type.
func uiFrame(line []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return line
	}
	delete(m, "type")
	b, err := json.Marshal(m)
	if err != nil {
		return line
	}
	return b
}

func (s *sessionActor) uiResponse(ctx actor.Context, m *pb.UIResponse) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.UIResponseResult{Error: notFound()})
		return
	}
	d, ok := s.dialogs[m.GetId()]
	if !ok {
		ctx.Respond(&pb.UIResponseResult{Error: pb.Err(CodeUnknownUI, "no agent dialog is waiting with that id")})
		return
	}
	resp := proc.ExtensionUIResponse{Type: proc.TypeExtensionUIResponse, ID: d.id}
	switch m.GetWhich() {
	case "value":
		v := m.GetValue()
		resp.Value = &v
	case "confirmed":
		c := m.GetConfirmed()
		resp.Confirmed = &c
	default:
		resp.Cancelled = true
	}
	s.send(ctx, resp, false)
	s.resolveDialog(d)
	ctx.Respond(&pb.UIResponseResult{Ok: true})
}

func (s *sessionActor) resolveDialog(d *dialog) {
	delete(s.dialogs, d.id)
	s.hub.Unstick("ui:" + d.id)
	s.emit(pb.UIRequestOf(&pb.UIRequestEvent{Id: d.id, Method: d.method, Resolved: true}), "")
}

// cancelDialogs answers "cancelled" to the dialogs of a turn (0: all) that
// nobody answered, and tells the clients they are gone.
func (s *sessionActor) cancelDialogs(ctx actor.Context, turnID uint64) {
	for _, d := range s.dialogs {
		if turnID != 0 && d.turn != turnID {
			continue
		}
		s.send(ctx, proc.ExtensionUIResponse{Type: proc.TypeExtensionUIResponse, ID: d.id, Cancelled: true}, false)
		s.resolveDialog(d)
	}
}
