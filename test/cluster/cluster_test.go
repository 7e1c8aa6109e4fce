package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Sessions spread over the nodes; a client on one node drives a session that
// lives on another: commands, prompts, and a resumed stream.
func TestSessionsSpreadAndCrossNodeClients(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.startAll(3)
	var ids []string
	hosts := map[int]int{}
	for i := 0; i < 9; i++ {
		id := e.nodes[0].create(t)
		ids = append(ids, id)
		hosts[e.hostOf(t, e.nodes[0], id).i]++
	}
	if len(hosts) < 2 {
		t.Fatalf("9 sessions all on one node: %v", hosts)
	}
	t.Logf("placement: %v", hosts)

	// A session that lives on a node other than node 0, driven from node 0.
	var id string
	var host *node
	for _, s := range ids {
		if h := e.hostOf(t, e.nodes[0], s); h.i != 0 {
			id, host = s, h
			break
		}
	}
	via := e.nodes[0]
	s := via.sse(t, id, "")
	s.Wait(t, 20*time.Second, "ready", testkit.IsStatus("ready"))
	for i := 1; i <= 3; i++ {
		st, out, err := via.command(id, "demo", "increment")
		if st != 200 || err != nil || out["ok"] != true {
			t.Fatalf("command via node 0 to node %d: %d %v %v", host.i, st, out, err)
		}
	}
	last := s.Wait(t, 10*time.Second, "rev 4", testkit.IsState("surface:demo", 4))
	if st, err := via.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "hello cluster"}, nil); st != 202 || err != nil {
		t.Fatalf("prompt: %d %v", st, err)
	}
	s.Wait(t, 10*time.Second, "finish", testkit.IsChat("finish"))
	s.Close()
	// A WebSocket client on node 0 runs a command on the remote session and
	// gets its reply and the state frame.
	ws := via.ws(t, id)
	ws.WriteJSON(map[string]any{"id": "w1", "type": "command", "domain": "demo", "action": "increment"})
	var gotReply, gotState bool
	deadline := time.Now().Add(20 * time.Second)
	for !gotReply || !gotState {
		ws.SetReadDeadline(deadline)
		var m struct {
			Event string         `json:"event"`
			Data  map[string]any `json:"data"`
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("websocket via node 0 (reply %v, state %v): %v", gotReply, gotState, err)
		}
		switch {
		case m.Event == "reply" && m.Data["id"] == "w1":
			if m.Data["ok"] != true {
				t.Fatalf("websocket command: %v", m.Data)
			}
			gotReply = true
		case m.Event == "state" && m.Data["key"] == "surface:demo" && m.Data["rev"] == 5.0:
			gotState = true
		}
	}
	ws.Close()
	// Resume on a third node: exactly the frames after the last one seen.
	third := e.nodes[3-host.i-0]
	if third == host {
		third = e.nodes[1]
	}
	r := third.sse(t, id, last.ID)
	r.Wait(t, 10*time.Second, "replayed user message", testkit.IsChat("data-user-message"))
	r.Wait(t, 10*time.Second, "replayed finish", testkit.IsChat("finish"))
	for _, ev := range r.All() {
		if ev.Kind == "resync" {
			t.Fatalf("resync on a resume inside the window: %v", ev.Raw)
		}
	}
}

// load runs increments on a session through the given nodes until stopped,
// recording the count every acknowledged command saw. A failed or refused
// command is not acknowledged and is not counted; it is sent again.
type load struct {
	mu     sync.Mutex
	acked  []int
	errors int
	stop   chan struct{}
	done   chan struct{}
}

func startLoad(t testing.TB, id string, via func(i int) *node) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			nd := via(i)
			if nd == nil || nd.dead() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			st, out, err := nd.command(id, "demo", "increment")
			if st == 200 && err == nil && out["ok"] == true {
				n := int(out["data"].(map[string]any)["count"].(float64))
				l.mu.Lock()
				l.acked = append(l.acked, n)
				l.mu.Unlock()
				continue
			}
			l.mu.Lock()
			l.errors++
			l.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return l
}

func (l *load) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *load) end() { close(l.stop); <-l.done }

