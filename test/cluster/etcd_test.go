package cluster_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/etcdtest"
	"github.com/surfaced/surfaced/internal/testkit"
)

func newEtcdEnv(t testing.TB, n int) (*env, *etcdtest.Server) {
	e := newEnv(t, "etcd", n)
	srv := etcdtest.Start(t)
	e.etcd = []string{srv.Endpoint}
	return e, srv
}

// With etcd membership: sessions spread, and the node holding a busy session
// is killed; the session moves and nothing acknowledged is lost.
func TestEtcdMembership(t *testing.T) {
	e, _ := newEtcdEnv(t, 3)
	e.startAll(3)
	var id string
	var host *node
	hosts := map[int]int{}
	for i := 0; i < 6; i++ {
		s := e.nodes[0].create(t)
		h := e.hostOf(t, e.nodes[0], s)
		hosts[h.i]++
		if h.i != 0 && id == "" {
			id, host = s, h
		}
	}
	if len(hosts) < 2 || id == "" {
		t.Fatalf("placement %v", hosts)
	}
	others := []*node{}
	for _, nd := range e.nodes {
		if nd != host {
			others = append(others, nd)
		}
	}
	l := startLoad(t, id, func(i int) *node { return others[i%2] })
	l.waitAcked(t, 20, 60*time.Second, "before the kill")
	host.kill9()
	l.waitAcked(t, l.ackedCount()+40, 90*time.Second, "commands resuming after the kill")
	l.end()
	count, _ := finalCount(t, others[0], id)
	l.check(t, count)
}

// etcd stopped for 30 s and started again: the cluster heals without anyone
// restarting the daemons, and no acknowledged command is lost.
func TestEtcdOutageHeals(t *testing.T) {
	e, srv := newEtcdEnv(t, 3)
	e.startAll(3)
	id := e.nodes[0].create(t)
	l := startLoad(t, id, func(i int) *node { return e.nodes[i%3] })
	l.waitAcked(t, 20, 60*time.Second, "before the outage")
	srv.Down()
	t.Log("etcd down")
	time.Sleep(30 * time.Second) // the fault itself: etcd is away for 30 s
	srv.Up()
	t.Log("etcd up")
	e.waitMembers(3)
	l.waitAcked(t, l.ackedCount()+40, 90*time.Second, "commands going on after etcd came back")
	l.end()
	count, _ := finalCount(t, e.nodes[1], id)
	l.check(t, count)
	for _, nd := range e.nodes {
		log := nd.tail(1 << 24)
		t.Logf("node %d: evicted=%v rejoined=%v lease-lost=%v", nd.i, strings.Contains(log, "WAS EVICTED"),
			strings.Contains(log, "rejoined as a new member"), strings.Contains(log, "lease lost"))
	}
	// A stream opened now works from every node.
	for _, nd := range e.nodes {
		s := nd.sse(t, id, "")
		s.Wait(t, 30*time.Second, "sticky state", testkit.IsState("surface:demo", 0))
		s.Close()
	}
}

// A member evicted for good (its key gone, as after a long etcd outage: the
// others block its id, and so does its own view) notices it is missing from
// its own topology view, says so loudly, goes unready, and rejoins as a new
// member; the cluster heals without anyone restarting it.
func TestEvictedMemberRejoins(t *testing.T) {
	e, srv := newEtcdEnv(t, 3)
	e.startAll(3)
	id := e.nodes[0].create(t)
	l := startLoad(t, id, func(i int) *node { return e.nodes[i%3] })
	l.waitAcked(t, 10, 60*time.Second, "before the eviction")
	victim := e.nodes[2]
	var h struct {
		Node string `json:"node"`
	}
	victim.get("/healthz", &h)
	memberID := h.Node[strings.Index(h.Node, "#")+1:]
	out, err := exec.Command("etcdctl", "--endpoints", srv.Endpoint, "del", "/surfaced/test/"+memberID).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("etcdctl del: %v %s", err, out)
	}
	// Unready while it is missing from its own view.
	sawUnready := false
	testkit.Eventually(t, 60*time.Second, func() bool {
		if st, _ := victim.get("/readyz", nil); st == 503 {
			sawUnready = true
		}
		return strings.Contains(victim.tail(1<<24), "rejoined as a new member")
	}, "the evicted member to rejoin as a new member")
	if !sawUnready {
		t.Errorf("/readyz never said not ready while the member was evicted")
	}
	if !strings.Contains(victim.tail(1<<24), "WAS EVICTED") {
		t.Errorf("the eviction was not logged loudly")
	}
	e.waitMembers(3)
	l.waitAcked(t, l.ackedCount()+20, 90*time.Second, "commands going on after the rejoin")
	l.end()
	count, _ := finalCount(t, e.nodes[0], id)
	l.check(t, count)
}

// With etcd unreachable the daemon does not hang at start (the library's
// provider blocks forever there): it exits with a clear error naming etcd.
func TestEtcdUnreachableFailsStart(t *testing.T) {
	e := newEnv(t, "etcd", 1)
	e.etcd = []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))} // nothing listens there
	cmd := exec.Command(e.bin, e.args(0)...)
	cmd.Dir = testkit.RepoRoot()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the daemon hung at start with etcd unreachable:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "etcd") || !strings.Contains(stderr.String(), e.etcd[0]) {
		t.Fatalf("the error does not name etcd and its endpoint:\n%s", stderr.String())
	}
	t.Logf("failed after %s: %s", time.Since(t0).Round(100*time.Millisecond), lastLine(stderr.String()))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
