package pitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The real pi through ACP (Streamable HTTP at /acp), and through the browser
// gateway at the same time. The client below speaks the transport raw, as
// docs/acp.md describes it.

type acpClient struct {
	d       *daemon
	t       testing.TB
	connID  string
	next    atomic.Int64
	conn    *testkit.SSE
	streams map[string]*testkit.SSE
}

func (d *daemon) acpClient() *acpClient {
	d.t.Helper()
	c := &acpClient{d: d, t: d.t, streams: map[string]*testkit.SSE{}}
	st, body, h := c.post(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "pitest", "version": "1"}}}, "")
	if st != http.StatusOK {
		d.t.Fatalf("initialize: %d %s", st, body)
	}
	c.connID = h.Get("Acp-Connection-Id")
	c.conn = testkit.OpenSSE(d.t, d.url+"/acp", c.header(""))
	return c
}

func (c *acpClient) header(sid string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + c.d.token}}
	if c.connID != "" {
		h.Set("Acp-Connection-Id", c.connID)
	}
	if sid != "" {
		h.Set("Acp-Session-Id", sid)
	}
	return h
}

func (c *acpClient) post(msg any, sid string) (int, string, http.Header) {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", c.d.url+"/acp", bytes.NewReader(b))
	for k, v := range c.header(sid) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func (c *acpClient) request(method string, params any, sid string) int64 {
	c.t.Helper()
	id := c.next.Add(1)
	if st, body, _ := c.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}, sid); st != http.StatusAccepted {
		c.t.Fatalf("%s: %d %s", method, st, body)
	}
	return id
}

func (c *acpClient) stream(sid string) *testkit.SSE {
	if s := c.streams[sid]; s != nil {
		return s
	}
	s := testkit.OpenSSE(c.t, c.d.url+"/acp", c.header(sid))
	c.streams[sid] = s
	return s
}

func isResponse(e testkit.Event, id int64) bool {
	v, ok := e.Data["id"].(float64)
	_, isReq := e.Data["method"]
	return ok && int64(v) == id && !isReq
}

