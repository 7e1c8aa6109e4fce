package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// inspectRun runs the built binary once and returns stdout, stderr and the
// exit code.
func inspectRun(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	bin := testkit.Build(t, "./cmd/surfaced")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// slowDepth finds the slow domain's row in a table frame and returns its
// DEPTH column (-1 when there is no such row).
func slowDepth(t *testing.T, frame string) int {
	t.Helper()
	var header []string
	for _, line := range strings.Split(frame, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "KIND" {
			header = f
			continue
		}
		if header == nil || len(f) < 4 || f[0] != "surface" || f[2] != daemon.SlowDomainName {
			continue
		}
		if header[3] != "DEPTH" {
			t.Fatalf("header %v", header)
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			t.Fatalf("depth column of %q: %v", line, err)
		}
		return n
	}
	return -1
}

// The main job, from the terminal: a flooded slow domain shows its depth
// rising in `surfaced inspect`.
func TestInspectShowsAFloodedDomain(t *testing.T) {
	d := daemon.Start(t, daemon.Dev(), daemon.SlowDomain(50*time.Millisecond), endedLinger)
	id := d.Create(nil)
	testkit.Eventually(t, 10*time.Second, func() bool {
		return daemon.Find(d.Actors("?session="+id), "surface", daemon.SlowDomainName) != nil
	}, "the slow domain")
	out, errOut, code := inspectRun(t, nil, "inspect", "--url", d.URL, "--token", d.Token, "--session", id)
	if code != 0 || slowDepth(t, out) != 0 || !strings.Contains(out, "node test-node") || !strings.Contains(out, "agentproc") {
		t.Fatalf("idle: exit %d\n%s\n%s", code, out, errOut)
	}
	wait := d.Flood(id, 60)
	deepest, sawCommand := 0, false
	testkit.Eventually(t, 15*time.Second, func() bool {
		out, errOut, code := inspectRun(t, []string{"SURFACED_TOKEN=" + d.Token}, "inspect", "--url", d.URL, "--sort", "depth", "--session", id)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		deepest = max(deepest, slowDepth(t, out))
		// Sorted by depth: the DEPTH column never rises down the table (the
		// flood queues in the session actor first, then in the domain).
		var col []int
		for _, line := range strings.Split(out, "\n")[2:] {
			if f := strings.Fields(line); len(f) > 3 {
				n, _ := strconv.Atoi(f[3])
				col = append(col, n)
			}
		}
		if !slices.IsSortedFunc(col, func(a, b int) int { return b - a }) {
			t.Fatalf("not sorted by depth:\n%s", out)
		}
		for _, line := range strings.Split(out, "\n") {
			sawCommand = sawCommand || strings.HasPrefix(line, "surface ") && strings.Contains(line, "*surfacedv1.RunCommand")
		}
		return deepest >= 5 && sawCommand
	}, "depth ≥ 5 and a running command in surfaced inspect")
	if ok := wait(); ok != 60 {
		t.Fatalf("%d of 60 commands", ok)
	}
	// --json prints the endpoint's answer.
	out, _, code = inspectRun(t, nil, "inspect", "--url", d.URL+"/", "--token", d.Token, "--json", "--kind", "surface", "--session", id)
	var rep inspect.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.Actors) != 2 || rep.Actors[0].Kind != "surface" {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
}

// --watch refreshes: the queue rises and drains, and the rows go when the
// session ends; an interrupt ends it with status 0.
func TestInspectWatch(t *testing.T) {
	d := daemon.Start(t, daemon.Dev(), daemon.SlowDomain(50*time.Millisecond), endedLinger)
	id := d.Create(nil)
	testkit.Eventually(t, 10*time.Second, func() bool {
		return daemon.Find(d.Actors("?session="+id), "surface", daemon.SlowDomainName) != nil
	}, "the slow domain")
	bin := testkit.Build(t, "./cmd/surfaced")
	cmd := exec.Command(bin, "inspect", "--url", d.URL, "--watch", "--interval", "200ms", "--session", id)
	cmd.Env = append(os.Environ(), "SURFACED_TOKEN="+d.Token)
	stdout, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Frames are separated by a blank line when stdout is not a terminal.
	frames := make(chan string, 1000)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(stdout)
		var cur strings.Builder
		for sc.Scan() {
			if sc.Text() == "" {
				frames <- cur.String()
				cur.Reset()
				continue
			}
			cur.WriteString(sc.Text() + "\n")
		}
	}()
	next := func(what string, pred func(string) bool) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("inspect ended while waiting for %s: %s", what, errb.String())
				}
				if pred(f) {
					return
				}
			case <-deadline:
				t.Fatalf("no frame with %s", what)
			}
		}
	}
	next("the idle slow domain", func(f string) bool { return slowDepth(t, f) == 0 })
	wait := d.Flood(id, 60)
	next("depth ≥ 5", func(f string) bool { return slowDepth(t, f) >= 5 })
	if ok := wait(); ok != 60 {
		t.Fatalf("%d of 60 commands", ok)
	}
	next("drained", func(f string) bool { return slowDepth(t, f) == 0 })
	if st, raw := d.Do("DELETE", "/api/sessions/"+id, nil); st != http.StatusOK {
		t.Fatalf("delete: %d %s", st, raw)
	}
	next("no rows after the end", func(f string) bool { return strings.Contains(f, "(no actor matches)") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after interrupt: %v %s", err, errb.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("--watch did not end on interrupt")
	}
}

