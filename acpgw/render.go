package acpgw

import (
	"encoding/json"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// frame renders one session frame: chat events as session/update
// notifications (with the turn's bookkeeping: the editor's own prompts, the
// answers of held prompts), dialogs and notices as dialogs.go says. The
// other frames (state, session status, diagnostics) are the browser's.
func (a *attachment) frame(f *pb.Frame) {
	switch e := f.GetEvent().GetEvent().(type) {
	case *pb.Event_Chat:
		a.chat(e.Chat)
	case *pb.Event_UiRequest:
		a.ui(e.UiRequest)
	}
}

// chat renders one chat event and keeps the turn's bookkeeping.
func (a *attachment) chat(c *pb.ChatEvent) {
	switch e := c.GetChunk().(type) {
	case *pb.ChatEvent_UserMessage:
		a.userMessage(e.UserMessage)
	case *pb.ChatEvent_TurnStart:
		a.turnError = ""
		a.turnPrompts = e.TurnStart.GetPromptIds()
	case *pb.ChatEvent_TurnError:
		a.turnError = e.TurnError.GetErrorText()
		// The editor shows why the turn failed in the conversation, once: the
		// answer to the prompt is then the bare -32603.
		if a.turnError != "" {
			a.update(acp.UpdateAgentMessageText("\n\n⚠ " + a.turnError))
		}
	case *pb.ChatEvent_TurnFinish:
		a.turnEnded(e.TurnFinish.GetPromptIds(), e.TurnFinish.GetStopReason())
	case *pb.ChatEvent_PartDelta:
		if d := e.PartDelta.GetDelta(); d != "" {
			kind := "agent_message_chunk"
			if e.PartDelta.GetKind() == pb.PartKind_PART_KIND_REASONING {
				kind = "agent_thought_chunk"
			}
			a.send(textChunk(a.sessionID, kind, d))
		}
	default:
		if u, ok := renderChat(c, a.payloads); ok {
			// A finished tool call's artifacts, as links (with payloads:
			// they are its output).
			if out := c.GetToolOutput(); out != nil && !out.GetPreliminary() && a.payloads && u.ToolCallUpdate != nil {
				u.ToolCallUpdate.Content = append(u.ToolCallUpdate.Content, a.artifactLinks(out.GetOutput())...)
			}
			a.update(u)
		}
	}
}

// textChunk encodes the session/update of a text chunk by hand: most of a
// turn's updates are these, and this gives what encoding the SDK's types
// gives (render_test.go checks), at a fraction of the cost.
func textChunk(sessionID, kind, text string) []byte {
	sid, _ := plainjson.Marshal(sessionID)
	txt, _ := plainjson.Marshal(text)
	b := make([]byte, 0, 128+len(sid)+len(txt))
	b = append(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	b = append(b, sid...)
	b = append(b, `,"update":{"content":{"text":`...)
	b = append(b, txt...)
	b = append(b, `,"type":"text"},"sessionUpdate":"`...)
	b = append(b, kind...)
	return append(b, `"}}}`...)
}

// userMessage: the editor's own prompt is not echoed (its held request
// learns its prompt id); anyone else's (a browser, another editor) is shown.
func (a *attachment) userMessage(um *pb.UserMessage) {
	for _, h := range a.held {
		if h.tag == um.GetTag() {
			h.promptID = um.GetPromptId()
			return
		}
	}
	if strings.HasPrefix(um.GetTag(), a.tagPrefix) {
		return
	}
	a.send(textChunk(a.sessionID, "user_message_chunk", um.GetText()))
}

// renderChat is the update of a chat event that has one: text and thinking
// deltas (chat sends those as textChunk), tool calls and their progress.
// payloads false withholds tool inputs, outputs and error texts.
func renderChat(c *pb.ChatEvent, payloads bool) (acp.SessionUpdate, bool) {
	switch e := c.GetChunk().(type) {
	case *pb.ChatEvent_PartDelta:
		d := e.PartDelta
		if d.GetDelta() == "" {
			return acp.SessionUpdate{}, false
		}
		if d.GetKind() == pb.PartKind_PART_KIND_REASONING {
			return acp.UpdateAgentThoughtText(d.GetDelta()), true
		}
		return acp.UpdateAgentMessageText(d.GetDelta()), true
	case *pb.ChatEvent_ToolInput:
		t := e.ToolInput
		opts := []acp.ToolCallStartOpt{acp.WithStartKind(kindOf(t.GetToolName())), acp.WithStartStatus(acp.ToolCallStatusInProgress)}
		if payloads {
			if v := rawValue(t.GetInput()); v != nil {
				opts = append(opts, acp.WithStartRawInput(v))
			}
		}
		title := t.GetToolName()
		if title == "" {
			title = "tool"
		}
		return acp.StartToolCall(acp.ToolCallId(t.GetToolCallId()), title, opts...), true
	case *pb.ChatEvent_ToolOutput:
		t := e.ToolOutput
		id := acp.ToolCallId(t.GetToolCallId())
		if t.GetPreliminary() {
			opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusInProgress)}
			if payloads {
				if content := textContent(toolResultText(t.GetOutput())); content != nil {
					opts = append(opts, acp.WithUpdateContent(content))
				}
			}
			return acp.UpdateToolCall(id, opts...), true
		}
		opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusCompleted)}
		if payloads {
			if v := rawValue(t.GetOutput()); v != nil {
				opts = append(opts, acp.WithUpdateRawOutput(v))
			}
			if content := textContent(toolResultText(t.GetOutput())); content != nil {
				opts = append(opts, acp.WithUpdateContent(content))
			}
		}
		return acp.UpdateToolCall(id, opts...), true
	case *pb.ChatEvent_ToolError:
		t := e.ToolError
		opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusFailed),
			acp.WithUpdateContent(textContent(failedText(t, payloads)))}
		if payloads {
			if v := rawValue(t.GetOutput()); v != nil {
				opts = append(opts, acp.WithUpdateRawOutput(v))
			}
		}
		return acp.UpdateToolCall(acp.ToolCallId(t.GetToolCallId()), opts...), true
	}
	return acp.SessionUpdate{}, false
}