// newSession makes a session with session/new and opens its stream.
func (c *acpClient) newSession(cwd string) string {
	c.t.Helper()
	id := c.request("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, "")
	res := c.conn.Wait(c.t, wait, "session/new answer", func(e testkit.Event) bool { return isResponse(e, id) })
	r, ok := res.Data["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("session/new: %v", res.Data)
	}
	sid := r["sessionId"].(string)
	c.stream(sid)
	return sid
}

func (c *acpClient) prompt(sid, text string) int64 {
	c.t.Helper()
	return c.request("session/prompt", map[string]any{"sessionId": sid,
		"prompt": []any{map[string]any{"type": "text", "text": text}}}, sid)
}

// acpTurn is what an editor saw of one prompt.
type acpTurn struct {
	updates  []map[string]any // session/update params.update
	requests []testkit.Event  // requests from the agent side (request_permission)
	resp     map[string]any
}

func (a *acpTurn) kinds() []string {
	var out []string
	for _, u := range a.updates {
		out = append(out, u["sessionUpdate"].(string))
	}
	return out
}

func (a *acpTurn) text(kind string) string {
	var b strings.Builder
	for _, u := range a.updates {
		if u["sessionUpdate"] == kind {
			b.WriteString(u["content"].(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

func (a *acpTurn) stopReason() string {
	r, _ := a.resp["result"].(map[string]any)
	s, _ := r["stopReason"].(string)
	return s
}

// collect reads the session stream until the answer to prompt id; onRequest
// answers requests from the agent side as they come.
func (c *acpClient) collect(sid string, id int64, onRequest func(testkit.Event)) *acpTurn {
	c.t.Helper()
	s := c.stream(sid)
	out := &acpTurn{}
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				c.t.Fatalf("ACP session stream closed: %v", s.Err)
			}
			switch {
			case ev.Data["method"] == "session/update":
				out.updates = append(out.updates, ev.Data["params"].(map[string]any)["update"].(map[string]any))
			case ev.Data["method"] != nil && ev.Data["id"] != nil:
				out.requests = append(out.requests, ev)
				if onRequest != nil {
					onRequest(ev)
				}
			case isResponse(ev, id):
				out.resp = ev.Data
				return out
			}
		case <-deadline:
			c.t.Fatalf("no ACP answer to prompt %d within %s; updates %v", id, wait, out.kinds())
		}
	}
}

// realDir is a temporary directory without symlinks (ACP compares cwds).
func realDir(t testing.TB) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A prompt from an editor streams to the editor and to a browser at once;
// a tool call shows as tool_call + tool_call_update with the real output.
func TestPiThroughACPAndBrowserAtOnce(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		switch {
		case r.LastRole() == "tool":
			return llmstub.Say("Listed: ", r.LastToolResult())
		case r.LastUser() == "list files":
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("Looking."),
				llmstub.CallTool(0, "call_ls", "bash", map[string]any{"command": "ls"}), llmstub.Finish("tool_calls"))}
		}
		return llmstub.Reply{Events: llmstub.Stream(llmstub.Reasoning("pondering"), llmstub.Text("Hi ", "from ", "pi"), llmstub.Finish("stop"))}
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	cwd := realDir(t)
	if err := os.WriteFile(filepath.Join(cwd, "gamma.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := d.acpClient()
	sid := c.newSession(cwd)
	browser := d.sse(sid) // the same session, in a browser
	ready(t, browser)

	id := c.prompt(sid, "hello")
	at := c.collect(sid, id, nil)
	bt := nextTurn(t, browser)
	if at.stopReason() != "end_turn" || bt.stopReason() != "end_turn" {
		t.Fatalf("stop reasons: editor %v, browser %q", at.resp, bt.stopReason())
	}
	if at.text("agent_message_chunk") != "Hi from pi" || bt.text() != "Hi from pi" {
		t.Errorf("text: editor %q, browser %q", at.text("agent_message_chunk"), bt.text())
	}
	if at.text("agent_thought_chunk") != "pondering" {
		t.Errorf("editor thoughts %q", at.text("agent_thought_chunk"))
	}

	id = c.prompt(sid, "list files")
	at = c.collect(sid, id, nil)
	bt = nextTurn(t, browser)
	var start, final map[string]any
	var progress int
	for _, u := range at.updates {
		switch u["sessionUpdate"] {
		case "tool_call":
			start = u
		case "tool_call_update":
			if u["status"] == "completed" || u["status"] == "failed" {
				final = u
			} else {
				progress++
			}
		}
	}
	if start == nil || start["toolCallId"] != "call_ls" || start["kind"] != "execute" || start["status"] != "in_progress" {
		t.Fatalf("tool_call: %v (updates %v)", start, at.kinds())
	}
	if in, _ := start["rawInput"].(map[string]any); in["command"] != "ls" {
		t.Errorf("tool_call rawInput %v", start["rawInput"])
	}
	if final == nil || final["status"] != "completed" || !strings.Contains(fmt.Sprint(final["content"]), "gamma.txt") {
		t.Errorf("final tool_call_update: %v", final)
	}
	if progress == 0 {
		t.Error("no in-progress tool_call_update (pi's tool_execution_update)")
	}
	if at.stopReason() != "end_turn" || !strings.Contains(bt.text(), "gamma.txt") {
		t.Errorf("editor %q, browser %q", at.stopReason(), bt.text())
	}
}

// session/cancel mid-stream answers cancelled and the session goes on; a
// prompt sent during a turn is queued and answered after it.
func TestPiThroughACPCancelAndQueue(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		switch r.LastUser() {
		case "stall":
			return llmstub.Reply{Events: llmstub.Text("partial"), Stall: true}
		case "slow":
			rep := llmstub.Say("slow ", "answer")
			rep.Delay = 150 * time.Millisecond
			return rep
		}
		return llmstub.Say("answer to ", r.LastUser())
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	c := d.acpClient()
	sid := c.newSession(realDir(t))
	s := c.stream(sid)

	id := c.prompt(sid, "stall")
	s.Wait(t, wait, "first chunk", func(e testkit.Event) bool { return e.Data["method"] == "session/update" })
	if st, body, _ := c.post(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": sid}}, sid); st != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", st, body)
	}
	if at := c.collect(sid, id, nil); at.stopReason() != "cancelled" {
		t.Fatalf("after cancel: %v", at.resp)
	}

	first := c.prompt(sid, "slow")
	s.Wait(t, wait, "first chunk", func(e testkit.Event) bool { return e.Data["method"] == "session/update" })
	second := c.prompt(sid, "queued one")
	a1 := c.collect(sid, first, nil)
	a2 := c.collect(sid, second, nil)
	if a1.stopReason() != "end_turn" || a2.stopReason() != "end_turn" {
		t.Fatalf("queued prompts: %v %v", a1.resp, a2.resp)
	}
	if !strings.Contains(a2.text("agent_message_chunk"), "answer to queued one") {
		t.Errorf("the queued prompt's answer: first %q second %q", a1.text("agent_message_chunk"), a2.text("agent_message_chunk"))
	}
}

// pi's select and confirm dialogs reach an editor as session/request_permission;
// the editor's choice is pi's answer.
func TestPiDialogsThroughACP(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
			}
		}
		switch n {
		case 0:
			return llmstub.Reply{Events: llmstub.Stream(llmstub.CallTool(0, "c0", "ask_user",
				map[string]any{"method": "select", "title": "Pick", "options": []string{"red", "green"}}), llmstub.Finish("tool_calls"))}
		case 1:
			return llmstub.Reply{Events: llmstub.Stream(llmstub.CallTool(0, "c1", "ask_user",
				map[string]any{"method": "confirm", "title": "Sure?", "message": "Really"}), llmstub.Finish("tool_calls"))}
		}
		return llmstub.Say("results: ", r.Messages[len(r.Messages)-3].Text(), " / ", r.LastToolResult())
	})
	home := Home(t, Config{BaseURL: srv.URL, Extensions: []string{filepath.Join(ExtensionsDir(), "dialogs.ts")}})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", home))
	c := d.acpClient()
	sid := c.newSession(realDir(t))
	id := c.prompt(sid, "ask me")
	at := c.collect(sid, id, func(req testkit.Event) {
		if req.Data["method"] != "session/request_permission" {
			return
		}
		p := req.Data["params"].(map[string]any)
		opts := p["options"].([]any)
		choice := opts[len(opts)-1].(map[string]any)["optionId"] // green, or reject
		if len(opts) == 2 && opts[0].(map[string]any)["optionId"] == "allow" {
			choice = "allow"
		}
		if st, body, _ := c.post(map[string]any{"jsonrpc": "2.0", "id": req.Data["id"],
			"result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}}, sid); st != http.StatusAccepted {
			t.Errorf("permission answer: %d %s", st, body)
		}
	})
	if len(at.requests) != 2 {
		t.Fatalf("%d permission requests, want 2 (select, confirm)", len(at.requests))
	}
	if at.stopReason() != "end_turn" {
		t.Fatalf("stop %v", at.resp)
	}
	if got := at.text("agent_message_chunk"); got != `results: answer: "green" / answer: true` {
		t.Errorf("pi got the answers %q", got)
	}
}

