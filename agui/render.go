package agui

import (
	"log/slog"
	"strconv"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Renderer renders one run: the session's typed events (the frames its
// RunSink keeps) as AG-UI events, each framed as @ag-ui/encoder frames
// them ("data: <JSON>" and a blank line). It keeps what AG-UI needs that a
// frame does not carry: the run's state document, the message a text part
// belongs to, which messages, reasoning spans and tool calls the client
// has open (AG-UI refuses content for one that is not), the turn's error
// and its interrupts. One goroutine at a time (the stream's writer).
//
// Message ids: the assistant message of a turn's first step is
// "turn-<turnId>" (the chat message id of every other rendering), that of
// its step k "turn-<turnId>-<k>"; a reasoning part's is "reasoning-<part
// id>"; a tool call's result is the tool message "result-<toolCallId>".
type Renderer struct {
	threadID, runID, sessionID string
	state                      *State
	// head: the frames up to it are in the state snapshot.
	head uint64
	// replayedTo: the chat frames up to it were replayed (a resume run
	// joining its turn): they tell which turn, step and calls are under
	// way, and are not sent again.
	replayedTo uint64
	silent     bool
	log        *slog.Logger

	turnID uint64
	step   int
	msgID  string // the current step's assistant message

	textParts map[string]bool // open text parts of the current message
	textMsg   string          // the message whose TEXT_MESSAGE the client has open ("": none)
	reasoning map[string]bool // reasoning parts the client has open, by AG-UI id
	tools     map[string]*toolCall
	toolOrder []string

	errText, errCode string
	interrupts       []Interrupt
	finished         bool // RUN_FINISHED or RUN_ERROR is written
}

type toolCall struct {
	name   string
	open   bool // the client has it open (TOOL_CALL_START sent, no END)
	args   bool // arguments were sent
	ended  bool // its input is complete (TOOL_CALL_END sent, or replayed)
	result bool
}

// RunOptions describe a run to render.
type RunOptions struct {
	ThreadID, RunID, SessionID string
	// State is the session's state when the run began.
	State *pb.StateEntries
	// ReplayedTo is the head of a subscription from the running turn's
	// start (a resume run): its frames up to there are not sent again.
	ReplayedTo uint64
	Logger     *slog.Logger
}

// NewRenderer starts rendering a run.
func NewRenderer(o RunOptions) *Renderer {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Renderer{threadID: o.ThreadID, runID: o.RunID, sessionID: o.SessionID,
		state: NewState(o.State), head: o.State.GetHead(), replayedTo: o.ReplayedTo, log: log,
		textParts: map[string]bool{}, reasoning: map[string]bool{}, tools: map[string]*toolCall{}}
}

// frame appends one framed event: b is the buffer, ev appends the event's
// JSON to it.
func frame(b []byte, ev func([]byte) []byte) []byte {
	b = append(b, "data: "...)
	b = ev(b)
	return append(b, "\n\n"...)
}

// Start appends the run's first events: RUN_STARTED and STATE_SNAPSHOT.
func (r *Renderer) Start(b []byte) []byte {
	b = frame(b, func(d []byte) []byte { return runStarted(d, r.threadID, r.runID, r.sessionID) })
	return r.snapshot(b)
}

// snapshot appends a STATE_SNAPSHOT of the run's document.
func (r *Renderer) snapshot(b []byte) []byte {
	snap := r.state.AppendJSON(nil)
	return frame(b, func(d []byte) []byte { return stateSnapshot(d, snap) })
}

// Finish appends a RUN_FINISHED that ends a run with no turn (a run that
// prompted nothing).
func (r *Renderer) Finish(b []byte) []byte {
	r.finished = true
	return frame(b, func(d []byte) []byte { return runFinished(d, r.threadID, r.runID, nil, 0, "") })
}

// Frame appends the events of one frame.
func (r *Renderer) Frame(b []byte, f *pb.Frame) []byte {
	if r.finished {
		return b
	}
	switch e := f.GetEvent().GetEvent().(type) {
	case *pb.Event_State:
		if f.GetSeq() <= r.head {
			return b
		}
		p, err := r.state.ApplyState(e.State)
		if err != nil {
			// A value that is not JSON cannot be diffed: the client gets
			// the whole state again.
			r.log.Warn("ag-ui: state delta failed; sending a snapshot", "session", r.sessionID, "key", e.State.GetKey(), "rev", e.State.GetRev(), "err", err)
			return r.snapshot(b)
		}
		if p != nil {
			b = frame(b, func(d []byte) []byte { return stateDelta(d, p) })
		}
	case *pb.Event_Status:
		if f.GetSeq() <= r.head {
			return b
		}
		if p := r.state.ApplyStatus(e.Status); p != nil {
			b = frame(b, func(d []byte) []byte { return stateDelta(d, p) })
		}
	case *pb.Event_Chat:
		r.silent = f.GetSeq() <= r.replayedTo
		b = r.chat(b, e.Chat)
		r.silent = false
	case *pb.Event_UiRequest:
		r.uiRequest(e.UiRequest)
	}
	return b
}

func (r *Renderer) emit(b []byte, ev func([]byte) []byte) []byte {
	if r.silent {
		return b
	}
	return frame(b, ev)
}

func (r *Renderer) chat(b []byte, c *pb.ChatEvent) []byte {
	switch e := c.GetChunk().(type) {
	case *pb.ChatEvent_TurnStart:
		r.turnID, r.step = e.TurnStart.GetTurnId(), 0
		r.msgID = pb.TurnMessageID(r.turnID)
	case *pb.ChatEvent_StepStart:
		r.step++
		if r.step > 1 {
			b = r.closeText(b)
			r.msgID = pb.TurnMessageID(r.turnID) + "-" + strconv.Itoa(r.step)
		}
	case *pb.ChatEvent_PartStart:
		if e.PartStart.GetKind() == pb.PartKind_PART_KIND_REASONING {
			b = r.openReasoning(b, e.PartStart.GetId())
		} else {
			b = r.openText(b, e.PartStart.GetId())
		}
	case *pb.ChatEvent_PartDelta:
		d := e.PartDelta
		if d.GetKind() == pb.PartKind_PART_KIND_REASONING {
			b = r.openReasoning(b, d.GetId())
			if d.GetDelta() != "" {
				id := reasoningID(d.GetId())
				b = r.emit(b, func(x []byte) []byte {
					return delta(x, EventReasoningMessageContent, "messageId", id, d.GetDelta())
				})
			}
		} else {
			b = r.openText(b, d.GetId())
			if d.GetDelta() != "" && r.textMsg != "" {
				b = frame(b, func(x []byte) []byte { return delta(x, EventTextMessageContent, "messageId", r.textMsg, d.GetDelta()) })
			}
		}
	case *pb.ChatEvent_PartEnd:
		if e.PartEnd.GetKind() == pb.PartKind_PART_KIND_REASONING {
			b = r.closeReasoning(b, reasoningID(e.PartEnd.GetId()))
		} else {
			delete(r.textParts, e.PartEnd.GetId())
			if len(r.textParts) == 0 {
				b = r.closeText(b)
			}
		}
	case *pb.ChatEvent_ToolInputStart:
		t := r.tool(e.ToolInputStart.GetToolCallId())
		t.name = e.ToolInputStart.GetToolName()
		b = r.openTool(b, e.ToolInputStart.GetToolCallId(), t)
	case *pb.ChatEvent_ToolInputDelta:
		id := e.ToolInputDelta.GetToolCallId()
		t := r.tool(id)
		if t.ended || t.name == "" {
			break // its input comes whole with ToolInputAvailable
		}
		b = r.openTool(b, id, t)
		if t.open && e.ToolInputDelta.GetDelta() != "" {
			t.args = true
			b = frame(b, func(x []byte) []byte {
				return delta(x, EventToolCallArgs, "toolCallId", id, e.ToolInputDelta.GetDelta())
			})
		}
	case *pb.ChatEvent_ToolInput:
		id := e.ToolInput.GetToolCallId()
		t := r.tool(id)
		if t.ended {
			break
		}
		if t.name == "" {
			t.name = e.ToolInput.GetToolName()
		}
		b = r.openTool(b, id, t)
		if t.open && !t.args {
			input := string(e.ToolInput.GetInput())
			if input == "" {
				input = "{}"
			}
			t.args = true
			b = frame(b, func(x []byte) []byte { return delta(x, EventToolCallArgs, "toolCallId", id, input) })
		}
		b = r.endTool(b, id, t)
	case *pb.ChatEvent_ToolOutput:
		if e.ToolOutput.GetPreliminary() {
			break // AG-UI has no partial results
		}
		id := e.ToolOutput.GetToolCallId()
		t := r.tool(id)
		b = r.endTool(b, id, t)
		if !t.result {
			t.result = true
			out := toolContent(e.ToolOutput.GetOutput())
			b = r.emit(b, func(x []byte) []byte { return toolCallResult(x, resultID(id), id, out, "") })
		}
	case *pb.ChatEvent_ToolError:
		id := e.ToolError.GetToolCallId()
		t := r.tool(id)
		b = r.endTool(b, id, t)
		if !t.result {
			t.result = true
			code := e.ToolError.GetErrorCode()
			if code == "" {
				code = "tool_error"
			}
			b = r.emit(b, func(x []byte) []byte {
				return toolCallResult(x, resultID(id), id, e.ToolError.GetErrorText(), code)
			})
		}
	case *pb.ChatEvent_TurnError:
		r.errText, r.errCode = e.TurnError.GetErrorText(), e.TurnError.GetCode()
	case *pb.ChatEvent_TurnFinish:
		if r.silent {
			break
		}
		b = r.closeAll(b)
		b = r.finishTurn(b, e.TurnFinish.GetStopReason())
	}
	return b
}

// finishTurn ends the run as the turn ended: RUN_ERROR when it failed,
// RUN_FINISHED (cancelled, or a success) otherwise.
func (r *Renderer) finishTurn(b []byte, stopReason string) []byte {
	r.finished = true
	if r.errText != "" || stopReason == "error" {
		msg, code := r.errText, r.errCode
		if msg == "" {
			msg = "The turn failed."
		}
		if code == "" {
			code = codes.AgentError
		}
		return frame(b, func(x []byte) []byte { return runError(x, msg, code) })
	}
	var outcome []byte
	if stopReason == "cancelled" {
		outcome = []byte(`{"type":"cancelled"}`)
	}
	return frame(b, func(x []byte) []byte { return runFinished(x, r.threadID, r.runID, outcome, r.turnID, stopReason) })
}

func reasoningID(partID string) string { return "reasoning-" + partID }

func resultID(toolCallID string) string { return "result-" + toolCallID }

func (r *Renderer) tool(id string) *toolCall {
	t := r.tools[id]
	if t == nil {
		t = &toolCall{}
		r.tools[id] = t
		r.toolOrder = append(r.toolOrder, id)
	}
	return t
}

func (r *Renderer) openText(b []byte, partID string) []byte {
	r.textParts[partID] = true
	if r.textMsg == r.msgID || r.silent {
		return b
	}
	b = r.closeText(b)
	r.textMsg = r.msgID
	return frame(b, func(x []byte) []byte { return textStart(x, r.textMsg) })
}

func (r *Renderer) closeText(b []byte) []byte {
	if r.textMsg == "" {
		return b
	}
	id := r.textMsg
	r.textMsg = ""
	clear(r.textParts)
	return frame(b, func(x []byte) []byte { return withID(x, EventTextMessageEnd, "messageId", id) })
}

func (r *Renderer) openReasoning(b []byte, partID string) []byte {
	id := reasoningID(partID)
	if r.reasoning[id] || r.silent {
		return b
	}
	r.reasoning[id] = true
	b = frame(b, func(x []byte) []byte { return withID(x, EventReasoningStart, "messageId", id) })
	return frame(b, func(x []byte) []byte { return reasoningMessageStart(x, id) })
}

func (r *Renderer) closeReasoning(b []byte, id string) []byte {
	if !r.reasoning[id] {
		return b
	}
	delete(r.reasoning, id)
	b = frame(b, func(x []byte) []byte { return withID(x, EventReasoningMessageEnd, "messageId", id) })
	return frame(b, func(x []byte) []byte { return withID(x, EventReasoningEnd, "messageId", id) })
}

func (r *Renderer) openTool(b []byte, id string, t *toolCall) []byte {
	if t.open || t.ended || r.silent || t.name == "" {
		return b
	}
	t.open = true
	return frame(b, func(x []byte) []byte { return toolCallStart(x, id, t.name, r.msgID) })
}

func (r *Renderer) endTool(b []byte, id string, t *toolCall) []byte {
	t.ended = true
	if !t.open {
		return b
	}
	t.open = false
	return frame(b, func(x []byte) []byte { return withID(x, EventToolCallEnd, "toolCallId", id) })
}

// closeAll ends what the client has open: AG-UI ends a run only with every
// message, reasoning span and tool call closed.
func (r *Renderer) closeAll(b []byte) []byte {
	b = r.closeText(b)
	for _, id := range sortedKeys(r.reasoning) {
		b = r.closeReasoning(b, id)
	}
	for _, id := range r.toolOrder {
		if t := r.tools[id]; t.open {
			t.open = false
			b = frame(b, func(x []byte) []byte { return withID(x, EventToolCallEnd, "toolCallId", id) })
		}
	}
	return b
}

// End appends what ends the run when its stream ends for reason (the turn's
// finish was rendered already when it ended the stream): the interrupt
// outcome when the run stopped at the agent's dialogs, a RUN_ERROR that
// says why when the stream was cut; nothing when the client went away.
func (r *Renderer) End(b []byte, reason delivery.Reason) []byte {
	if r.finished {
		return b
	}
	switch reason {
	case delivery.EndClientGone, delivery.EndClosed:
		return b
	case delivery.EndFinal:
		b = r.closeAll(b)
		r.finished = true
		var outcome []byte
		if len(r.interrupts) > 0 {
			outcome = appendInterruptOutcome(nil, r.interrupts)
		}
		return frame(b, func(x []byte) []byte { return runFinished(x, r.threadID, r.runID, outcome, r.turnID, "") })
	}
	b = r.closeAll(b)
	r.finished = true
	return frame(b, func(x []byte) []byte { return runError(x, cutText(reason), string(reason)) })
}

// Interrupted reports whether the run ends at the agent's dialogs.
func (r *Renderer) Interrupted() bool { return len(r.interrupts) > 0 }

// cutText says why a run's stream ended before its turn did.
func cutText(reason delivery.Reason) string {
	const goesOn = " The turn goes on in the session: its effects reach the next run's state."
	switch reason {
	case delivery.EndSlowConsumer:
		return "The stream was cut: the client read too slowly." + goesOn
	case delivery.EndShutdown:
		return "The stream was cut: the daemon is shutting down."
	case delivery.EndMoved:
		return "The stream was cut: the session moved to another node." + goesOn
	case delivery.EndRevoked:
		return "The stream was cut: its credential was revoked."
	case delivery.EndSessionGone:
		return "The stream was cut: the session went away before the turn finished."
	}
	return "The stream was cut (" + string(reason) + ")."
}
