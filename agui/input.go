package agui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// FieldError is an input AG-UI's own schema (RunAgentInputSchema of
// @ag-ui/core 1.0) refuses: Field names where, as a path into the body
// ("messages[2].content[0].source.type"), and Message says what is wrong.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
}

// Input is a run's RunAgentInput as far as surfaced reads it. Decode checks
// the whole body against the schema; what a session does not take (the
// client's state, tools, context, forwardedProps, the earlier messages) is
// checked and then left alone (docs/ag-ui.md says why).
type Input struct {
	ThreadID string
	RunID    string
	// Messages are the conversation as the client has it.
	Messages []Message
	// Resume answers the interrupts of the thread's last run; nil when the
	// body had none.
	Resume []ResumeEntry
}

// Message is a message of the input: its id, role and, for a user message,
// its content.
type Message struct {
	ID   string
	Role string
	// Text and Parts are a user message's content: a string, or parts.
	Text  string
	Parts []Part
}

// Part is a part of a user message's content.
type Part struct {
	Field string // where it was in the body, for errors
	Type  string // text, image, audio, video, document
	Text  string // a text part's
	// A media part's source: data (Value is base64 bytes), url or file (a
	// handle the provider issued: surfaced's are artifact ids).
	Source   string
	Value    string
	MimeType string
	Provider string
	// Filename is the part's metadata.filename, when it is a string.
	Filename string
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	Field       string // where it was in the body ("resume[0]"), for errors
	InterruptID string
	Status      string          // resolved or cancelled
	Payload     json.RawMessage // nil when absent
}

// Roles of messages.
const (
	RoleDeveloper = "developer"
	RoleSystem    = "system"
	RoleAssistant = "assistant"
	RoleUser      = "user"
	RoleTool      = "tool"
	RoleActivity  = "activity"
	RoleReasoning = "reasoning"
)

// Decode reads a RunAgentInput. It refuses what the schema refuses, with a
// *FieldError naming the field: a required field missing, a field of the
// wrong type, a null where an optional field may only be left out, an
// unknown role, part or source type. Members the schema does not describe
// are allowed (its objects are loose).
func Decode(body []byte) (*Input, error) {
	top, err := object(body, "body")
	if err != nil {
		return nil, err
	}
	in := &Input{}
	if in.ThreadID, err = requiredString(top, "threadId", "threadId"); err != nil {
		return nil, err
	}
	if in.RunID, err = requiredString(top, "runId", "runId"); err != nil {
		return nil, err
	}
	for _, k := range []string{"protocolVersion", "parentRunId"} {
		if _, err := optionalString(top, k, k); err != nil {
			return nil, err
		}
	}
	// state: any JSON value; null stands for absent.
	raw, ok := top["messages"]
	if !ok {
		return nil, fieldErr("messages", "is required: the conversation, the last message being the user's new one")
	}
	msgs, err := array(raw, "messages")
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		msg, err := decodeMessage(m, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		in.Messages = append(in.Messages, msg)
	}
	if err := eachOf(top, "tools", checkTool); err != nil {
		return nil, err
	}
	if err := eachOf(top, "context", checkContext); err != nil {
		return nil, err
	}
	if err := notNull(top, "forwardedProps", "forwardedProps"); err != nil {
		return nil, err
	}
	if raw, ok := top["resume"]; ok {
		entries, err := array(raw, "resume")
		if err != nil {
			return nil, err
		}
		in.Resume = []ResumeEntry{}
		for i, e := range entries {
			r, err := decodeResume(e, fmt.Sprintf("resume[%d]", i))
			if err != nil {
				return nil, err
			}
			in.Resume = append(in.Resume, r)
		}
	}
	return in, nil
}

