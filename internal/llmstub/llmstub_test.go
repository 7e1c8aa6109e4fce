package llmstub

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func start(t *testing.T, script Script) *Server {
	t.Helper()
	s, err := Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// events reads an SSE body into its data payloads.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

const chatBody = `{"model":"m","stream":true,"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},{"role":"tool","tool_call_id":"c1","content":"out"}],"tools":[{"type":"function","function":{"name":"bash","parameters":{}}}]}`

func TestStreamsTheScriptedReply(t *testing.T) {
	s := start(t, func(r Request) Reply {
		return Reply{Events: Stream(Reasoning("hm"), Text("a", "b"), CallTool(0, "c9", "bash", map[string]any{"command": "ls"}), Finish("tool_calls"), Usage(3, 2))}
	})
	resp := post(t, context.Background(), s.URL+"/chat/completions", chatBody)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := events(t, resp.Body)
	if len(evs) != 8 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("events: %q", evs)
	}
	var c struct {
		Choices []struct {
			Delta        map[string]any `json:"delta"`
			FinishReason *string        `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(evs[0]), &c); err != nil || c.Choices[0].Delta["reasoning_content"] != "hm" {
		t.Errorf("reasoning chunk %s (%v)", evs[0], err)
	}
	_ = json.Unmarshal([]byte(evs[4]), &c)
	tc := c.Choices[0].Delta["tool_calls"].([]any)[0].(map[string]any)
	if tc["function"].(map[string]any)["arguments"] != `{"command":"ls"}` {
		t.Errorf("tool call arguments chunk %s", evs[4])
	}
	_ = json.Unmarshal([]byte(evs[5]), &c)
	if c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish chunk %s", evs[5])
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.LastUser() != "hi there" || r.LastRole() != "tool" || r.LastToolResult() != "out" || !r.HasTool("bash") || r.HasTool("edit") ||
		r.Messages[1].Images() != 1 || r.Authorization != "Bearer k" {
		t.Errorf("request as recorded: %+v", r)
	}
}

func TestErrorsAndBadRequests(t *testing.T) {
	s := start(t, Sequence(Error(500, "down"), Say("ok")))
	resp := post(t, context.Background(), s.URL+"/chat/completions", chatBody)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), `"message":"down"`) {
		t.Errorf("scripted error: %d %s", resp.StatusCode, b)
	}
	// Sequence: the second and every later request get the last reply.
	for i := 0; i < 2; i++ {
		resp = post(t, context.Background(), s.URL+"/chat/completions", chatBody)
		evs := events(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(evs) != 4 {
			t.Errorf("request %d: %d %q", i+2, resp.StatusCode, evs)
		}
	}
	for _, tc := range []struct {
		path, body string
		status     int
		says       string
	}{
		{"/chat/completions", `{"model":`, 400, "not a chat completion request"},
		{"/chat/completions", `{"model":"m","stream":false,"messages":[]}`, 400, "streaming requests only"},
		{"/models", `{}`, 404, "POST /v1/chat/completions only"},
	} {
		resp := post(t, context.Background(), s.URL+tc.path, tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.says) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("%d requests recorded, want the 4 valid ones", n)
	}
}

func TestStallEndsWhenTheClientLeaves(t *testing.T) {
	left := make(chan struct{})
	s := start(t, func(Request) Reply { return Reply{Events: Text("partial"), Stall: true} })
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, s.URL+"/chat/completions", chatBody)
	go func() {
		defer close(left)
		events(t, resp.Body)
	}()
	select {
	case <-left:
		t.Fatal("a stalled stream ended on its own")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after the client left")
	}
	resp.Body.Close()
}

func TestSlowStreamingAndSetScript(t *testing.T) {
	s := start(t, func(Request) Reply { return Reply{Events: Text("a", "b", "c"), Delay: 60 * time.Millisecond} })
	t0 := time.Now()
	resp := post(t, context.Background(), s.URL+"/chat/completions", chatBody)
	events(t, resp.Body)
	resp.Body.Close()
	if el := time.Since(t0); el < 150*time.Millisecond {
		t.Errorf("three events 60 ms apart took %s", el)
	}
	s.SetScript(func(Request) Reply { return Say("new") })
	resp = post(t, context.Background(), s.URL+"/chat/completions", chatBody)
	evs := events(t, resp.Body)
	resp.Body.Close()
	if len(evs) != 4 || !strings.Contains(evs[0], `"content":"new"`) {
		t.Errorf("after SetScript: %q", evs)
	}
	if _, err := Start(nil); err == nil {
		t.Error("Start(nil) succeeded")
	}
}

func TestCallToolInParts(t *testing.T) {
	evs := CallToolInParts(1, "c2", "echo", `{"te`, `xt":"hi"}`)
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	var joined strings.Builder
	for i, ev := range evs {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatal(err)
		}
		tc := c.Choices[0].Delta.ToolCalls[0]
		if tc.Index != 1 || (i == 0) != (tc.ID == "c2" && tc.Function.Name == "echo") {
			t.Errorf("event %d: %s", i, ev)
		}
		joined.WriteString(tc.Function.Arguments)
	}
	if joined.String() != `{"text":"hi"}` {
		t.Errorf("arguments %q", joined.String())
	}
}

func TestHoldPausesTheStream(t *testing.T) {
	hold := make(chan struct{})
	s := start(t, func(Request) Reply {
		return Reply{Events: Stream(Text("a", "b"), Finish("stop")), Hold: hold, HoldAfter: 1}
	})
	resp := post(t, context.Background(), s.URL+"/chat/completions", chatBody)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || !strings.Contains(first, `"content":"a"`) {
		t.Fatalf("first event %q: %v", first, err)
	}
	got := make(chan []string)
	go func() { got <- events(t, r) }()
	select {
	case evs := <-got:
		t.Fatalf("the stream went on while held: %q", evs)
	default:
	}
	close(hold)
	if evs := <-got; len(evs) != 3 || !strings.Contains(evs[0], `"content":"b"`) || evs[2] != "[DONE]" {
		t.Fatalf("after the hold: %q", evs)
	}
}
