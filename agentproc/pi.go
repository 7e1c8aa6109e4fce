package agentproc

import (
	"encoding/json"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// Types of pi's RPC mode (pi --mode rpc; pi's docs/rpc.md), the base protocol.

// pi command types the daemon sends.
const (
	CmdPrompt               = "prompt"
	CmdAbort                = "abort"
	CmdGetState             = "get_state"
	CmdGetMessages          = "get_messages"
	CmdGetCommands          = "get_commands"
	TypeExtensionUIResponse = "extension_ui_response"
)

// Line types the agent writes (pi base protocol).
const (
	TypeResponse           = "response"
	TypeExtensionUIRequest = "extension_ui_request"

	EventAgentStart           = "agent_start"
	EventAgentEnd             = "agent_end"
	EventTurnStart            = "turn_start"
	EventTurnEnd              = "turn_end"
	EventMessageStart         = "message_start"
	EventMessageUpdate        = "message_update"
	EventMessageEnd           = "message_end"
	EventToolExecutionStart   = "tool_execution_start"
	EventToolExecutionUpdate  = "tool_execution_update"
	EventToolExecutionEnd     = "tool_execution_end"
	EventQueueUpdate          = "queue_update"
	EventCompactionStart      = "compaction_start"
	EventCompactionEnd        = "compaction_end"
	EventAutoCompactionStart  = "auto_compaction_start"
	EventAutoCompactionEnd    = "auto_compaction_end"
	EventAutoRetryStart       = "auto_retry_start"
	EventAutoRetryEnd         = "auto_retry_end"
	EventExtensionError       = "extension_error"
	EventSessionInfoChanged   = "session_info_changed"
	EventThinkingLevelChanged = "thinking_level_changed"
)

// assistantMessageEvent types.
const (
	AMEStart         = "start"
	AMETextStart     = "text_start"
	AMETextDelta     = "text_delta"
	AMETextEnd       = "text_end"
	AMEThinkingStart = "thinking_start"
	AMEThinkingDelta = "thinking_delta"
	AMEThinkingEnd   = "thinking_end"
	AMEToolcallStart = "toolcall_start"
	AMEToolcallDelta = "toolcall_delta"
	AMEToolcallEnd   = "toolcall_end"
	AMEDone          = "done"
	AMEError         = "error"
)

// ImageContent is pi's image block: {type:"image", data, mimeType}.
type ImageContent struct {
	Type     string `json:"type"` // image
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

// PromptCommand starts a turn.
type PromptCommand struct {
	ID                string         `json:"id,omitempty"`
	Type              string         `json:"type"` // prompt
	Message           string         `json:"message"`
	Images            []ImageContent `json:"images,omitempty"`
	StreamingBehavior string         `json:"streamingBehavior,omitempty"`
	// Attachments are the prompt's artifacts, for a surfaced/1 agent only
	// (a plain pi agent gets its image attachments as Images).
	Attachments []PromptAttachment `json:"attachments,omitempty"`
}

// SimpleCommand is any command without fields: abort, get_state, get_messages, get_commands.
type SimpleCommand struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type"`
}

// ExtensionUIResponse answers a dialog: exactly one of Value, Confirmed, Cancelled.
type ExtensionUIResponse struct {
	Type      string  `json:"type"` // extension_ui_response
	ID        string  `json:"id"`
	Value     *string `json:"value,omitempty"`
	Confirmed *bool   `json:"confirmed,omitempty"`
	Cancelled bool    `json:"cancelled,omitempty"`
}

// Response answers a command. Error is pi's error string.
type Response struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"` // response
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// Event is the envelope of every pi event; the rest of the line depends on Type.
type Event struct {
	Type string `json:"type"`

	// message_start / message_update / message_end / turn_end
	Message               *AgentMessage          `json:"message,omitempty"`
	AssistantMessageEvent *AssistantMessageEvent `json:"assistantMessageEvent,omitempty"`

	// turn_end
	ToolResults []AgentMessage `json:"toolResults,omitempty"`

	// agent_end (WillRetry also on compaction_end; pi 0.73 does not send it
	// on agent_end, it announces a retry with auto_retry_start instead)
	Messages  []AgentMessage `json:"messages,omitempty"`
	WillRetry bool           `json:"willRetry,omitempty"`

	// tool_execution_* (Result is also compaction_end's result).
	// PartialResult is the output accumulated so far: it replaces the
	// previous one, it does not add to it.
	ToolCallID    string          `json:"toolCallId,omitempty"`
	ToolName      string          `json:"toolName,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	PartialResult json.RawMessage `json:"partialResult,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	IsError       bool            `json:"isError,omitempty"`

	// queue_update
	Steering []string `json:"steering,omitempty"`
	FollowUp []string `json:"followUp,omitempty"`

	// compaction_* / auto_compaction_* / auto_retry_*
	Reason       string `json:"reason,omitempty"`
	Aborted      bool   `json:"aborted,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Attempt      int    `json:"attempt,omitempty"`
	MaxAttempts  int    `json:"maxAttempts,omitempty"`
	DelayMs      int    `json:"delayMs,omitempty"`
	Success      bool   `json:"success,omitempty"`
	FinalError   string `json:"finalError,omitempty"`

	// extension_error
	ExtensionPath string `json:"extensionPath,omitempty"`
	Event         string `json:"event,omitempty"`
	Error         string `json:"error,omitempty"`

	// session_info_changed
	Name string `json:"name,omitempty"`

	// thinking_level_changed
	Level string `json:"level,omitempty"`
}

// AssistantMessageEvent is message_update's streaming event.
type AssistantMessageEvent struct {
	Type string `json:"type"`
	// ContentIndex is the block the event concerns (text_*, thinking_*,
	// toolcall_*). It is written even when 0; see MarshalJSON.
	ContentIndex int             `json:"contentIndex,omitempty"`
	Delta        string          `json:"delta,omitempty"`
	Content      string          `json:"content,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	ToolCall     json.RawMessage `json:"toolCall,omitempty"`
	// Partial is the assistant message so far (pi sends it with every event).
	Partial json.RawMessage `json:"partial,omitempty"`
	// Message is the final message of a done event.
	Message *AgentMessage `json:"message,omitempty"`
	// error event: the message that failed, with its errorMessage
	Error *AgentMessage `json:"error,omitempty"`
}

// HasContentIndex reports whether pi's event of this type carries contentIndex.
func HasContentIndex(typ string) bool {
	switch typ {
	case AMETextStart, AMETextDelta, AMETextEnd, AMEThinkingStart, AMEThinkingDelta, AMEThinkingEnd,
		AMEToolcallStart, AMEToolcallDelta, AMEToolcallEnd:
		return true
	}
	return false
}

// MarshalJSON writes contentIndex for the block events even when it is 0:
// pi always sends it there, and a client that indexes the message's content
// by it must not see the first block's index dropped.
func (e AssistantMessageEvent) MarshalJSON() ([]byte, error) {
	type plain AssistantMessageEvent
	if !HasContentIndex(e.Type) {
		return plainjson.Marshal(plain(e))
	}
	return plainjson.Marshal(struct {
		plain
		ContentIndex int `json:"contentIndex"`
	}{plain(e), e.ContentIndex})
}

// AgentMessage is a message in pi's history (user, assistant or toolResult).
type AgentMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content,omitempty"`
	StopReason   string          `json:"stopReason,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	ToolCallID   string          `json:"toolCallId,omitempty"`
	ToolName     string          `json:"toolName,omitempty"`
	IsError      bool            `json:"isError,omitempty"`
	Timestamp    int64           `json:"timestamp,omitempty"`

	// Assistant messages: which model answered and what it cost.
	API      string          `json:"api,omitempty"`
	Provider string          `json:"provider,omitempty"`
	Model    string          `json:"model,omitempty"`
	Usage    json.RawMessage `json:"usage,omitempty"`
}

// ContentBlock is one block of a message's content.
type ContentBlock struct {
	Type      string          `json:"type"` // text, thinking, toolCall, image
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Data      string          `json:"data,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
}