func decodeMessage(raw json.RawMessage, field string) (Message, error) {
	obj, err := object(raw, field)
	if err != nil {
		return Message{}, err
	}
	role, err := requiredString(obj, "role", field+".role")
	if err != nil {
		return Message{}, err
	}
	m := Message{Role: role}
	if m.ID, err = requiredString(obj, "id", field+".id"); err != nil {
		return Message{}, err
	}
	if _, err := optionalString(obj, "subagentRunId", field+".subagentRunId"); err != nil {
		return Message{}, err
	}
	if err := metadata(obj, field); err != nil {
		return Message{}, err
	}
	var optional []string
	switch role {
	case RoleDeveloper, RoleSystem:
		if _, err := requiredString(obj, "content", field+".content"); err != nil {
			return Message{}, err
		}
		optional = []string{"name", "encryptedValue"}
	case RoleAssistant:
		optional = []string{"name", "encryptedValue", "content"}
		if err := eachOf(obj, "toolCalls", func(raw json.RawMessage, f string) error { return checkToolCall(raw, field+"."+f) }); err != nil {
			return Message{}, err
		}
	case RoleUser:
		optional = []string{"name", "encryptedValue"}
		raw, ok := obj["content"]
		if !ok {
			return Message{}, fieldErr(field+".content", "is required in a user message")
		}
		if m.Text, m.Parts, err = content(raw, field+".content"); err != nil {
			return Message{}, err
		}
	case RoleTool:
		optional = []string{"error", "encryptedValue"}
		raw, ok := obj["content"]
		if !ok {
			return Message{}, fieldErr(field+".content", "is required in a tool message")
		}
		if _, _, err := content(raw, field+".content"); err != nil {
			return Message{}, err
		}
		if _, err := requiredString(obj, "toolCallId", field+".toolCallId"); err != nil {
			return Message{}, err
		}
	case RoleActivity:
		if _, err := requiredString(obj, "activityType", field+".activityType"); err != nil {
			return Message{}, err
		}
		raw, ok := obj["content"]
		if !ok {
			return Message{}, fieldErr(field+".content", "is required in an activity message")
		}
		if _, err := object(raw, field+".content"); err != nil {
			return Message{}, err
		}
	case RoleReasoning:
		if _, err := requiredString(obj, "content", field+".content"); err != nil {
			return Message{}, err
		}
		optional = []string{"encryptedValue"}
	default:
		return Message{}, fieldErr(field+".role", "is %q: a message's role is one of developer, system, assistant, user, tool, activity, reasoning", clip(role))
	}
	for _, k := range optional {
		if _, err := optionalString(obj, k, field+"."+k); err != nil {
			return Message{}, err
		}
	}
	return m, nil
}

// content reads string-or-parts content.
func content(raw json.RawMessage, field string) (string, []Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, fieldErr(field, "is not a valid JSON string")
		}
		return s, nil, nil
	}
	if len(raw) == 0 || raw[0] != '[' {
		return "", nil, fieldErr(field, "must be a string or an array of content parts")
	}
	items, err := array(raw, field)
	if err != nil {
		return "", nil, err
	}
	parts := []Part{}
	for i, it := range items {
		p, err := decodePart(it, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return "", nil, err
		}
		parts = append(parts, p)
	}
	return "", parts, nil
}

