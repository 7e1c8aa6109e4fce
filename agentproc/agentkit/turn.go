package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Text of the errors pi reports in the same situations.
const (
	errBusy        = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
	abortedMessage = "Request was aborted"
)

// userInput is a prompt waiting to enter the conversation.
type userInput struct {
	text   string
	images []agentproc.ImageContent
	// attachments are the prompt's artifacts (ids; Artifacts().Get reads
	// them).
	attachments []agentproc.PromptAttachment
}

// turn is one agent run (agent_start … agent_end) and the means to abort it.
type turn struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the run has written agent_end
	span   trace.Span    // the turn, in the daemon's trace when it sent one
}

// newTurn starts a turn, continuing the trace of the prompt's traceparent
// ("" for a turn of queued prompts, or none).
func (a *Agent) newTurn(traceparent string) *turn {
	ctx, span := startSpan(withTrace(a.base, traceparent), "turn")
	ctx, cancel := context.WithCancel(ctx)
	return &turn{ctx: ctx, cancel: cancel, done: make(chan struct{}), span: span}
}

// handlePrompt serves prompt, steer and follow_up. The response comes first,
// at once; the run goes on in the background, as in pi.
func (a *Agent) handlePrompt(kind string, p *agentproc.PromptCommand, traceparent string) {
	if kind == agentproc.CmdPrompt && a.isProbeCommand(p.Message) {
		// pi runs extension commands at once, without a turn; the probes do nothing.
		a.respond(p.ID, kind, nil)
		return
	}
	in := userInput{text: p.Message, images: p.Images, attachments: p.Attachments}
	a.mu.Lock()
	if a.turn != nil {
		behavior := p.StreamingBehavior
		switch kind {
		case cmdSteer:
			behavior = "steer"
		case cmdFollowUp:
			behavior = "followUp"
		}
		switch behavior {
		case "steer":
			a.steering = append(a.steering, in)
		case "followUp", "follow_up":
			a.followUp = append(a.followUp, in)
		default:
			a.mu.Unlock()
			a.fail(p.ID, kind, errBusy)
			return
		}
		a.emitQueueLocked()
		a.mu.Unlock()
		a.respond(p.ID, kind, nil)
		return
	}
	t := a.newTurn(traceparent)
	a.turn = t
	a.mu.Unlock()
	a.respond(p.ID, kind, nil)
	go a.runAgent(t, []userInput{in})
}

// isProbeCommand reports whether a prompt is "/surface:<domain>" for a hosted domain.
func (a *Agent) isProbeCommand(msg string) bool {
	name, ok := strings.CutPrefix(strings.TrimSpace(msg), "/")
	if !ok {
		return false
	}
	domain, ok := strings.CutPrefix(name, agentproc.SurfaceKeyPrefix)
	if !ok {
		return false
	}
	_, hosted := a.surfaces[domain]
	return hosted
}

// handleAbort cancels the running turn and answers once its agent_end is out,
// as pi answers abort once the agent is idle. Queued messages are dropped too.
func (a *Agent) handleAbort(id string) {
	a.mu.Lock()
	t := a.turn
	if len(a.steering)+len(a.followUp) > 0 {
		a.steering, a.followUp = nil, nil
		a.emitQueueLocked()
	}
	a.mu.Unlock()
	if t == nil {
		a.respond(id, agentproc.CmdAbort, nil)
		return
	}
	t.cancel()
	if !a.goWork(func() {
		<-t.done
		a.respond(id, agentproc.CmdAbort, nil)
	}) {
		a.respond(id, agentproc.CmdAbort, nil)
	}
}

// emitQueueLocked reports the queues; a.mu must be held so that reports go
// out in the order the queues changed.
func (a *Agent) emitQueueLocked() {
	texts := func(q []userInput) []string {
		out := make([]string, 0, len(q))
		for _, in := range q {
			out = append(out, in.text)
		}
		return out
	}
	a.emit(queueUpdateEvent{Type: agentproc.EventQueueUpdate, Steering: texts(a.steering), FollowUp: texts(a.followUp)})
}

// queueUpdateEvent is queue_update with its arrays always present (pi sends
// empty arrays; agentproc.Event would omit them).
type queueUpdateEvent struct {
	Type     string   `json:"type"`
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
}

