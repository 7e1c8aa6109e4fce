package agentkittest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// ChatRequest is what a client sent to the OpenAIServer.
type ChatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`

	// Path and Authorization are taken from the HTTP request.
	Path          string `json:"-"`
	Authorization string `json:"-"`
}

// LastRole is the role of the last message.
func (r ChatRequest) LastRole() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Role
}

// Reply is the OpenAIServer's answer to one request.
type Reply struct {
	// Status, when set and not 200, makes the answer an error with Body.
	Status int
	Body   string
	// Events are the data payloads of the event stream, one event each,
	// written verbatim (so a test can send a malformed one).
	Events []string
	// NoDone leaves out the closing "data: [DONE]".
	NoDone bool
}

// TextEvents streams parts as content deltas, then finish_reason "stop".
func TextEvents(parts ...string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, chunk(map[string]any{"content": p}, nil))
	}
	return append(out, chunk(map[string]any{}, "stop"))
}

// ToolCallEvents streams one tool call: a header with id and name, then the
// argument text in the given fragments, then finish_reason "tool_calls".
func ToolCallEvents(id, name string, argParts ...string) []string {
	out := []string{chunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": ""},
	}}}, nil)}
	for _, p := range argParts {
		out = append(out, chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "function": map[string]any{"arguments": p},
		}}}, nil))
	}
	return append(out, chunk(map[string]any{}, "tool_calls"))
}

// Chunk builds one chat.completion.chunk payload with delta and an optional
// finish reason.
func Chunk(delta map[string]any, finish string) string {
	if finish == "" {
		return chunk(delta, nil)
	}
	return chunk(delta, finish)
}

func chunk(delta map[string]any, finish any) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
	return string(b)
}

// OpenAIServer is a scripted OpenAI-compatible chat-completions server on
// 127.0.0.1. URL is the base a client takes (it ends in /v1).
type OpenAIServer struct {
	URL string

	mu       sync.Mutex
	requests []ChatRequest
}

// NewOpenAIServer serves POST /v1/chat/completions with respond's replies.
// respond runs on the server's goroutines.
func NewOpenAIServer(t testing.TB, respond func(req ChatRequest) Reply) *OpenAIServer {
	t.Helper()
	s := &OpenAIServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req ChatRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, "bad request body: "+err.Error()), http.StatusBadRequest)
			return
		}
		req.Path = r.URL.Path
		req.Authorization = r.Header.Get("Authorization")
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()

		rep := respond(req)
		if rep.Status != 0 && rep.Status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.Status)
			_, _ = io.WriteString(w, rep.Body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		_, _ = io.WriteString(w, ": scripted server\n\n")
		for _, ev := range rep.Events {
			_, _ = io.WriteString(w, "data: "+strings.ReplaceAll(ev, "\n", "\ndata: ")+"\n\n")
			if fl != nil {
				fl.Flush()
			}
		}
		if !rep.NoDone {
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

// Requests returns the requests received so far.
func (s *OpenAIServer) Requests() []ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatRequest(nil), s.requests...)
}
