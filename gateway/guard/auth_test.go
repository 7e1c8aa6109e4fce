package guard

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/identity"
)

func TestAuthentication(t *testing.T) {
	s := start(t, Config{Token: testToken})
	base := s.srv.URL
	cookie := DefaultCookieName + "=" + testToken
	for _, tc := range []struct {
		name    string
		path    string
		headers []string
		want    int
		subject string // on 200
		message string // a fragment of the 401 message
	}{
		{"no credential", "/api/whoami", nil, 401, "", "No credential"},
		{"wrong bearer", "/api/whoami", []string{"Authorization", "Bearer wrong-token-wrong-token"}, 401, "", "not valid"},
		{"empty bearer", "/api/whoami", []string{"Authorization", "Bearer "}, 401, "", "Bearer <token>"},
		{"bearer of spaces", "/api/whoami", []string{"Authorization", "Bearer    x"}, 401, "", "not valid"},
		{"right bearer", "/api/whoami", []string{"Authorization", "Bearer " + testToken}, 200, identity.Local, ""},
		{"scheme is case-insensitive", "/api/whoami", []string{"Authorization", "bearer " + testToken}, 200, identity.Local, ""},
		{"basic scheme", "/api/whoami", []string{"Authorization", "Basic " + testToken}, 401, "", "Bearer <token>"},
		{"token alone", "/api/whoami", []string{"Authorization", testToken}, 401, "", "Bearer <token>"},
		{"two Authorization headers", "/api/whoami", []string{"Authorization", "Bearer " + testToken, "Authorization", "Bearer " + testToken}, 401, "", "more than one"},
		{"right cookie", "/api/whoami", []string{"Cookie", cookie}, 200, identity.Local, ""},
		{"wrong cookie", "/api/whoami", []string{"Cookie", DefaultCookieName + "=nope"}, 401, "", "cookie is not valid"},
		{"a bad bearer is not rescued by a good cookie", "/api/whoami", []string{"Authorization", "Bearer nope", "Cookie", cookie}, 401, "", "not valid"},
		{"token in the query of an API path", "/api/whoami?token=" + testToken, nil, 401, "", "query string"},
		{"token in the query of an API POST", "/api/echo?token=" + testToken, nil, 401, "", "query string"},
		{"public page needs nothing", "/", nil, 200, "", ""},
		{"ACP mount without credential", "/acp", nil, 401, "", "No credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodGet
			if strings.HasPrefix(tc.path, "/api/echo") {
				method = http.MethodPost
			}
			resp, body := do(t, method, base+tc.path, tc.headers...)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			switch tc.want {
			case 401:
				if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
					t.Errorf("WWW-Authenticate = %q, want Bearer", got)
				}
				var b errorBody
				if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error.Code != "unauthorized" || !strings.Contains(b.Error.Message, tc.message) {
					t.Errorf("body %s: want code unauthorized and a message containing %q", body, tc.message)
				}
			case 200:
				if tc.subject == "" {
					return
				}
				var id identity.Identity
				if err := json.Unmarshal([]byte(body), &id); err != nil || id.Subject != tc.subject || id.Credential != digestHex(testToken) {
					t.Errorf("identity %s, want subject %q and the token's digest", body, tc.subject)
				}
			}
		})
	}
}

func TestPublicPathCarriesIdentityWhenSignedIn(t *testing.T) {
	s := start(t, Config{Token: testToken})
	_, body := do(t, http.MethodGet, s.srv.URL+"/", "Authorization", "Bearer "+testToken)
	if body != "page signed-in=true subject=local" {
		t.Fatalf("signed in: %q", body)
	}
	_, body = do(t, http.MethodGet, s.srv.URL+"/", "Authorization", "Bearer nope")
	if body != "page signed-in=false subject=" {
		t.Fatalf("bad credential on a public page: %q", body)
	}
}

