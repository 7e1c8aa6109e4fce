package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// readChat reads a chat stream to its end and returns its events ([DONE]
// is an event whose Raw is "[DONE]").
func readChat(t *testing.T, s *testkit.SSE) []testkit.Event {
	t.Helper()
	var out []testkit.Event
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("the chat stream did not end; so far: %v", types(out))
		}
	}
}

// nextChunk waits for the next chunk of type typ on a chat stream.
func nextChunk(t *testing.T, s *testkit.SSE, typ string) testkit.Event {
	t.Helper()
	return s.Wait(t, 10*time.Second, typ, func(e testkit.Event) bool { return e.Data["type"] == typ })
}

// types lists the chunk types of a chat stream ("[DONE]" for the end).
func types(evs []testkit.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Raw == "[DONE]" {
			out = append(out, "[DONE]")
			continue
		}
		out = append(out, fmt.Sprint(e.Data["type"]))
	}
	return out
}

func compact(ts []string) string {
	var out []string
	for _, t := range ts {
		if len(out) > 0 && out[len(out)-1] == t+"*" {
			continue
		}
		if len(out) > 0 && out[len(out)-1] == t {
			out[len(out)-1] = t + "*"
			continue
		}
		out = append(out, t)
	}
	return strings.Join(out, " ")
}

func textOf(evs []testkit.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Data["type"] == "text-delta" {
			b.WriteString(e.Data["delta"].(string))
		}
	}
	return b.String()
}

// waitTurnOn waits on the session stream for the chunks of the turn with
// messageId, from its start to its finish, and returns their data.
func waitTurnOn(t *testing.T, s *testkit.SSE, messageID string) []string {
	t.Helper()
	start := s.Wait(t, 10*time.Second, "start of "+messageID, func(e testkit.Event) bool {
		return e.Kind == "chat" && e.Data["type"] == "start" && e.Data["messageId"] == messageID
	})
	out := []string{start.Raw}
	for {
		e := s.Wait(t, 10*time.Second, "chunks of "+messageID, testkit.IsKind("chat"))
		if e.Data["type"] == "data-user-message" {
			continue
		}
		out = append(out, e.Raw)
		if e.Data["type"] == "finish" {
			return out
		}
	}
}

// The answer is the turn that answers the prompt, as a UI message stream:
// the headers the AI SDK wants, the chunks the session stream carries for
// the turn (the user message excepted), [DONE], then the end.
func TestChatStreamsTheTurn(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	events := d.SSE(id, "")
	events.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))

	s, status, body := d.Chat(id, daemon.ChatBody("hello there"))
	if status != http.StatusOK {
		t.Fatalf("chat: %d %s", status, body)
	}
	h := s.Resp.Header
	if h.Get("Content-Type") != "text/event-stream" || h.Get("x-vercel-ai-ui-message-stream") != "v1" || h.Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers %v", h)
	}
	evs := readChat(t, s)
	got := compact(types(evs))
	if got != "start start-step text-start text-delta* text-end finish-step finish [DONE]" {
		t.Fatalf("chunks: %s", got)
	}
	if textOf(evs) != "echo: hello there" {
		t.Fatalf("text %q", textOf(evs))
	}
	for _, e := range evs {
		if e.Kind != "" || e.ID != "" {
			t.Errorf("a chat stream's events are data only: %+v", e)
		}
	}
	start := evs[0].Data
	mid, _ := start["messageId"].(string)
	if !strings.HasPrefix(mid, "turn-") || evs[len(evs)-2].Data["messageMetadata"].(map[string]any)["stopReason"] != "end_turn" {
		t.Fatalf("start %v finish %v", start, evs[len(evs)-2].Data)
	}

	// The session stream carried the same chunks for the turn.
	var onChat []string
	for _, e := range evs[:len(evs)-1] {
		onChat = append(onChat, e.Raw)
	}
	onSession := waitTurnOn(t, events, mid)
	if strings.Join(onChat, "\n") != strings.Join(onSession, "\n") {
		t.Fatalf("the chat stream and the session stream differ:\nchat:    %q\nsession: %q", onChat, onSession)
	}
	// The user message went to the session stream only, with the text.
	if um := events.All(); !strings.Contains(fmt.Sprint(types(um)), "data-user-message") {
		t.Fatalf("the session stream has no user message: %v", types(um))
	}
}

