package acpgw_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// A browser (SSE on the HTTP API) and an editor (ACP) on one session, with
// the real demo agent: the editor's prompt streams to both, and a surface
// command from the browser is what the agent sees in the next turn.
func TestBrowserAndEditorOnOneSession(t *testing.T) {
	demo := testkit.Build(t, "./examples/surface-demo-agent")
	d := daemon.Start(t, daemon.Agents(surfaced.AgentSpec{Name: "demo", Argv: []string{demo}, Env: []string{"SURFACED_LLM_BASE_URL="}}))
	ed := d.ACPClient()
	ed.Initialize()
	sid := ed.NewSession(daemon.TempDir(t))

	browser := testkit.OpenSSE(t, d.URL+"/api/sessions/"+sid+"/events", http.Header{"Authorization": {"Bearer " + d.Token}})
	browser.Wait(t, 20*time.Second, "the session ready", testkit.IsStatus("ready"))

	// The editor prompts: the reply streams to the editor and to the browser.
	id := ed.Prompt(sid, "hello from the editor")
	text, _, resp := ed.Turn(sid, id)
	if daemon.StopReason(resp) != "end_turn" || !strings.Contains(text, "hello from the editor") {
		t.Fatalf("editor: %q %v", text, resp)
	}
	um := browser.Wait(t, 10*time.Second, "the editor's prompt", testkit.IsChat("data-user-message"))
	if data := um.Data["data"].(map[string]any); data["via"] != "acp" || data["text"] != "hello from the editor" {
		t.Errorf("browser saw the prompt as %v", data)
	}
	var browserText strings.Builder
	for {
		ev := browser.Wait(t, 10*time.Second, "the reply", func(e testkit.Event) bool { return e.Kind == "chat" })
		if ev.Data["type"] == "text-delta" {
			browserText.WriteString(ev.Data["delta"].(string))
		}
		if ev.Data["type"] == "finish" {
			break
		}
	}
	if browserText.String() != text {
		t.Errorf("browser saw %q, editor %q", browserText.String(), text)
	}

	// The browser presses the surface's button...
	req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+sid+"/surfaces/demo/increment", bytes.NewReader([]byte("{}")))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var cmd map[string]any
	_ = json.Unmarshal(body, &cmd)
	if res.StatusCode != http.StatusOK || cmd["ok"] != true {
		t.Fatalf("increment from the browser: %d %s", res.StatusCode, body)
	}

	// ... and the editor's next turn works on that state: the agent's tool
	// moves the same counter from 1 to 2.
	id = ed.Prompt(sid, "increment please")
	text, kinds, resp := ed.Turn(sid, id)
	if daemon.StopReason(resp) != "end_turn" || !strings.Contains(text, "count = 2") {
		t.Fatalf("editor after the browser's command: %q %v %v", text, kinds, resp)
	}
	if !strings.Contains(strings.Join(kinds, ","), "tool_call,tool_call_update") {
		t.Errorf("the tool call did not reach the editor: %v", kinds)
	}
	browser.Wait(t, 10*time.Second, "the counter at 2", func(e testkit.Event) bool {
		v, _ := e.Data["value"].(map[string]any)
		return e.Kind == "state" && e.Data["key"] == "surface:demo" && v["count"] == float64(2)
	})
}

// A reply cut at the length limit answers max_tokens; thinking streams as
// agent_thought_chunk (the demo agent's scripted model).
func TestMaxTokensAndThoughts(t *testing.T) {
	demo := testkit.Build(t, "./examples/surface-demo-agent")
	d := daemon.Start(t, daemon.Agents(surfaced.AgentSpec{Name: "demo", Argv: []string{demo}, Env: []string{"SURFACED_LLM_BASE_URL="}}))
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	id := c.Prompt(sid, "long")
	if _, _, r := c.Turn(sid, id); daemon.StopReason(r) != "max_tokens" {
		t.Errorf("long: %v", r)
	}
	id = c.Prompt(sid, "think about it")
	_, kinds, r := c.Turn(sid, id)
	if daemon.StopReason(r) != "end_turn" || !strings.Contains(strings.Join(kinds, ","), "agent_thought_chunk") {
		t.Errorf("think: %v %v", kinds, r)
	}
}
