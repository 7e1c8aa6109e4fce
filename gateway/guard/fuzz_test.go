package guard

import (
	"net/http"
	"net/http/httptest"
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
