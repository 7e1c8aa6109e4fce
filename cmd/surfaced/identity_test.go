package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestServeSignsInWithTheIdentityProvider: the configuration file's oidc,
// jwt and access sections, through the real binary, against the test
// OpenID provider: the daemon prints where to sign in (no start URL), a
// browser sign-in works, the provider's JWTs are bearer tokens, and the
// access rule hides demo from who may not use it.
func TestServeSignsInWithTheIdentityProvider(t *testing.T) {
	op := idptest.StartOP(t, map[string]idptest.User{
		"alice": {Password: "alice-pw", Groups: []string{"staff"}},
		"bob":   {Password: "bob-pw"},
	})
	port := freePort(t)
	base := fmt.Sprintf("http://localhost:%d", port)
	op.Client("surfaced", "surfaced-secret", base+"/auth/callback")
	dir := t.TempDir()
	root := testkit.RepoRoot()
	if err := os.WriteFile(filepath.Join(dir, "oidc-secret"), []byte("surfaced-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "surfaced.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`addr: 127.0.0.1:%d
data_dir: %s
agents:
  - dir: %s
  - dir: %s
oidc:
  issuer: %s
  client_id: surfaced
  client_secret_file: oidc-secret
  redirect_url: %s/auth/callback
jwt:
  - issuer: %s
    audience: surfaced
access:
  demo: {groups: [staff]}
`, port, filepath.Join(dir, "data"), filepath.Join(root, "examples/surface-demo-agent"), filepath.Join(root, "examples/hello-agent"),
		op.Issuer, base, op.Issuer)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testkit.Build(t, "./cmd/surfaced")
	cmd := exec.Command(bin, "serve", "--config", cfg)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("daemon stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case line := <-lines:
		if want := "surfaced: open " + base + "/ (sign in with " + op.Issuer + ")"; strings.TrimSpace(line) != want {
			t.Fatalf("first line %q, want %q", line, want)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("no start line; stderr:\n%s", stderr.String())
	}

	agents := func(token string) (int, []string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/agents", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Agents []struct{ Name string } }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		var names []string
		for _, a := range out.Agents {
			names = append(names, a.Name)
		}
		return resp.StatusCode, names
	}
	now := time.Now()
	jwt := func(sub string, groups []string, aud string) string {
		return op.Mint(map[string]any{"iss": op.Issuer, "sub": sub, "aud": aud, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "groups": groups})
	}
	if st, names := agents(jwt("alice-id", []string{"staff"}, "surfaced")); st != http.StatusOK || !slices.Equal(names, []string{"demo", "hello"}) {
		t.Fatalf("alice's agents: %d %q", st, names)
	}
	if st, names := agents(jwt("bob-id", nil, "surfaced")); st != http.StatusOK || !slices.Equal(names, []string{"hello"}) {
		t.Fatalf("bob's agents: %d %q", st, names)
	}
	if st, _ := agents(jwt("alice-id", []string{"staff"}, "another-service")); st != http.StatusUnauthorized {
		t.Fatalf("a JWT for another audience: %d", st)
	}

	// A browser sign-in, without a browser: the login, the provider's
	// page, the callback; the cookie then says alice.
	jar := idptest.NewJar()
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := op.SignIn(jar, resp.Header.Get("Location"), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if resp, err = c.Get(back.String()); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	resp, err = c.Get(base + "/auth/me")
	if err != nil {
		t.Fatal(err)
	}
	me, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(me), `"subject":"`+op.Issuer+`#alice-id"`) || !strings.Contains(string(me), `"via":"signin"`) {
		t.Fatalf("/auth/me: %s", me)
	}
	u, _ := url.Parse(base)
	if len(jar.Cookies(u)) == 0 {
		t.Fatal("no cookie")
	}
}

// TestServeIdentityProviderDown: a provider that does not answer discovery
// at start stops the daemon with the setting's line.
func TestServeIdentityProviderDown(t *testing.T) {
	bin := testkit.Build(t, "./cmd/surfaced")
	dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	agents := "agents:\n  - dir: " + filepath.Join(testkit.RepoRoot(), "examples/hello-agent") + "\n"
	for _, tc := range []struct{ name, src, want string }{
		{"oidc", "addr: 127.0.0.1:0\ndata_dir: " + filepath.Join(dir, "data") + "\noidc:\n  issuer: " + dead + "\n  client_id: surfaced\n  redirect_url: http://localhost:7800/auth/callback\n",
			"surfaced.yaml:4: oidc.issuer: "},
		{"jwt", "addr: 127.0.0.1:0\ndata_dir: " + filepath.Join(dir, "data") + "\njwt:\n  - audience: surfaced\n    issuer: " + dead + "\n",
			"surfaced.yaml:5: jwt[0].issuer: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "surfaced.yaml")
			if err := os.WriteFile(cfg, []byte(tc.src+agents), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "serve", "--config", cfg)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), dead) {
				t.Fatalf("exit %v, want a failure saying %q and the issuer; output:\n%s", err, tc.want, out)
			}
		})
	}
}
