package agentproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// pyTree is an agent that starts two children that outlive it unless the
// daemon ends them: one in a session of its own (setsid: out of the
// agent's process group), one in the agent's group; it says their pids.
const pyTree = `
import json, os, time
a = os.fork()
if a == 0:
    os.setsid()
    time.sleep(300)
    os._exit(0)
b = os.fork()
if b == 0:
    time.sleep(300)
    os._exit(0)
print(json.dumps({"type": "pids", "setsid": a, "group": b}), flush=True)
time.sleep(300)
`

func writeScript(t *testing.T, src string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.py")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"python3", p}
}

func waitAllGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

func treePIDs(t *testing.T, r *recorder) (setsid, group int) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		for _, e := range r.snapshot() {
			if e.kind == "line" && e.env.Type == "pids" {
				var v struct{ Setsid, Group int }
				if err := json.Unmarshal(e.line, &v); err != nil {
					t.Fatal(err)
				}
				return v.Setsid, v.Group
			}
		}
		select {
		case <-r.poke:
		case <-deadline:
			t.Fatalf("no pids line; events %+v", r.snapshot())
		}
	}
}

func killStray(pids ...int) {
	for _, pid := range pids {
		if !gone(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// With a Tracker, the agent's whole tree ends with it, the child that left
// its process group (setsid) too; with cgroups and without.
func TestTrackerEndsTheWholeTree(t *testing.T) {
	for _, cgroups := range []bool{true, false} {
		t.Run(fmt.Sprintf("cgroups=%v", cgroups), func(t *testing.T) {
			tr, err := NewTracker(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close(context.Background())
			if !cgroups {
				tr.mu.Lock()
				cg := tr.cgroup
				tr.cgroup = ""
				tr.mu.Unlock()
				if cg != "" {
					removeCgroup(cg)
				}
			} else if tr.cgroup == "" {
				testkit.Missing(t, "no cgroup v2 can be created here")
			}
			r := newRecorder()
			p := start(t, Spec{Argv: writeScript(t, pyTree), Tracker: tr}, r)
			a, b := treePIDs(t, r)
			defer killStray(a, b)
			if m, ok := markOf(a); !ok || !strings.HasPrefix(m, tr.run+"/") {
				t.Fatalf("the setsid child's mark %q, want one of run %s", m, tr.run)
			}
			recs, _ := os.ReadDir(tr.dir)
			if len(recs) != 2 { // run, and the agent
				t.Fatalf("records %v", recs)
			}
			p.Close()
			waitExit(t, p, r)
			waitAllGone(t, "after Close", a, b)
			if recs, _ := os.ReadDir(tr.dir); len(recs) != 1 {
				t.Fatalf("records after the exit: %v", recs)
			}
			if cgroups {
				if ents, _ := os.ReadDir(tr.cgroup); countDirs(ents) != 0 {
					t.Fatalf("the agent's cgroup is left: %v", ents)
				}
			}
		})
	}
}

func countDirs(ents []os.DirEntry) int {
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			n++
		}
	}
	return n
}

// A new Tracker sweeps the runs of daemons that are gone: a recorded
// process that carries such a run's mark is killed; a process with the
// mark of a live run, or none, is left alone.
func TestTrackerSweepsDeadRuns(t *testing.T) {
	root := t.TempDir()
	sleeper := func(mark string) *exec.Cmd {
		cmd := exec.Command("sleep", "300")
		if mark != "" {
			cmd.Env = append(os.Environ(), EnvMark+"="+mark)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait() // reap it when it dies
		t.Cleanup(func() { cmd.Process.Kill() })
		return cmd
	}
	// A dead run: a pid that is not running with that start time.
	deadRun := "999999999-1-dead"
	dead := sleeper(deadRun + "/1")
	if err := os.Mkdir(filepath.Join(root, "run-"+deadRun), 0o700); err != nil {
		t.Fatal(err)
	}
	// A live run: this test process, with its real start time.
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	liveRun := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(start, 10) + "-live"
	live := sleeper(liveRun + "/1")
	if err := os.Mkdir(filepath.Join(root, "run-"+liveRun), 0o700); err != nil {
		t.Fatal(err)
	}
	stranger := sleeper("")
	other := sleeper("some-other-run/1")

	tr, err := NewTracker(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(context.Background())
	waitGone(t, dead.Process.Pid)
	for _, c := range []*exec.Cmd{live, stranger, other} {
		if gone(c.Process.Pid) {
			t.Fatalf("process %d (%v) was killed", c.Process.Pid, c.Env[len(c.Env)-1:])
		}
	}
	if _, err := os.Stat(filepath.Join(root, "run-"+deadRun)); !os.IsNotExist(err) {
		t.Fatalf("the dead run's records stay: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "run-"+liveRun)); err != nil {
		t.Fatalf("the live run's records went: %v", err)
	}
}

func TestProcStart(t *testing.T) {
	a, err := procStart(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("%d %v", a, err)
	}
	if _, err := procStart(1 << 30); err == nil {
		t.Fatal("a missing pid has a start time")
	}
}
