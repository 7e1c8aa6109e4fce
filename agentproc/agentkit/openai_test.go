package agentkit

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

// collect runs one Stream and gathers what it yields.
func collect(t *testing.T, m Model, req Request) (deltas []Delta, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for d, e := range m.Stream(ctx, req) {
		if e != nil {
			if err != nil {
				t.Fatalf("a second error after %v: %v", err, e)
			}
			err = e
			continue
		}
		if err != nil {
			t.Fatalf("delta %+v after error %v", d, err)
		}
		deltas = append(deltas, d)
	}
	return deltas, err
}

func TestOpenAIStreamsText(t *testing.T) {
	srv := agentkittest.NewOpenAIServer(t, func(agentkittest.ChatRequest) agentkittest.Reply {
		return agentkittest.Reply{Events: append([]string{
			agentkittest.Chunk(map[string]any{"role": "assistant", "reasoning_content": "hmm "}, ""),
		}, agentkittest.TextEvents("Hel", "lo, ", "wörld")...)}
	})
	m := &OpenAIModel{BaseURL: srv.URL + "/", Model: "test-model", APIKey: "sk-test"}
	deltas, err := collect(t, m, Request{
		System: "be brief",
		Messages: []Message{
			{Role: RoleUser, Text: "hi", Images: []agentproc.ImageContent{{Type: "image", Data: "AAAA", MimeType: "image/png"}}},
			{Role: RoleAssistant, Text: "", ToolCalls: []ToolCall{{ID: "c1", Name: "echo", Arguments: `{"text":"x"}`}}},
			{Role: RoleToolResult, ToolCallID: "c1", ToolName: "echo", Text: "x"},
		},
		Tools: []ToolSpec{{Name: "echo", Description: "echo it", Parameters: json.RawMessage(`{"type":"object"}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text, thinking strings.Builder
	for _, d := range deltas[:len(deltas)-1] {
		switch d.Kind {
		case DeltaText:
			text.WriteString(d.Text)
		case DeltaThinking:
			thinking.WriteString(d.Text)
		default:
			t.Errorf("unexpected delta %+v", d)
		}
	}
	if text.String() != "Hello, wörld" || thinking.String() != "hmm " {
		t.Errorf("text %q thinking %q", text.String(), thinking.String())
	}
	if last := deltas[len(deltas)-1]; last.Kind != DeltaFinish || last.Reason != StopStop {
		t.Errorf("last delta %+v", last)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "test-model" || !r.Stream || r.Authorization != "Bearer sk-test" || r.Path != "/v1/chat/completions" {
		t.Errorf("request %+v", r)
	}
	var roles []string
	for _, msg := range r.Messages {
		roles = append(roles, msg.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool" {
		t.Errorf("roles %v", roles)
	}
	if !strings.Contains(string(r.Messages[1].Content), `data:image/png;base64,AAAA`) {
		t.Errorf("image part missing: %s", r.Messages[1].Content)
	}
	if string(r.Messages[2].Content) != "null" || len(r.Messages[2].ToolCalls) != 1 ||
		r.Messages[2].ToolCalls[0].Function.Arguments != `{"text":"x"}` {
		t.Errorf("assistant message %+v", r.Messages[2])
	}
	if r.Messages[3].ToolCallID != "c1" || string(r.Messages[3].Content) != `"x"` {
		t.Errorf("tool message %+v", r.Messages[3])
	}
	if len(r.Tools) != 1 || r.Tools[0].Type != "function" || r.Tools[0].Function.Name != "echo" {
		t.Errorf("tools %+v", r.Tools)
	}
}

func TestOpenAIToolCallAcrossDeltas(t *testing.T) {
	srv := agentkittest.NewOpenAIServer(t, func(agentkittest.ChatRequest) agentkittest.Reply {
		return agentkittest.Reply{Events: agentkittest.ToolCallEvents("call_9", "echo", `{"te`, `xt":"h`, `i"}`)}
	})
	deltas, err := collect(t, &OpenAIModel{BaseURL: srv.URL, Model: "m"}, Request{Messages: []Message{{Role: RoleUser, Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	for _, d := range deltas {
		if d.Kind == DeltaToolCallArgs {
			args.WriteString(d.Text)
		}
	}
	if deltas[0].Kind != DeltaToolCall || deltas[0].ID != "call_9" || deltas[0].Name != "echo" {
		t.Errorf("first delta %+v", deltas[0])
	}
	if args.String() != `{"text":"hi"}` {
		t.Errorf("args %q", args.String())
	}
	if last := deltas[len(deltas)-1]; last.Kind != DeltaFinish || last.Reason != StopToolUse {
		t.Errorf("last %+v", last)
	}
}

func TestOpenAIErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply agentkittest.Reply
		want  []string
	}{
		{"500 with an OpenAI error body",
			agentkittest.Reply{Status: 500, Body: `{"error":{"message":"model overloaded","type":"server_error"}}`},
			[]string{`"m"`, "500 Internal Server Error", "model overloaded", "/v1/chat/completions"}},
		{"401 with a string error", agentkittest.Reply{Status: 401, Body: `{"error":"bad key"}`},
			[]string{"401 Unauthorized", "bad key"}},
		{"404 with a plain body", agentkittest.Reply{Status: 404, Body: "no such model\n"},
			[]string{"404 Not Found", "no such model"}},
		{"malformed chunk", agentkittest.Reply{Events: []string{agentkittest.Chunk(map[string]any{"content": "ok"}, ""), `{"choices":[{"delta":{"content":`}},
			[]string{"malformed stream chunk", `{\"choices\"`}},
		{"error object in the stream", agentkittest.Reply{Events: []string{`{"error":{"message":"rate limited mid-stream"}}`}},
			[]string{"server error in stream", "rate limited mid-stream"}},
		{"cut off without finish or DONE", agentkittest.Reply{Events: agentkittest.TextEvents("a")[:1], NoDone: true},
			[]string{"stream ended before the model finished"}},
		{"content filter", agentkittest.Reply{Events: []string{agentkittest.Chunk(map[string]any{}, "content_filter")}},
			[]string{"content filter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := agentkittest.NewOpenAIServer(t, func(agentkittest.ChatRequest) agentkittest.Reply { return tt.reply })
			_, err := collect(t, &OpenAIModel{BaseURL: srv.URL, Model: "m"}, Request{Messages: []Message{{Role: RoleUser, Text: "x"}}})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestOpenAIFinishWithoutDoneAndLength(t *testing.T) {
	srv := agentkittest.NewOpenAIServer(t, func(agentkittest.ChatRequest) agentkittest.Reply {
		return agentkittest.Reply{Events: []string{agentkittest.Chunk(map[string]any{"content": "cut"}, "length")}, NoDone: true}
	})
	deltas, err := collect(t, &OpenAIModel{BaseURL: srv.URL}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	if last := deltas[len(deltas)-1]; last.Reason != StopLength {
		t.Errorf("last %+v", last)
	}
}

func TestOpenAIUnreachable(t *testing.T) {
	// The address of a listener that is gone: connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = collect(t, &OpenAIModel{BaseURL: "http://" + addr + "/v1", Model: "m"}, Request{})
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "POST") {
		t.Errorf("err = %v", err)
	}
}

// newLoopbackServer serves h on 127.0.0.1 for the test's duration.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestOpenAINonStreamingAnswer(t *testing.T) {
	srv := http.NewServeMux()
	srv.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"whole","tool_calls":[{"id":"c","type":"function","function":{"name":"echo","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`))
	})
	ts := newLoopbackServer(t, srv)
	deltas, err := collect(t, &OpenAIModel{BaseURL: ts + "/v1"}, Request{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []DeltaKind{}
	for _, d := range deltas {
		kinds = append(kinds, d.Kind)
	}
	want := []DeltaKind{DeltaText, DeltaToolCall, DeltaToolCallArgs, DeltaFinish}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
}

// TestOpenAIAgentLoop runs a whole turn against the scripted server: a tool
// call, then text; the second request carries the tool result.
func TestOpenAIAgentLoop(t *testing.T) {
	srv := agentkittest.NewOpenAIServer(t, func(r agentkittest.ChatRequest) agentkittest.Reply {
		if r.LastRole() == "tool" {
			return agentkittest.Reply{Events: agentkittest.TextEvents("Echoed ", "it.")}
		}
		return agentkittest.Reply{Events: agentkittest.ToolCallEvents("call_1", "echo", `{"text":`, `"hey"}`)}
	})
	a, logs := newTestAgent(Options{Model: &OpenAIModel{BaseURL: srv.URL, Model: "m"}, System: "sys"})
	a.AddTool(Tool{Name: "echo", Run: func(_ context.Context, tc *ToolCtx, args json.RawMessage) (string, error) {
		_ = tc.Update("working")
		var v struct{ Text string }
		return v.Text + "!", json.Unmarshal(args, &v)
	}})
	h := start(t, a, logs)
	h.prompt(t, "p", "say hey")
	var upd agentproc.Event
	h.Await(agentproc.EventToolExecutionUpdate, nil).Decode(t, &upd)
	assertJSON(t, "partialResult", upd.PartialResult, `{"content":[{"type":"text","text":"working"}]}`)
	msgs := h.agentEnd(t)
	if got := lastAssistant(t, msgs).Text(); got != "Echoed it." {
		t.Errorf("reply %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	second := reqs[1]
	last := second.Messages[len(second.Messages)-1]
	if last.Role != "tool" || last.ToolCallID != "call_1" {
		t.Errorf("second request ends with %+v", last)
	}
	if second.Messages[0].Role != "system" {
		t.Errorf("no system message: %+v", second.Messages[0])
	}
}

func TestOpenAIAbortMidStream(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: " + agentkittest.Chunk(map[string]any{"content": "partial"}, "") + "\n\n"))
		w.(http.Flusher).Flush()
		select { // hold the stream open until the client goes away
		case <-r.Context().Done():
		case <-release:
		}
	})
	url := newLoopbackServer(t, mux)
	defer close(release)
	a, logs := newTestAgent(Options{Model: &OpenAIModel{BaseURL: url + "/v1"}})
	h := start(t, a, logs)
	h.prompt(t, "p", "x")
	h.Await(agentproc.EventMessageUpdate, func(l agentkittest.Line) bool { return strings.Contains(string(l.Raw), "text_delta") })
	h.Send(agentproc.SimpleCommand{ID: "ab", Type: agentproc.CmdAbort})
	last := lastAssistant(t, h.agentEnd(t))
	if last.StopReason != "aborted" || last.Text() != "partial" {
		t.Errorf("last %+v %q", last, last.Text())
	}
}

func TestModelFromEnv(t *testing.T) {
	t.Setenv(EnvLLMBaseURL, "")
	if _, ok := ModelFromEnv().(*ScriptedModel); !ok {
		t.Error("no base URL should give the scripted model")
	}
	t.Setenv(EnvLLMBaseURL, "http://127.0.0.1:9/v1")
	t.Setenv(EnvLLMModel, "llama")
	t.Setenv(EnvLLMAPIKey, "k")
	m, ok := ModelFromEnv().(*OpenAIModel)
	if !ok || m.BaseURL != "http://127.0.0.1:9/v1" || m.Model != "llama" || m.APIKey != "k" {
		t.Errorf("ModelFromEnv = %+v", m)
	}
}

// TestOpenAIToolCallInputStreams: a tool call's arguments, streamed by the
// server in fragments, go out as pi's toolcall_start, one toolcall_delta per
// fragment as it arrives (the server sends the next fragment only once the
// agent has written the previous one's delta), and toolcall_end with the
// whole call; the deltas joined are the arguments the tool runs with.
func TestOpenAIToolCallInputStreams(t *testing.T) {
	fragments := []string{`{"text":`, `"a long`, ` input, wörd`, ` by wörd"}`}
	written := make(chan int, len(fragments))
	mux := http.NewServeMux()
	var calls atomic.Int32
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) > 1 { // after the tool result
			for _, ev := range agentkittest.TextEvents("done") {
				_, _ = w.Write([]byte("data: " + ev + "\n\n"))
			}
			_, _ = w.Write([]byte("data: [DONE]\n\n"))
			return
		}
		send := func(delta map[string]any) {
			_, _ = w.Write([]byte("data: " + agentkittest.Chunk(delta, "") + "\n\n"))
			w.(http.Flusher).Flush()
		}
		send(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_7", "type": "function",
			"function": map[string]any{"name": "echo", "arguments": ""}}}})
		for i, f := range fragments {
			send(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": f}}}})
			select { // the agent wrote this fragment's delta before the next one exists
			case n := <-written:
				if n != i {
					t.Errorf("delta %d written while fragment %d was the last sent", n, i)
				}
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
				t.Errorf("fragment %d was not written as a toolcall_delta while the stream waited", i)
				return
			}
		}
		_, _ = w.Write([]byte("data: " + agentkittest.Chunk(map[string]any{}, "tool_calls") + "\n\ndata: [DONE]\n\n"))
	})
	url := newLoopbackServer(t, mux)
	a, logs := newTestAgent(Options{Model: &OpenAIModel{BaseURL: url + "/v1", Model: "m"}})
	a.AddTool(Tool{Name: "echo", Run: func(_ context.Context, _ *ToolCtx, args json.RawMessage) (string, error) {
		return string(args), nil
	}})
	h := start(t, a, logs)
	h.prompt(t, "p", "go")

	update := func(typ string) (agentproc.Event, agentkittest.Line) {
		t.Helper()
		l := h.Await(agentproc.EventMessageUpdate, func(l agentkittest.Line) bool {
			return strings.Contains(string(l.Raw), `"type":"`+typ+`"`)
		})
		var ev agentproc.Event
		l.Decode(t, &ev)
		return ev, l
	}
	startEv, _ := update(agentproc.AMEToolcallStart)
	blocks := startEv.Message.Blocks()
	ci := startEv.AssistantMessageEvent.ContentIndex
	if ci >= len(blocks) || blocks[ci].Type != "toolCall" || blocks[ci].ID != "call_7" || blocks[ci].Name != "echo" {
		t.Fatalf("toolcall_start's partial message %s (content index %d)", startEv.Message.Content, ci)
	}
	var joined strings.Builder
	for i, f := range fragments {
		ev, _ := update(agentproc.AMEToolcallDelta)
		if ev.AssistantMessageEvent.Delta != f || ev.AssistantMessageEvent.ContentIndex != ci {
			t.Fatalf("delta %d: %+v, want %q at %d", i, ev.AssistantMessageEvent, f, ci)
		}
		joined.WriteString(ev.AssistantMessageEvent.Delta)
		written <- i
	}
	endEv, _ := update(agentproc.AMEToolcallEnd)
	var call agentproc.ContentBlock
	if err := json.Unmarshal(endEv.AssistantMessageEvent.ToolCall, &call); err != nil || call.ID != "call_7" || call.Name != "echo" {
		t.Fatalf("toolcall_end's call %s: %v", endEv.AssistantMessageEvent.ToolCall, err)
	}
	assertJSON(t, "toolcall_end arguments", call.Arguments, joined.String())
	var exec agentproc.Event
	h.Await(agentproc.EventToolExecutionStart, nil).Decode(t, &exec)
	assertJSON(t, "tool_execution_start args", exec.Args, joined.String())
	h.agentEnd(t)
}
