package agentkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// OpenAIModel is a client of an OpenAI-compatible chat-completions endpoint
// (POST {BaseURL}/chat/completions with stream:true, Server-Sent Events back).
// Tool calls use the "tools"/"tool_calls" fields; reasoning deltas are read
// from "reasoning_content" or "reasoning" where servers send them.
type OpenAIModel struct {
	// BaseURL includes the version, e.g. "http://127.0.0.1:11434/v1".
	BaseURL string
	// Model is the model name sent with each request.
	Model string
	// APIKey, if set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Client sends the requests; nil means http.DefaultClient. Streams can be
	// long: bound them with the context, not with Client.Timeout.
	Client *http.Client
	// MaxLineBytes caps one line of the event stream; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
}

// Info describes the model for get_state.
func (m *OpenAIModel) Info() ModelInfo {
	return ModelInfo{ID: m.Model, Provider: "openai-compatible", BaseURL: m.BaseURL}
}

func (m *OpenAIModel) endpoint() string {
	return strings.TrimRight(m.BaseURL, "/") + "/chat/completions"
}

// Stream sends req and yields the streamed answer.
func (m *OpenAIModel) Stream(ctx context.Context, req Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		stopped := false
		emit := func(d Delta) bool {
			if !stopped && !yield(d, nil) {
				stopped = true
			}
			return !stopped
		}
		if err := m.stream(ctx, req, emit); err != nil && !stopped {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			yield(Delta{}, fmt.Errorf("openai-compatible model %q: %w", m.Model, err))
		}
	}
}

// Wire types of the chat-completions API (the parts agentkit uses).
type (
	oaRequest struct {
		Model    string      `json:"model"`
		Messages []oaMessage `json:"messages"`
		Tools    []oaTool    `json:"tools,omitempty"`
		Stream   bool        `json:"stream"`
	}
	oaMessage struct {
		Role       string       `json:"role"`
		Content    any          `json:"content"` // string, []oaPart, or nil
		ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
		ToolCallID string       `json:"tool_call_id,omitempty"`
	}
	oaPart struct {
		Type     string      `json:"type"`
		Text     string      `json:"text,omitempty"`
		ImageURL *oaImageURL `json:"image_url,omitempty"`
	}
	oaImageURL struct {
		URL string `json:"url"`
	}
	oaToolCall struct {
		ID       string     `json:"id"`
		Type     string     `json:"type"`
		Function oaFunction `json:"function"`
	}
	oaFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	oaTool struct {
		Type     string         `json:"type"`
		Function oaToolFunction `json:"function"`
	}
	oaToolFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}

	oaChunk struct {
		Choices []oaChoice      `json:"choices"`
		Error   json.RawMessage `json:"error"`
	}
	oaChoice struct {
		Index        int     `json:"index"`
		Delta        oaDelta `json:"delta"`
		Message      oaDelta `json:"message"` // non-streaming answers
		FinishReason *string `json:"finish_reason"`
	}
	oaDelta struct {
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
		Reasoning        string `json:"reasoning"`
		ToolCalls        []struct {
			Index    *int   `json:"index"`
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
)

func oaMessages(req Request) []oaMessage {
	out := make([]oaMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, oaMessage{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			if len(m.Images) == 0 {
				out = append(out, oaMessage{Role: "user", Content: m.Text})
				continue
			}
			parts := []oaPart{{Type: "text", Text: m.Text}}
			for _, img := range m.Images {
				parts = append(parts, oaPart{Type: "image_url",
					ImageURL: &oaImageURL{URL: "data:" + img.MimeType + ";base64," + img.Data}})
			}
			out = append(out, oaMessage{Role: "user", Content: parts})
		case RoleAssistant:
			msg := oaMessage{Role: "assistant"}
			if m.Text != "" {
				msg.Content = m.Text
			}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: tc.ID, Type: "function",
					Function: oaFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
			out = append(out, msg)
		case RoleToolResult:
			out = append(out, oaMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: m.Text})
		}
	}
	return out
}

func oaTools(specs []ToolSpec) []oaTool {
	out := make([]oaTool, 0, len(specs))
	for _, t := range specs {
		//lint:ignore S1016 the wire shape is OpenAI's, not the SDK's: a field added to ToolSpec must not reach the request unseen.
		fn := oaToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
		out = append(out, oaTool{Type: "function", Function: fn})
	}
	return out
}

func (m *OpenAIModel) stream(ctx context.Context, req Request, emit func(Delta) bool) error {
	body, err := plainjson.Marshal(oaRequest{Model: m.Model, Messages: oaMessages(req), Tools: oaTools(req.Tools), Stream: true})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	url := m.endpoint()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if m.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+m.APIKey)
	}
	client := m.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, serverMessage(excerpt))
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType == "application/json" {
		// A server that ignores stream:true answers with one completion.
		return m.whole(resp.Body, emit)
	}
	return m.events(resp.Body, emit)
}

