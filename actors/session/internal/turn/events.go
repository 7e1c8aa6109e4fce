package turn

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	proc "github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// turn is the turn in progress: one prompt command to the agent answering
// every message that was queued when it started, or a run the agent started
// on its own (an extension, a retry after the turn had ended).
type turn struct {
	id        uint64
	promptIDs []uint64
	promptReq string // the prompt command's id; empty for a run the agent started
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
	open      []part // parts started and not ended, in the order they started
	text      strings.Builder
	thinking  strings.Builder
	lastStop  string
	lastError string
	tools     map[string]json.RawMessage // toolCallId -> args, for the transcript
	// calls are the tool calls whose input the current message streams, by
	// content index.
	calls map[int]*toolStream
}

// part is an open text or reasoning part.
type part struct {
	id   string
	kind pb.PartKind
}

// toolStream is a tool call whose input the agent streams (toolcall_*).
type toolStream struct {
	id, name string
	started  bool     // tool-input-start went out
	pending  []string // deltas that came before the call had an id and a name
}

// newTurn makes a turn with the next turn id (not yet the current one).
func (m *Machine) newTurn() *turn { return m.turnWithID(m.next(&m.turnID)) }

// turnWithID is a turn with an id handed out already.
func (m *Machine) turnWithID(id uint64) *turn {
	t := &turn{id: id, tools: map[string]json.RawMessage{}, calls: map[int]*toolStream{}}
	if m.now != nil {
		t.started = m.now()
	}
	return t
}

// messageUpdateLine is a message_update line as far as a turn reads it:
// the event, without the partial message pi repeats in "message" and
// "assistantMessageEvent.partial" (decoding those would copy the whole
// message for every token). scanUpdate reads the same, faster, for the
// lines it can; encoding/json reads the others.
type messageUpdateLine struct {
	Event *assistantEvent `json:"assistantMessageEvent"`
}

type assistantEvent struct {
	Type         string `json:"type"`
	ContentIndex int    `json:"contentIndex"`
	Delta        string `json:"delta"`
	Reason       string `json:"reason"`
	Error        *struct {
		ErrorMessage string `json:"errorMessage"`
	} `json:"error"`
	// ToolCall is toolcall_end's finished call.
	ToolCall json.RawMessage `json:"toolCall"`
}

// AgentLine takes one pi event the agent wrote (agent_start, turn_*,
// message_*, tool_execution_*, agent_end, auto_retry_*, compaction_*,
// auto_compaction_*, session_info_changed, extension_error, queue_update,
// thinking_level_changed) under its line type typ; a line of another type
// is ignored. line is one record as the agent codec passes it on: a JSON
// object (agentproc.DecodeEnvelope accepted it). A line that is not a valid
// event of its type changes nothing and is answered with an error, for the
// session's invalid_line diagnostic.
func (m *Machine) AgentLine(typ string, line []byte) error {
	if typ == proc.EventMessageUpdate {
		// The hot path (one line per token): read only the event (see scan.go).
		e := &m.upd
		present, ok := scanUpdate(line, e)
		if !ok {
			var u messageUpdateLine
			if err := json.Unmarshal(line, &u); err != nil {
				return fmt.Errorf("%s is not a valid event: %w", typ, err)
			}
			present = u.Event != nil
			if present {
				*e = *u.Event
			}
		}
		if present && m.cur != nil {
			m.messageUpdate(e, line)
		}
		return nil
	}
	var ev proc.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return fmt.Errorf("%s is not a valid event: %w", typ, err)
	}
	m.event(typ, &ev, line)
	return nil
}

