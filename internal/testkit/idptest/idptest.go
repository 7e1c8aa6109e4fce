// Package idptest runs the identity provider side of the daemon's tests as
// real processes: the test OpenID provider (tools/idp/testop, zitadel/oidc's
// certified OP with a login page) and oauth2-proxy (built from its Go
// module). Both are built from the tools/idp module once per test binary
// and run on loopback ports; they stop at the end of the test.
package idptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

var (
	buildMu  sync.Mutex
	built    = map[string]string{}
	buildDir string
)

// build compiles pkg of the tools/idp module once per test binary.
func build(t testing.TB, pkg, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "surfaced-idpbin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Join(testkit.RepoRoot(), "tools", "idp")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (tools/idp): %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// User is a person at the provider.
type User struct {
	Password string   `json:"password"`
	Groups   []string `json:"groups,omitempty"`
}

// OP is a running test OpenID provider.
type OP struct {
	t      testing.TB
	Issuer string // http://127.0.0.1:port
}

// StartOP runs the provider with users (by name; a user's sub is
// "<name>-id").
func StartOP(t testing.TB, users map[string]User) *OP {
	t.Helper()
	bin := build(t, "./testop", "testop")
	data, _ := json.Marshal(users)
	file := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-users", file)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // it stops when its stdin closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("testop did not start: %v\n%s", err, stderr.String())
	}
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "issuer ")
	if !ok {
		t.Fatalf("testop said %q", line)
	}
	return &OP{t: t, Issuer: issuer}
}

func (op *OP) post(path, body string) []byte {
	op.t.Helper()
	resp, err := http.Post(op.Issuer+path, "application/json", strings.NewReader(body))
	if err != nil {
		op.t.Fatalf("testop %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		op.t.Fatalf("testop %s: %s %s", path, resp.Status, b)
	}
	return b
}

// Client registers a web client (client_secret_basic, code and refresh
// token grants) with its redirect URIs.
func (op *OP) Client(id, secret string, redirectURIs ...string) {
	op.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": id, "secret": secret, "redirect_uris": redirectURIs})
	op.post("/test/client", string(b))
}

// JWTClient registers a web client whose access tokens are JWTs (aud: its
// id; the user's groups in "groups").
func (op *OP) JWTClient(id, secret string, redirectURIs ...string) {
	op.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": id, "secret": secret, "redirect_uris": redirectURIs, "jwt_access_tokens": true})
	op.post("/test/client", string(b))
}

// Rotate makes a new signing key current (the old one stays published)
// and returns its kid.
func (op *OP) Rotate() string {
	op.t.Helper()
	var out struct{ Kid string }
	_ = json.Unmarshal(op.post("/test/rotate", ""), &out)
	return out.Kid
}

// KeysDown takes the key set down (503) or brings it back.
func (op *OP) KeysDown(down bool) {
	op.t.Helper()
	v := "0"
	if down {
		v = "1"
	}
	op.post("/test/keys?down="+v, "")
}

// Disable disables a user: no sign-in, no refresh, no userinfo.
func (op *OP) Disable(user string) {
	op.t.Helper()
	op.post("/test/disable?user="+url.QueryEscape(user), "")
}

// Mint signs claims with the provider's current key (RS256, its kid).
func (op *OP) Mint(claims map[string]any) string {
	op.t.Helper()
	b, _ := json.Marshal(claims)
	return string(op.post("/test/mint", string(b)))
}

// Keys is the provider's key set as published.
func (op *OP) Keys() []byte {
	op.t.Helper()
	resp, err := http.Get(op.Issuer + "/keys")
	if err != nil {
		op.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

var formID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// SignIn signs user in as a browser would, without one: it follows the
// authorization URL to the login page, posts the form, and returns the
// URL the provider redirects back to (the client's redirect URI with code
// and state). jar keeps the cookies the way goes through.
func (op *OP) SignIn(jar http.CookieJar, authURL, user, password string) (*url.URL, error) {
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), op.Issuer) {
			return http.ErrUseLastResponse // back at the client: stop there
		}
		return nil
	}}
	resp, err := c.Get(authURL)
	if err != nil {
		return nil, err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := formID.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("no login form at %s (%s): %.300s", resp.Request.URL, resp.Status, page)
	}
	resp, err = c.PostForm(op.Issuer+"/login/username", url.Values{"id": {string(m[1])}, "username": {user}, "password": {password}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("the provider did not send the browser back (%s): %w", resp.Status, err)
	}
	return loc, nil
}

// NewJar is a cookie jar for SignIn.
func NewJar() http.CookieJar {
	j, _ := cookiejar.New(nil)
	return j
}

// Proxy is a running oauth2-proxy in front of an upstream.
type Proxy struct {
	URL string // http://127.0.0.1:port
}

// StartOAuth2Proxy runs oauth2-proxy in front of upstream, signing people
// in with op (a client it registers there) and passing the user and groups
// upstream as X-Forwarded-User and X-Forwarded-Groups.
func StartOAuth2Proxy(t testing.TB, op *OP, upstream string) *Proxy {
	t.Helper()
	bin := build(t, "github.com/oauth2-proxy/oauth2-proxy/v7", "oauth2-proxy")
	addr := freeAddr(t)
	base := "http://" + addr
	op.Client("oauth2-proxy", "proxy-secret", base+"/oauth2/callback")
	cookieSecret := "0123456789abcdef0123456789abcdef"
	cmd := exec.Command(bin,
		"--http-address="+addr,
		"--provider=oidc",
		"--oidc-issuer-url="+op.Issuer,
		"--client-id=oauth2-proxy",
		"--client-secret=proxy-secret",
		"--redirect-url="+base+"/oauth2/callback",
		"--upstream="+upstream,
		"--email-domain=*",
		"--cookie-secret="+cookieSecret,
		"--cookie-secure=false",
		"--scope=openid profile email",
		"--pass-user-headers=true",
		"--oidc-groups-claim=groups",
		"--user-id-claim=sub",
		"--skip-provider-button=true",
		"--insecure-oidc-allow-unverified-email=true",
		"--reverse-proxy=false",
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("oauth2-proxy:\n%s", logs.String())
		}
	})
	testkit.Eventually(t, 60*time.Second, func() bool {
		resp, err := http.Get(base + "/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "oauth2-proxy answers /ping")
	return &Proxy{URL: base}
}

// freeAddr is a loopback address free now (oauth2-proxy must know its own
// address for its redirect URL before it listens).
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