func TestInspectRefusals(t *testing.T) {
	plain := daemon.Start(t, daemon.SlowDomain(20*time.Millisecond), endedLinger)
	devd := daemon.Start(t, daemon.Dev(), daemon.SlowDomain(20*time.Millisecond), endedLinger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"not dev mode", []string{"--url", plain.URL, "--token", plain.Token}, 1,
			"is not in development mode (GET /debug/actors answered 404): restart it with --dev"},
		{"not dev mode, watching", []string{"--url", plain.URL, "--token", plain.Token, "--watch"}, 1, "not in development mode"},
		{"unreachable", []string{"--url", closed}, 1, "cannot reach the daemon at " + closed + " (is it running? use --url)"},
		{"no token", []string{"--url", devd.URL}, 1, "refused the credentials (401 unauthorized"},
		{"wrong token", []string{"--url", devd.URL, "--token", "not-the-token-0123456789"}, 1, "pass --token or set SURFACED_TOKEN"},
		{"bad sort", []string{"--url", devd.URL, "--sort", "size"}, 2, `--sort must be depth or latency, not "size"`},
		{"bad kind", []string{"--url", devd.URL, "--kind", "actor"}, 2, `--kind must be one of session, surface, agentproc, sse, ws, acp, not "actor"`},
		{"bad url", []string{"--url", "ftp://x"}, 2, `--url must be the daemon's http(s)://host:port, not "ftp://x"`},
		{"bad interval", []string{"--url", devd.URL, "--watch", "--interval", "1ms"}, 2, "--interval must be at least 100ms"},
		{"arguments", []string{"extra"}, 1, "unknown command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := inspectRun(t, []string{"SURFACED_TOKEN="}, append([]string{"inspect"}, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.msg) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q), stdout %q", code, c.code, errOut, c.msg, out)
			}
		})
	}
}

