package main_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// agentCheck runs `surfaced agent check args...` and returns its exit code
// and output.
func agentCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	bin := testkit.Build(t, "./cmd/surfaced")
	cmd := exec.Command(bin, append([]string{"agent", "check", "--data-dir", t.TempDir()}, args...)...)
	cmd.Dir = testkit.RepoRoot()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatal(err)
	return 0, "", ""
}

func TestAgentCheckPassesTheDemo(t *testing.T) {
	code, out, errOut := agentCheck(t, "--command", "demo/increment", "--abort", "--abort-prompt", "slow", "./examples/surface-demo-agent")
	if code != 0 || !strings.Contains(out, "PASS: all 6 checks passed.") {
		t.Fatalf("exit %d\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"ok    start: ready in ",
		"ok    surface demo: the probe surface:demo answered ok; snapshot rev 1 {\"count\":0,\"log\":[]}",
		"ok    command demo/increment: ok in ",
		"ok    restart: stopped in ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAgentCheckReportsABrokenAgent(t *testing.T) {
	fake := testkit.FakeAgent(t)[0]
	code, out, _ := agentCheck(t, "--ready-timeout", "500ms", "--", fake, "-mode", "exit-early")
	want := `FAIL  start
      problem: The agent exited before it was ready (exit code 2).
        expected: agent_ready (or an answer to get_commands), then the agent runs until its stdin ends
        came: nothing on stdout
        stderr: fakeagent: exiting early on purpose
skip  prompt: the agent never became ready
skip  restart: the agent never became ready

FAIL: 1 of 3 checks failed.
`
	if code != 1 || !strings.HasSuffix(out, want) {
		t.Fatalf("exit %d, want 1; output:\n%s\nwant it to end with:\n%s", code, out, want)
	}
}

func TestAgentCheckTrace(t *testing.T) {
	fake := testkit.FakeAgent(t)[0]
	code, _, errOut := agentCheck(t, "--trace", "--", fake)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		`[agent 1] ← {"name":"fake","protocol":"surfaced/1"`,
		`[agent 1] → {"id":"ready-1-1","type":"get_commands"}`,
		`[agent 1] → {"id":"turn.prompt.1","type":"prompt","message":"Hello!`,
		`[agent 2] ← {"name":"fake","protocol":"surfaced/1"`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("trace lacks %q:\n%s", want, errOut)
		}
	}
}

func TestAgentCheckUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "name an agent directory"},
		{[]string{"/does/not/exist"}, "is not an agent directory"},
		{[]string{"./examples/hello-agent", "./examples/surface-demo-agent"}, "give one agent directory"},
		{[]string{"--command", "increment", "./examples/surface-demo-agent"}, "want domain/action"},
		{[]string{"--command", "demo/increment", "--args", "{nope", "./examples/surface-demo-agent"}, "--args is not JSON"},
		{[]string{"--args", "{}", "./examples/surface-demo-agent"}, "--args goes with --command"},
		{[]string{"--timeout", "soon", "./examples/surface-demo-agent"}, "invalid argument"},
		{[]string{"./docs"}, "has no agent.json and no Go files"},
	} {
		code, out, errOut := agentCheck(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, want 2 with %q; stdout:\n%s\nstderr:\n%s", tc.args, code, tc.msg, out, errOut)
		}
	}
}
