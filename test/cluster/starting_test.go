package cluster_test

import (
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// slowAgent announces its surfaces half a second after it starts, so that a
// command sent at once surely comes first.
func slowAgent(t *testing.T) []string { return testkit.FakeAgent(t, "-ready-delay", "500ms") }

func mustIncrement(t *testing.T, nd *node, id string, want float64, what string) {
	t.Helper()
	st, out, err := nd.command(id, "demo", "increment")
	if st != 200 || err != nil || out["ok"] != true || out["data"].(map[string]any)["count"] != want {
		t.Fatalf("%s: %d %v %v (want count %v)", what, st, out, err, want)
	}
}

// A command sent while the session's agent is starting waits for it: right
// after the session is created (through every node), and right after the
// session is activated on a new node because the one holding it stopped.
func TestCommandsWaitForStartingAgentInCluster(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.agent = slowAgent(t)
	e.startAll(3)
	for _, nd := range e.nodes {
		id := nd.create(t)
		mustIncrement(t, nd, id, 1, "a command right after the session was created")
	}
	id, host, others := e.remoteSession(t)
	mustIncrement(t, others[0], id, 1, "a command right after the session was created")
	host.stop() // its sessions stop and release their leases
	mustIncrement(t, others[0], id, 2, "a command right after the session's node stopped")
	if e.hostOf(t, others[0], id) == host {
		t.Fatalf("the session did not move")
	}
}

// The same on one daemon, right after it restarted.
func TestCommandWaitsForStartingAgentAfterRestart(t *testing.T) {
	e := newEnv(t, "", 1)
	e.agent = slowAgent(t)
	nd := e.start(0)
	id := nd.create(t)
	mustIncrement(t, nd, id, 1, "a command right after the session was created")
	nd.stop()
	nd = e.start(0)
	mustIncrement(t, nd, id, 2, "a command right after the daemon restarted")
}
