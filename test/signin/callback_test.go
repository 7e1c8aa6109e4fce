package signin_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// attempt is a sign-in started at the daemon: the provider's URL and the
// cookie that binds the attempt to the browser that started it.
type attempt struct {
	authURL string
	cookie  *http.Cookie
}

func startSignIn(t *testing.T, op *idptest.OP, base, next string) attempt {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+guard.LoginPath+"?next="+url.QueryEscape(next), nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	a := attempt{authURL: resp.Header.Get("Location")}
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(a.authURL, op.Issuer+"/") {
		t.Fatalf("login: %d %q", resp.StatusCode, a.authURL)
	}
	cs := resp.Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteLaxMode || cs[0].Path != "/auth/callback" || cs[0].MaxAge <= 0 {
		t.Fatalf("the attempt's cookie: %+v", cs)
	}
	a.cookie = cs[0]
	return a
}

// callback delivers the provider's redirect to the daemon with the given
// cookies (none: another browser), as JSON or as a page.
func callback(t *testing.T, u string, html bool, cookies ...*http.Cookie) (answer, []*http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	if html {
		req.Header.Set("Accept", "text/html")
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}, resp.Cookies()
}

// signInCookie is the daemon's sign-in cookie among cs (nil when it set
// none).
func signInCookie(cs []*http.Cookie) *http.Cookie {
	for _, c := range cs {
		if !strings.HasSuffix(c.Name, "_signin") && c.MaxAge >= 0 && c.Value != "" {
			return c
		}
	}
	return nil
}

// TestSignInCallback: the callback completes only the attempt this
// browser started, once, with the provider's code; everything else is
// refused with a clear answer and signs nobody in. The browser lands on a
// path of this daemon only.
func TestSignInCallback(t *testing.T) {
	op := idptest.StartOP(t, people)
	d, si, base := signInDaemon(t, op, clock.Real{})

	// The way it should go: the cookie (HttpOnly, SameSite=Strict, whole
	// site) and the landing page that moves on to next.
	a := startSignIn(t, op, base, "/auth/me")
	back, err := op.SignIn(idptest.NewJar(), a.authURL, "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), base+"/auth/callback?") {
		t.Fatalf("the provider sent the browser to %s", back)
	}
	ok, set := callback(t, back.String(), true, a.cookie)
	c := signInCookie(set)
	if ok.status != http.StatusOK || c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("callback: %d %v %s", ok.status, set, ok.body)
	}
	if !strings.Contains(string(ok.body), `<meta http-equiv="refresh" content="0;url=/auth/me">`) || ok.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("landing page: %s", ok.body)
	}
	if m := me(t, d, ""); m.SignedIn {
		t.Fatal("signed in without the cookie")
	}
	if si.SignedIn() != 1 {
		t.Fatalf("%d sign-ins", si.SignedIn())
	}

	// The same callback again (a replay, with or without the attempt's
	// cookie): the attempt was used.
	for _, cs := range [][]*http.Cookie{{a.cookie}, nil} {
		if again, set := callback(t, back.String(), false, cs...); again.status != http.StatusBadRequest || again.errorCode(t) != codes.SigninFailed || signInCookie(set) != nil {
			t.Fatalf("replayed callback: %d %s", again.status, again.body)
		}
	}

	// Another browser delivers alice's callback (a link sent to someone):
	// it did not start the attempt.
	a = startSignIn(t, op, base, "/")
	back, err = op.SignIn(idptest.NewJar(), a.authURL, "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	other := startSignIn(t, op, base, "/") // that browser's own attempt
	if r, set := callback(t, back.String(), false, other.cookie); r.status != http.StatusBadRequest || r.errorCode(t) != codes.SigninFailed ||
		!strings.Contains(string(r.body), "not started in this browser") || signInCookie(set) != nil {
		t.Fatalf("another browser's callback: %d %s", r.status, r.body)
	}
	if r, _ := callback(t, back.String(), false); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "not started in this browser") {
		t.Fatalf("a callback without the attempt's cookie: %d %s", r.status, r.body)
	}

	// Malformed callbacks, the provider's refusal, and a code the provider
	// never issued.
	state := stateOf(t, a.authURL)
	cb := base + "/auth/callback"
	for _, tc := range []struct {
		name, query string
		status      int
		says        string
	}{
		{"no state, no code", "", http.StatusBadRequest, "one state and one code"},
		{"no code", "state=" + state, http.StatusBadRequest, "one state and one code"},
		{"two states", "state=" + state + "&state=" + state + "&code=x", http.StatusBadRequest, "one state and one code"},
		{"two codes", "state=" + state + "&code=x&code=y", http.StatusBadRequest, "one state and one code"},
		{"the provider refused", "state=" + state + "&error=access_denied&error_description=the+user+said+no", http.StatusForbidden, "access_denied: the user said no"},
		{"a code the provider never issued", "state=" + state + "&code=forged", http.StatusForbidden, "refused the sign-in code"},
	} {
		a := startSignIn(t, op, base, "/")
		st := stateOf(t, a.authURL)
		q := strings.ReplaceAll(tc.query, state, st)
		r, set := callback(t, cb+"?"+q, false, a.cookie)
		if r.status != tc.status || r.errorCode(t) != codes.SigninFailed || !strings.Contains(string(r.body), tc.says) || signInCookie(set) != nil {
			t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	// A browser gets a page that says why, with a way to sign in again.
	a = startSignIn(t, op, base, "/")
	if r, _ := callback(t, cb+"?state="+stateOf(t, a.authURL)+"&code=forged", true, a.cookie); r.status != http.StatusForbidden ||
		!strings.Contains(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), `href="/auth/login"`) {
		t.Fatalf("a failed callback's page: %d %s", r.status, r.body)
	}
	if si.SignedIn() != 1 {
		t.Fatalf("%d sign-ins after the refusals, want alice's one", si.SignedIn())
	}

	// next that would leave the daemon lands on /.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"} {
		a := startSignIn(t, op, base, next)
		back, err := op.SignIn(idptest.NewJar(), a.authURL, "bob", "bob-pw")
		if err != nil {
			t.Fatal(err)
		}
		r, _ := callback(t, back.String(), true, a.cookie)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `content="0;url=/"`) || strings.Contains(string(r.body), "evil") {
			t.Fatalf("next %q: %d %s", next, r.status, r.body)
		}
	}

	// Sign-out only from the daemon's own pages: another site's form
	// cannot sign a browser out.
	cookie := (&http.Cookie{Name: c.Name, Value: c.Value}).String()
	req, _ := http.NewRequest(http.MethodPost, base+guard.LogoutPath, nil)
	req.Header.Set("Cookie", cookie)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site sign-out: %d", resp.StatusCode)
	}
	if m := me(t, d, ""); m.SignedIn {
		t.Fatal("me without a cookie")
	}
	req, _ = http.NewRequest(http.MethodGet, base+guard.MePath, nil)
	req.Header.Set("Cookie", cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"signedIn":true`) || !strings.Contains(string(body), `"via":"signin"`) {
		t.Fatalf("alice after a cross-site sign-out: %s", body)
	}
}

func stateOf(t *testing.T, authURL string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil || u.Query().Get("state") == "" {
		t.Fatalf("no state in %q", authURL)
	}
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" {
		t.Fatalf("the authorization request lacks PKCE or a nonce: %s", authURL)
	}
	return q.Get("state")
}