// turnEndEvent is turn_end with pi's toolResults, which agentproc.Event lacks.
type turnEndEvent struct {
	agentproc.Event
	ToolResults []agentproc.AgentMessage `json:"toolResults"`
}

func (a *Agent) takeQueue(steering bool) []userInput {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := &a.followUp
	if steering {
		q = &a.steering
	}
	out := *q
	*q = nil
	if len(out) > 0 {
		a.emitQueueLocked()
	}
	return out
}

// runAgent runs t, then starts another run at once if messages were queued
// during the run's last moments, so that none is lost between "the run found
// its queue empty" and "the agent is idle".
func (a *Agent) runAgent(t *turn, inputs []userInput) {
	for {
		runMessages := a.runOnce(t, inputs)
		a.mu.Lock()
		queued := append(a.steering, a.followUp...)
		a.steering, a.followUp = nil, nil
		var next *turn
		if len(queued) > 0 {
			next = a.newTurn("")
			a.emitQueueLocked()
		}
		a.turn = next
		// agent_end goes out under a.mu: a prompt that sees the agent idle is
		// answered, and its run started, only after this run's agent_end.
		a.emit(agentEndEvent(runMessages))
		a.mu.Unlock()
		if f := a.opts.OnAgentEnd; f != nil {
			a.goWork(func() { f(a.base) })
		}
		t.span.End()
		t.cancel()
		close(t.done)
		if next == nil {
			return
		}
		t, inputs = next, queued
	}
}

func agentEndEvent(msgs []agentproc.AgentMessage) agentproc.Event {
	if msgs == nil {
		msgs = []agentproc.AgentMessage{}
	}
	return agentproc.Event{Type: agentproc.EventAgentEnd, Messages: msgs}
}

// runOnce is pi's agent loop: agent_start, then turns of model → tools until
// the model stops calling tools and no steering or follow-up message waits.
// It returns the run's messages; the caller writes agent_end.
func (a *Agent) runOnce(t *turn, inputs []userInput) []agentproc.AgentMessage {
	ctx := t.ctx
	var runMessages []agentproc.AgentMessage
	add := func(m agentproc.AgentMessage) {
		a.mu.Lock()
		a.history = append(a.history, m)
		a.mu.Unlock()
		runMessages = append(runMessages, m)
	}
	addInputs := func(ins []userInput) {
		for _, in := range ins {
			m := userMessage(in)
			a.emitMessage(agentproc.EventMessageStart, m)
			a.emitMessage(agentproc.EventMessageEnd, m)
			add(m)
		}
	}

	a.emit(agentproc.Event{Type: agentproc.EventAgentStart})
	a.emit(agentproc.Event{Type: agentproc.EventTurnStart})
	addInputs(inputs)

	steps := 0
	firstTurn := true
	pending := a.takeQueue(true)
	for {
		moreToolCalls := true
		for moreToolCalls || len(pending) > 0 {
			if !firstTurn {
				a.emit(agentproc.Event{Type: agentproc.EventTurnStart})
			}
			firstTurn = false
			addInputs(pending)
			pending = nil

			var msg agentproc.AgentMessage
			if steps >= a.opts.MaxSteps {
				msg = assistantMessage(nil, StopError,
					fmt.Sprintf("agentkit: stopped after %d model calls in one prompt (Options.MaxSteps)", a.opts.MaxSteps))
				a.emitMessage(agentproc.EventMessageStart, msg)
				a.emitMessage(agentproc.EventMessageEnd, msg)
			} else {
				steps++
				msg = a.streamAssistant(ctx)
			}
			add(msg)
			if msg.StopReason == string(StopError) || msg.StopReason == string(StopAborted) {
				a.emit(turnEndEvent{Event: agentproc.Event{Type: agentproc.EventTurnEnd, Message: &msg},
					ToolResults: []agentproc.AgentMessage{}})
				return runMessages
			}

			results := []agentproc.AgentMessage{}
			moreToolCalls = false
			if calls := toolCallBlocks(msg); len(calls) > 0 {
				results = a.runTools(ctx, calls, msg.StopReason == string(StopLength))
				for _, r := range results {
					add(r)
				}
				moreToolCalls = true
			}
			a.emit(turnEndEvent{Event: agentproc.Event{Type: agentproc.EventTurnEnd, Message: &msg}, ToolResults: results})
			pending = a.takeQueue(true)
		}
		pending = a.takeQueue(false)
		if len(pending) == 0 {
			return runMessages
		}
		steps = 0 // a follow-up is a new request of the user's
	}
}

