// Package llmstub is a scripted OpenAI-compatible chat-completions server for
// tests and benchmarks: real HTTP on 127.0.0.1, streaming answers as
// server-sent events the way OpenAI's API does, so that real clients (the pi
// coding agent, agentkit, any OpenAI SDK) run against it unmodified and
// offline.
//
// A Script decides each answer from the request: streamed text, reasoning
// (reasoning_content deltas), tool calls, an HTTP error, a stream that stalls
// until the client goes away (to test aborts), or a stream cut short.
package llmstub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Script answers one request. It runs on the server's goroutines, one call
// per request, possibly concurrently.
type Script func(req Request) Reply

// Request is what a client sent to POST /v1/chat/completions.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`

	// Authorization is the request's Authorization header.
	Authorization string `json:"-"`
	// Body is the request body as received.
	Body []byte `json:"-"`
}

// Message is one chat message of a request.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
}

// ToolCall is an assistant's tool call as the client replays it.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool the client offers.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Text is the text of a message's content: the string, or the text parts of
// an array of parts.
func (m Message) Text() string {
	if len(m.Content) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Images counts the image parts of a message's content.
func (m Message) Images() int {
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return 0
	}
	n := 0
	for _, p := range parts {
		if p.Type == "image_url" {
			n++
		}
	}
	return n
}

// LastRole is the role of the last message ("tool" after a tool result).
func (r Request) LastRole() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Role
}

// LastUser is the text of the last user message.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// LastToolResult is the text of the last tool result message.
func (r Request) LastToolResult() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// HasTool reports whether the client offered a tool of that name.
func (r Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// Reply is the server's answer to one request.
type Reply struct {
	// Status, when set and not 200, answers with that status and Body (a
	// JSON error object when Body is empty).
	Status int
	Body   string

	// Events are the data payloads of the stream, one event each, written
	// verbatim (a test may send a malformed one). Build them with Text,
	// Reasoning, CallTool, Finish and Usage.
	Events []string
	// Delay is waited before each event (slow streaming).
	Delay time.Duration
	// Hold, when set, pauses the stream after HoldAfter events until it is
	// closed (or the client goes away, or the server closes): a model in
	// the middle of its answer for as long as a test needs.
	Hold      <-chan struct{}
	HoldAfter int
	// Stall keeps the stream open after the events, without [DONE], until
	// the client goes away or the server closes: a model that never
	// finishes, for abort tests.
	Stall bool
	// NoDone leaves out the closing "data: [DONE]".
	NoDone bool
}

// Error is a Reply answering status with an OpenAI-style error object.
func Error(status int, message string) Reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "server_error", "code": nil}})
	return Reply{Status: status, Body: string(b)}
}

// Chunk builds one chat.completion.chunk payload with delta and a finish
// reason ("" for none).
func Chunk(delta map[string]any, finish string) string {
	var fr any
	if finish != "" {
		fr = finish
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": "stub",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fr}},
	})
	return string(b)
}

// Text streams parts as content deltas (no finish reason: add Finish).
func Text(parts ...string) []string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		out = append(out, Chunk(map[string]any{"content": p}, ""))
	}
	return out
}

// Reasoning streams parts as reasoning_content deltas (thinking).
func Reasoning(parts ...string) []string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		out = append(out, Chunk(map[string]any{"reasoning_content": p}, ""))
	}
	return out
}

// CallTool streams one tool call with index idx: a header with id and name,
// then the JSON arguments in one fragment (no finish reason: add
// Finish("tool_calls")).
func CallTool(idx int, id, name string, args any) []string {
	a, err := json.Marshal(args)
	if err != nil {
		panic("llmstub: tool arguments not marshalable: " + err.Error())
	}
	return []string{
		Chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": idx, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""},
		}}}, ""),
		Chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": idx, "function": map[string]any{"arguments": string(a)},
		}}}, ""),
	}
}

