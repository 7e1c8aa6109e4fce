package pitest

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The daemon binary hosting pi: `surfaced run -- pi --mode rpc` and the
// example agent directory, with pi found on PATH like a user would have it.
func TestSurfacedRunHostsPi(t *testing.T) {
	Bin(t)
	cases := []struct {
		name string
		args []string
		// pi's own conversation goes on after a restart with the example's --continue.
		continues bool
	}{
		{"command", []string{"--", "pi", "--mode", "rpc"}, false},
		{"example", []string{filepath.Join(testkit.RepoRoot(), "examples", "pi-agent")}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := model(t, func(r llmstub.Request) llmstub.Reply {
				return llmstub.Say("pi here, you said: ", r.LastUser())
			})
			home := Home(t, Config{BaseURL: srv.URL})
			args := append([]string{"run", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--token", "run-test-token-0123456789abcdef"}, tc.args...)
			cmd := exec.Command(testkit.Build(t, "./cmd/surfaced"), args...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), Env(home)...)
			cmd.Env = append(cmd.Env, "PATH="+BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir())
			base := startProc(t, cmd)
			d := &daemon{t: t, url: base, token: "run-test-token-0123456789abcdef"}

			_, agents := d.do("GET", "/api/agents", nil)
			list, _ := agents["agents"].([]any)
			if len(list) != 1 || list[0].(map[string]any)["name"] != "pi" {
				t.Fatalf("agents: %v", agents)
			}
			id := d.create("")
			s := d.sse(id)
			ready(t, s)
			d.prompt(id, "hello pi")
			tr := nextTurn(t, s)
			if tr.text() != "pi here, you said: hello pi" || tr.stopReason() != "end_turn" {
				t.Fatalf("turn: %q %q", tr.text(), tr.stopReason())
			}
			if tc.continues {
				// The session's pi session directory holds the conversation.
				matches, _ := filepath.Glob(filepath.Join(home, "surfaced", id, "*.jsonl"))
				if len(matches) != 1 {
					t.Errorf("pi session files for %s: %v", id, matches)
				}
			}
		})
	}
}

// startProc starts the daemon and returns its base URL from the start line.
func startProc(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
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
		u, ok := strings.CutPrefix(strings.TrimSpace(line), "surfaced: open ")
		if !ok {
			t.Fatalf("first stdout line %q; stderr:\n%s", line, stderr.String())
		}
		base, _, _ := strings.Cut(u, "/?token=")
		base = strings.TrimSuffix(base, "/")
		// The daemon answers.
		resp, err := http.Get(base + "/api/agents")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return base
	case <-time.After(90 * time.Second):
		t.Fatalf("no start line; stderr:\n%s", stderr.String())
	}
	return ""
}

// The agent entries for pi: the example directory's manifest, and the
// command line of `surfaced run -- pi --mode rpc`.
func TestPiAgentEntries(t *testing.T) {
	m, err := config.LoadManifest(filepath.Join(testkit.RepoRoot(), "examples", "pi-agent"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := m.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "pi" || len(spec.Argv) != 4 || spec.Argv[0] != "sh" || !strings.Contains(spec.Argv[2], "exec pi --mode rpc --continue --session-dir") {
		t.Errorf("example manifest: %+v", spec)
	}
	m, err = config.ManifestForRun([]string{"pi", "--mode", "rpc", "--provider", "local"})
	if err != nil {
		t.Fatal(err)
	}
	if spec, _ := m.Spec(); spec.Name != "pi" || strings.Join(spec.Argv, " ") != "pi --mode rpc --provider local" {
		t.Errorf("run -- pi: %+v", spec)
	}
}