// emit writes an event; a failed write means the daemon is gone, which the
// input loop learns from its EOF, so it is only logged.
func (a *Agent) emit(ev any) {
	if err := a.send(ev); err != nil {
		a.log.Debug("event not sent", "err", err)
	}
}

func (a *Agent) emitMessage(typ string, m agentproc.AgentMessage) {
	a.emit(agentproc.Event{Type: typ, Message: &m})
}

func nowMillis() int64 { return time.Now().UnixMilli() }

func userMessage(in userInput) agentproc.AgentMessage {
	blocks := []agentproc.ContentBlock{{Type: "text", Text: in.text}}
	if len(in.attachments) > 0 {
		blocks = append(blocks, agentproc.ContentBlock{Type: "text", Text: attachmentsText(in.attachments)})
	}
	for _, img := range in.images {
		blocks = append(blocks, agentproc.ContentBlock{Type: "image", Data: img.Data, MimeType: img.MimeType})
	}
	return agentproc.AgentMessage{Role: string(RoleUser), Content: mustJSON(blocks), Timestamp: nowMillis()}
}

// attachmentsText tells the model which artifacts a prompt attached, by id,
// so that it can hand them to tools (which read them with Artifacts().Get).
func attachmentsText(atts []agentproc.PromptAttachment) string {
	var b strings.Builder
	b.WriteString("Attached artifacts:")
	for _, at := range atts {
		b.WriteString("\n- ")
		b.WriteString(at.ID)
		b.WriteString(" (")
		b.WriteString(at.MediaType)
		if at.Name != "" {
			b.WriteString(", ")
			b.WriteString(at.Name)
		}
		b.WriteString(")")
	}
	return b.String()
}

func assistantMessage(blocks []agentproc.ContentBlock, stop StopReason, errMsg string) agentproc.AgentMessage {
	if blocks == nil {
		blocks = []agentproc.ContentBlock{}
	}
	return agentproc.AgentMessage{Role: string(RoleAssistant), Content: mustJSON(blocks), StopReason: string(stop),
		ErrorMessage: errMsg, Timestamp: nowMillis()}
}

// mustJSON encodes values that are encodable by construction.
func mustJSON(v any) json.RawMessage {
	b, err := plainjson.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agentkit: encode %T: %v", v, err))
	}
	return b
}

func toolCallBlocks(m agentproc.AgentMessage) []agentproc.ContentBlock {
	var out []agentproc.ContentBlock
	for _, b := range m.Blocks() {
		if b.Type == "toolCall" {
			out = append(out, b)
		}
	}
	return out
}

// request builds the model call from the history and the tools.
func (a *Agent) request() Request {
	a.mu.Lock()
	msgs := modelMessages(a.history)
	a.mu.Unlock()
	tools := make([]ToolSpec, 0, len(a.toolList))
	for _, name := range a.toolList {
		t := a.tools[name]
		tools = append(tools, t.spec())
	}
	return Request{System: a.opts.System, Messages: msgs, Tools: tools, UI: a}
}

// streamAssistant calls the model once and streams its answer as
// message_start, message_update… and message_end.
func (a *Agent) streamAssistant(ctx context.Context) agentproc.AgentMessage {
	b := &assistantBuilder{a: a, open: -1, toolIndex: map[int]int{}, args: map[int]*strings.Builder{}}
	a.emitMessage(agentproc.EventMessageStart, b.partial())
	if ctx.Err() != nil {
		msg := assistantMessage(nil, StopAborted, abortedMessage)
		a.emitMessage(agentproc.EventMessageEnd, msg)
		return msg
	}
	mctx, span := startSpan(ctx, "model call")
	reason, err := a.consume(mctx, b)
	spanError(span, err)
	span.End()

	var (
		stop   StopReason
		errMsg string
	)
	switch {
	case ctx.Err() != nil:
		stop, errMsg = StopAborted, abortedMessage
	case err != nil:
		stop, errMsg = StopError, err.Error()
	default:
		b.closeOpen() // pi closes the open block only on a clean finish
		switch reason {
		case "", StopStop, StopToolUse:
			stop = StopStop
			if b.hasToolCalls() {
				stop = StopToolUse
			}
		case StopLength:
			stop = StopLength
		default:
			stop, errMsg = StopError, fmt.Sprintf("model finished with unknown reason %q", reason)
		}
	}
	msg := assistantMessage(b.final(), stop, errMsg)
	a.emitMessage(agentproc.EventMessageEnd, msg)
	return msg
}