// waitAcked waits until n commands have been acknowledged in all.
func (l *load) waitAcked(t testing.TB, n int, timeout time.Duration, what string) {
	t.Helper()
	testkit.Eventually(t, timeout, func() bool { return l.ackedCount() >= n }, "%d acknowledged commands (%s); %v so far", n, what, later(func() string {
		l.mu.Lock()
		defer l.mu.Unlock()
		return fmt.Sprintf("%d, %d failed attempts", len(l.acked), l.errors)
	}))
}

// later is a fmt.Stringer computed when a failure message is formatted,
// so that it says how things stood at the end of the wait.
type later func() string

func (f later) String() string { return f() }

// check verifies that no acknowledged command was lost: every acknowledged
// increment saw a distinct count (a lost write would hand its count out
// again), and the final snapshot holds at least as many increments as were
// acknowledged (unacknowledged ones may have landed too: at-least-once).
func (l *load) check(t testing.TB, final int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int]bool{}
	for _, n := range l.acked {
		if seen[n] {
			t.Fatalf("count %d acknowledged twice: an acknowledged write was lost (acked %v)", n, l.acked)
		}
		seen[n] = true
	}
	if final < len(l.acked) {
		t.Fatalf("final count %d < %d acknowledged commands", final, len(l.acked))
	}
	t.Logf("%d acknowledged, %d failed attempts, final count %d", len(l.acked), l.errors, final)
}

func finalCount(t testing.TB, nd *node, id string) (count, rev int) {
	t.Helper()
	var out struct {
		Entries map[string]struct {
			Value struct {
				Count int `json:"count"`
			} `json:"value"`
			Rev int `json:"rev"`
		} `json:"entries"`
	}
	var st int
	var err error
	testkit.Eventually(t, 30*time.Second, func() bool {
		st, err = nd.get("/api/sessions/"+id+"/state", &out)
		return st == 200 && err == nil
	}, "the state via node %d; last answer %v", nd.i, later(func() string { return fmt.Sprint(st, " ", err) }))
	e := out.Entries["surface:demo"]
	return e.Value.Count, e.Rev
}

// kill -9 the node holding a busy session: the session comes back on another
// node with its revs continuing, clients recover, and no acknowledged
// command is lost.
func TestNodeKilledSessionMoves(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.startAll(3)
	id, host, others := e.remoteSession(t)
	client := others[0]
	s := client.sse(t, id, "")
	s.Wait(t, 20*time.Second, "ready", testkit.IsStatus("ready"))
	l := startLoad(t, id, func(i int) *node { return others[i%2] })
	l.waitAcked(t, 20, 60*time.Second, "before the kill")
	_, revBefore := finalCount(t, client, id)
	host.kill9()
	t.Logf("killed node %d at rev %d", host.i, revBefore)
	// The stream on the client's node ends (its session vanished); the
	// client reconnects with its last id and is told to resync.
	<-s.Done()
	l.waitAcked(t, 60, 90*time.Second, "commands resuming after the kill")
	r := client.sse(t, id, s.LastID())
	r.Wait(t, 20*time.Second, "resync after the move", testkit.IsKind("resync"))
	st := r.Wait(t, 20*time.Second, "sticky snapshot", testkit.IsState("surface:demo", 0))
	if rev := st.Data["rev"].(float64); int(rev) <= revBefore {
		t.Fatalf("rev went back: %v after %d", rev, revBefore)
	}
	l.end()
	newHost := e.hostOf(t, client, id)
	if newHost == host {
		t.Fatalf("the session is still on the killed node")
	}
	count, _ := finalCount(t, client, id)
	l.check(t, count)
}

