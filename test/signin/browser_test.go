package signin_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// signInDaemon is a daemon whose browsers sign in with op (client
// "surfaced"). The daemon is reached as http://localhost:port, the
// provider as http://127.0.0.1:port: two sites, so the provider's redirect
// to the callback is a cross-site navigation, as with a real provider.
func signInDaemon(t *testing.T, op *idptest.OP, clk clock.Clock, opts ...daemon.Option) (*daemon.Daemon, *idp.SignIn, string) {
	t.Helper()
	iss, err := idp.Discover(context.Background(), idp.IssuerConfig{URL: op.Issuer, Discover: true, Clock: clk, Logger: daemon.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var si *idp.SignIn
	var base string
	opts = append([]daemon.Option{daemon.GuardAt(func(url string, c *guard.Config) {
		base = strings.Replace(url, "127.0.0.1", "localhost", 1)
		op.Client("surfaced", "surfaced-secret", base+"/auth/callback")
		si, err = idp.NewSignIn(idp.SignInConfig{Issuer: iss, ClientID: "surfaced", ClientSecret: "surfaced-secret",
			RedirectURL: base + "/auth/callback", Scopes: []string{"openid", "profile", "email", "offline_access"},
			Recheck: time.Minute, Lifetime: time.Hour, Clock: clk, Logger: daemon.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		c.SignIn, c.Clock = si, clk
	})}, opts...)
	d := daemon.Start(t, opts...)
	t.Cleanup(si.Close)
	return d, si, base
}

func jsString(s string) string { return strconv.Quote(s) }

func tid(id string) string { return `[data-testid="` + id + `"]` }

func evalString(ctx context.Context, expr string) string {
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => { try { return String(await (`+expr+`)) } catch (e) { return "" } })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		return ""
	}
	return got
}

func waitFor(t *testing.T, ctx context.Context, what, expr string, ok func(string) bool) string {
	t.Helper()
	last := &lastValue{}
	testkit.Eventually(t, 30*time.Second, func() bool {
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

func visible(sel string) string {
	return `(() => { const e = document.querySelector(` + jsString(sel) + `); return !!e && !e.closest("[hidden]") && e.getClientRects().length > 0 })()`
}

// saveScreenshot writes the page at a viewport size to the test's artifact
// directory (go test -artifacts keeps it), and to SURFACED_SCREENSHOTS
// when that names a directory.
func saveScreenshot(t *testing.T, ctx context.Context, name string, w, h int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h, chromedp.EmulateScale(1))); err != nil {
		t.Fatalf("viewport %dx%d: %v", w, h, err)
	}
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

// TestBrowserSignsInAndOut: chromium opens the web UI signed out, is sent
// to the provider's login page, signs in there as alice, lands back in the
// web UI as alice (the SameSite=Strict cookie set on the cross-site
// callback sticks, thanks to the landing step), then signs out.
func TestBrowserSignsInAndOut(t *testing.T) {
	ctx := testkit.Browser(t)
	op := idptest.StartOP(t, people)
	d, si, base := signInDaemon(t, op, clock.Real{})
	_ = chromedp.Listen(ctx, func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			t.Logf("uncaught: %s %s", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception.Description)
		}
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	// The web UI sends a signed-out person to the provider's login page.
	waitFor(t, ctx, "the provider's login page", `location.href`, func(s string) bool { return strings.HasPrefix(s, op.Issuer+"/login/username") })
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`#username`, "alice"),
		chromedp.SendKeys(`#password`, "alice-pw"),
		chromedp.Click(`button[type="submit"]`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the web UI shows alice", elemText(tid("account-subject")), func(s string) bool { return s == "alice Test" })
	if href := evalString(ctx, "location.origin + location.pathname"); href != base+"/" {
		t.Fatalf("landed on %s, want %s/", href, base)
	}
	if via := evalString(ctx, elemText(tid("account-via"))); !strings.Contains(via, "127.0.0.1") {
		t.Fatalf("account via %q", via)
	}
	me := evalString(ctx, `fetch("/auth/me").then(r => r.text())`)
	if !strings.Contains(me, `"subject":"`+subjectOf(op, "alice")+`"`) || !strings.Contains(me, `"via":"signin"`) || !strings.Contains(me, `"groups":["staff"]`) {
		t.Fatalf("/auth/me: %s", me)
	}
	// The cookie is HttpOnly: the page cannot read it.
	if c := evalString(ctx, "document.cookie"); strings.Contains(c, "surfaced_token") {
		t.Fatalf("the page can read the cookie: %q", c)
	}
	// The agent list and a session, as alice.
	waitFor(t, ctx, "a session opens", `location.hash`, func(s string) bool { return strings.HasPrefix(s, "#/s/") })
	waitFor(t, ctx, "the composer", visible(tid("composer-input")), func(s string) bool { return s == "true" })
	saveScreenshot(t, ctx, "signed-in-1400x900", 1400, 900)
	saveScreenshot(t, ctx, "signed-in-390x844", 390, 844)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	if si.SignedIn() != 1 {
		t.Fatalf("%d sign-ins held", si.SignedIn())
	}

	// Sign out: the sign-in ends, the page says so and offers to sign in
	// again (without sending the person straight back to the provider).
	if err := chromedp.Do(ctx, chromedp.Click(tid("sign-out"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the signed-out page", elemText(tid("signed-out")), func(s string) bool { return strings.Contains(s, "You signed out.") })
	waitFor(t, ctx, "the sign-in button", visible(tid("sign-in")), func(s string) bool { return s == "true" })
	if si.SignedIn() != 0 {
		t.Fatalf("%d sign-ins held after signing out", si.SignedIn())
	}
	if me := evalString(ctx, `fetch("/auth/me").then(r => r.json()).then(m => String(m.signedIn))`); me != "false" {
		t.Fatalf("/auth/me after sign-out: signedIn %s", me)
	}
	saveScreenshot(t, ctx, "signed-out-1400x900", 1400, 900)
	saveScreenshot(t, ctx, "signed-out-390x844", 390, 844)
	// A reload stays signed out.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "still signed out after a reload", elemText(tid("signed-out")), func(s string) bool { return strings.Contains(s, "signed out") })

	// The cookie set on the cross-site callback is sent on the navigation
	// that lands the browser: a page that needs it (here /auth/me itself,
	// as a document) sees the sign-in at once.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+guard.LoginPath+"?next="+"%2Fauth%2Fme")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the provider's login page again", `location.href`, func(s string) bool { return strings.HasPrefix(s, op.Issuer+"/login/username") })
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`#username`, "alice"),
		chromedp.SendKeys(`#password`, "alice-pw"),
		chromedp.Click(`button[type="submit"]`),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "landed on /auth/me", `location.href`, func(s string) bool { return s == base+guard.MePath })
	waitFor(t, ctx, "the landing navigation carried the cookie", `document.body.innerText`, func(s string) bool { return strings.Contains(s, `"signedIn":true`) })
	_ = d
}
