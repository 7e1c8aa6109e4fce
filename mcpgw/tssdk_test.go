package mcpgw_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// The official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// testdata/npm/mcp-sdk; scripts/test-setup installs it) drives the mount
// through its Client and StreamableHTTPClientTransport, unmodified: it
// negotiates 2025-11-25 (initialize, a stateful session, notifications on
// the GET stream).

// scenario runs a scenario of testdata/npm/mcp-sdk/scenarios.mjs.
func scenario(t *testing.T, name string, env ...string) *testkit.Scenario {
	t.Helper()
	return testkit.StartScenario(t, testkit.NodeFixture(t, "mcp-sdk", "@modelcontextprotocol/sdk"), name, env...)
}

func tsEnv(d *daemon.Daemon, url string, more ...string) []string {
	return append([]string{"MCP_URL=" + url, "MCP_TOKEN=" + d.Token}, more...)
}

func TestTypeScriptSDK(t *testing.T) {
	d := daemon.Start(t, daemon.Agents(fakeAgent(t, "-schemas")))

	t.Run("basic", func(t *testing.T) {
		s := scenario(t, "basic", tsEnv(d, d.MCPURL)...)
		created := s.Next("created")
		if created["protocolVersion"] != stateful || created["sessionHeader"] != true {
			t.Errorf("negotiated %v (a session: %v), want %s", created["protocolVersion"], created["sessionHeader"], stateful)
		}
		if tools, _ := json.Marshal(created["tools"]); !strings.Contains(string(tools), `"run_command"`) || !strings.Contains(string(tools), `"prompt"`) {
			t.Errorf("tools: %s", tools)
		}
		id := created["sessionId"].(string)
		ready(t, d, id)
		browser := d.SSE(id, "")
		defer browser.Close()
		browser.Wait(t, 10*time.Second, "the first snapshot", testkit.IsState("surface:demo", 1))
		s.Go()
		done := s.Next("done")
		if !strings.Contains(done["text"].(string), "chunk39") || done["progress"].(float64) < 10 || done["rev"] != 2.0 {
			t.Errorf("done: %v", done)
		}
		browser.Wait(t, 10*time.Second, "the browser sees rev 2", testkit.IsState("surface:demo", 2))
		s.Wait()
	})

	id := d.Create(nil)
	ready(t, d, id)

	t.Run("subscribe", func(t *testing.T) {
		s := scenario(t, "subscribe", tsEnv(d, d.MCPURL, "SESSION_ID="+id)...)
		sub := s.Next("subscribed")
		if tm, _ := json.Marshal(sub["templates"]); !strings.Contains(string(tm), `"surfaced://sessions/{sessionId}/surfaces/{domain}"`) {
			t.Errorf("templates: %s", tm)
		}
		// A browser's button press.
		if st, body := d.Do("POST", "/api/sessions/"+id+"/surfaces/demo/increment", map[string]any{}); st != http.StatusOK {
			t.Fatalf("browser command: %d %s", st, body)
		}
		s.Go()
		done := s.Next("done")
		if !strings.Contains(done["text"].(string), `"count":1`) || done["rev"] != 2.0 {
			t.Errorf("done: %v", done)
		}
		s.Wait()
	})

	t.Run("cancel", func(t *testing.T) {
		browser := d.SSE(id, "")
		defer browser.Close()
		s := scenario(t, "cancel", tsEnv(d, d.MCPURL, "SESSION_ID="+id)...)
		s.Next("cancelled")
		browser.Wait(t, 10*time.Second, "the turn aborted", testkit.IsChat("abort"))
		s.Go()
		s.Wait()
	})

	t.Run("dialog", func(t *testing.T) {
		s := scenario(t, "dialog", tsEnv(d, d.MCPURL, "SESSION_ID="+id)...)
		done := s.Next("done")
		if !strings.Contains(done["text"].(string), "true") {
			t.Errorf("done: %v", done)
		}
		s.Wait()
	})

	t.Run("attached", func(t *testing.T) {
		s := scenario(t, "attached", tsEnv(d, d.MCPURL+"/sessions/"+id)...)
		done := s.Next("done")
		if tools, _ := json.Marshal(done["tools"]); !strings.Contains(string(tools), `"demo_increment"`) {
			t.Errorf("tools: %s", tools)
		}
		s.Wait()
	})

	t.Run("badinput", func(t *testing.T) {
		other := daemon.Start(t, twoSubjects(t))
		alice := other.As(aliceToken)
		foreign := alice.Create(nil)
		bob := other.As(bobToken)
		s := scenario(t, "badinput", tsEnv(bob, bob.MCPURL, "SESSION_ID="+foreign)...)
		s.Next("done")
		s.Wait()
	})
}