// consume feeds the model's deltas into b. A panicking model fails the
// message instead of the process.
func (a *Agent) consume(ctx context.Context, b *assistantBuilder) (reason StopReason, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("model panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			reason, err = "", fmt.Errorf("model panicked: %v", r)
		}
	}()
	for d, derr := range a.model.Stream(ctx, a.request()) {
		if derr != nil {
			return "", derr
		}
		switch d.Kind {
		case DeltaText:
			b.text(d.Text)
		case DeltaThinking:
			b.thinking(d.Text)
		case DeltaToolCall:
			b.toolCallStart(d.Index, d.ID, d.Name)
		case DeltaToolCallArgs:
			b.toolCallArgs(d.Index, d.Text)
		case DeltaFinish:
			return d.Reason, nil
		}
	}
	return "", nil
}

// assistantBuilder accumulates an assistant message and emits pi's
// message_update events for it.
type assistantBuilder struct {
	a         *Agent
	blocks    []agentproc.ContentBlock
	open      int                      // content index of the open block, -1 if none
	toolIndex map[int]int              // model tool-call index → content index
	args      map[int]*strings.Builder // content index → argument text so far
}

func (b *assistantBuilder) partial() agentproc.AgentMessage {
	return assistantMessage(b.snapshot(), "", "")
}

func (b *assistantBuilder) snapshot() []agentproc.ContentBlock {
	out := make([]agentproc.ContentBlock, len(b.blocks))
	copy(out, b.blocks)
	for ci, sb := range b.args {
		out[ci].Arguments = storedArguments(sb.String())
	}
	return out
}

func (b *assistantBuilder) final() []agentproc.ContentBlock { return b.snapshot() }

func (b *assistantBuilder) update(typ string, ci int, delta, content string, toolCall json.RawMessage) {
	m := b.partial()
	b.a.emit(agentproc.Event{Type: agentproc.EventMessageUpdate, Message: &m,
		AssistantMessageEvent: &agentproc.AssistantMessageEvent{Type: typ, ContentIndex: ci, Delta: delta,
			Content: content, ToolCall: toolCall}})
}

// openBlock makes a block of kind typ the open one, closing another kind.
func (b *assistantBuilder) openBlock(typ, startEvent string) int {
	if b.open >= 0 && b.blocks[b.open].Type == typ {
		return b.open
	}
	b.closeOpen()
	b.blocks = append(b.blocks, agentproc.ContentBlock{Type: typ})
	b.open = len(b.blocks) - 1
	b.update(startEvent, b.open, "", "", nil)
	return b.open
}

func (b *assistantBuilder) text(s string) {
	if s == "" {
		return
	}
	ci := b.openBlock("text", agentproc.AMETextStart)
	b.blocks[ci].Text += s
	b.update(agentproc.AMETextDelta, ci, s, "", nil)
}

func (b *assistantBuilder) thinking(s string) {
	if s == "" {
		return
	}
	ci := b.openBlock("thinking", agentproc.AMEThinkingStart)
	b.blocks[ci].Thinking += s
	b.update(agentproc.AMEThinkingDelta, ci, s, "", nil)
}

func (b *assistantBuilder) toolCallStart(index int, id, name string) {
	if ci, ok := b.toolIndex[index]; ok { // a repeated header: fill what was missing
		if b.blocks[ci].ID == "" {
			b.blocks[ci].ID = id
		}
		if b.blocks[ci].Name == "" {
			b.blocks[ci].Name = name
		}
		return
	}
	b.closeOpen()
	if id == "" {
		id = b.a.newID("call")
	}
	b.blocks = append(b.blocks, agentproc.ContentBlock{Type: "toolCall", ID: id, Name: name})
	ci := len(b.blocks) - 1
	b.open = ci
	b.toolIndex[index] = ci
	b.args[ci] = &strings.Builder{}
	b.update(agentproc.AMEToolcallStart, ci, "", "", nil)
}