func TestStartURLExchange(t *testing.T) {
	s := start(t, Config{Token: testToken})
	base := s.srv.URL

	t.Run("sets a session cookie and drops the token", func(t *testing.T) {
		resp, body := do(t, http.MethodGet, base+"/index.html?a=1&token="+testToken+"&b=two%20words&token=")
		// Two token parameters are ambiguous: refused.
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("two token params: got %d %s, want 401", resp.StatusCode, body)
		}
		resp, body = do(t, http.MethodGet, base+"/index.html?a=1&token="+testToken+"&b=two%20words")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("got %d %s, want 303", resp.StatusCode, body)
		}
		if loc := resp.Header.Get("Location"); loc != "/index.html?a=1&b=two%20words" {
			t.Errorf("Location = %q", loc)
		}
		for h, want := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("%s = %q, want %q", h, got, want)
			}
		}
		cs := resp.Cookies()
		if len(cs) != 1 {
			t.Fatalf("cookies: %v", cs)
		}
		c := cs[0]
		if c.Name != DefaultCookieName || c.Value != testToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode ||
			c.Path != "/" || !c.Expires.IsZero() || c.MaxAge != 0 || c.Secure {
			t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/, no expiry, not Secure on plain HTTP", resp.Header.Get("Set-Cookie"))
		}
	})

	t.Run("a browser follows it and then uses the API", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		c := client()
		c.Jar = jar
		c.CheckRedirect = nil
		resp, err := c.Get(base + "/?token=" + testToken)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
			t.Fatalf("landed on %s with %d, want / with 200", resp.Request.URL, resp.StatusCode)
		}
		resp, err = c.Get(base + "/api/whoami")
		if err != nil {
			t.Fatal(err)
		}
		var id identity.Identity
		_ = json.NewDecoder(resp.Body).Decode(&id)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || id.Subject != identity.Local {
			t.Fatalf("API with the cookie: %d %+v", resp.StatusCode, id)
		}
	})

	t.Run("bad token, JSON", func(t *testing.T) {
		resp, body := do(t, http.MethodGet, base+"/?token=nope")
		if resp.StatusCode != http.StatusUnauthorized || errorCode(body) != "unauthorized" || len(resp.Cookies()) != 0 {
			t.Fatalf("got %d %s (cookies %v), want 401 unauthorized and no cookie", resp.StatusCode, body, resp.Cookies())
		}
	})

	t.Run("bad token, page", func(t *testing.T) {
		resp, body := do(t, http.MethodGet, base+"/?token=nope", "Accept", "text/html,application/xhtml+xml")
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "Not signed in") || strings.Contains(body, "nope") {
			t.Fatalf("got %d %q %s, want a 401 page that does not echo the token", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})

	t.Run("not on API paths", func(t *testing.T) {
		resp, body := do(t, http.MethodGet, base+"/api/whoami?token="+testToken)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Fatalf("got %d %s, want 401 and no cookie", resp.StatusCode, body)
		}
	})

	t.Run("only GET", func(t *testing.T) {
		resp, _ := do(t, http.MethodHead, base+"/?token="+testToken)
		if resp.StatusCode == http.StatusSeeOther || len(resp.Cookies()) != 0 {
			t.Fatalf("HEAD: got %d with cookies %v, want no exchange", resp.StatusCode, resp.Cookies())
		}
	})

	t.Run("the gates still apply", func(t *testing.T) {
		resp, body := do(t, http.MethodGet, base+"/?token="+testToken, "Host", "evil.example.com")
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("rebound start URL: got %d %s, want 403 and no cookie", resp.StatusCode, body)
		}
	})
}

