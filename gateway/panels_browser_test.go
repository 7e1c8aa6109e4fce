package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// consoleErrors collects the page's uncaught exceptions and console.error
// calls (not the browser's own log, which reports a missing favicon).
func consoleErrors(ctx context.Context) func() []string {
	var mu sync.Mutex
	var errs []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source == "") {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// The demo agent's own panel, loaded from its ui/ folder by a real daemon:
// mounted by the UI (not the generic panel), count, increment, echo, log;
// at a desktop and a phone size.
func TestBrowserAgentPanel(t *testing.T) {
	ctx := testkit.Browser(t)
	errs := consoleErrors(ctx)
	d := daemon.Start(t, demoAgent(t, "./examples/surface-demo-agent")...)
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(d.URL+"/?token="+d.Token),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 0")
	// The agent's module is what rendered it: the UI mounted it from the
	// agent's folder, and the generic panel's form is not there.
	mounted, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const p = document.querySelector('[data-testid="surface-demo"]');
		const res = performance.getEntriesByType("resource").map(e => new URL(e.name).pathname);
		return [p && p.dataset.panel, p && p.dataset.mounted, !!document.querySelector('[data-testid="surface-demo-form"]'),
			res.includes("/agents/demo/ui/demo.js"), res.includes("/agents/demo/ui/demo.css")].join(",");
	})()`))
	if mounted != "module,true,false,true,true" {
		t.Fatalf("panel, mounted, generic form, module loaded, css loaded = %s", mounted)
	}
	waitText(t, ctx, tid("surface-demo-rev"), "rev 1")
	if err := chromedp.Do(ctx, chromedp.Click(tid("surface-demo-increment"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 1")
	waitText(t, ctx, tid("surface-demo-rev"), "rev 2")
	for _, text := range []string{"hello from the panel", "a second line"} {
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(tid("surface-demo-echo-input"), text),
			chromedp.Click(tid("surface-demo-echo")),
		); err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, tid("surface-demo-log")+" li:last-child", text)
	}
	waitText(t, ctx, tid("surface-demo-echo-input"), "") // cleared after a successful echo
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="surface-demo-echo-input"]').value`)); v != "" {
		t.Fatalf("the echo box keeps %q after the echo", v)
	}
	// An empty echo is not sent; a command the agent refuses shows its error.
	if err := chromedp.Do(ctx, chromedp.Click(tid("surface-demo-echo"))); err != nil {
		t.Fatal(err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="surface-demo-log"] li').length`)); n != 2 {
		t.Fatalf("log has %d entries, want 2", n)
	}
	waitText(t, ctx, tid("surface-demo-rev"), "rev 4")
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 1")
	waitText(t, ctx, tid("surface-demo-log")+" li:last-child", "a second line")
	shot(t, ctx, "panel-demo-1400x900", false)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-count"), "count: 1")
	shot(t, ctx, "panel-demo-390x844", false)
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(tid("surface-demo"))); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, "panel-demo-390x844-panel", false)
	if e := errs(); len(e) != 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}

// A panel module that throws in mount: the UI says so and falls back to
// the generic panel, which still runs commands.
func TestBrowserBrokenPanel(t *testing.T) {
	ui := t.TempDir()
	if err := os.WriteFile(filepath.Join(ui, "demo.js"), []byte(`export function mount() { throw new Error("boom in mount"); }`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Browser(t)
	d := daemon.Start(t,
		daemon.Agents(surfaced.AgentSpec{Name: "demo", Argv: []string{testkit.Build(t, "./examples/surface-demo-agent")}}),
		daemon.AgentUI("demo", gateway.AgentUI{Dir: ui, Panels: map[string]string{"demo": "demo.js"}}))
	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-panel-failed"), "The agent's demo panel failed to mount: boom in mount. Showing the snapshot instead.")
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(tid("surface-demo-run")),
		chromedp.SetValue(tid("surface-demo-action"), "increment"),
		chromedp.Click(tid("surface-demo-run")),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, tid("surface-demo-result"), "ok: {\n  \"count\": 1\n}")
}

// shot saves a PNG of the viewport (full: the whole page) when
// SURFACED_SCREENSHOTS names a directory.
func shot(t *testing.T, ctx context.Context, name string, full bool) {
	dir := os.Getenv("SURFACED_SCREENSHOTS")
	if dir == "" {
		return
	}
	action := chromedp.CaptureScreenshot()
	if full {
		action = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}

// tally is the native domain of docs/panels.md's example.
type tally struct {
	Total   int   `json:"total"`
	Entries []int `json:"entries"`
}

// The complete example of docs/panels.md, taken from the document, mounted
// for a domain of that shape: it renders, adds, resets, and shows a refused
// command's error.
func TestBrowserPanelsDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testkit.RepoRoot(), "docs/panels.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```js\n// ui/tally.js")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/panels.md has no ```js block starting with // ui/tally.js")
	}
	ui := t.TempDir()
	if err := os.WriteFile(filepath.Join(ui, "tally.js"), []byte("// ui/tally.js"+code), 0o644); err != nil {
		t.Fatal(err)
	}
	domain := surface.Define("tally", tally{Entries: []int{}}, map[string]surface.Command[tally]{
		"add": func(ctx *surface.Ctx[tally], args json.RawMessage) (any, error) {
			var a struct {
				Amount int `json:"amount"`
			}
			if err := json.Unmarshal(args, &a); err != nil || a.Amount <= 0 {
				return nil, errors.New("amount must be a positive number")
			}
			ctx.SetState(func(s tally) tally {
				s.Total += a.Amount
				s.Entries = append(append([]int(nil), s.Entries...), a.Amount)
				return s
			})
			return map[string]int{"total": ctx.Get().Total}, nil
		},
		"reset": func(ctx *surface.Ctx[tally], _ json.RawMessage) (any, error) {
			ctx.SetState(func(tally) tally { return tally{Entries: []int{}} })
			return nil, nil
		},
	})
	ctx := testkit.Browser(t)
	errs := consoleErrors(ctx)
	d := daemon.Start(t, daemon.Domains(surfaced.DomainBinding{Domain: domain}),
		daemon.AgentUI("fake", gateway.AgentUI{Dir: ui, Panels: map[string]string{"tally": "tally.js"}}))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	panel := `[data-testid="surface-tally"] .panel-mount`
	waitText(t, ctx, panel+" p:nth-child(2)", "total: 0")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(panel+" input", "5"),
		chromedp.Click(panel+" button.primary"),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, panel+" p:nth-child(2)", "total: 5")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(panel+" input", "-1"),
		chromedp.Click(panel+" button.primary"),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, panel+" p.error", "amount must be a positive number (dispatch_failed)")
	if err := chromedp.Do(ctx, chromedp.Click(panel+" button:not(.primary)")); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, panel+" p:nth-child(2)", "total: 0")
	waitText(t, ctx, panel+" p.error", "")
	shot(t, ctx, "panel-doc-example-1400x900", false)
	if e := errs(); len(e) != 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