// kindOf maps a tool name to an ACP tool kind.
func kindOf(toolName string) acp.ToolKind {
	switch strings.ToLower(toolName) {
	case "bash":
		return acp.ToolKindExecute
	case "read":
		return acp.ToolKindRead
	case "edit", "write":
		return acp.ToolKindEdit
	case "grep", "find", "ls":
		return acp.ToolKindSearch
	}
	return acp.ToolKindOther
}

// toolResultText is the text of a pi tool result ({content:[{type:text,
// text}]}), a JSON string's value, or else the JSON itself.
func toolResultText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var tr struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &tr) == nil && len(tr.Content) > 0 {
		var b strings.Builder
		for _, c := range tr.Content {
			if c.Type == "text" {
				b.WriteString(c.Text)
			}
		}
		return b.String()
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func textContent(text string) []acp.ToolCallContent {
	if text == "" {
		return nil
	}
	return []acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}
}

// rawValue carries JSON through as is (nil when empty).
func rawValue(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// failedText is what a failed tool call shows: its error text with
// payloads, only its class (or a plain sentence) without.
func failedText(e *pb.ToolError, payloads bool) string {
	if payloads && e.GetErrorText() != "" {
		return e.GetErrorText()
	}
	if e.GetErrorCode() != "" {
		return "The tool call failed (" + e.GetErrorCode() + ")."
	}
	return "The tool call failed."
}

// replayUpdate turns one transcript entry into the update that replays it.
func replayUpdate(e *pb.TranscriptEntry, payloads bool) (acp.SessionUpdate, bool) {
	switch e.GetRole() {
	case "user":
		return acp.UpdateUserMessageText(e.GetText()), e.GetText() != ""
	case "assistant":
		return acp.UpdateAgentMessageText(e.GetText()), e.GetText() != ""
	case "thinking":
		return acp.UpdateAgentThoughtText(e.GetText()), e.GetText() != ""
	case "tool":
		status := acp.ToolCallStatusCompleted
		if e.GetIsError() {
			status = acp.ToolCallStatusFailed
		}
		opts := []acp.ToolCallStartOpt{acp.WithStartKind(kindOf(e.GetToolName())), acp.WithStartStatus(status)}
		if payloads {
			if v := rawValue(e.GetToolArgs()); v != nil {
				opts = append(opts, acp.WithStartRawInput(v))
			}
			if v := rawValue(e.GetToolResult()); v != nil {
				opts = append(opts, acp.WithStartRawOutput(v))
			}
			opts = append(opts, acp.WithStartContent(textContent(toolResultText(e.GetToolResult()))))
		}
		title := e.GetToolName()
		if title == "" {
			title = "tool"
		}
		return acp.StartToolCall(acp.ToolCallId(e.GetToolCallId()), title, opts...), e.GetToolCallId() != ""
	}
	return acp.SessionUpdate{}, false
}