func (m *Machine) event(typ string, ev *proc.Event, line []byte) {
	t := m.cur
	switch typ {
	case proc.EventAgentStart:
		if t == nil {
			if !m.ready {
				return
			}
			t = m.startAgentTurn()
		}
		t.runs++
		t.retrying = false
		if t.aborted {
			// The abort reached the agent before this run began (while the
			// prompt was in preflight, or between a failure and its retry):
			// this run is cancelled too.
			m.send(proc.SimpleCommand{ID: m.reqID("abort"), Type: proc.CmdAbort}, "")
		}
	case proc.EventTurnStart:
		if t != nil {
			m.chat(&pb.ChatEvent_StepStart{StepStart: &pb.StepStart{}})
		}
	case proc.EventTurnEnd:
		if t != nil {
			m.closeParts()
			m.chat(&pb.ChatEvent_StepFinish{StepFinish: &pb.StepFinish{}})
		}
	case proc.EventMessageStart:
		if t != nil && ev.Message != nil && ev.Message.Role == "assistant" {
			t.msgN++
			clear(t.calls)
		}
	case proc.EventMessageEnd:
		if t != nil && ev.Message != nil && ev.Message.Role == "assistant" {
			m.closeParts()
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
			m.recordAssistant()
		}
	case proc.EventToolExecutionStart:
		if t != nil {
			t.tools[ev.ToolCallID] = ev.Args
		}
		m.chat(&pb.ChatEvent_ToolInput{ToolInput: &pb.ToolInputAvailable{ToolCallId: ev.ToolCallID, ToolName: ev.ToolName, Input: rawOrEmpty(ev.Args)}})
	case proc.EventToolExecutionUpdate:
		m.chat(&pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: ev.ToolCallID, Output: rawOrNull(ev.PartialResult), Preliminary: true}})
	case proc.EventToolExecutionEnd:
		var args json.RawMessage
		var turnID uint64
		if t != nil {
			args = t.tools[ev.ToolCallID]
			delete(t.tools, ev.ToolCallID)
			turnID = t.id
		}
		if ev.IsError {
			m.chat(&pb.ChatEvent_ToolError{ToolError: &pb.ToolError{ToolCallId: ev.ToolCallID, ErrorText: toolText(ev.Result),
				ErrorCode: toolErrorCode(ev.Result), Output: ev.Result}})
		} else {
			m.chat(&pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: ev.ToolCallID, Output: rawOrNull(ev.Result)}})
		}
		m.out.Transcript([]store.Entry{{Role: "tool", ToolCallID: ev.ToolCallID, ToolName: ev.ToolName,
			ToolArgs: args, ToolResult: ev.Result, IsError: ev.IsError, TurnID: turnID, At: m.stamp()}})
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
			m.settle(settleEnd)
			return
		}
		m.endTurn(stop, errText)
	case proc.EventAutoRetryStart:
		m.notice(line)
		if t != nil {
			t.retrying = true
			t.retries = ev.Attempt
		}
	case proc.EventAutoRetryEnd:
		m.notice(line)
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
			m.failRun(msg, ev.Attempt)
		}
	case proc.EventCompactionStart, proc.EventAutoCompactionStart:
		m.notice(line)
		if t != nil && t.settleID != "" && t.settleFor == settleEnd && ev.Reason == "overflow" {
			// The failed run overflowed the context: pi compacts and runs again.
			t.retrying, t.compacting = true, true
		}
	case proc.EventCompactionEnd, proc.EventAutoCompactionEnd:
		m.notice(line)
		if t != nil && t.compacting {
			t.compacting = false
			if !ev.WillRetry {
				t.retrying = false
				msg := ev.ErrorMessage
				if msg == "" {
					msg = t.endErr
				}
				m.failRun(msg, t.retries)
			}
		}
	case proc.EventSessionInfoChanged:
		if ev.Name != "" {
			m.out.Title(ev.Name)
		}
	case proc.EventExtensionError:
		m.log.Warn("agent extension error", "extension", ev.ExtensionPath, "event", ev.Event, "error", ev.Error)
		m.notice(line)
	case proc.EventQueueUpdate, proc.EventThinkingLevelChanged:
		m.notice(line)
	default:
		m.log.Debug("agent line of unknown type ignored", "type", typ)
	}
}

// notice passes an agent event clients may show (retries, compaction,
// queue, extension errors) as a transient data chunk.
func (m *Machine) notice(line []byte) {
	m.chat(&pb.ChatEvent_AgentNotice{AgentNotice: &pb.AgentNotice{Line: line}})
}

func (m *Machine) messageUpdate(e *assistantEvent, line []byte) {
	t := m.cur
	switch e.Type {
	case proc.AMETextDelta:
		id := m.openPart(pb.PartKind_PART_KIND_TEXT, e.ContentIndex)
		t.text.WriteString(e.Delta)
		m.chat(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: id, Kind: pb.PartKind_PART_KIND_TEXT, Delta: e.Delta}})
	case proc.AMETextStart:
		m.openPart(pb.PartKind_PART_KIND_TEXT, e.ContentIndex)
	case proc.AMETextEnd:
		m.endPart(pb.PartKind_PART_KIND_TEXT, e.ContentIndex)
	case proc.AMEThinkingStart:
		m.openPart(pb.PartKind_PART_KIND_REASONING, e.ContentIndex)
	case proc.AMEThinkingDelta:
		id := m.openPart(pb.PartKind_PART_KIND_REASONING, e.ContentIndex)
		t.thinking.WriteString(e.Delta)
		m.chat(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: id, Kind: pb.PartKind_PART_KIND_REASONING, Delta: e.Delta}})
	case proc.AMEThinkingEnd:
		m.endPart(pb.PartKind_PART_KIND_REASONING, e.ContentIndex)
	case proc.AMEToolcallStart, proc.AMEToolcallDelta, proc.AMEToolcallEnd:
		m.toolInput(e, line)
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

