package debug_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced/internal/testkit"
)

// evalUntil polls a JavaScript expression until check accepts its value.
func evalUntil[T any](t *testing.T, ctx context.Context, what, expr string, check func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last T
	var lastErr error
	for time.Now().Before(deadline) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		if err == nil {
			last = v
			if check(v) {
				return v
			}
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: last value %v (err %v)", what, last, lastErr)
	return last
}

// The page in a real browser: signed in through the start URL, it shows the
// session's actors live, the flooded slow domain's queue rising, and an
// empty table once the session has ended.
func TestPageInABrowser(t *testing.T) {
	bctx := testkit.Browser(t)
	d := dev(t, 50*time.Millisecond)
	id := d.Create(nil)
	// Sign in through the start URL exchange on a public path that is not
	// the web UI: the web UI would subscribe to the session, and an ended
	// session whose client was subscribed at the end keeps its actor until
	// the next request (its final flush drops the subscribers without
	// arming the linger), so the last row would stay.
	if err := chromedp.Do(bctx, chromedp.Navigate(d.URL+"/healthz?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(d.URL+"/debug/?sort=depth&session="+id)); err != nil {
		t.Fatal(err)
	}
	evalUntil(t, bctx, "status live", `document.querySelector('[data-testid="status"]').textContent`, func(s string) bool { return s == "live" })
	evalUntil(t, bctx, "node", `document.querySelector('[data-testid="node"]').textContent`, func(s string) bool { return s == "node test-node" })
	evalUntil(t, bctx, "the slow domain's row", `document.querySelectorAll('tr[data-domain="slow"]').length`, func(n int) bool { return n == 1 })
	if v, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="filter-sort"]').value + "|" + document.querySelector('[data-testid="filter-session"]').value`)); v != "depth|"+id {
		t.Fatalf("filters from the address: %q", v)
	}

	wait := d.Flood(id, 60)
	depthJS := `Number(document.querySelector('tr[data-domain="slow"] [data-testid="depth"]').textContent)`
	evalUntil(t, bctx, "depth ≥ 5 on the page", depthJS, func(n int) bool { return n >= 5 })
	// Sorted by depth: the flooded domain comes first (once the session
	// actor, which the flood passes through, has forwarded its share).
	evalUntil(t, bctx, "the queued domain first", `document.querySelector('[data-testid="rows"] tr').dataset.domain`, func(s string) bool { return s == "slow" })
	evalUntil(t, bctx, "the running command", `document.querySelector('tr[data-domain="slow"] [data-col="current"]').textContent`,
		func(s string) bool { return s == "*surfacedv1.RunCommand" })
	screenshot(t, bctx, "inspector-flooded")
	if ok := wait(); ok != 60 {
		t.Fatalf("%d of 60 commands", ok)
	}
	evalUntil(t, bctx, "depth back to 0", depthJS, func(n int) bool { return n == 0 })

	if st, raw := d.Do("DELETE", "/api/sessions/"+id, nil); st != http.StatusOK {
		t.Fatalf("delete: %d %s", st, raw)
	}
	defer func() {
		if t.Failed() {
			left, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('[data-testid="rows"] tr')).map(r => r.dataset.kind + " " + r.dataset.id + " " + r.textContent).join("\n")`))
			t.Logf("rows left:\n%s\n%+v", left, d.Actors(""))
		}
	}()
	evalUntil(t, bctx, "no rows after the end", `document.querySelectorAll('[data-testid="rows"] tr').length`, func(n int) bool { return n == 0 })
	evalUntil(t, bctx, "the empty note", `!document.querySelector('[data-testid="empty"]').hidden`, func(b bool) bool { return b })
}

// screenshot saves a PNG under $SURFACED_SCREENSHOTS when that is set.
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
	_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}
