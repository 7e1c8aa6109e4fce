package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// waitText waits until the element's text equals want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	expr := `(() => { const e = document.querySelector(` + jsString(sel) + `); return e ? e.textContent.trim() : null })()`
	deadline := time.Now().Add(15 * time.Second)
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

// The main job in a real browser: the demo panel shows count: 0; increment
// makes it 1; a reload keeps 1; "increment" typed in the chat moves the same
// counter.
func TestBrowserMainJob(t *testing.T) {
	ctx := testkit.Browser(t)
	d := daemon.Start(t, demoAgent(t, "./examples/surface-demo-agent")...)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 0")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="surface-demo-log"] li').length`)); n != 0 {
		t.Fatalf("the log starts empty, has %d entries", n)
	}
	// The token left the address bar (the cookie carries the login).
	if u, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); strings.Contains(u, "token=") {
		t.Fatalf("token still in the address: %s", u)
	}
	if err := chromedp.Do(ctx, chromedp.Click(tid("surface-demo-increment"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 1")
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 1")
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(tid("composer-input")),
		chromedp.SendKeys(tid("composer-input"), "increment please"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 2")
	screenshot(t, ctx, "main-job")
	// The reply streamed into the chat, with the tool call.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="chat-tool"]').length`))
		txt, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('[data-testid="chat-message-assistant"]')).map(e => e.textContent).join(' ')`))
		if n >= 1 && strings.Contains(txt, "scripted") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat did not show the reply: tools=%d text=%q", n, txt)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// demoAgent runs an agent binary as `surfaced run ./examples/surface-demo-agent`
// runs the demo agent: named and titled by its manifest, with the panels the
// manifest names served from its ui/ folder.
func demoAgent(t *testing.T, pkg string) []daemon.Option {
	t.Helper()
	m, err := config.LoadManifest(filepath.Join(testkit.RepoRoot(), "examples/surface-demo-agent"))
	if err != nil {
		t.Fatal(err)
	}
	dir, panels := m.UI()
	if dir == "" {
		t.Fatal("the demo agent's manifest names no panels")
	}
	return []daemon.Option{
		daemon.Agents(surfaced.AgentSpec{Name: m.Name, Title: m.Title, Argv: []string{testkit.Build(t, pkg)}}),
		daemon.AgentUI(m.Name, gateway.AgentUI{Dir: dir, Panels: panels}),
	}
}

// An agent whose manifest names a demo panel but which never registers the
// domain (hello-agent's binary): the panel mounts and shows unavailable,
// read-only, without an error, and the chat still works.
func TestBrowserDegradedPanel(t *testing.T) {
	ctx := testkit.Browser(t)
	d := daemon.Start(t, demoAgent(t, "./examples/hello-agent")...)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-degraded"), "demo surface unavailable (read-only)")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="surface-demo-increment"], [data-testid="surface-demo-echo"], [data-testid="surface-demo-error"], [role="alert"]').length`)); n != 0 {
		t.Fatalf("a degraded panel has no controls and no error (%d found)", n)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(tid("composer-input")),
		chromedp.SendKeys(tid("composer-input"), "echo: hi there"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('[data-testid="tool-output"]')).map(e => e.textContent).join(' ')`))
		if strings.Contains(out, "hi there") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the echo tool output did not show: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An agent that ships no panels and registers no domain: no panel at all,
// a quiet line saying so.
func TestBrowserNoSurfaces(t *testing.T) {
	ctx := testkit.Browser(t)
	d := daemon.Start(t, daemon.Agents(surfaced.AgentSpec{Name: "hello", Title: "Hello",
		Argv: []string{testkit.Build(t, "./examples/hello-agent")}}))
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surfaces-empty"), "This agent has no surfaces.")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.panel').length`)); n != 0 {
		t.Fatalf("%d panels for an agent without surfaces", n)
	}
}

// screenshot saves a PNG when SURFACED_SCREENSHOTS names a directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("SURFACED_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	_ = os.WriteFile(dir+"/"+name+".png", png, 0o644)
}

// Finding 6 of issue 14, in a real browser: alice is signed in; a page on
// another site sends the browser to the start URL with bob's token, and
// posts a forged confirmation. The browser stays alice. Opening bob's link
// herself shows a confirmation page; only its button switches to bob.
func TestBrowserStartURLCannotBeForced(t *testing.T) {
	ctx := testkit.Browser(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	const aliceTok, bobTok = "alice-secret-token", "bob-secret-token-1"
	daemon.WriteTokens(t, tokens, map[string]string{"alice": aliceTok, "bob": bobTok})
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }))
	aliceSession, bobSession := d.As(aliceTok).Create(nil), d.As(bobTok).Create(nil)

	// The other site: localhost is another site than 127.0.0.1.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/navigate":
			fmt.Fprintf(w, `<!doctype html><script>location.href = %q</script>`, d.URL+"/?token="+bobTok)
		case "/post":
			fmt.Fprintf(w, `<!doctype html><form method="post" action="%s"><input name="token" value="%s"><input name="next" value="/"><input name="confirm" value="x.9999999999"></form><script>document.forms[0].submit()</script>`,
				d.URL+guard.SignInPath, bobTok)
		}
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	// whoseSessions lists, from a document of the daemon's (not the app,
	// which may start a session of its own), the sessions the browser's
	// cookie sees.
	whoseSessions := func() string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/style.css")); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`fetch('/api/sessions').then(r => r.json()).then(j => (j.sessions || []).map(s => s.sessionId).join(','))`,
			chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+aliceTok)); err != nil {
		t.Fatal(err)
	}
	if got := whoseSessions(); got != aliceSession {
		t.Fatalf("signed in with alice's link, the browser sees %q", got)
	}

	// The other site navigates the browser to bob's start URL.
	if err := chromedp.Do(ctx, chromedp.Navigate(evilURL+"/navigate")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "h1", "Sign-in refused")
	if got := whoseSessions(); got != aliceSession {
		t.Fatalf("after another site sent the browser to bob's link, it sees %q", got)
	}
	// ... and posts a confirmation it made up.
	if err := chromedp.Do(ctx, chromedp.Navigate(evilURL+"/post")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		u, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		return strings.HasPrefix(u, d.URL)
	}, "the forged form's answer from the daemon")
	if got := whoseSessions(); got != aliceSession {
		t.Fatalf("after another site posted a confirmation, the browser sees %q", got)
	}

	// Alice opens bob's link herself: she is asked, and stays alice until
	// she confirms.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+bobTok)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "h1", "Switch to bob?")
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid="signin-switch"]`)); err != nil {
		t.Fatal(err)
	}
	// The form posts, and the answer sends the browser on to / (the app).
	var at string
	t.Cleanup(func() {
		if t.Failed() {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Logf("the browser is at %s: %s", at, body)
		}
	})
	testkit.Eventually(t, 10*time.Second, func() bool {
		at, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		return at == d.URL+"/"
	}, "the confirmation to land on /")
	if got := whoseSessions(); got != bobSession {
		t.Fatalf("after confirming the switch, the browser sees %q (alice %s, bob %s)", got, aliceSession, bobSession)
	}
}
