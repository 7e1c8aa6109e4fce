package main_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// daemonProc is the real binary running `run`.
type daemonProc struct {
	cmd    *exec.Cmd
	url    string // the start URL printed
	base   string
	token  string
	stderr *syncBuffer // the daemon writes it while a test reads it
}

func startBinary(t testing.TB, args ...string) *daemonProc {
	t.Helper()
	return startBinaryEnv(t, nil, args...)
}

// startBinaryEnv is startBinary with env ("K=V") added to the test's.
func startBinaryEnv(t testing.TB, env []string, args ...string) *daemonProc {
	t.Helper()
	bin := testkit.Build(t, "./cmd/surfaced")
	cmd := exec.Command(bin, args...)
	cmd.Dir = testkit.RepoRoot()
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, _ := cmd.StdoutPipe()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
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
		u, ok := strings.CutPrefix(strings.TrimSpace(line), "surfaced: open ")
		if !ok {
			t.Fatalf("first stdout line %q; stderr:\n%s", line, stderr.String())
		}
		p := &daemonProc{cmd: cmd, url: u, stderr: stderr}
		p.base, p.token, _ = strings.Cut(u, "/?token=")
		return p
	case <-time.After(90 * time.Second):
		t.Fatalf("no start line; stderr:\n%s", stderr.String())
	}
	return nil
}

func TestRunPrintsStartURLAndShutsDownCleanly(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, "run", "--addr", "127.0.0.1:0", "--data-dir", data, "./examples/surface-demo-agent")
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") || len(p.token) < 32 {
		t.Fatalf("start URL %q", p.url)
	}
	// The start URL logs a browser in: cookie, then a redirect without the token.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].HttpOnly {
		t.Fatalf("start URL: %d %v", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	req, _ := http.NewRequest("POST", p.base+"/api/sessions", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(cookie)
	start := time.Now()
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create with the cookie: %v %v", err, resp)
	}
	resp.Body.Close()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("a new session took %s to be ready (want < 2 s)", el)
	}
	// The demo agent's manifest names its panel: listed, and served from ui/.
	for path, want := range map[string]string{"/api/agents": `"panels":{"demo":"/agents/demo/ui/demo.js"}`, "/agents/demo/ui/demo.js": "export function mount("} {
		req, _ := http.NewRequest("GET", p.base+path, nil)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want %s in %.300s", path, resp.StatusCode, want, body)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v; stderr:\n%s", err, p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit after SIGTERM; stderr:\n%s", p.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(data, "surfaced.db")); err != nil {
		t.Fatalf("no store in the data dir: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	bin := testkit.Build(t, "./cmd/surfaced")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run"}, 2, "name an agent directory"},
		{[]string{"run", "/does/not/exist"}, 2, "is not an agent directory"},
		{[]string{"serve"}, 2, "serve needs --config"},
		{[]string{"serve", "--config", "/does/not/exist.yaml"}, 2, "exist.yaml"},
		{[]string{"run", "--addr", "nope", "./examples/hello-agent"}, 2, "addr"},
	} {
		cmd := exec.CommandContext(context.Background(), bin, tc.args...)
		cmd.Dir = testkit.RepoRoot()
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != tc.code || !strings.Contains(string(out), tc.msg) {
			t.Errorf("%v: exit %d, want %d with %q; output:\n%s", tc.args, code, tc.code, tc.msg, out)
		}
	}
}

func TestHelpIsComplete(t *testing.T) {
	bin := testkit.Build(t, "./cmd/surfaced")
	for _, sub := range []string{"run", "serve"} {
		out, err := exec.Command(bin, sub, "--help").CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"--addr", "--data-dir", "--token", "--tokens-file", "--no-auth", "--dev", "--config"} {
			if !strings.Contains(string(out), flag) {
				t.Errorf("%s --help lacks %s", sub, flag)
			}
		}
	}
}

func TestServeWithConfig(t *testing.T) {
	dir := t.TempDir()
	root := testkit.RepoRoot()
	cfg := filepath.Join(dir, "surfaced.yaml")
	os.WriteFile(cfg, []byte(`addr: 127.0.0.1:0
data_dir: `+filepath.Join(dir, "data")+`
agents:
  - dir: `+filepath.Join(root, "examples/surface-demo-agent")+`
  - dir: `+filepath.Join(root, "examples/hello-agent")+`
limits:
  sessions_per_subject: 5
`), 0o644)
	p := startBinary(t, "serve", "--config", cfg)
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := call("GET", "/api/agents", ""); st != 200 || !strings.Contains(body, `"demo"`) || !strings.Contains(body, `"hello"`) {
		t.Fatalf("agents: %d %s", st, body)
	}
	if st, body := call("POST", "/api/sessions", "{}"); st != 400 || !strings.Contains(body, "demo, hello") {
		t.Fatalf("no agent named with several configured: %d %s", st, body)
	}
	if st, body := call("POST", "/api/sessions", `{"agent":"hello"}`); st != 201 {
		t.Fatalf("create hello: %d %s", st, body)
	}
	for i := 0; i < 4; i++ {
		call("POST", "/api/sessions", `{"agent":"demo"}`)
	}
	if st, body := call("POST", "/api/sessions", `{"agent":"demo"}`); st != 429 || !strings.Contains(body, "too_many_sessions") {
		t.Fatalf("sessions_per_subject: %d %s", st, body)
	}
}