func TestCookieNameAndTLSAttributes(t *testing.T) {
	g, err := New(Config{Addr: "127.0.0.1:7800", Token: testToken, CookieName: "surfaced_7800", Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:7800/?token="+testToken, nil)
	r.Host = "127.0.0.1:7800"
	r.TLS = &tls.ConnectionState{}
	w := httptest.NewRecorder()
	g.Handler(isPublicPath, http.NotFoundHandler()).ServeHTTP(w, r)
	res := w.Result()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 || res.Cookies()[0].Name != "surfaced_7800" || !res.Cookies()[0].Secure {
		t.Fatalf("got %d %v, want 303 with a Secure cookie named surfaced_7800", res.StatusCode, res.Header["Set-Cookie"])
	}
}

func TestWithoutToken(t *testing.T) {
	for in, want := range map[string]string{
		"/?token=x":                 "/",
		"/?token=x&token=y":         "/",
		"/?a=1&token=x&b=2":         "/?a=1&b=2",
		"/?to%6Ben=x&tokens=1":      "/?tokens=1",
		"//evil.example.com/?token": "/evil.example.com/",
		"///a?token=1":              "/a",
		"/a%2Fb?token=1&c":          "/a%2Fb?c",
	} {
		u, err := url.ParseRequestURI(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := withoutToken(u); got != want {
			t.Errorf("withoutToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNoAuth(t *testing.T) {
	log, logs := newLogger()
	s := start(t, Config{NoAuth: true, Logger: log})
	if !strings.Contains(logs.String(), "AUTHENTICATION IS OFF") || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no loud warning at start: %s", logs)
	}
	for _, headers := range [][]string{nil, {"Authorization", "Bearer whatever"}} {
		resp, body := do(t, http.MethodGet, s.srv.URL+"/api/whoami", headers...)
		var id identity.Identity
		_ = json.Unmarshal([]byte(body), &id)
		if resp.StatusCode != http.StatusOK || id.Subject != identity.Anonymous || id.Credential != "" {
			t.Fatalf("headers %v: got %d %s, want 200 anonymous", headers, resp.StatusCode, body)
		}
	}
	// The gates still apply.
	resp, _ := do(t, http.MethodGet, s.srv.URL+"/api/whoami", "Host", "evil.example.com")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no-auth with a rebound Host: got %d, want 403", resp.StatusCode)
	}
	resp, _ = do(t, http.MethodGet, s.srv.URL+"/api/whoami", "Origin", "http://evil.example.com")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no-auth with a foreign Origin: got %d, want 403", resp.StatusCode)
	}
	// An anonymous Context is never revoked.
	ctx, cancel := s.g.Context(t.Context(), identity.Identity{Subject: identity.Anonymous})
	select {
	case <-ctx.Done():
		t.Fatal("anonymous context was cancelled")
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no credential", Config{Addr: "127.0.0.1:7800"}, "no credential configured"},
		{"no port", Config{Addr: "127.0.0.1", Token: testToken}, `listen address "127.0.0.1"`},
		{"empty addr", Config{Token: testToken}, "listen address"},
		{"token with a space", Config{Addr: ":1", Token: "abc def"}, "printable ASCII"},
		{"token with a semicolon", Config{Addr: ":1", Token: "abc;def"}, "semicolon"},
		{"bad cookie name", Config{Addr: ":1", Token: testToken, CookieName: "a b"}, `cookie name "a b"`},
		{"hostname with scheme", Config{Addr: ":1", Token: testToken, AllowedHostnames: []string{"https://x.example"}}, `allowed hostname "https://x.example"`},
		{"hostname with port", Config{Addr: ":1", Token: testToken, AllowedHostnames: []string{"x.example:80"}}, "without scheme, port"},
		{"hostname wildcard", Config{Addr: ":1", Token: testToken, AllowedHostnames: []string{"*.example.com"}}, "wildcard"},
		{"bracketed with port", Config{Addr: ":1", Token: testToken, AllowedHostnames: []string{"[::1]:80"}}, "allowed hostname"},
		{"origin without scheme", Config{Addr: ":1", Token: testToken, BrowserOrigins: []string{"app.example.com"}}, `browser origin "app.example.com"`},
		{"origin with path", Config{Addr: ":1", Token: testToken, BrowserOrigins: []string{"https://app.example.com/"}}, "nothing after the port"},
		{"origin wildcard", Config{Addr: ":1", Token: testToken, BrowserOrigins: []string{"*"}}, "browser origin"},
		{"origin null", Config{Addr: ":1", Token: testToken, BrowserOrigins: []string{"null"}}, "browser origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(tc.cfg)
			if err == nil {
				g.Close()
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	// Accepted spellings.
	g, err := New(Config{Addr: "[::1]:0", Token: testToken, Logger: discard(),
		AllowedHostnames: []string{"Surfaced.Example.NET.", "::1", "[fe80::2]", "192.0.2.7", "my_host"},
		BrowserOrigins:   []string{"http://[::1]:5173", "https://app.example.com:443"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, k := range []string{"surfaced.example.net", "[::1]", "[fe80::2]", "192.0.2.7", "my_host"} {
		h, _, _ := parseAuthority(k)
		if _, ok := g.allowedHosts[h]; !ok {
			t.Errorf("allowed hostname %q missing from %v", k, g.allowedHosts)
		}
	}
	if o, _ := parseOrigin("https://app.example.com"); !hasOrigin(g, o) {
		t.Errorf("origins %v", g.browserOrigins)
	}
}

func TestShortTokenWarns(t *testing.T) {
	log, logs := newLogger()
	g, err := New(Config{Addr: ":1", Token: "short", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if !strings.Contains(logs.String(), "short and guessable") {
		t.Fatalf("no warning: %s", logs)
	}
}

func TestLaunchToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := LaunchToken()
		if len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" || !cookieSafe(tok) || seen[tok] {
			t.Fatalf("LaunchToken() = %q: want 32 fresh hex digits", tok)
		}
		seen[tok] = true
	}
}

func hasOrigin(g *Guard, o parsedOrigin) bool {
	_, ok := g.browserOrigins[o]
	return ok
}

// TestNetHTTPHandler drives the plain net/http form on a real listener.
func TestNetHTTPHandler(t *testing.T) {
	g, err := New(Config{Addr: "127.0.0.1:0", Token: testToken, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/actors", func(w http.ResponseWriter, r *http.Request) {
		id, ok := identity.FromContext(r.Context())
		if !ok {
			t.Error("no identity in the context")
		}
		_, _ = w.Write([]byte(id.Subject))
	})
	srv := httptest.NewServer(g.Handler(nil, mux))
	defer srv.Close()
	resp, body := do(t, http.MethodGet, srv.URL+"/debug/actors", "Authorization", "Bearer "+testToken)
	if resp.StatusCode != http.StatusOK || body != identity.Local {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodGet, srv.URL+"/debug/actors")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("no credential: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, http.MethodGet, srv.URL+"/debug/actors", "Authorization", "Bearer "+testToken, "Host", "evil.example.com")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebound Host: %d", resp.StatusCode)
	}
	resp, _ = do(t, http.MethodHead, srv.URL+"/debug/actors", "Origin", "http://evil.example.com")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("HEAD with a foreign Origin: %d", resp.StatusCode)
	}
}
