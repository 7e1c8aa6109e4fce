package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// pyTreeAgent is a surfaced/1 agent that starts two children before it
// announces itself: one in a session of its own (setsid, out of its process
// group) and one in its group. It notes "<agent> <setsid child> <group
// child>".
const pyTreeAgent = `
import json, os, sys, time
a = os.fork()
if a == 0:
    os.setsid()
    time.sleep(300)
    os._exit(0)
b = os.fork()
if b == 0:
    time.sleep(300)
    os._exit(0)
with open(os.environ["AGENT_NOTES"], "a") as f:
    f.write("%d %d %d\n" % (os.getpid(), a, b))
sys.stdout.write(json.dumps({"type": "agent_ready", "protocol": "surfaced/1", "surfaces": []}) + "\n")
sys.stdout.flush()
for raw in sys.stdin:
    pass
time.sleep(300)
`

// running reports whether pid runs (a zombie nobody reaped does not).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

type treeDaemon struct {
	t     *testing.T
	cfg   string
	notes string
	p     *daemonProc
}

func (d *treeDaemon) call(method, path, body string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.p.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.p.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// session creates a session and returns its id and the pids of its agent
// and the agent's two children.
func (d *treeDaemon) session() (id string, agent, setsid, group int) {
	d.t.Helper()
	before := d.noted()
	st, body := d.call("POST", "/api/sessions", `{"agent":"tree"}`)
	if st != 201 {
		d.t.Fatalf("create: %d %s", st, body)
	}
	id = body[strings.Index(body, `"sessionId":"`)+13:]
	id = id[:strings.IndexByte(id, '"')]
	testkit.Eventually(d.t, 60*time.Second, func() bool { return len(d.noted()) > len(before) }, "the agent's children")
	lines := d.noted()
	fmt.Sscanf(lines[len(lines)-1], "%d %d %d", &agent, &setsid, &group)
	d.t.Cleanup(func() {
		for _, pid := range []int{agent, setsid, group} {
			if running(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return id, agent, setsid, group
}

func (d *treeDaemon) noted() []string {
	b, _ := os.ReadFile(d.notes)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func startTreeDaemon(t *testing.T) *treeDaemon {
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.py")
	os.WriteFile(script, []byte(pyTreeAgent), 0o644)
	d := &treeDaemon{t: t, cfg: filepath.Join(dir, "surfaced.yaml"), notes: filepath.Join(dir, "notes")}
	os.WriteFile(d.cfg, []byte(`addr: 127.0.0.1:0
data_dir: `+filepath.Join(dir, "data")+`
agents:
  - name: tree
    command: [python3, `+script+`]
    env: {AGENT_NOTES: `+d.notes+`}
`), 0o644)
	d.p = startBinary(t, "serve", "--config", d.cfg)
	return d
}

// An agent's children end with it, the one that left its process group
// too: on DELETE, and when the daemon is killed (SIGKILL) and started
// again.
func TestAgentChildrenEndWithTheAgent(t *testing.T) {
	d := startTreeDaemon(t)

	// DELETE ends the agent and both children.
	id, agent, setsid, group := d.session()
	if st, body := d.call("DELETE", "/api/sessions/"+id, ""); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		return !running(agent) && !running(setsid) && !running(group)
	}, "the agent and its children gone after DELETE")

	// The daemon is killed: the agent dies with it (parent-death signal);
	// its children outlive it until the daemon starts again, which ends
	// them.
	_, agent, setsid, group = d.session()
	if err := d.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.p.cmd.Wait()
	testkit.Eventually(t, 30*time.Second, func() bool { return !running(agent) }, "the agent gone with the daemon")
	if !running(group) || !running(setsid) {
		t.Fatalf("the children died with the daemon (setsid %v, group %v): the restart's sweep is not what is tested", running(setsid), running(group))
	}
	d.p = startBinary(t, "serve", "--config", d.cfg)
	testkit.Eventually(t, 30*time.Second, func() bool {
		return !running(setsid) && !running(group)
	}, "the previous agent's children gone after the restart")
	if ents, _ := os.ReadDir(filepath.Join(filepath.Dir(d.cfg), "data", "agents")); len(ents) != 1 {
		t.Fatalf("agent records after the restart: %v (want this run's only)", ents)
	}
}
