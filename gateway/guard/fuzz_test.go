package guard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
)

func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"localhost:7800", "[::1]:1", "127.0.0.1.", "LOCALHOST", "a..b", "[::ffff:127.0.0.1]:80", "x:", "évil", "127.1", "[fe80::1%25eth0]"} {
		f.Add(s)
	}
	g, err := New(Config{Addr: "127.0.0.1:7800", Token: testToken, AllowedHostnames: []string{"surfaced.example.net"}, Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, port, err := parseAuthority(s)
		if err != nil {
			return
		}
		// The canonical form is a fixed point and lowercase.
		again := h.authority()
		if port != "" {
			again += ":" + port
		}
		h2, _, err := parseAuthority(again)
		if err != nil || h2.key() != h.key() {
			t.Fatalf("%q → %q → %q, %v", s, again, h2.key(), err)
		}
		if strings.ToLower(h.key()) != h.key() {
			t.Fatalf("%q: key %q is not lowercase", s, h.key())
		}
		// Bound to loopback, only loopback hosts and the listed one pass.
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = s
		if g.HostOK(r) && !h.loopback() && h.key() != "surfaced.example.net" {
			t.Fatalf("HostOK admitted %q (%q)", s, h.key())
		}
	})
}

func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"http://localhost:7800", "https://APP.example.com:443", "null", "http://[::1]", "http://x/", "http://u@x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseOrigin(s)
		if err != nil {
			return
		}
		o2, err := parseOrigin(o.String())
		if err != nil || o2.String() != o.String() {
			t.Fatalf("%q → %q → %q, %v", s, o.String(), o2.String(), err)
		}
	})
}

// FuzzCheckMark: the sign-in confirmation's mark (a form field anyone can
// post) is accepted only when it is exactly the one this process made for
// these two tokens with an expiry still ahead; nothing else passes, and no
// input panics.
func FuzzCheckMark(f *testing.F) {
	g := &Guard{markKey: newMarkKey(), clock: clock.Real{}}
	good := g.confirmMark("cur", "next", time.Now().Add(confirmWithin))
	expired := g.confirmMark("cur", "next", time.Now().Add(-time.Second))
	f.Add(expired, "cur", "next")
	f.Add(good, "cur", "next")
	f.Add(good, "next", "cur")
	f.Add(good, "", "next")
	f.Add(good+"0", "cur", "next")
	f.Add(strings.ToUpper(good), "cur", "next")
	f.Add("."+strings.Split(good, ".")[1], "cur", "next")
	f.Add("", "", "")
	f.Add("..", "a", "b")
	f.Add("00.99999999999999999999", "a", "b")
	f.Fuzz(func(t *testing.T, mark, cur, next string) {
		// Forging another HMAC is out of the fuzzer's reach: the one mark
		// that passes is the genuine one, for its own two tokens.
		ok := g.checkMark(mark, cur, next)
		if want := mark == good && cur == "cur" && next == "next"; ok != want {
			t.Fatalf("checkMark(%q, %q, %q) = %v, want %v", mark, cur, next, ok, want)
		}
	})
}

// FuzzSafeNext: where a browser lands after signing in (?next=, anyone's
// link) is always a path of this daemon: resolved against the daemon's
// origin it stays there, and it carries no control character or
// backslash a browser might read as another host.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "/#/s/abc", "/app/?x=1", "//evil.example/", "/\\evil.example", "https://evil.example/",
		"/%2F/evil.example", "/\t/evil.example", "javascript:alert(1)", "", "/a\x00b", "///x", "/.%2e/", "/?next=//evil"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://daemon.example:7800/")
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != "/" && got != next {
			t.Fatalf("safeNext(%q) = %q: neither the input nor /", next, got)
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\x7f") {
			t.Fatalf("safeNext(%q) = %q", next, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 {
				t.Fatalf("safeNext(%q) = %q: a control character", next, got)
			}
		}
		ref, err := url.Parse(got)
		if err != nil {
			t.Fatalf("safeNext(%q) = %q does not parse: %v", next, got, err)
		}
		if u := base.ResolveReference(ref); u.Scheme != base.Scheme || u.Host != base.Host {
			t.Fatalf("safeNext(%q) = %q lands on %s", next, got, u)
		}
	})
}

// FuzzAuthenticateHeaders: whatever a request carries (Authorization,
// the cookie, the trusted proxy's headers) and wherever it comes from,
// Authenticate never panics, refuses with the one 401 shape, and admits
// only the static token or the proxy's header from the proxy's address.
func FuzzAuthenticateHeaders(f *testing.F) {
	g, err := New(Config{Addr: "127.0.0.1:7000", Token: testToken, Logger: discard(), TrustedProxy: &TrustedProxy{
		Header: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(g.Close)
	f.Add("Bearer "+testToken, "", "", "", "192.168.1.1:1")
	f.Add("bearer    "+testToken, "", "", "", "192.168.1.1:1")
	f.Add("", DefaultCookieName+"="+testToken, "", "", "192.168.1.1:1")
	f.Add("", DefaultCookieName+"=s1.abc; "+DefaultCookieName+"="+testToken, "", "", "192.168.1.1:1")
	f.Add("", "", "alice", "staff, ops", "10.1.1.1:1")
	f.Add("", "", "alice", "", "192.168.1.1:1")
	f.Add("Bearer "+testToken, "", "", "staff", "192.168.1.1:1")
	f.Add("Bearer a.b.c", "", "", "", "[::ffff:10.0.0.1]:2")
	f.Add("Basic x", "", "local", "", "10.0.0.1:3")
	f.Fuzz(func(t *testing.T, authz, cookie, user, groups, remote string) {
		r := httptest.NewRequest(http.MethodGet, "/api/whoami", nil)
		r.RemoteAddr = remote
		for name, v := range map[string]string{"Authorization": authz, "Cookie": cookie, "X-Forwarded-User": user, "X-Forwarded-Groups": groups} {
			if v != "" {
				r.Header.Set(name, v)
			}
		}
		id, err := g.Authenticate(r)
		if err != nil {
			var ae *AuthError
			if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != "unauthorized" || ae.Message == "" {
				t.Fatalf("refusal %#v", err)
			}
			return
		}
		switch {
		case id.Subject == "local" && id.Credential == digestHex(testToken):
			if user != "" || groups != "" && !g.proxy.trusts(remote) {
				t.Fatalf("the token admitted beside the proxy's headers: %+v", id)
			}
			if !strings.Contains(authz, testToken) && !strings.Contains(cookie, testToken) {
				t.Fatalf("admitted without the token: %+v", id)
			}
		case id.Credential == proxyPrefix+user:
			if !g.proxy.trusts(remote) || id.Subject != user || checkSubject(user) != nil {
				t.Fatalf("the proxy's header admitted from %q: %+v", remote, id)
			}
			for _, gr := range id.Groups {
				if checkSubject(gr) != nil || !strings.Contains(groups, gr) {
					t.Fatalf("group %q from %q", gr, groups)
				}
			}
		default:
			t.Fatalf("admitted as %+v", id)
		}
	})
}
