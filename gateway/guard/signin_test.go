package guard

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
)

const (
	aliceTok = "alice-token-0123456789abcdef"
	bobTok   = "bob-token-0123456789abcdef"
)

// postForm posts a form with headers (pairs) and returns the response.
func postForm(t *testing.T, u string, form url.Values, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func formField(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no %s field: %s", name, page)
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// Finding 6 of issue 14: a page of another site cannot sign a browser in,
// nor switch it to another subject; a browser signed in as one subject is
// asked before the link of another replaces its cookie.
func TestStartURLCannotBeForcedOnABrowser(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	writeTokensFile(t, tokens, "alice", aliceTok, "bob", bobTok)
	s := start(t, Config{TokensFile: tokens})
	base := s.srv.URL
	html := "text/html,application/xhtml+xml"
	alice := DefaultCookieName + "=" + aliceTok

	t.Run("another site's navigation is refused", func(t *testing.T) {
		for _, site := range []string{"cross-site", "same-site"} {
			resp, body := do(t, http.MethodGet, base+"/?token="+bobTok, "Sec-Fetch-Site", site, "Accept", html)
			if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 || !strings.Contains(body, "another web site") {
				t.Fatalf("%s: %d %v %s", site, resp.StatusCode, resp.Cookies(), body)
			}
			resp, body = do(t, http.MethodGet, base+"/?token="+bobTok, "Sec-Fetch-Site", site, "Cookie", alice)
			if resp.StatusCode != http.StatusForbidden || errorCode(body) != "cross_site_signin" || len(resp.Cookies()) != 0 {
				t.Fatalf("%s, JSON: %d %s", site, resp.StatusCode, body)
			}
		}
	})

	t.Run("a navigation the person made signs in", func(t *testing.T) {
		for _, site := range []string{"none", "same-origin", ""} {
			h := []string{"Accept", html}
			if site != "" {
				h = append(h, "Sec-Fetch-Site", site)
			}
			resp, _ := do(t, http.MethodGet, base+"/?token="+bobTok, h...)
			if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].Value != bobTok {
				t.Fatalf("Sec-Fetch-Site %q: %d %v", site, resp.StatusCode, resp.Cookies())
			}
		}
		// Signed in as bob already: the same subject's link goes through.
		resp, _ := do(t, http.MethodGet, base+"/?token="+bobTok, "Sec-Fetch-Site", "none", "Cookie", DefaultCookieName+"="+bobTok)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("bob's link with bob's cookie: %d", resp.StatusCode)
		}
		// A cookie that no longer signs in (a revoked token, a restarted
		// daemon's launch token) is replaced at once.
		resp, _ = do(t, http.MethodGet, base+"/?token="+bobTok, "Sec-Fetch-Site", "none", "Cookie", DefaultCookieName+"=stale-token-0000000000")
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
			t.Fatalf("bob's link over a stale cookie: %d %v", resp.StatusCode, resp.Cookies())
		}
	})

	t.Run("another subject's link asks first", func(t *testing.T) {
		resp, page := do(t, http.MethodGet, base+"/index.html?x=1&token="+bobTok, "Sec-Fetch-Site", "none", "Accept", html, "Cookie", alice)
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 || !strings.Contains(page, "signed in as <b>alice</b>") ||
			!strings.Contains(page, "Sign in as bob") || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("confirmation page: %d %v %s", resp.StatusCode, resp.Cookies(), page)
		}
		form := url.Values{"token": {formField(t, page, "token")}, "next": {formField(t, page, "next")}, "confirm": {formField(t, page, "confirm")}}
		// Not from the daemon's own page.
		if resp, _ := postForm(t, base+SignInPath, form, "Cookie", alice, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("confirmation from another site: %d", resp.StatusCode)
		}
		// Not for this browser (another cookie, or none).
		if resp, _ := postForm(t, base+SignInPath, form, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("confirmation without alice's cookie: %d", resp.StatusCode)
		}
		// A forged or altered mark.
		bad := url.Values{"token": form["token"], "next": form["next"], "confirm": {"00" + form.Get("confirm")[2:]}}
		if resp, _ := postForm(t, base+SignInPath, bad, "Cookie", alice, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("altered mark: %d", resp.StatusCode)
		}
		// Expired.
		old := url.Values{"token": form["token"], "next": form["next"], "confirm": {s.g.confirmMark(digestHex(aliceTok), digestHex(bobTok), time.Now().Add(-time.Second))}}
		if resp, _ := postForm(t, base+SignInPath, old, "Cookie", alice, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("expired mark: %d", resp.StatusCode)
		}
		// The person's click.
		resp, _ = postForm(t, base+SignInPath, form, "Cookie", alice, "Sec-Fetch-Site", "same-origin")
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].Value != bobTok ||
			resp.Header.Get("Location") != "/index.html?x=1" {
			t.Fatalf("confirmed: %d %v %q", resp.StatusCode, resp.Cookies(), resp.Header.Get("Location"))
		}
		// Without a page (an API client with a cookie jar): told, not switched.
		resp, body := do(t, http.MethodGet, base+"/?token="+bobTok, "Cookie", alice)
		if resp.StatusCode != http.StatusConflict || errorCode(body) != "signin_needs_confirmation" || len(resp.Cookies()) != 0 {
			t.Fatalf("JSON: %d %s", resp.StatusCode, body)
		}
	})
}

// The confirmation page's mark expires by the guard's clock, not the wall
// clock: a page used within confirmWithin switches the browser, one used
// after it is refused.
func TestSignInConfirmationExpiresByTheGuardsClock(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	writeTokensFile(t, tokens, "alice", aliceTok, "bob", bobTok)
	fake := clock.NewFake(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	s := start(t, Config{TokensFile: tokens, Clock: fake})
	base := s.srv.URL
	alice := DefaultCookieName + "=" + aliceTok
	page := func() url.Values {
		t.Helper()
		resp, page := do(t, http.MethodGet, base+"/?token="+bobTok, "Sec-Fetch-Site", "none", "Accept", "text/html", "Cookie", alice)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("confirmation page: %d %s", resp.StatusCode, page)
		}
		return url.Values{"token": {formField(t, page, "token")}, "next": {formField(t, page, "next")}, "confirm": {formField(t, page, "confirm")}}
	}

	late := page()
	fake.Advance(confirmWithin + time.Second)
	if resp, body := postForm(t, base+SignInPath, late, "Cookie", alice, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusForbidden ||
		len(resp.Cookies()) != 0 || !strings.Contains(body, "expired") {
		t.Fatalf("a confirmation used %s after its page: %d %v, want 403 (expired)", confirmWithin+time.Second, resp.StatusCode, resp.Cookies())
	}

	inTime := page()
	fake.Advance(confirmWithin - time.Second)
	if resp, _ := postForm(t, base+SignInPath, inTime, "Cookie", alice, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != http.StatusSeeOther ||
		len(resp.Cookies()) != 1 || resp.Cookies()[0].Value != bobTok {
		t.Fatalf("a confirmation used within %s: %d %v, want the switch", confirmWithin, resp.StatusCode, resp.Cookies())
	}
}