// A rolling restart of every node, one by one, under a steady command load
// loses nothing acknowledged.
func TestRollingRestart(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.startAll(3)
	ids := []string{e.nodes[0].create(t), e.nodes[1].create(t), e.nodes[2].create(t)}
	loads := make([]*load, len(ids))
	for k, id := range ids {
		k := k
		loads[k] = startLoad(t, id, func(i int) *node { return e.nodes[(i+k)%3] })
	}
	// Every session makes progress before each restart and after the last.
	progress := func(when string) {
		t.Helper()
		for k, l := range loads {
			l.waitAcked(t, l.ackedCount()+10, 60*time.Second, fmt.Sprintf("session %d %s", k, when))
		}
	}
	for i := 0; i < 3; i++ {
		progress(fmt.Sprintf("before node %d restarts", i))
		before := loads[0].ackedCount() + loads[1].ackedCount() + loads[2].ackedCount()
		e.nodes[i].stop()
		e.start(i)
		e.waitMembers(3)
		t.Logf("node %d restarted; %d commands acknowledged so far", i, before)
	}
	progress("after the last restart")
	for k, id := range ids {
		loads[k].end()
		count, _ := finalCount(t, e.nodes[0], id)
		loads[k].check(t, count)
		if loads[k].ackedCount() < 20 {
			t.Fatalf("session %d: only %d commands acknowledged", k, loads[k].ackedCount())
		}
	}
}

// A node cut off from the cluster (frozen longer than the session lease)
// loses its sessions to another node, and when it comes back it cannot
// commit anything for them: its writes are fenced. It then finds itself
// evicted and rejoins as a new member (etcd), and serves again.
func TestStaleNodeCannotCommit(t *testing.T) {
	e, _ := newEtcdEnv(t, 3)
	e.extra = []string{"--config", writeLeaseConfig(t, "2s")}
	e.startAll(3)
	id, host, others := e.remoteSession(t)
	l0 := startLoad(t, id, func(int) *node { return host })
	l0.waitAcked(t, 5, 60*time.Second, "via the host")
	l0.end()
	// A browser attached on the host itself.
	watcher := host.sse(t, id, "")
	watcher.Wait(t, 20*time.Second, "ready", testkit.IsStatus("ready"))
	// Freeze the host: it neither renews its leases nor answers.
	_ = syscall.Kill(host.cmd.Process.Pid, syscall.SIGSTOP)
	t.Cleanup(func() { _ = syscall.Kill(host.cmd.Process.Pid, syscall.SIGCONT) }) // however the test ends
	l := startLoad(t, id, func(i int) *node { return others[i%2] })
	l.waitAcked(t, 10, 60*time.Second, "the session moving off the frozen node")
	_ = syscall.Kill(host.cmd.Process.Pid, syscall.SIGCONT)
	// The stale node wakes up believing it owns the session; what it is sent
	// now must not commit there. (Acknowledged answers go to the checker.)
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		st, out, _ := host.command(id, "demo", "increment")
		if st == 200 && out["ok"] == true {
			n := int(out["data"].(map[string]any)["count"].(float64))
			l.mu.Lock()
			l.acked = append(l.acked, n)
			l.mu.Unlock()
		}
		t.Logf("command via the stale node: %d in %s", st, time.Since(t0).Round(time.Millisecond))
	}
	// Its activation stopped, whichever came first on waking: the lease
	// renewal finding the lease taken, or the cluster moving the grain away.
	// Either way the browser attached there is told the session moved.
	end := watcher.Wait(t, 30*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "moved" {
		t.Fatalf("the browser on the stale node: %v", end.Raw)
	}
	// It rejoins and serves again.
	testkit.Eventually(t, 90*time.Second, func() bool { return strings.Contains(host.tail(1<<24), "rejoined as a new member") },
		"the stale node to rejoin as a new member")
	e.waitMembers(3)
	l.waitAcked(t, l.ackedCount()+10, 90*time.Second, "commands going on after the rejoin")
	if st, out, _ := host.command(id, "demo", "increment"); st != 200 || out["ok"] != true {
		t.Fatalf("the rejoined node does not serve: %d %v", st, out)
	} else {
		l.mu.Lock()
		l.acked = append(l.acked, int(out["data"].(map[string]any)["count"].(float64)))
		l.mu.Unlock()
	}
	l.end()
	l.mu.Lock()
	l.acked = append(l.acked, l0.acked...)
	l.mu.Unlock()
	count, _ := finalCount(t, others[0], id)
	l.check(t, count)
}

func writeLeaseConfig(t testing.TB, ttl string) string {
	p := filepath.Join(t.TempDir(), "lease.yaml")
	os.WriteFile(p, []byte("cluster:\n  lease_ttl: "+ttl+"\n"), 0o644)
	return p
}
