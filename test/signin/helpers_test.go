// Package signin_test signs people in to a real daemon through a real
// OpenID provider (tools/idp/testop: zitadel/oidc's certified OP, with a
// login page) and a real oauth2-proxy: browser sign-in in chromium, JWT
// bearer tokens and their key rotation and outages, the trusted proxy, the
// access rules on every transport, revocation.
package signin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// people at the provider.
var people = map[string]idptest.User{
	"alice": {Password: "alice-pw", Groups: []string{"staff"}},
	"bob":   {Password: "bob-pw"},
	"carol": {Password: "carol-pw", Groups: []string{"contractors"}},
}

// subjectOf is the daemon's subject of a person of op.
func subjectOf(op *idptest.OP, name string) string { return op.Issuer + "#" + name + "-id" }

// bearerDaemon is a daemon that takes op's JWTs (audience "surfaced") as
// bearer tokens, its key set on clk with the given max age.
func bearerDaemon(t *testing.T, op *idptest.OP, clk clock.Clock, maxAge time.Duration, opts ...daemon.Option) (*daemon.Daemon, *idp.Bearer) {
	t.Helper()
	iss, err := idp.Discover(context.Background(), idp.IssuerConfig{URL: op.Issuer, Clock: clk, MaxAge: maxAge, Logger: daemon.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := idp.NewBearer([]idp.BearerIssuer{{Issuer: iss, Audience: "surfaced"}})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]daemon.Option{daemon.Guard(func(c *guard.Config) {
		c.Bearer, c.Clock = b, clk
		c.ProtectedResources = []string{"/mcp"}
	})}, opts...)
	return daemon.Start(t, opts...), b
}

// answer is an HTTP answer, read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("not an error answer: %d %s", a.status, a.body)
	}
	return e.Error.Code
}

// errorShape is the keys of an error answer's JSON, to compare shapes.
func (a answer) errorShape(t *testing.T) string {
	t.Helper()
	var top map[string]map[string]any
	if err := json.Unmarshal(a.body, &top); err != nil || len(top) != 1 || top["error"] == nil {
		t.Fatalf("not {\"error\":{…}}: %s", a.body)
	}
	keys := []string{}
	for k := range top["error"] {
		keys = append(keys, k)
	}
	if len(keys) != 2 {
		t.Fatalf("error keys %q", keys)
	}
	return a.header.Get("Content-Type") + " " + strings.Join(sorted(keys), ",")
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func do(t *testing.T, method, url, token, body string, headers ...string) answer {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// me is GET /auth/me.
func me(t *testing.T, d *daemon.Daemon, token string) guard.Me {
	t.Helper()
	a := do(t, http.MethodGet, d.URL+guard.MePath, token, "")
	var m guard.Me
	if a.status != http.StatusOK || json.Unmarshal(a.body, &m) != nil {
		t.Fatalf("/auth/me: %d %s", a.status, a.body)
	}
	return m
}