func (b *assistantBuilder) toolCallArgs(index int, s string) {
	ci, ok := b.toolIndex[index]
	if !ok {
		b.toolCallStart(index, "", "")
		ci = b.toolIndex[index]
	}
	if s == "" {
		return
	}
	b.args[ci].WriteString(s)
	b.update(agentproc.AMEToolcallDelta, ci, s, "", nil)
}

func (b *assistantBuilder) closeOpen() {
	if b.open < 0 {
		return
	}
	ci := b.open
	b.open = -1
	switch blk := b.blocks[ci]; blk.Type {
	case "text":
		b.update(agentproc.AMETextEnd, ci, "", blk.Text, nil)
	case "thinking":
		b.update(agentproc.AMEThinkingEnd, ci, "", blk.Thinking, nil)
	case "toolCall":
		blk.Arguments = storedArguments(b.args[ci].String())
		b.update(agentproc.AMEToolcallEnd, ci, "", "", mustJSON(blk))
	}
}

func (b *assistantBuilder) hasToolCalls() bool { return len(b.toolIndex) > 0 }

// runTools executes the calls one after the other, each framed by
// tool_execution_start/end and followed by its toolResult message. An abort
// stops the batch after the running call, as pi does. When the model hit its
// length limit the arguments may be cut off, so nothing runs.
func (a *Agent) runTools(ctx context.Context, calls []agentproc.ContentBlock, truncated bool) []agentproc.AgentMessage {
	results := make([]agentproc.AgentMessage, 0, len(calls))
	for _, call := range calls {
		a.emit(agentproc.Event{Type: agentproc.EventToolExecutionStart, ToolCallID: call.ID, ToolName: call.Name,
			Args: call.Arguments})
		var (
			text    string
			isError bool
			links   []string
		)
		if truncated {
			text, isError = fmt.Sprintf("Tool call %q was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.", call.Name), true
		} else {
			tctx, span := startSpan(ctx, "tool "+call.Name, attribute.String("gen_ai.tool.name", call.Name))
			text, isError, links = a.execTool(tctx, call)
			if isError {
				span.SetStatus(codes.Error, "the tool failed")
			}
			span.End()
		}
		res := textResult(text)
		if len(links) > 0 {
			res.Details = mustJSON(map[string][]string{"artifacts": links})
		}
		a.emit(agentproc.Event{Type: agentproc.EventToolExecutionEnd, ToolCallID: call.ID, ToolName: call.Name,
			Result: mustJSON(res), IsError: isError})
		msg := agentproc.AgentMessage{Role: string(RoleToolResult), ToolCallID: call.ID, ToolName: call.Name,
			Content: mustJSON(res.Content), IsError: isError, Timestamp: nowMillis()}
		a.emitMessage(agentproc.EventMessageStart, msg)
		a.emitMessage(agentproc.EventMessageEnd, msg)
		results = append(results, msg)
		if ctx.Err() != nil {
			break
		}
	}
	return results
}

// execTool runs one call and returns the result text and whether it failed.
func (a *Agent) execTool(ctx context.Context, call agentproc.ContentBlock) (text string, isError bool, links []string) {
	tool, ok := a.tools[call.Name]
	if !ok {
		return fmt.Sprintf("Tool %s not found", call.Name), true, nil
	}
	if len(call.Arguments) > 0 && call.Arguments[0] == '"' {
		return fmt.Sprintf("Invalid arguments for tool %s: not a JSON object: %s", call.Name, argumentsText(call.Arguments)), true, nil
	}
	if ctx.Err() != nil {
		return "Operation aborted", true, nil
	}
	tc := &ToolCtx{ToolCallID: call.ID, ToolName: call.Name, agent: a, args: call.Arguments, ctx: ctx}
	defer func() {
		links = tc.links
		if r := recover(); r != nil {
			a.log.Error("tool panicked", "tool", call.Name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			text, isError = fmt.Sprintf("Tool %s panicked: %v", call.Name, r), true
		}
	}()
	out, err := tool.Run(ctx, tc, call.Arguments)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return "Operation aborted", true, nil
		}
		return err.Error(), true, nil
	}
	return out, false, nil
}
