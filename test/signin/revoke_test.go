package signin_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// signInWithoutBrowser signs user in to the daemon at base the way a
// browser does (login, the provider's page, the callback) and returns the
// cookie header the daemon set.
func signInWithoutBrowser(t *testing.T, op *idptest.OP, base, user, password string) string {
	t.Helper()
	jar := idptest.NewJar()
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + guard.LoginPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authURL := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(authURL, op.Issuer) {
		t.Fatalf("login: %d %q", resp.StatusCode, authURL)
	}
	back, err := op.SignIn(jar, authURL, user, password)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = c.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	u, _ := url.Parse(base)
	var parts []string
	for _, ck := range jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}

// TestSignInRevokedAtTheProvider: a person disabled at the provider loses
// access at the next re-check (recheck_interval): the daemon's refresh is
// refused, the sign-in ends, its live stream ends revoked, and the cookie
// no longer authenticates.
func TestSignInRevokedAtTheProvider(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	_, si, base := signInDaemon(t, op, clk)
	cookie := signInWithoutBrowser(t, op, base, "alice", "alice-pw")
	withCookie := func(method, path, body string) answer {
		return do(t, method, base+path, "", body, "Cookie", cookie)
	}
	a := withCookie(http.MethodPost, "/api/sessions", `{}`)
	if a.status != http.StatusCreated {
		t.Fatalf("create as alice: %d %s", a.status, a.body)
	}
	var created struct{ SessionID string }
	_ = json.Unmarshal(a.body, &created)
	stream := testkit.OpenSSE(t, base+"/api/sessions/"+created.SessionID+"/events", http.Header{"Cookie": {cookie}})
	defer stream.Close()
	stream.Wait(t, 10*time.Second, "the session frame", testkit.IsKind("session"))

	// A re-check while the person is admitted changes nothing. The clock
	// holds the re-check's timer and the stream's (the sign-in's end):
	// the re-check has run when its timer is armed again.
	testkit.Eventually(t, 10*time.Second, func() bool { return clk.Pending() >= 2 }, "the re-check and the stream's end armed")
	armed := clk.Pending()
	clk.Advance(time.Minute)
	testkit.Eventually(t, 10*time.Second, func() bool { return clk.Pending() >= armed }, "the next re-check armed")
	if a := withCookie(http.MethodGet, "/api/agents", ""); a.status != http.StatusOK {
		t.Fatalf("after a re-check: %d %s", a.status, a.body)
	}

	op.Disable("alice")
	clk.Advance(time.Minute)
	end := stream.Wait(t, 10*time.Second, "the end frame", testkit.IsKind("end"))
	if end.Data["reason"] != "revoked" {
		t.Fatalf("end %v, want revoked", end.Data)
	}
	if si.SignedIn() != 0 {
		t.Fatalf("%d sign-ins held", si.SignedIn())
	}
	if a := withCookie(http.MethodGet, "/api/agents", ""); a.status != http.StatusUnauthorized || a.errorCode(t) != "unauthorized" {
		t.Fatalf("after the revocation: %d %s", a.status, a.body)
	}
}

// TestSignInLifetime: a sign-in ends at session_lifetime, and its streams
// with it.
func TestSignInLifetime(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	_, _, base := signInDaemon(t, op, clk)
	cookie := signInWithoutBrowser(t, op, base, "bob", "bob-pw")
	if a := do(t, http.MethodGet, base+"/api/agents", "", "", "Cookie", cookie); a.status != http.StatusOK {
		t.Fatalf("signed in: %d %s", a.status, a.body)
	}
	for range 60 { // the re-checks of an hour, one a minute
		testkit.Eventually(t, 10*time.Second, func() bool { return clk.Pending() >= 1 }, "a timer armed")
		clk.Advance(time.Minute)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return do(t, http.MethodGet, base+"/api/agents", "", "", "Cookie", cookie).status == http.StatusUnauthorized
	}, "the sign-in over after its lifetime")
}
