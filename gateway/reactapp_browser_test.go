package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// buildReactApp builds examples/react-app with the web workspace's pinned
// toolchain (web/node_modules, installed by scripts/test-setup) into a
// directory of the test. Without node or the workspace the test is skipped,
// except on CI.
func buildReactApp(t *testing.T) string {
	t.Helper()
	node, web := testkit.Node(t), testkit.NPM(t, "web", "esbuild")
	out := filepath.Join(t.TempDir(), "app")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(web, "scripts", "build.mjs"), "--example-out", out)
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/react-app: %v\n%s", err, b)
	}
	return out
}

// evalString evaluates a JavaScript expression that yields a string.
func evalString(ctx context.Context, expr string) string {
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => { try { return String(await (`+expr+`)) } catch (e) { return "" } })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		return ""
	}
	return got
}

// waitFor waits until the expression's string satisfies ok.
func waitFor(t *testing.T, ctx context.Context, what, expr string, ok func(string) bool) string {
	t.Helper()
	last := &lastValue{}
	testkit.Eventually(t, 20*time.Second, func() bool {
		last.s = evalString(ctx, expr)
		return ok(last.s)
	}, "%s (last: %v)", what, last)
	return last.s
}

// lastValue shows, when a wait gives up, what it saw last.
type lastValue struct{ s string }

func (l *lastValue) String() string { return strconv.Quote(l.s) }

func elemText(sel string) string {
	return `(document.querySelector(` + jsString(sel) + `)?.textContent ?? "").trim()`
}

func allText(sel string) string {
	return `Array.from(document.querySelectorAll(` + jsString(sel) + `)).map(e => e.textContent).join("\n")`
}

// saveScreenshot writes the page at a viewport size to the test's artifact
// directory (go test -artifacts keeps it), and to SURFACED_SCREENSHOTS
// when that names a directory.
func saveScreenshot(t *testing.T, ctx context.Context, name string, w, h int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h, chromedp.EmulateScale(1))); err != nil {
		t.Fatalf("viewport %dx%d: %v", w, h, err)
	}
	// Let layout settle at the new size: wait for two animation frames.
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	for _, dir := range []string{t.ArtifactDir(), os.Getenv("SURFACED_SCREENSHOTS")} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		t.Logf("screenshot %s", p)
	}
}

// The React example app (useChat with surfacedChatTransport, the demo counter
// through useSurface and useConversationBridge) served by a real daemon with
// --web-root's mechanism, in headless chromium, with the demo agent on its
// scripted model.
func TestBrowserReactApp(t *testing.T) {
	app := buildReactApp(t)
	ctx := testkit.Browser(t)
	d := daemon.Start(t,
		daemon.Agents(surfaced.AgentSpec{Name: "demo", Title: "Surface demo", Argv: []string{testkit.Build(t, "./examples/surface-demo-agent")}}),
		// A crashed agent stays down long enough for the page to show it.
		daemon.Limits(surfaced.Limits{RestartBackoff: 3 * time.Second}),
		daemon.WebRoot(os.DirFS(app)),
	)
	// The page's console and uncaught errors go to the test's log.
	_ = chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			t.Logf("console.%s: %s", ev.Type, strings.Join(args, " "))
		case *runtime.EventExceptionThrown:
			t.Logf("uncaught: %s %s", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception.Description)
		}
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	// The start URL on the app's path gives the page its cookie, then the app
	// starts a session and names it in the address.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/app/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter shows 0", elemText(tid("counter-value")), func(s string) bool { return s == "0" })
	href := evalString(ctx, "location.href")
	if strings.Contains(href, "token=") || !strings.Contains(href, "session=") {
		t.Fatalf("the address should name the session and not the token: %s", href)
	}
	waitFor(t, ctx, "the bridge is in prompt mode", elemText(tid("bridge-mode")), func(s string) bool { return s == "live" })

	// A chat message streams its answer into useChat's messages.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("chat-input"), "hello from react"),
		chromedp.Click(tid("chat-send")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the user message", allText(tid("chat-message-user")), func(s string) bool { return strings.Contains(s, "hello from react") })
	waitFor(t, ctx, "the streamed answer", allText(tid("chat-message-assistant")), func(s string) bool {
		return strings.Contains(s, "scripted model") && strings.Contains(s, "hello from react")
	})

	// useSurface: the button runs the command; the count comes back as a snapshot.
	waitFor(t, ctx, "the send button is back", `document.querySelector('[data-testid="chat-send"]') !== null`, func(s string) bool { return s == "true" })
	if err := chromedp.Do(ctx, chromedp.Click(tid("counter-increment"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter shows 1", elemText(tid("counter-value")), func(s string) bool { return s == "1" })

	// useConversationBridge: the op goes through the conversation as a user
	// message; the model calls the tool, which moves the same counter.
	if err := chromedp.Do(ctx, chromedp.Click(tid("counter-ask"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter shows 2", elemText(tid("counter-value")), func(s string) bool { return s == "2" })
	waitFor(t, ctx, "the op in the chat", allText(tid("chat-op")), func(s string) bool { return strings.Contains(s, "Increment the counter") })
	waitFor(t, ctx, "the op in the session's history", `fetch(location.origin + "/api/sessions/" + new URLSearchParams(location.search).get("session") + "/messages").then(r => r.text())`,
		func(s string) bool { return strings.Contains(s, "tool: increment") })

	// The chat moves the counter too.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("chat-input"), "increment please"),
		chromedp.Click(tid("chat-send")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter shows 3", elemText(tid("counter-value")), func(s string) bool { return s == "3" })
	waitFor(t, ctx, "the tool call in the chat", allText(tid("chat-tool")), func(s string) bool { return strings.Contains(s, "count = 3") })
	saveScreenshot(t, ctx, "react-app-1400x900", 1400, 900)
	saveScreenshot(t, ctx, "react-app-390x844", 390, 844)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}

	// The agent goes down: the bridge turns unavailable and the panel
	// read-only; when the daemon restarts the agent it comes back.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("chat-input"), "crash now"),
		chromedp.Click(tid("chat-send")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the read-only notice", elemText(tid("surface-unavailable")), func(s string) bool { return strings.Contains(s, "read-only") })
	if got := evalString(ctx, `document.querySelector('[data-testid="counter-increment"]').disabled`); got != "true" {
		t.Fatalf("increment is not disabled while the surface is unavailable (%s)", got)
	}
	saveScreenshot(t, ctx, "react-app-unavailable-1400x900", 1400, 900)
	waitFor(t, ctx, "the bridge back in prompt mode", elemText(tid("bridge-mode")), func(s string) bool { return s == "live" })

	// A reload resumes: the same session, its history, its count.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter after reload", elemText(tid("counter-value")), func(s string) bool { return s == "3" })
	waitFor(t, ctx, "the history after reload", allText(tid("chat-message-user")), func(s string) bool {
		return strings.Contains(s, "hello from react") && strings.Contains(s, "increment please")
	})
	if got := evalString(ctx, "location.href"); got != href {
		t.Fatalf("the reload changed the session: %s, was %s", got, href)
	}
}
