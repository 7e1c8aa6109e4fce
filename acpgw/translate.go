package acpgw

import (
	"encoding/json"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

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