// The real daemon: `run --dev` inspects its session, agent and client
// actors and serves /debug; without --dev it answers 404 and inspect says so.
func TestRunDevServesTheInspector(t *testing.T) {
	agent := testkit.FakeAgent(t)
	const token = "inspect-e2e-token-0123456789abcdef"
	start := func(dev bool) (base string, cmd *exec.Cmd, stderr *syncBuffer) {
		args := []string{"run", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--token", token}
		if dev {
			args = append(args, "--dev")
		}
		cmd = exec.Command(testkit.Build(t, "./cmd/surfaced"), append(append(args, "--"), agent...)...)
		stdout, _ := cmd.StdoutPipe()
		stderr = &syncBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line := make(chan string, 1)
		go func() {
			r := bufio.NewReader(stdout)
			l, _ := r.ReadString('\n')
			line <- l
			_, _ = io.Copy(io.Discard, r)
		}()
		select {
		case l := <-line:
			u, ok := strings.CutPrefix(strings.TrimSpace(l), "surfaced: open ")
			if !ok {
				t.Fatalf("start line %q; stderr:\n%s", l, stderr)
			}
			return strings.TrimSuffix(u, "/"), cmd, stderr
		case <-time.After(60 * time.Second):
			t.Fatalf("no start line; stderr:\n%s", stderr)
		}
		return "", nil, nil
	}
	do := func(method, url string) (int, []byte) {
		req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	base, cmd, stderr := start(true)
	st, raw := do("POST", base+"/api/sessions")
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, raw)
	}
	var created struct{ SessionID string }
	_ = json.Unmarshal(raw, &created)
	id := created.SessionID
	events := testkit.OpenSSE(t, base+"/api/sessions/"+id+"/events", http.Header{"Authorization": {"Bearer " + token}})
	events.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	kinds := map[string]bool{}
	testkit.Eventually(t, 10*time.Second, func() bool {
		_, raw := do("GET", base+"/debug/actors?session="+id)
		var rep inspect.Report
		_ = json.Unmarshal(raw, &rep)
		for _, a := range rep.Actors {
			kinds[a.Kind] = true
		}
		return kinds["session"] && kinds["surface"] && kinds["agentproc"] && kinds["sse"]
	}, "session, surface, agentproc and sse actors")
	if st, raw := do("GET", base+"/metrics"); st != 200 || !strings.Contains(string(raw), `surfaced_actors{kind="session"} 1`) {
		t.Fatalf("metrics: %d", st)
	}
	out, errOut, code := inspectRun(t, []string{"SURFACED_TOKEN=" + token}, "inspect", "--url", base, "--session", id)
	if code != 0 || !strings.Contains(out, "agentproc") || !strings.Contains(out, "sse") {
		t.Fatalf("inspect: exit %d\n%s\n%s", code, out, errOut)
	}
	// pprof is not on the API listener, even in dev mode.
	if st, _ := do("GET", base+"/debug/pprof/"); st != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ on the API listener: %d", st)
	}
	// Shutdown does not wait for an open inspector stream: it ends it.
	stream := testkit.OpenSSE(t, base+"/debug/actors/stream", http.Header{"Authorization": {"Bearer " + token}})
	stream.Wait(t, 5*time.Second, "a snapshot", testkit.IsKind("actors"))
	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	end := stream.Wait(t, 10*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "shutdown" {
		t.Fatalf("end: %s", end.Raw)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit after SIGTERM\n%s", stderr)
	}
	if el := time.Since(began); el > 10*time.Second {
		t.Errorf("shutdown with an inspector stream took %s", el)
	}
	if !strings.Contains(stderr.String(), "development mode") {
		t.Errorf("dev mode was not announced in the log:\n%s", stderr)
	}

	base, _, stderr = start(false)
	if st, raw := do("GET", base+"/debug/actors"); st != http.StatusNotFound {
		t.Fatalf("/debug/actors without --dev: %d %s", st, raw)
	}
	if st, raw := do("GET", base+"/metrics"); st != 200 || strings.Contains(string(raw), "surfaced_actor") {
		t.Fatalf("inspector metrics without --dev: %d", st)
	}
	_, errOut, code = inspectRun(t, []string{"SURFACED_TOKEN=" + token}, "inspect", "--url", base)
	if code != 1 || !strings.Contains(errOut, "not in development mode") {
		t.Fatalf("inspect against a daemon without --dev: exit %d %s", code, errOut)
	}
	if strings.Contains(stderr.String(), "development mode") {
		t.Errorf("dev mode announced without --dev:\n%s", stderr)
	}
}

// endedLinger lets an ended session's actor go soon.
var endedLinger = daemon.Limits(surfaced.Limits{EndedLinger: 200 * time.Millisecond})