// Blocks decodes the content of a message: a string or an array of blocks.
func (m *AgentMessage) Blocks() []ContentBlock {
	if len(m.Content) == 0 {
		return nil
	}
	if m.Content[0] == '"' {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return []ContentBlock{{Type: "text", Text: s}}
		}
		return nil
	}
	var bs []ContentBlock
	if json.Unmarshal(m.Content, &bs) != nil {
		return nil
	}
	return bs
}

// Text concatenates the text blocks of a message.
func (m *AgentMessage) Text() string {
	var out string
	for _, b := range m.Blocks() {
		if b.Type == "text" {
			out += b.Text
		}
	}
	return out
}

// ExtensionUIRequest is a dialog or a fire-and-forget notice from the agent.
type ExtensionUIRequest struct {
	Type   string `json:"type"` // extension_ui_request
	ID     string `json:"id"`
	Method string `json:"method"`

	Title       string   `json:"title,omitempty"`
	Message     string   `json:"message,omitempty"`
	Options     []string `json:"options,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Prefill     string   `json:"prefill,omitempty"`
	Timeout     int      `json:"timeout,omitempty"`

	NotifyType      string   `json:"notifyType,omitempty"`
	StatusKey       string   `json:"statusKey,omitempty"`
	StatusText      string   `json:"statusText,omitempty"`
	WidgetKey       string   `json:"widgetKey,omitempty"`
	WidgetLines     []string `json:"widgetLines,omitempty"`
	WidgetPlacement string   `json:"widgetPlacement,omitempty"`
	Text            string   `json:"text,omitempty"`
}

// Dialog methods wait for an extension_ui_response; the others are notices.
func IsDialog(method string) bool {
	switch method {
	case "select", "confirm", "input", "editor":
		return true
	}
	return false
}

// Model is pi's model description (get_state's model,
// get_available_models), as far as the daemon reads it.
type Model struct {
	ID            string   `json:"id"`
	Name          string   `json:"name,omitempty"`
	API           string   `json:"api,omitempty"`
	Provider      string   `json:"provider,omitempty"`
	BaseURL       string   `json:"baseUrl,omitempty"`
	Reasoning     bool     `json:"reasoning,omitempty"`
	Input         []string `json:"input,omitempty"` // "text", "image"
	ContextWindow int      `json:"contextWindow,omitempty"`
	MaxTokens     int      `json:"maxTokens,omitempty"`
}

// AcceptsImages reports whether the model takes image input.
func (m *Model) AcceptsImages() bool {
	if m == nil {
		return false
	}
	for _, in := range m.Input {
		if in == "image" {
			return true
		}
	}
	return false
}

// SessionState is the data of pi's get_state response (the fields the
// daemon reads).
type SessionState struct {
	Model         *Model `json:"model,omitempty"`
	ThinkingLevel string `json:"thinkingLevel,omitempty"`
	IsStreaming   bool   `json:"isStreaming"`
	IsCompacting  bool   `json:"isCompacting"`
	SessionID     string `json:"sessionId,omitempty"`
	SessionName   string `json:"sessionName,omitempty"`
	MessageCount  int    `json:"messageCount"`
}

// ToolResult is pi's tool result shape: {content:[blocks], details?}.
type ToolResult struct {
	Content []ContentBlock  `json:"content"`
	Details json.RawMessage `json:"details,omitempty"`
}
