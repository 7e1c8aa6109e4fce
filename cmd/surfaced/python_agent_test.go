package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// TestPythonAgentUnderTheDaemon runs the Python example agent of
// docs/agent-protocol.md under the real daemon (surfaced run, its manifest):
// a command from a client, and a prompt whose tool runs the same command
// through the daemon, both moving one snapshot.
func TestPythonAgentUnderTheDaemon(t *testing.T) {
	testkit.Python3(t)
	p := startBinary(t, "run", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "./examples/python-agent")
	auth := http.Header{"Authorization": {"Bearer " + p.token}}
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header = auth.Clone()
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	st, created := call("POST", "/api/sessions", `{}`)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, created)
	}
	id := created["sessionId"].(string)
	events := testkit.OpenSSE(t, p.base+"/api/sessions/"+id+"/events", auth)
	events.Wait(t, 20*time.Second, "ready", testkit.IsStatus("ready"))
	events.Wait(t, 10*time.Second, "the initial notes", testkit.IsState("surface:notes", 1))

	st, res := call("POST", "/api/sessions/"+id+"/surfaces/notes/add", `{"args":{"text":"milk"}}`)
	if st != http.StatusOK || res["ok"] != true {
		t.Fatalf("notes/add: %d %v", st, res)
	}
	if data, _ := res["data"].(map[string]any); data["count"] != 1.0 {
		t.Fatalf("notes/add data: %v", res)
	}
	events.Wait(t, 10*time.Second, "notes rev 2", testkit.IsState("surface:notes", 2))
	st, res = call("POST", "/api/sessions/"+id+"/surfaces/notes/add", `{"args":{"text":"  "}}`)
	if st != http.StatusOK || res["ok"] != false || res["error"].(map[string]any)["code"] != "invalid_args" {
		t.Fatalf("notes/add with blank text: %d %v", st, res)
	}

	st, res = call("POST", "/api/sessions/"+id+"/prompt", `{"message":"note eggs"}`)
	if st != http.StatusAccepted {
		t.Fatalf("prompt: %d %v", st, res)
	}
	events.Wait(t, 10*time.Second, "the tool call", func(e testkit.Event) bool {
		return e.Kind == "chat" && e.Data["type"] == "tool-input-available" && e.Data["toolName"] == "note"
	})
	notes := events.Wait(t, 10*time.Second, "notes rev 3", testkit.IsState("surface:notes", 3))
	if items := notes.Data["value"].(map[string]any)["items"]; len(items.([]any)) != 2 || items.([]any)[1] != "eggs" {
		t.Fatalf("notes: %v", notes.Data)
	}
	finish := events.Wait(t, 10*time.Second, "finish", testkit.IsChat("finish"))
	if meta := finish.Data["messageMetadata"].(map[string]any); meta["stopReason"] != "end_turn" {
		t.Fatalf("finish: %v", finish.Data)
	}
	st, res = call("GET", "/api/sessions/"+id+"/messages", "")
	b, _ := json.Marshal(res)
	if st != http.StatusOK || !strings.Contains(string(b), `Noted: {\"count\": 2}`) {
		t.Fatalf("messages: %d %s", st, b)
	}
}

// TestAgentProtocolDocHoldsThePythonAgent: the complete agent printed in
// docs/agent-protocol.md is the one the tests run.
func TestAgentProtocolDocHoldsThePythonAgent(t *testing.T) {
	root := testkit.RepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "agent-protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "python-agent", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```python\n"+string(src)+"```\n") {
		t.Fatal("docs/agent-protocol.md does not hold examples/python-agent/agent.py as it is, in a python block: copy it over")
	}
}
