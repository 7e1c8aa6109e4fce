package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Sessions nobody watches sleep after limits.idle_timeout on every node of
// a cluster, although their activations renew their leases several times
// meanwhile (every lease_ttl/3): housekeeping does not keep a session
// awake.
func TestUnwatchedSessionsSleepInCluster(t *testing.T) {
	const idle = 2 * time.Second
	e := newEnv(t, "automanaged", 2)
	cfg := filepath.Join(t.TempDir(), "idle.yaml")
	if err := os.WriteFile(cfg, []byte("cluster:\n  lease_ttl: 1500ms\nlimits:\n  idle_timeout: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.extra = []string{"--config", cfg}
	e.startAll(2)
	agents := func(nd *node) int { return len(testkit.ChildPIDsOf(nd.cmd.Process.Pid, e.agent[0])) }

	ids := map[string]bool{}
	for range 20 {
		ids[e.nodes[0].create(t)] = true
	}
	last := time.Now()
	if agents(e.nodes[0]) == 0 || agents(e.nodes[1]) == 0 {
		t.Logf("placement: %d agents on node 0, %d on node 1", agents(e.nodes[0]), agents(e.nodes[1]))
	}
	seen := &clusterAwake{}
	testkit.Eventually(t, time.Until(last.Add(idle+time.Second)), func() bool {
		seen.agents = [2]int{agents(e.nodes[0]), agents(e.nodes[1])}
		seen.sessions = seen.sessions[:0]
		var list struct {
			Sessions []struct {
				ID     string `json:"sessionId"`
				Status string `json:"status"`
			} `json:"sessions"`
		}
		if st, err := e.nodes[0].get("/api/sessions?limit=500", &list); st != 200 || err != nil {
			t.Fatalf("list: %d %v", st, err)
		}
		for _, s := range list.Sessions {
			if ids[s.ID] && s.Status != "idle" {
				seen.sessions = append(seen.sessions, s.ID+" "+s.Status)
			}
		}
		return seen.agents == [2]int{} && len(seen.sessions) == 0
	}, "every unwatched session asleep by idle_timeout + 1 s (%v)", seen)
}

type clusterAwake struct {
	agents   [2]int
	sessions []string
}

func (a *clusterAwake) String() string {
	return fmt.Sprintf("agents on the nodes %v; %d sessions not idle: %v", a.agents, len(a.sessions), a.sessions)
}