// partID names a text or reasoning part of the turn's current message. The
// last one is remembered: a stream of deltas asks for the same id each time.
func (m *Machine) partID(kind pb.PartKind, index int) string {
	t := m.cur
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

// openPart returns the id of a text or reasoning part, starting it when it
// is not open.
func (m *Machine) openPart(kind pb.PartKind, index int) string {
	id := m.partID(kind, index)
	t := m.cur
	for _, p := range t.open {
		if p.id == id {
			return id
		}
	}
	t.open = append(t.open, part{id: id, kind: kind})
	m.chat(&pb.ChatEvent_PartStart{PartStart: &pb.PartStart{Id: id, Kind: kind}})
	return id
}

func (m *Machine) endPart(kind pb.PartKind, index int) {
	id := m.partID(kind, index)
	t := m.cur
	for i, p := range t.open {
		if p.id == id {
			t.open = append(t.open[:i], t.open[i+1:]...)
			m.chat(&pb.ChatEvent_PartEnd{PartEnd: &pb.PartEnd{Id: id, Kind: kind}})
			return
		}
	}
}

// closeParts ends every open text/reasoning part (a message that ended or
// was cut without its *_end events), in the order they started.
func (m *Machine) closeParts() {
	t := m.cur
	if t == nil {
		return
	}
	for _, p := range t.open {
		m.chat(&pb.ChatEvent_PartEnd{PartEnd: &pb.PartEnd{Id: p.id, Kind: p.kind}})
	}
	t.open = t.open[:0]
}

// recordAssistant moves the text gathered so far into the transcript.
func (m *Machine) recordAssistant() {
	t := m.cur
	if t == nil {
		return
	}
	var entries []store.Entry
	at := m.stamp()
	if t.thinking.Len() > 0 {
		entries = append(entries, store.Entry{Role: "thinking", Text: t.thinking.String(), TurnID: t.id, At: at})
	}
	if t.text.Len() > 0 {
		entries = append(entries, store.Entry{Role: "assistant", Text: t.text.String(), TurnID: t.id, At: at})
	}
	t.text.Reset()
	t.thinking.Reset()
	if len(entries) > 0 {
		m.out.Transcript(entries)
	}
}

// toolInput streams a tool call's input as the model writes it
// (toolcall_start, toolcall_delta, toolcall_end): tool-input-start once the
// call has an id and a name, then its argument text as deltas. The id and
// name are in the call's content block of the partial message, which is
// decoded only until they are known (usually once, at toolcall_start); a
// delta after that is read from the event alone. Deltas that come before
// the call is known wait and go out right after its start, so that the
// deltas of a call joined are its whole input.
func (m *Machine) toolInput(e *assistantEvent, line []byte) {
	t := m.cur
	c := t.calls[e.ContentIndex]
	if e.Type == proc.AMEToolcallStart || c == nil {
		c = &toolStream{}
		t.calls[e.ContentIndex] = c
	}
	if !c.started {
		var id, name string
		if e.Type == proc.AMEToolcallEnd && len(e.ToolCall) > 0 {
			id, name = decodeToolCall(e.ToolCall)
		}
		if id == "" || name == "" {
			id, name = toolCallBlock(line, e.ContentIndex)
		}
		if id != "" && name != "" {
			c.id, c.name, c.started = id, name, true
			m.chat(&pb.ChatEvent_ToolInputStart{ToolInputStart: &pb.ToolInputStart{ToolCallId: id, ToolName: name}})
			for _, d := range c.pending {
				m.chat(&pb.ChatEvent_ToolInputDelta{ToolInputDelta: &pb.ToolInputDelta{ToolCallId: id, Delta: d}})
			}
			c.pending = nil
		}
	}
	if e.Type != proc.AMEToolcallDelta || e.Delta == "" {
		return
	}
	if !c.started {
		c.pending = append(c.pending, e.Delta)
		return
	}
	m.chat(&pb.ChatEvent_ToolInputDelta{ToolInputDelta: &pb.ToolInputDelta{ToolCallId: c.id, Delta: e.Delta}})
}

// toolCallBlock reads the id and name of the tool call at content index i
// of a message_update's partial message ("message", which pi and agentkit
// both send; else "assistantMessageEvent.partial").
func toolCallBlock(line []byte, i int) (id, name string) {
	type message struct {
		Content json.RawMessage `json:"content"`
	}
	var l struct {
		Message *message `json:"message"`
		Event   *struct {
			Partial *message `json:"partial"`
		} `json:"assistantMessageEvent"`
	}
	if json.Unmarshal(line, &l) != nil {
		return "", ""
	}
	var content json.RawMessage
	switch {
	case l.Message != nil:
		content = l.Message.Content
	case l.Event != nil && l.Event.Partial != nil:
		content = l.Event.Partial.Content
	}
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil || i < 0 || i >= len(blocks) {
		return "", ""
	}
	return decodeToolCall(blocks[i])
}

// decodeToolCall reads a toolCall content block's id and name.
func decodeToolCall(raw json.RawMessage) (id, name string) {
	var b struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &b) != nil || b.Type != "toolCall" {
		return "", ""
	}
	return b.ID, b.Name
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