// CallToolInParts streams one tool call with index idx whose JSON
// arguments arrive in the fragments given, one event each, the way models
// stream a long tool input (no finish reason: add Finish("tool_calls")).
func CallToolInParts(idx int, id, name string, fragments ...string) []string {
	out := []string{Chunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": idx, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""},
	}}}, "")}
	for _, f := range fragments {
		out = append(out, Chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": idx, "function": map[string]any{"arguments": f},
		}}}, ""))
	}
	return out
}

// Finish is the closing chunk with a finish reason (stop, length, tool_calls).
func Finish(reason string) string { return Chunk(map[string]any{}, reason) }

// Usage is a usage-only chunk (what servers send with include_usage).
func Usage(prompt, completion int) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": "stub", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
	return string(b)
}

// Stream joins event lists into one (Text, then Finish, then Usage, ...).
func Stream(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("llmstub: Stream takes strings and []string, not %T", p))
		}
	}
	return out
}

// Say is the common reply: the parts as text, finish "stop", a small usage.
func Say(parts ...string) Reply {
	return Reply{Events: Stream(Text(parts...), Finish("stop"), Usage(10, len(parts)))}
}

// Sequence answers the n-th request with replies[n], and every later one
// with the last reply.
func Sequence(replies ...Reply) Script {
	if len(replies) == 0 {
		panic("llmstub: Sequence needs at least one reply")
	}
	var mu sync.Mutex
	n := 0
	return func(Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		r := replies[min(n, len(replies)-1)]
		n++
		return r
	}
}

// Server is a running stub. The zero value is not usable; call Start.
type Server struct {
	// URL is the base a client takes, ending in /v1 (http://127.0.0.1:port/v1).
	URL string

	srv    *http.Server
	ln     net.Listener
	closed chan struct{}

	mu       sync.Mutex
	script   Script
	requests []Request
}

// Start listens on 127.0.0.1 (a free port) and serves script.
func Start(script Script) (*Server, error) {
	if script == nil {
		return nil, errors.New("llmstub: nil script")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("llmstub: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/v1", script: script, ln: ln, closed: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// SetScript replaces the script for the requests that follow.
func (s *Server) SetScript(script Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = script
}

// Close stops the server; stalled streams end.
func (s *Server) Close() {
	select {
	case <-s.closed:
		return
	default:
	}
	close(s.closed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}

// Requests returns the requests received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || strings.TrimSuffix(r.URL.Path, "/") != "/v1/chat/completions" {
		writeJSONError(w, http.StatusNotFound, "llmstub serves POST /v1/chat/completions only, not "+r.Method+" "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSONError(w, http.StatusBadRequest, "the request body is not a chat completion request: "+err.Error())
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	req.Body = body
	s.mu.Lock()
	s.requests = append(s.requests, req)
	script := s.script
	s.mu.Unlock()

	rep := script(req)
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		b := rep.Body
		if b == "" {
			b = fmt.Sprintf(`{"error":{"message":%q}}`, http.StatusText(rep.Status))
		}
		_, _ = io.WriteString(w, b)
		return
	}
	if !req.Stream {
		writeJSONError(w, http.StatusBadRequest, "llmstub answers streaming requests only (stream: true)")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	flush()
	for i, ev := range rep.Events {
		if rep.Hold != nil && i == rep.HoldAfter {
			select {
			case <-rep.Hold:
			case <-r.Context().Done():
				return
			case <-s.closed:
				return
			}
		}
		if rep.Delay > 0 {
			select {
			case <-time.After(rep.Delay):
			case <-r.Context().Done():
				return
			case <-s.closed:
				return
			}
		}
		if _, err := io.WriteString(w, "data: "+strings.ReplaceAll(ev, "\n", "\ndata: ")+"\n\n"); err != nil {
			return
		}
		flush()
	}
	if rep.Stall {
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	if !rep.NoDone {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		flush()
	}
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg}})
	_, _ = w.Write(b)
}