// regenerate-message asks again with the same prompt: a new turn, with a
// message id of its own.
func TestChatRegenerate(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	s, status, body := d.Chat(id, daemon.ChatBody("once more"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	first := readChat(t, s)
	mid := first[0].Data["messageId"].(string)
	regen := map[string]any{"id": "chat", "trigger": "regenerate-message", "messageId": mid, "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "once"}, map[string]any{"type": "text", "text": "more"}}},
	}, "extra": map[string]any{"the app's": "own field"}}
	s, status, body = d.Chat(id, regen)
	if status != 200 {
		t.Fatalf("regenerate: %d %s", status, body)
	}
	second := readChat(t, s)
	if second[0].Data["messageId"] == mid || textOf(second) != "echo: once\n\nmore" {
		t.Fatalf("regenerated %v %q (first %s)", second[0].Data, textOf(second), mid)
	}
	_, out := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	if n := len(out["messages"].([]any)); n != 4 {
		t.Fatalf("transcript has %d entries, want 2 turns of 2: %v", n, out)
	}
}

// An error in the turn is an error chunk; the stream still ends with finish
// and [DONE].
func TestChatErrorTurn(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	s, status, body := d.Chat(id, daemon.ChatBody("fail"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	evs := readChat(t, s)
	got := compact(types(evs))
	if !strings.HasSuffix(got, "error finish [DONE]") {
		t.Fatalf("chunks: %s", got)
	}
	if !strings.Contains(fmt.Sprint(evs[len(evs)-3].Data["errorText"]), "the model failed on purpose") {
		t.Fatalf("error %v", evs[len(evs)-3].Data)
	}
}

// POST …/abort during the turn: the stream shows abort, then finish.
func TestChatAbort(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	s, status, body := d.Chat(id, daemon.ChatBody("slow"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	nextChunk(t, s, "text-delta")
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/abort", nil); st != 200 || out["wasBusy"] != true {
		t.Fatalf("abort: %d %v", st, out)
	}
	rest := readChat(t, s)
	got := compact(types(rest))
	if !strings.HasSuffix(got, "abort finish [DONE]") {
		t.Fatalf("after abort: %s", got)
	}
	if stop := rest[len(rest)-2].Data["messageMetadata"].(map[string]any)["stopReason"]; stop != "cancelled" {
		t.Fatalf("stop reason %v", stop)
	}
}

// A client that goes away does not cancel the turn: it runs to its end.
func TestChatDisconnectKeepsTheTurn(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	events := d.SSE(id, "")
	s, status, body := d.Chat(id, daemon.ChatBody("slow"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	start := nextChunk(t, s, "start")
	nextChunk(t, s, "text-delta")
	s.Close()
	chunks := waitTurnOn(t, events, start.Data["messageId"].(string))
	var finish map[string]any
	_ = json.Unmarshal([]byte(chunks[len(chunks)-1]), &finish)
	if stop := finish["messageMetadata"].(map[string]any)["stopReason"]; stop != "end_turn" {
		t.Fatalf("the turn ended %v after its chat client left", stop)
	}
	if !strings.Contains(strings.Join(chunks, ""), "chunk39") {
		t.Fatalf("the turn did not run to its end: %q", chunks)
	}
	// The chat stream's subscriber is gone with its client.
	testkit.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(metrics(t, d), `surfaced_clients{kind="chat"} 0`)
	}, "the chat client counted down")
}

func metrics(t *testing.T, d *daemon.Daemon) string {
	t.Helper()
	_, b := d.Do("GET", "/metrics", nil)
	return string(b)
}

// A prompt sent while a turn runs waits in the inbox; its stream is the turn
// that answers it, not the running one.
func TestChatQueuedPrompt(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	first, status, body := d.Chat(id, daemon.ChatBody("slow"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	nextChunk(t, first, "text-delta")
	second, status, body := d.Chat(id, daemon.ChatBody("second"))
	if status != 200 {
		t.Fatalf("queued chat: %d %s", status, body)
	}
	a, b := readChat(t, first), readChat(t, second)
	if !strings.HasPrefix(textOf(a), "chunk1 ") || textOf(b) != "echo: second" {
		t.Fatalf("first %q second %q", textOf(a), textOf(b))
	}
	if b[0].Data["messageId"] == nil || b[0].Data["messageId"] == first.All()[0].Data["messageId"] {
		t.Fatalf("the queued prompt's stream has the running turn's id: %v", b[0].Data)
	}
	if compact(types(b)) != "start start-step text-start text-delta* text-end finish-step finish [DONE]" {
		t.Fatalf("queued stream: %s", compact(types(b)))
	}
}

// GET …/chat/stream: the running turn from its start (same message id),
// then live; 204 when no turn runs.
func TestChatResume(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	events := d.SSE(id, "")
	if st, b := d.Do("GET", "/api/sessions/"+id+"/chat/stream", nil); st != http.StatusNoContent || len(b) != 0 {
		t.Fatalf("no turn: %d %q", st, b)
	}
	// The dialog holds the turn open.
	s, status, body := d.Chat(id, daemon.ChatBody("ask"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	start := nextChunk(t, s, "start")
	ui := events.Wait(t, 10*time.Second, "dialog", testkit.IsKind("ui-request"))
	s.Close()

	r, status, body := testkit.TryOpenSSE(d.URL+"/api/sessions/"+id+"/chat/stream", d.Auth())
	if status != 200 {
		t.Fatalf("resume: %d %s", status, body)
	}
	defer r.Close()
	if r.Resp.Header.Get("x-vercel-ai-ui-message-stream") != "v1" {
		t.Fatalf("headers %v", r.Resp.Header)
	}
	again := nextChunk(t, r, "start")
	if again.Raw != start.Raw {
		t.Fatalf("resumed start %s, want %s", again.Raw, start.Raw)
	}
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": ui.Data["id"], "confirmed": true}); st != 200 {
		t.Fatalf("answer: %d %v", st, out)
	}
	rest := readChat(t, r)
	if !strings.HasPrefix(textOf(rest), "dialog said ") || !strings.HasSuffix(compact(types(rest)), "finish [DONE]") {
		t.Fatalf("resumed stream: %s %q", compact(types(rest)), textOf(rest))
	}
	if st, _ := d.Do("GET", "/api/sessions/"+id+"/chat/stream", nil); st != http.StatusNoContent {
		t.Fatalf("after the turn: %d", st)
	}
}

// A turn that emitted more than the replay window keeps cannot be resumed
// from its start: the answer says so.
func TestChatResumeOutsideTheWindow(t *testing.T) {
	d := daemon.Start(t, daemon.Limits(surfaced.Limits{ReplayFrames: 8}))
	id := d.Create(nil)
	events := d.SSE(id, "")
	s, status, body := d.Chat(id, daemon.ChatBody("ask"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	nextChunk(t, s, "start")
	ui := events.Wait(t, 10*time.Second, "dialog", testkit.IsKind("ui-request"))
	for i := 0; i < 10; i++ {
		if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil); st != 200 {
			t.Fatalf("increment: %d %v", st, out)
		}
	}
	st, out := d.JSON("GET", "/api/sessions/"+id+"/chat/stream", nil)
	if st != http.StatusConflict || daemon.ErrCode(out) != "turn_not_replayable" || !strings.Contains(fmt.Sprint(out), "replay window") {
		t.Fatalf("resume outside the window: %d %v", st, out)
	}
	d.JSON("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": ui.Data["id"], "confirmed": true})
	if got := compact(types(readChat(t, s))); !strings.HasSuffix(got, "finish [DONE]") {
		t.Fatalf("the chat stream itself goes on: %s", got)
	}
}

// Every error before the stream starts is a JSON error like the rest of
// /api.
func TestChatErrors(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": "alice-secret-token", "bob": "bob-secret-token-1"})
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }),
		daemon.Gateway(gateway.Limits{PromptBodyBytes: 4096}))
	alice, bob := d.As("alice-secret-token"), d.As("bob-secret-token-1")
	id := alice.Create(nil)
	ended := alice.Create(nil)
	if st, out := alice.JSON("DELETE", "/api/sessions/"+ended, nil); st != 200 {
		t.Fatalf("delete: %d %v", st, out)
	}
	chat := "/api/sessions/" + id + "/chat"
	user := func(parts ...any) map[string]any {
		return map[string]any{"messages": []any{map[string]any{"id": "u", "role": "user", "parts": parts}}}
	}
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	file := func(url, mediaType string) map[string]any {
		return map[string]any{"type": "file", "url": url, "mediaType": mediaType}
	}
	cases := []struct {
		name   string
		who    *daemon.Daemon
		path   string
		body   any
		hdr    http.Header
		status int
		code   string
		field  string
	}{
		{"no credential", alice, chat, daemon.ChatBody("hi"), http.Header{"Authorization": nil}, 401, "unauthorized", ""},
		{"missing session", alice, "/api/sessions/nope/chat", daemon.ChatBody("hi"), nil, 404, "not_found", ""},
		{"foreign session", bob, chat, daemon.ChatBody("hi"), nil, 404, "not_found", ""},
		{"ended session", alice, "/api/sessions/" + ended + "/chat", daemon.ChatBody("hi"), nil, 409, "session_ended", ""},
		{"no messages", alice, chat, map[string]any{"id": "x"}, nil, 400, "invalid_field", "messages"},
		{"messages not an array", alice, chat, map[string]any{"messages": "hi"}, nil, 400, "invalid_field", "messages"},
		{"no user message", alice, chat, map[string]any{"messages": []any{map[string]any{"role": "assistant", "parts": []any{text("hi")}}}}, nil, 400, "no_user_message", "messages"},
		{"empty messages", alice, chat, map[string]any{"messages": []any{}}, nil, 400, "no_user_message", "messages"},
		{"bad trigger", alice, chat, map[string]any{"trigger": "resume-stream", "messages": []any{}}, nil, 400, "invalid_field", "trigger"},
		{"parts not an array", alice, chat, map[string]any{"messages": []any{map[string]any{"role": "user", "parts": "hi"}}}, nil, 400, "invalid_field", "messages[0].parts"},
		{"no parts", alice, chat, map[string]any{"messages": []any{map[string]any{"role": "user"}}}, nil, 400, "invalid_field", "messages[0].parts"},
		{"part without a type", alice, chat, user(map[string]any{"text": "hi"}), nil, 400, "invalid_field", "messages[0].parts[0].type"},
		{"text part without text", alice, chat, user(map[string]any{"type": "text"}), nil, 400, "invalid_field", "messages[0].parts[0].text"},
		{"text not a string", alice, chat, user(map[string]any{"type": "text", "text": 3}), nil, 400, "invalid_field", "messages[0].parts"},
		{"empty prompt", alice, chat, user(text("  "), map[string]any{"type": "step-start"}), nil, 400, "empty_prompt", "messages[0].parts"},
		{"file without url", alice, chat, user(map[string]any{"type": "file", "mediaType": "image/png"}), nil, 400, "invalid_field", "messages[0].parts[0].url"},
		{"file without media type", alice, chat, user(map[string]any{"type": "file", "url": "data:,x"}), nil, 400, "invalid_field", "messages[0].parts[0].mediaType"},
		{"bad data URL", alice, chat, user(file("data:image/png;base64,@@@", "image/png")), nil, 400, "invalid_field", "messages[0].parts[0].url"},
		{"data URL without comma", alice, chat, user(file("data:image/png;base64", "image/png")), nil, 400, "invalid_field", "messages[0].parts[0].url"},
		{"foreign URL", alice, chat, user(text("see"), file("https://example.invalid/cat.png", "image/png")), nil, 400, "invalid_field", "messages[0].parts[1].url"},
		{"another session's artifact URL", alice, chat, user(file("/api/sessions/other/artifacts/att_x1", "image/png")), nil, 400, "invalid_field", "messages[0].parts[0].url"},
		{"unknown artifact file", alice, chat, user(file("/api/artifacts/att_AbC-1/content?exp=1&sig=ab", "image/png")), nil, 400, "invalid_field", "messages[0].parts[0].url"},
		{"file of a foreign session", bob, chat, user(file("data:image/png;base64,iVBORw0KGgo=", "image/png")), nil, 404, "not_found", ""},
		{"file of an ended session", alice, "/api/sessions/" + ended + "/chat", user(file("data:image/png;base64,iVBORw0KGgo=", "image/png")), nil, 409, "session_ended", ""},
		{"not JSON", alice, chat, "{", nil, 400, "invalid_json", ""},
		{"not an object", alice, chat, "[]", nil, 400, "invalid_json", ""},
		{"trailing data", alice, chat, `{"messages":[]} {}`, nil, 400, "invalid_json", ""},
		{"too large", alice, chat, user(text(strings.Repeat("x", 5000))), nil, 413, "too_large", ""},
		{"form body", alice, chat, "messages=hi", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, 415, "unsupported_media_type", ""},
		{"GET", alice, chat, nil, nil, 405, "method_not_allowed", ""},
		{"resume without credential", alice, chat + "/stream", nil, http.Header{"Authorization": nil}, 401, "unauthorized", ""},
		{"resume a missing session", alice, "/api/sessions/nope/chat/stream", nil, nil, 404, "not_found", ""},
		{"resume a foreign session", bob, chat + "/stream", nil, nil, 404, "not_found", ""},
		{"resume an ended session", alice, "/api/sessions/" + ended + "/chat/stream", nil, nil, 409, "session_ended", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "POST"
			if strings.HasSuffix(c.path, "/stream") || c.name == "GET" {
				method = "GET"
			}
			var hdr []http.Header
			if c.hdr != nil {
				hdr = append(hdr, c.hdr)
			}
			st, out := c.who.JSON(method, c.path, c.body, hdr...)
			if st != c.status || daemon.ErrCode(out) != c.code {
				t.Fatalf("%d %v; want %d %s", st, out, c.status, c.code)
			}
			if c.field != "" {
				fields, _ := out["error"].(map[string]any)["fields"].([]any)
				if len(fields) != 1 || fields[0] != c.field {
					t.Fatalf("fields %v; want [%s] (%v)", fields, c.field, out)
				}
			}
		})
	}
	// The prompt endpoint gives the same not-found answer.
	st1, a := bob.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "x"})
	st2, b := bob.JSON("POST", chat, daemon.ChatBody("x"))
	if st1 != st2 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("prompt %d %v, chat %d %v", st1, a, st2, b)
	}
	// Nothing reached the session: no turn ran.
	_, out := alice.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	if n := len(out["messages"].([]any)); n != 0 {
		t.Fatalf("refused chats left %d transcript entries", n)
	}
}