// Stop reasons seen from an editor: a reply cut at the length limit answers
// max_tokens; a model server failing and pi crashing never answer end_turn
// with nothing shown, and the session goes on after pi's restart.
func TestPiStopReasonsThroughACP(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		switch {
		case r.LastUser() == "crash" && r.LastRole() == "user":
			return llmstub.Reply{Events: llmstub.Stream(llmstub.CallTool(0, "k", "bash", map[string]any{"command": "kill -9 $PPID"}), llmstub.Finish("tool_calls"))}
		case r.LastUser() == "fail":
			return llmstub.Error(500, "the model server is down")
		case r.LastUser() == "long":
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("cut sho"), llmstub.Finish("length"))}
		}
		return llmstub.Say("fine")
	})
	d := startDaemon(t, surfaced.Limits{RestartBackoff: 50 * time.Millisecond}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	c := d.acpClient()
	sid := c.newSession(realDir(t))
	browser := d.sse(sid)
	ready(t, browser)

	at := c.collect(sid, c.prompt(sid, "long"), nil)
	if at.stopReason() != "max_tokens" || at.text("agent_message_chunk") != "cut sho" {
		t.Errorf("length: %v %q", at.resp, at.text("agent_message_chunk"))
	}

	at = c.collect(sid, c.prompt(sid, "fail"), nil)
	if at.resp["error"] == nil && at.stopReason() == "end_turn" && at.text("agent_message_chunk") == "" {
		t.Errorf("a failed model call answered end_turn with nothing shown: %v", at.resp)
	}
	t.Logf("editor's answer to a 500: %v; updates %v", at.resp, at.kinds())

	at = c.collect(sid, c.prompt(sid, "crash"), nil)
	if at.resp["error"] == nil && at.stopReason() == "end_turn" {
		t.Errorf("a crashed turn answered end_turn: %v", at.resp)
	}
	ready(t, browser)
	if at = c.collect(sid, c.prompt(sid, "after"), nil); at.stopReason() != "end_turn" || at.text("agent_message_chunk") != "fine" {
		t.Fatalf("after the restart: %v %q", at.resp, at.text("agent_message_chunk"))
	}
}
