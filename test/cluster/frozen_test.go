package cluster_test

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// frozenFor is how long the frozen node stays stopped: longer than the
// session lease (2 s here) and than the gossip heartbeat expiry (20 s), after
// which the node, on waking, blocks every other member, as they blocked it.
const frozenFor = 25 * time.Second

// freeze stops nd (SIGSTOP) until the others have taken its session over
// (the load through them is acknowledged again) and frozenFor has passed,
// then resumes it (SIGCONT).
func freeze(t *testing.T, e *env, nd *node, l *load) {
	t.Helper()
	t0 := time.Now()
	_ = syscall.Kill(nd.cmd.Process.Pid, syscall.SIGSTOP)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(nd.cmd.Process.Pid, syscall.SIGCONT)
		}
	}
	defer resume()
	n := l.ackedCount()
	testkit.Eventually(t, 60*time.Second, func() bool { return l.ackedCount() >= n+10 },
		"the session to move off the frozen node (commands acknowledged through the others)")
	// The fault lasts frozenFor, whatever the cluster did meanwhile.
	time.Sleep(time.Until(t0.Add(frozenFor)))
	resume()
	t.Logf("node %d frozen for %s", nd.i, time.Since(t0).Round(100*time.Millisecond))
}

// readyz asks the node whether it is ready: 200, 503, or 0 when it does not
// answer (it exited).
func (nd *node) readyz() int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(nd.base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// comesBack checks the frozen node after it resumed: until it serves again
// (or exits, when exits is set), whenever /readyz says 200 a command through
// it is answered at once with its result, never left to hang into a 503. It
// returns whether the node exited.
func comesBack(t *testing.T, nd *node, id string, l *load, exits bool) bool {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	sawUnready := false
	for {
		if nd.dead() {
			if !exits {
				t.Fatalf("the frozen node exited:\n%s", nd.tail(4000))
			}
			return true
		}
		switch st := nd.readyz(); st {
		case 200:
			t0 := time.Now()
			st, out, err := nd.command(id, "demo", "increment")
			if nd.dead() && exits {
				return true // it was leaving: its last answers do not count
			}
			if st != 200 || err != nil || out["ok"] != true {
				t.Fatalf("/readyz said 200 (unready seen before: %v), then a command through the node answered %d %v %v after %s",
					sawUnready, st, out, err, time.Since(t0).Round(time.Millisecond))
			}
			l.record(out)
			t.Logf("the node is ready and serves (unready seen before: %v); the command took %s", sawUnready, time.Since(t0).Round(time.Millisecond))
			return false
		default:
			sawUnready = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frozen node neither serves nor left")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// record adds an acknowledged increment's count to the checker.
func (l *load) record(out map[string]any) {
	n := int(out["data"].(map[string]any)["count"].(float64))
	l.mu.Lock()
	l.acked = append(l.acked, n)
	l.mu.Unlock()
}

// A node frozen (SIGSTOP) for longer than the session lease and the gossip
// heartbeat expiry, then resumed, does not come back as a zombie (ready, and
// every command through it hanging into a 503): a command sent to it as it
// wakes is answered with its result, it is never ready while it cannot
// serve, and it rejoins as a new member (etcd) and serves. Nothing
// acknowledged is lost.
func TestFrozenNodeRejoins(t *testing.T) {
	e, _ := newEtcdEnv(t, 3)
	e.extra = []string{"--config", writeLeaseConfig(t, "2s")}
	e.startAll(3)
	id, host, others := e.remoteSession(t)
	l := startLoad(t, id, func(i int) *node { return others[i%2] })
	testkit.Eventually(t, 30*time.Second, func() bool { return l.ackedCount() >= 5 }, "the load to start")
	freeze(t, e, host, l)
	// A command sent as it wakes is answered with its result: the node's
	// store writer, whose writes in flight spanned the freeze, probes the
	// store before it would refuse anything (no 503 store_unavailable).
	t0 := time.Now()
	st, out, err := host.command(id, "demo", "increment")
	if st != 200 || err != nil || out["ok"] != true {
		took := time.Since(t0).Round(time.Millisecond)
		t.Fatalf("a command through the node as it woke: %d %v %v after %s; the node's log until then:\n%s\nits goroutines then:\n%s",
			st, out, err, took, host.tail(12000), host.goroutines())
	}
	l.record(out)
	t.Logf("a command through the node as it woke: answered in %s", time.Since(t0).Round(time.Millisecond))
	comesBack(t, host, id, l, false)
	e.waitMembers(3)
	// It serves sessions placed on it, new ones included.
	for i := 0; i < 6; i++ {
		s := host.create(t)
		if st, out, err := host.command(s, "demo", "increment"); st != 200 || err != nil || out["ok"] != true {
			t.Fatalf("a new session through the rejoined node: %d %v %v", st, out, err)
		}
	}
	n := l.ackedCount()
	testkit.Eventually(t, 60*time.Second, func() bool { return l.ackedCount() >= n+10 }, "more commands acknowledged")
	l.end()
	count, _ := finalCount(t, others[0], id)
	l.check(t, count)
}

// The same with automanaged membership, which cannot rejoin in one process:
// the node says it is not ready and leaves (exit status 75); started again,
// as its service manager would, it serves.
func TestFrozenNodeLeavesForItsServiceManager(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.extra = []string{"--config", writeLeaseConfig(t, "2s")}
	e.startAll(3)
	id, host, others := e.remoteSession(t)
	l := startLoad(t, id, func(i int) *node { return others[i%2] })
	testkit.Eventually(t, 30*time.Second, func() bool { return l.ackedCount() >= 5 }, "the load to start")
	freeze(t, e, host, l)
	if !comesBack(t, host, id, l, true) {
		t.Fatalf("the node served again without rejoining (automanaged cannot rejoin in one process)")
	}
	<-host.exited
	if code := host.cmd.ProcessState.ExitCode(); code != 75 {
		t.Fatalf("the node exited with status %d, want 75 (EX_TEMPFAIL)\n%s", code, host.tail(4000))
	}
	// The service manager starts it again.
	e.start(host.i)
	e.waitMembers(3)
	host = e.nodes[host.i]
	for i := 0; i < 6; i++ {
		s := host.create(t)
		if st, out, err := host.command(s, "demo", "increment"); st != 200 || err != nil || out["ok"] != true {
			t.Fatalf("a new session through the restarted node: %d %v %v", st, out, err)
		}
	}
	if st, out, err := host.command(id, "demo", "increment"); st != 200 || err != nil || out["ok"] != true {
		t.Fatalf("the restarted node does not serve: %d %v %v", st, out, err)
	} else {
		l.record(out)
	}
	l.end()
	count, _ := finalCount(t, others[0], id)
	l.check(t, count)
}
