package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// webNoRedirect is a client that shows redirects instead of following them.
var webNoRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func webGet(t *testing.T, c *http.Client, url string, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// --web-root: the app's files at /app/ without a credential, under the UI's
// headers; the start URL exchange on /app/ sets the cookie; the API stays
// behind authentication.
func TestWebRoot(t *testing.T) {
	app := fstest.MapFS{
		"index.html":   {Data: []byte("<!doctype html><title>app</title>")},
		"app.js":       {Data: []byte("console.log(1)")},
		"sub/page.css": {Data: []byte("body{}")},
	}
	d := daemon.Start(t, daemon.WebRoot(app))

	resp, body := webGet(t, webNoRedirect, d.URL+"/app/", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<title>app</title>") {
		t.Fatalf("/app/: %d %q", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self'", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-cache", "Referrer-Policy": "no-referrer",
	} {
		if got := resp.Header.Get(k); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q in it", k, got, want)
		}
	}
	if resp, body := webGet(t, webNoRedirect, d.URL+"/app/app.js", nil); resp.StatusCode != http.StatusOK || body != "console.log(1)" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("/app/app.js: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/app/sub/page.css", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("/app/sub/page.css: %d", resp.StatusCode)
	}
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/app", nil); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/app/" {
		t.Fatalf("/app: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/app/missing.js", "/app/../go.mod", "/app/%2e%2e/go.mod"} {
		if resp, _ := webGet(t, webNoRedirect, d.URL+p, nil); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMovedPermanently {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}

	// The start URL on the app's path: the cookie, and the address without the token.
	resp, _ = webGet(t, webNoRedirect, d.URL+"/app/?token="+d.Token+"&session=s1", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/app/?session=s1" {
		t.Fatalf("start URL: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Value == d.Token {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("no cookie from the start URL: %v", resp.Header.Values("Set-Cookie"))
	}
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/app/?token=wrong", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", resp.StatusCode)
	}
	// The API still wants the credential; the cookie is one.
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/api/sessions", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/api without a credential: %d", resp.StatusCode)
	}
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/api/sessions", http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("/api with the cookie: %d", resp.StatusCode)
	}
	// Another site's page cannot read the app or the API (the Origin gate).
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/app/app.js", http.Header{"Origin": {"http://evil.test"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Origin: %d", resp.StatusCode)
	}
}

// Without a web root there is no /app/.
func TestNoWebRoot(t *testing.T) {
	d := daemon.Start(t)
	if resp, _ := webGet(t, webNoRedirect, d.URL+"/app/", nil); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/app/ without a web root: %d", resp.StatusCode)
	}
}