// helloAgent is a daemon whose agent is examples/hello-agent (agentkit,
// with its echo tool) talking to a scripted OpenAI-compatible model.
func helloAgent(t *testing.T, script llmstub.Script, opts ...daemon.Option) (*daemon.Daemon, *llmstub.Server) {
	t.Helper()
	llm, err := llmstub.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(llm.Close)
	agent := surfaced.AgentSpec{Name: "hello", Argv: []string{testkit.Build(t, "./examples/hello-agent")},
		Env: []string{agentkit.EnvLLMBaseURL + "=" + llm.URL, agentkit.EnvLLMModel + "=stub"}}
	return daemon.Start(t, append([]daemon.Option{daemon.Agents(agent)}, opts...)...), llm
}

// A Go agent's tool input types itself out: agentkit turns the model's
// streamed arguments into pi's toolcall_* events, the session into
// tool-input-start and one tool-input-delta per fragment, and the deltas
// joined parse to the input of tool-input-available.
func TestChatToolInputStreams(t *testing.T) {
	fragments := []string{`{"te`, `xt": "a long`, ` input that types`, ` itself out"}`}
	d, _ := helloAgent(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastRole() == "tool" {
			return llmstub.Say("It said: ", r.LastToolResult())
		}
		return llmstub.Reply{Events: llmstub.Stream(llmstub.Reasoning("Echo ", "it."), llmstub.Text("Calling echo."),
			llmstub.CallToolInParts(0, "call_1", "echo", fragments...), llmstub.Finish("tool_calls"))}
	})
	id := d.Create(nil)
	s, status, body := d.Chat(id, daemon.ChatBody("echo something long"))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
	evs := readChat(t, s)
	got := compact(types(evs))
	want := "start start-step reasoning-start reasoning-delta* reasoning-end text-start text-delta text-end " +
		"tool-input-start tool-input-delta* tool-input-available tool-output-available finish-step " +
		"start-step text-start text-delta* text-end finish-step finish [DONE]"
	if got != want {
		t.Fatalf("chunks:\n got %s\nwant %s", got, want)
	}
	var deltas []string
	var input, output any
	for _, e := range evs {
		switch e.Data["type"] {
		case "tool-input-start":
			if e.Data["toolCallId"] != "call_1" || e.Data["toolName"] != "echo" {
				t.Errorf("tool-input-start %s", e.Raw)
			}
		case "tool-input-delta":
			deltas = append(deltas, e.Data["inputTextDelta"].(string))
		case "tool-input-available":
			input = e.Data["input"]
		case "tool-output-available":
			output = e.Data["output"]
		}
	}
	if strings.Join(deltas, "|") != strings.Join(fragments, "|") {
		t.Errorf("deltas %q, want one per fragment %q", deltas, fragments)
	}
	var joined any
	if err := json.Unmarshal([]byte(strings.Join(deltas, "")), &joined); err != nil || fmt.Sprint(joined) != fmt.Sprint(input) {
		t.Errorf("joined deltas %q parse to %v (%v); input %v", strings.Join(deltas, ""), joined, err, input)
	}
	if !strings.Contains(fmt.Sprint(output), "a long input that types itself out") || textOf(evs) != "Calling echo.It said: a long input that types itself out" {
		t.Errorf("output %v, text %q", output, textOf(evs))
	}
}