func decodePart(raw json.RawMessage, field string) (Part, error) {
	obj, err := object(raw, field)
	if err != nil {
		return Part{}, err
	}
	p := Part{Field: field}
	if p.Type, err = requiredString(obj, "type", field+".type"); err != nil {
		return Part{}, err
	}
	if _, err := optionalString(obj, "id", field+".id"); err != nil {
		return Part{}, err
	}
	if err := notNull(obj, "metadata", field+".metadata"); err != nil {
		return Part{}, err
	}
	if md, ok := obj["metadata"]; ok {
		var meta struct {
			Filename any `json:"filename"`
		}
		if json.Unmarshal(md, &meta) == nil {
			p.Filename, _ = meta.Filename.(string)
		}
	}
	switch p.Type {
	case "text":
		if p.Text, err = requiredString(obj, "text", field+".text"); err != nil {
			return Part{}, err
		}
		return p, nil
	case "image", "audio", "video", "document":
	default:
		return Part{}, fieldErr(field+".type", "is %q: a content part is text, image, audio, video or document", clip(p.Type))
	}
	raw, ok := obj["source"]
	if !ok {
		return Part{}, fieldErr(field+".source", "is required in a %s part", p.Type)
	}
	src, err := object(raw, field+".source")
	if err != nil {
		return Part{}, err
	}
	if p.Source, err = requiredString(src, "type", field+".source.type"); err != nil {
		return Part{}, err
	}
	if p.Value, err = requiredString(src, "value", field+".source.value"); err != nil {
		return Part{}, err
	}
	switch p.Source {
	case "data":
		if p.MimeType, err = requiredString(src, "mimeType", field+".source.mimeType"); err != nil {
			return Part{}, err
		}
	case "url", "file":
		if p.MimeType, err = optionalString(src, "mimeType", field+".source.mimeType"); err != nil {
			return Part{}, err
		}
		if p.Source == "file" {
			if p.Provider, err = optionalString(src, "provider", field+".source.provider"); err != nil {
				return Part{}, err
			}
		}
	default:
		return Part{}, fieldErr(field+".source.type", "is %q: a source is data, url or file", clip(p.Source))
	}
	return p, nil
}

func checkToolCall(raw json.RawMessage, field string) error {
	obj, err := object(raw, field)
	if err != nil {
		return err
	}
	if _, err := requiredString(obj, "id", field+".id"); err != nil {
		return err
	}
	typ, err := requiredString(obj, "type", field+".type")
	if err != nil {
		return err
	}
	if typ != "function" {
		return fieldErr(field+".type", "must be \"function\"")
	}
	fnRaw, ok := obj["function"]
	if !ok {
		return fieldErr(field+".function", "is required in a tool call")
	}
	fn, err := object(fnRaw, field+".function")
	if err != nil {
		return err
	}
	for _, k := range []string{"name", "arguments"} {
		if _, err := requiredString(fn, k, field+".function."+k); err != nil {
			return err
		}
	}
	if _, err := optionalString(obj, "encryptedValue", field+".encryptedValue"); err != nil {
		return err
	}
	return metadata(obj, field)
}

func checkTool(raw json.RawMessage, field string) error {
	obj, err := object(raw, field)
	if err != nil {
		return err
	}
	for _, k := range []string{"name", "description"} {
		if _, err := requiredString(obj, k, field+"."+k); err != nil {
			return err
		}
	}
	if err := notNull(obj, "parameters", field+".parameters"); err != nil {
		return err
	}
	return metadata(obj, field)
}

