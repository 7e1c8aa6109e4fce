package agentkit

import (
	"context"
	"encoding/json"
	"iter"
	"os"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Model is a streaming chat model. Stream yields deltas in order and ends after
// a DeltaFinish, or with one (Delta{}, err) pair when the call fails. When ctx
// is cancelled the model stops promptly and yields ctx.Err() (or just stops);
// the agent then ends the message with stopReason "aborted".
//
// A Stream that ends without DeltaFinish is taken as "stop", or "toolUse" when
// it produced tool calls.
type Model interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Delta, error]
}

// ModelInfo describes a model for get_state. Models may implement
// interface{ Info() ModelInfo }.
type ModelInfo struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl,omitempty"`
}

// Request is one model call: the system prompt, the conversation so far and the
// tools the model may call.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolSpec
	// UI opens dialogs on the user's screen. Real LLMs never need it; the
	// scripted model uses it to exercise dialogs. Nil when no agent runs the call.
	UI Dialoger
}

// Dialoger opens pi extension UI dialogs; *Agent implements it.
type Dialoger interface {
	Dialog(ctx context.Context, req agentproc.ExtensionUIRequest) (DialogAnswer, error)
}

// Role of a Message.
type Role string

// Roles, named as pi names them.
const (
	RoleUser       Role = "user"
	RoleAssistant  Role = "assistant"
	RoleToolResult Role = "toolResult"
)

// Message is one entry of the conversation as a model sees it. Failed and
// aborted assistant messages are left out, and a tool call that never got a
// result is followed by a synthetic error result, so every history a Model
// receives is well formed.
type Message struct {
	Role   Role
	Text   string                   // user text, assistant text, or tool result text
	Images []agentproc.ImageContent // user only
	// ToolCalls are the assistant's tool calls.
	ToolCalls []ToolCall
	// ToolCallID and ToolName identify the call a RoleToolResult answers.
	ToolCallID string
	ToolName   string
	IsError    bool
}

// ToolCall is a model's request to run a tool. Arguments is the JSON text as
// the model wrote it (it may be malformed; the agent checks before running).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// StopReason is why an assistant message ended, as pi spells it.
type StopReason string

// Stop reasons. A model yields StopStop, StopLength or StopToolUse; the agent
// sets StopError and StopAborted itself.
const (
	StopStop    StopReason = "stop"
	StopLength  StopReason = "length"
	StopToolUse StopReason = "toolUse"
	StopError   StopReason = "error"
	StopAborted StopReason = "aborted"
)

// DeltaKind tells what a Delta carries.
type DeltaKind int

// Delta kinds.
const (
	// DeltaText carries a fragment of the reply in Text.
	DeltaText DeltaKind = iota + 1
	// DeltaThinking carries a fragment of reasoning in Text.
	DeltaThinking
	// DeltaToolCall starts tool call number Index with ID and Name.
	DeltaToolCall
	// DeltaToolCallArgs carries a fragment of tool call Index's JSON arguments in Text.
	DeltaToolCallArgs
	// DeltaFinish ends the stream with Reason.
	DeltaFinish
)

// Delta is one streamed piece of a model's answer.
type Delta struct {
	Kind   DeltaKind
	Text   string
	Index  int
	ID     string
	Name   string
	Reason StopReason
}

// Environment variables read by ModelFromEnv (docs/agent-protocol.md, "Environment").
const (
	EnvLLMBaseURL = "SURFACED_LLM_BASE_URL"
	EnvLLMModel   = "SURFACED_LLM_MODEL"
	EnvLLMAPIKey  = "SURFACED_LLM_API_KEY"
)

// ModelFromEnv returns an OpenAI-compatible chat-completions model configured
// by SURFACED_LLM_BASE_URL (the base including /v1), SURFACED_LLM_MODEL and
// SURFACED_LLM_API_KEY, or the deterministic ScriptedModel when
// SURFACED_LLM_BASE_URL is unset or empty.
func ModelFromEnv() Model {
	base := os.Getenv(EnvLLMBaseURL)
	if base == "" {
		return &ScriptedModel{}
	}
	return &OpenAIModel{
		BaseURL: base,
		Model:   os.Getenv(EnvLLMModel),
		APIKey:  os.Getenv(EnvLLMAPIKey),
	}
}

// modelMessages turns the pi-shaped history into what a model sees: text,
// images and tool calls only; failed and aborted assistant messages dropped;
// every tool call answered (a call left without a result, e.g. by an abort,
// gets a synthetic error result so chat APIs accept the history).
func modelMessages(history []agentproc.AgentMessage) []Message {
	out := make([]Message, 0, len(history))
	var open []ToolCall // tool calls of the last assistant message still without a result
	closeOpen := func() {
		for _, tc := range open {
			out = append(out, Message{Role: RoleToolResult, ToolCallID: tc.ID, ToolName: tc.Name,
				Text: "No result provided", IsError: true})
		}
		open = nil
	}
	for i := range history {
		m := &history[i]
		switch Role(m.Role) {
		case RoleUser:
			closeOpen()
			msg := Message{Role: RoleUser}
			for _, b := range m.Blocks() {
				switch b.Type {
				case "text":
					msg.Text += b.Text
				case "image":
					msg.Images = append(msg.Images, agentproc.ImageContent{Type: "image", Data: b.Data, MimeType: b.MimeType})
				}
			}
			out = append(out, msg)
		case RoleAssistant:
			closeOpen()
			if m.StopReason == string(StopError) || m.StopReason == string(StopAborted) {
				continue
			}
			msg := Message{Role: RoleAssistant}
			for _, b := range m.Blocks() {
				switch b.Type {
				case "text":
					msg.Text += b.Text
				case "toolCall":
					msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: argumentsText(b.Arguments)})
				}
			}
			if msg.Text == "" && len(msg.ToolCalls) == 0 {
				continue
			}
			out = append(out, msg)
			open = append(open[:0:0], msg.ToolCalls...)
		case RoleToolResult:
			found := false
			for j, tc := range open {
				if tc.ID == m.ToolCallID {
					open = append(open[:j:j], open[j+1:]...)
					found = true
					break
				}
			}
			if !found {
				continue // a result for no pending call would be rejected by chat APIs
			}
			out = append(out, Message{Role: RoleToolResult, ToolCallID: m.ToolCallID, ToolName: m.ToolName,
				Text: m.Text(), IsError: m.IsError})
		}
	}
	closeOpen()
	return out
}

// argumentsText recovers the model's argument text from a stored toolCall
// block: JSON objects as they are; malformed arguments were stored as a JSON
// string and come back unquoted.
func argumentsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// storedArguments makes the model's argument text storable in a toolCall
// block: valid JSON as is, anything else as a JSON string so that every event
// stays valid JSON.
func storedArguments(text string) json.RawMessage {
	if text == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	b, _ := plainjson.Marshal(text)
	return b
}