// serverMessage extracts the error text of an error answer: OpenAI's
// {"error":{"message"}}, {"error":"..."}, {"message"} or {"detail"}; else
// the body itself, trimmed.
func serverMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		if msg := errorText(v.Error); msg != "" {
			return msg
		}
		if v.Message != "" {
			return v.Message
		}
		if msg := errorText(v.Detail); msg != "" {
			return msg
		}
	}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "(empty body)"
	}
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// errorText reads an error that is a string or an object with "message".
func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(raw)
}

// finishReason maps chat-completions finish reasons to pi's.
func finishReason(r string) (StopReason, error) {
	switch r {
	case "stop", "":
		return StopStop, nil
	case "length":
		return StopLength, nil
	case "tool_calls", "function_call":
		return StopToolUse, nil
	case "content_filter":
		return "", errors.New("the provider's content filter stopped the answer")
	default:
		return StopStop, nil
	}
}

// chunkState turns chunks into deltas.
type chunkState struct {
	emit    func(Delta) bool
	finish  *string
	toolIDs map[int]bool
}

func (st *chunkState) apply(c *oaChunk, whole bool) (bool, error) {
	if msg := errorText(c.Error); msg != "" {
		return false, fmt.Errorf("server error in stream: %s", msg)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // agentkit asks for one choice
		}
		d := ch.Delta
		if whole {
			d = ch.Message
		}
		if t := d.ReasoningContent + d.Reasoning; t != "" && !st.emit(Delta{Kind: DeltaThinking, Text: t}) {
			return false, nil
		}
		if d.Content != "" && !st.emit(Delta{Kind: DeltaText, Text: d.Content}) {
			return false, nil
		}
		for i, tc := range d.ToolCalls {
			idx := i
			if tc.Index != nil {
				idx = *tc.Index
			}
			if !st.toolIDs[idx] {
				st.toolIDs[idx] = true
				if !st.emit(Delta{Kind: DeltaToolCall, Index: idx, ID: tc.ID, Name: tc.Function.Name}) {
					return false, nil
				}
			} else if tc.ID != "" || tc.Function.Name != "" {
				// Some servers repeat the header; the builder fills in what was missing.
				if !st.emit(Delta{Kind: DeltaToolCall, Index: idx, ID: tc.ID, Name: tc.Function.Name}) {
					return false, nil
				}
			}
			if tc.Function.Arguments != "" && !st.emit(Delta{Kind: DeltaToolCallArgs, Index: idx, Text: tc.Function.Arguments}) {
				return false, nil
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			r := *ch.FinishReason
			st.finish = &r
		}
	}
	return true, nil
}

func (st *chunkState) done() error {
	r := ""
	if st.finish != nil {
		r = *st.finish
	}
	reason, err := finishReason(r)
	if err != nil {
		return err
	}
	st.emit(Delta{Kind: DeltaFinish, Reason: reason})
	return nil
}

func (m *OpenAIModel) whole(body io.Reader, emit func(Delta) bool) error {
	var c oaChunk
	if err := json.NewDecoder(io.LimitReader(body, int64(m.maxLine()))).Decode(&c); err != nil {
		return fmt.Errorf("decode completion: %w", err)
	}
	st := &chunkState{emit: emit, toolIDs: map[int]bool{}}
	if more, err := st.apply(&c, true); err != nil || !more {
		return err
	}
	return st.done()
}

func (m *OpenAIModel) maxLine() int {
	if m.MaxLineBytes > 0 {
		return m.MaxLineBytes
	}
	return DefaultMaxLineBytes
}

// events reads the Server-Sent Events stream: "data:" lines joined until a
// blank line make one event; "data: [DONE]" ends the stream.
func (m *OpenAIModel) events(body io.Reader, emit func(Delta) bool) error {
	lr := newLineReader(body, m.maxLine())
	st := &chunkState{emit: emit, toolIDs: map[int]bool{}}
	var (
		data      []byte
		eventName string
	)
	// dispatch handles one complete event; it reports whether to go on.
	dispatch := func() (more bool, finished bool, err error) {
		defer func() { data, eventName = data[:0], "" }()
		payload := bytes.TrimSpace(data)
		if len(payload) == 0 {
			return true, false, nil
		}
		if string(payload) == "[DONE]" {
			return false, true, nil
		}
		if eventName == "error" {
			return false, false, fmt.Errorf("server error in stream: %s", serverMessage(payload))
		}
		var c oaChunk
		if err := json.Unmarshal(payload, &c); err != nil {
			return false, false, fmt.Errorf("malformed stream chunk %q: %w", excerpt(payload), err)
		}
		more, err = st.apply(&c, false)
		return more, false, err
	}
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			more, finished, derr := dispatch()
			if derr != nil || !more && !finished {
				return derr
			}
			if !finished && st.finish == nil {
				return errors.New("stream ended before the model finished (no finish_reason and no [DONE])")
			}
			return st.done()
		}
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		if len(line) == 0 {
			more, finished, derr := dispatch()
			if derr != nil {
				return derr
			}
			if finished {
				return st.done()
			}
			if !more {
				return nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		case "event":
			eventName = string(value)
		case "": // a comment line (": keep-alive")
		}
	}
}