func checkContext(raw json.RawMessage, field string) error {
	obj, err := object(raw, field)
	if err != nil {
		return err
	}
	for _, k := range []string{"description", "value"} {
		if _, err := requiredString(obj, k, field+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func decodeResume(raw json.RawMessage, field string) (ResumeEntry, error) {
	obj, err := object(raw, field)
	if err != nil {
		return ResumeEntry{}, err
	}
	r := ResumeEntry{Field: field}
	if r.InterruptID, err = requiredString(obj, "interruptId", field+".interruptId"); err != nil {
		return ResumeEntry{}, err
	}
	if r.Status, err = requiredString(obj, "status", field+".status"); err != nil {
		return ResumeEntry{}, err
	}
	if r.Status != "resolved" && r.Status != "cancelled" {
		return ResumeEntry{}, fieldErr(field+".status", "is %q: it is \"resolved\" or \"cancelled\"", clip(r.Status))
	}
	if err := notNull(obj, "payload", field+".payload"); err != nil {
		return ResumeEntry{}, err
	}
	r.Payload = obj["payload"]
	if err := metadata(obj, field); err != nil {
		return ResumeEntry{}, err
	}
	return r, nil
}

// object decodes a JSON object into its members.
func object(raw json.RawMessage, field string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fieldErr(field, "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fieldErr(field, "is not valid JSON: %v", err)
	}
	return m, nil
}

func array(raw json.RawMessage, field string) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, fieldErr(field, "must be an array")
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fieldErr(field, "is not valid JSON: %v", err)
	}
	return a, nil
}

// eachOf checks each item of an optional array member (absent: none; null
// is refused, as the schema's default applies only to an absent key).
func eachOf(obj map[string]json.RawMessage, key string, check func(json.RawMessage, string) error) error {
	raw, ok := obj[key]
	if !ok {
		return nil
	}
	items, err := array(raw, key)
	if err != nil {
		return err
	}
	for i, it := range items {
		if err := check(it, fmt.Sprintf("%s[%d]", key, i)); err != nil {
			return err
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func requiredString(obj map[string]json.RawMessage, key, field string) (string, error) {
	raw, ok := obj[key]
	if !ok {
		return "", fieldErr(field, "is required")
	}
	return stringOf(raw, field)
}

// optionalString reads a member that may be left out, never null.
func optionalString(obj map[string]json.RawMessage, key, field string) (string, error) {
	raw, ok := obj[key]
	if !ok {
		return "", nil
	}
	return stringOf(raw, field)
}

func stringOf(raw json.RawMessage, field string) (string, error) {
	if isNull(raw) {
		return "", fieldErr(field, "is null: an optional field is left out, never null, and a required one is a string")
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", fieldErr(field, "must be a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fieldErr(field, "is not a valid JSON string")
	}
	return s, nil
}

// notNull refuses a member that is present and null (the schema's
// "any value but null, or left out").
func notNull(obj map[string]json.RawMessage, key, field string) error {
	if raw, ok := obj[key]; ok && isNull(raw) {
		return fieldErr(field, "is null: leave it out instead")
	}
	return nil
}

// metadata checks a member "metadata": an object when present.
func metadata(obj map[string]json.RawMessage, field string) error {
	raw, ok := obj["metadata"]
	if !ok {
		return nil
	}
	if _, err := object(raw, field+".metadata"); err != nil {
		return err
	}
	return nil
}

// clip keeps an error message short whatever a client sent.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Prompt is what a run asks the session: the text of the user message that
// ends the input's messages, and its media parts.
type Prompt struct {
	MessageID string
	Text      string
	Media     []Part
}

// Prompt reads the run's prompt: the user message the input's messages end
// with. ok is false when they end with another role's message, or with
// none: the run then prompts nothing (docs/ag-ui.md). A user message with
// neither text nor media is refused.
func (in *Input) Prompt() (p Prompt, ok bool, err error) {
	if len(in.Messages) == 0 {
		return Prompt{}, false, nil
	}
	last := len(in.Messages) - 1
	m := in.Messages[last]
	if m.Role != RoleUser {
		return Prompt{}, false, nil
	}
	p.MessageID = m.ID
	if m.Parts == nil {
		p.Text = m.Text
	} else {
		var b strings.Builder
		for _, part := range m.Parts {
			if part.Type == "text" {
				// As @ag-ui/core's contentToText: the text parts concatenated.
				b.WriteString(part.Text)
				continue
			}
			p.Media = append(p.Media, part)
		}
		p.Text = b.String()
	}
	if strings.TrimSpace(p.Text) == "" && len(p.Media) == 0 {
		return Prompt{}, false, fieldErr(fmt.Sprintf("messages[%d].content", last), "is empty: the user message has no text and no media")
	}
	return p, true, nil
}

// Bytes decodes a data source's value: base64, standard or URL-safe, padded
// or not.
func (p Part) Bytes() ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(p.Value); err == nil {
			return b, nil
		}
	}
	return nil, fieldErr(p.Field+".source.value", "is not base64: a data source carries its bytes base64-encoded")
}
