package pitest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
	tkdaemon "github.com/surfaced/surfaced/internal/testkit/daemon"
)

// examples/pi-surface-demo as `surfaced run ./examples/pi-surface-demo`
// runs it: its manifest (pi from PATH, here the pinned fixture's), its
// panel, against the scripted model.

// piDemo is the example's agent and panel, with pi on PATH and home as its
// agent directory.
func piDemo(t *testing.T, home string) (surfaced.AgentSpec, gateway.AgentUI) {
	t.Helper()
	Bin(t)
	m, err := config.LoadManifest(filepath.Join(testkit.RepoRoot(), "examples", "pi-surface-demo"))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := config.AgentSpecs([]config.Manifest{m})
	if err != nil {
		t.Fatal(err)
	}
	spec := specs[0]
	spec.Env = append(append(spec.Env, Env(home)...), "PATH="+BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir, panels := m.UI()
	if dir == "" {
		t.Fatal("the example's manifest names no panel")
	}
	return spec, gateway.AgentUI{Dir: dir, Panels: panels}
}

// demoModel calls the tool increment when asked to, then reports its result.
func demoModel(t *testing.T) *llmstub.Server {
	return model(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastRole() == "tool" {
			return llmstub.Say("Done: the tool answered ", r.LastToolResult(), ".")
		}
		if strings.Contains(strings.ToLower(r.LastUser()), "increment") && r.HasTool("increment") {
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("Incrementing the counter."),
				llmstub.CallTool(0, "call_inc", "increment", map[string]any{}), llmstub.Finish("tool_calls"))}
		}
		return llmstub.Say("Ask me to increment the counter.")
	})
}

func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	expr := `(() => { const e = document.querySelector(` + jsString(sel) + `); return e ? e.textContent.trim() : null })()`
	deadline := time.Now().Add(wait)
	var last string
	for time.Now().Before(deadline) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[*string](expr))
		if err == nil && got != nil {
			last = *got
			if last == want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: want %q, have %q", sel, want, last)
}

func jsString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`) + "'"
}

func tid(id string) string { return `[data-testid="` + id + `"]` }

// shot saves a PNG of the viewport when SURFACED_SCREENSHOTS names a directory.
func shot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("SURFACED_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}

// The pi-surface-demo in a browser: the agent-shipped panel shows the pi
// extension's counter; the button and the chat (pi's model calls the tool)
// move the same count; a reload keeps it; an editor over ACP on the same
// session sees the tool call. At a desktop and a phone size.
func TestBrowserPiSurfaceDemo(t *testing.T) {
	srv := demoModel(t)
	spec, ui := piDemo(t, Home(t, Config{BaseURL: srv.URL}))
	ctx := testkit.Browser(t)
	d := tkdaemon.Start(t, tkdaemon.Agents(spec), tkdaemon.AgentUI(spec.Name, ui))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 0")
	if err := chromedp.Do(ctx, chromedp.Click(tid("surface-demo-increment"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 1")
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(tid("composer-input")),
		chromedp.SendKeys(tid("composer-input"), "please increment the counter"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 2")
	// The reply streamed into the chat, with the tool call and its result.
	deadline := time.Now().Add(wait)
	for {
		n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="chat-tool"]').length`))
		txt, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('[data-testid="chat-message-assistant"]')).map(e => e.textContent).join(' ')`))
		if n >= 1 && strings.Contains(txt, "count = 2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat did not show the tool call and its answer: tools=%d text=%q", n, txt)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.Click(tid("surface-demo-echo-input")), chromedp.SendKeys(tid("surface-demo-echo-input"), "hello from pi"),
		chromedp.Click(tid("surface-demo-echo"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-log")+" li:last-child", "hello from pi")
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 2")
	waitText(t, ctx, tid("surface-demo-log")+" li:last-child", "hello from pi")
	shot(t, ctx, "pi-surface-demo-1400x900")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 2")
	shot(t, ctx, "pi-surface-demo-390x844")
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(tid("surface-demo"))); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, "pi-surface-demo-390x844-panel")

	// An editor over ACP loads the same session and sees the tool call.
	var sid string
	testkit.Eventually(t, wait, func() bool {
		_, body := d.Do("GET", "/api/sessions", nil)
		var list struct {
			Sessions []struct {
				SessionID string `json:"sessionId"`
			} `json:"sessions"`
		}
		if err := json.Unmarshal(body, &list); err != nil || len(list.Sessions) != 1 {
			return false
		}
		sid = list.Sessions[0].SessionID
		return true
	}, "the browser's session")
	c := d.ACPClient()
	c.Initialize()
	s := c.Stream(sid)
	id := c.Request("session/load", map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}}, sid)
	if res := c.Response(c.Conn, id); res["error"] != nil {
		t.Fatalf("session/load: %v", res)
	}
	call := s.Wait(t, wait, "the replayed tool call", func(e testkit.Event) bool {
		p, _ := e.Data["params"].(map[string]any)
		u, _ := p["update"].(map[string]any)
		return u["sessionUpdate"] == "tool_call" && u["title"] == "increment"
	})
	u := call.Data["params"].(map[string]any)["update"].(map[string]any)
	if u["status"] != "completed" || u["toolCallId"] != "call_inc" {
		t.Fatalf("the editor's tool call: %v", u)
	}
	if !strings.Contains(fmt.Sprint(u["content"]), "count = 2") {
		t.Logf("the tool call's content (payloads may be off): %v", u["content"])
	}
}
