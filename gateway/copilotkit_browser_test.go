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
	"github.com/chromedp/chromedp/kb"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// buildCopilotKitApp builds examples/copilotkit-app with the web workspace's
// pinned toolchain into a directory of the test.
func buildCopilotKitApp(t *testing.T) string {
	t.Helper()
	web := testkit.NPM(t, "web", "@copilotkit/react-core")
	out := filepath.Join(t.TempDir(), "app")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(web, "scripts", "build.mjs"), "--copilotkit-out", out)
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/copilotkit-app: %v\n%s", err, b)
	}
	return out
}

// chatInput is CopilotKit's message box.
const chatInput = `[data-testid="chat"] textarea`

// say types a message into CopilotKit's chat and sends it (Enter).
func say(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(chatInput), text), chromedp.SendKeys(chromedp.CSS(chatInput), kb.Enter)); err != nil {
		t.Fatalf("say %q: %v", text, err)
	}
}

// chatScrolled is how far CopilotKit's message scroller is from its end,
// in pixels ("0" at the end, and when nothing scrolls).
const chatScrolled = `(() => {
  const s = Array.from(document.querySelectorAll('[data-testid="chat"] *')).find(e =>
    /(auto|scroll)/.test(getComputedStyle(e).overflowY) && e.scrollHeight > e.clientHeight);
  return s ? String(Math.round(s.scrollHeight - s.scrollTop - s.clientHeight)) : "0";
})()`

// waitChatAtEnd waits until the chat shows its end (its scrolling smooth,
// as a person sees it once it stops).
func waitChatAtEnd(t *testing.T, ctx context.Context) {
	t.Helper()
	waitFor(t, ctx, "the chat scrolled to its end", chatScrolled, func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n <= 2 })
}

// dialogAnswerable says whether the dialog's first button is what a click
// at its middle hits (not the chat's input floating over it).
const dialogAnswerable = `(() => {
  const b = document.querySelector('[data-testid="agent-dialog"] button');
  if (!b) return "no button";
  const r = b.getBoundingClientRect();
  return String(b.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)));
})()`

// The CopilotKit example (CopilotKit's chat on the demo agent over AG-UI,
// the counter from the run's shared state, its button through
// @surfaced/react) served by a real daemon with --web-root's mechanism, in
// headless chromium.
func TestBrowserCopilotKitApp(t *testing.T) {
	app := buildCopilotKitApp(t)
	ctx := testkit.Browser(t)
	d := daemon.Start(t,
		daemon.Agents(surfaced.AgentSpec{Name: "demo", Title: "Surface demo", Argv: []string{testkit.Build(t, "./examples/surface-demo-agent")}}),
		daemon.WebRoot(os.DirFS(app)),
	)
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
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/app/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	// The first (state-only) run opens the thread: the shared state shows the count.
	waitFor(t, ctx, "the counter shows 0", elemText(tid("counter-value")), func(s string) bool { return s == "0" })
	waitFor(t, ctx, "the demo surface is live", elemText(tid("surface-availability")), func(s string) bool { return s == "live" })
	href := evalString(ctx, "location.href")
	if strings.Contains(href, "token=") || !strings.Contains(href, "thread=") {
		t.Fatalf("the address should name the thread and not the token: %s", href)
	}

	// CopilotKit's chat streams the agent's answer.
	say(t, ctx, "hello from copilotkit")
	waitFor(t, ctx, "the streamed answer", elemText(tid("chat")), func(s string) bool {
		return strings.Contains(s, "scripted model") && strings.Contains(s, "hello from copilotkit")
	})

	// The button runs the command through @surfaced/react; the count comes
	// back through the shared state.
	waitFor(t, ctx, "the agent is idle", elemText(tid("connection")), func(s string) bool { return s == "connected" })
	if err := chromedp.Do(ctx, chromedp.Click(tid("counter-increment"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter shows 1", elemText(tid("counter-value")), func(s string) bool { return s == "1" })

	// The chat moves it too: the tool's change arrives as a STATE_DELTA of
	// the chat's run.
	say(t, ctx, "increment the counter please")
	waitFor(t, ctx, "the counter shows 2", elemText(tid("counter-value")), func(s string) bool { return s == "2" })
	waitFor(t, ctx, "the delta in the activity", elemText(tid("state-activity")), func(s string) bool { return strings.Contains(s, "surface:demo/value/count = 2") })
	waitFor(t, ctx, "the tool's answer", elemText(tid("chat")), func(s string) bool { return strings.Contains(s, "count = 2") })

	// The agent's dialog is an AG-UI interrupt; answering it resumes the turn.
	waitFor(t, ctx, "the agent is idle", elemText(tid("connection")), func(s string) bool { return s == "connected" })
	say(t, ctx, "choose a colour")
	waitFor(t, ctx, "the dialog", elemText(tid("agent-dialog")), func(s string) bool { return strings.Contains(s, "Choose a colour") })
	waitChatAtEnd(t, ctx)
	waitFor(t, ctx, "the dialog's answers in sight", dialogAnswerable, func(s string) bool { return s == "true" })
	saveScreenshot(t, ctx, "copilotkit-app-dialog-1400x900", 1400, 900)
	if err := chromedp.Do(ctx, chromedp.Click(`//*[@data-testid="agent-dialog"]//button[text()="green"]`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the resumed turn", elemText(tid("chat")), func(s string) bool { return strings.Contains(s, "You chose: green.") })
	waitFor(t, ctx, "the agent is idle", elemText(tid("connection")), func(s string) bool { return s == "connected" })
	waitChatAtEnd(t, ctx)
	saveScreenshot(t, ctx, "copilotkit-app-1400x900", 1400, 900)

	// A reload (on a phone now) continues the thread: the same session, its
	// count, its history.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1)), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the counter after reload", elemText(tid("counter-value")), func(s string) bool { return s == "2" })
	waitFor(t, ctx, "the history after reload", elemText(tid("chat")), func(s string) bool {
		return strings.Contains(s, "hello from copilotkit") && strings.Contains(s, "You chose: green.")
	})
	if got := evalString(ctx, "location.href"); got != href {
		t.Fatalf("the reload changed the thread: %s, was %s", got, href)
	}
	waitChatAtEnd(t, ctx)
	saveScreenshot(t, ctx, "copilotkit-app-390x844", 390, 844)
}
