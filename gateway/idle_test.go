package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// A session nobody ever watched sleeps after limits.idle_timeout like one
// whose clients left: 200 sessions made with POST /api/sessions and never
// opened (no stream, no command) have no agent process left, and the list
// shows them idle, by idle_timeout + 1 s after the last was made.
func TestUnwatchedSessionsSleep(t *testing.T) {
	const n = 200
	const idle = 2 * time.Second
	agent := testkit.FakeAgent(t)
	d := daemon.Start(t,
		daemon.Agents(surfaced.AgentSpec{Name: "fake", Argv: agent}),
		daemon.Limits(surfaced.Limits{IdleTimeout: idle}),
		daemon.Quotas(surfaced.Quotas{SessionsPerSubject: n}))
	ids := make(map[string]bool, n)
	for range n {
		ids[d.Create(nil)] = true
	}
	last := time.Now()
	if len(testkit.ChildPIDs(agent[0])) == 0 {
		t.Fatal("no agent process runs right after the sessions were made")
	}

	seen := &awake{}
	testkit.Eventually(t, time.Until(last.Add(idle+time.Second)), func() bool {
		seen.agents = len(testkit.ChildPIDs(agent[0]))
		seen.sessions = seen.sessions[:0]
		for _, s := range listSessions(t, d) {
			if ids[s.ID] && s.Status != "idle" {
				seen.sessions = append(seen.sessions, s.ID+" "+s.Status)
			}
		}
		return seen.agents == 0 && len(seen.sessions) == 0
	}, "every unwatched session asleep by idle_timeout + 1 s (%v)", seen)
	if live := d.Runtime.LiveSessions(); len(live) != 0 {
		t.Fatalf("%d session actors still live after they slept", len(live))
	}
}

// awake is what the last look found still awake.
type awake struct {
	agents   int
	sessions []string
}

func (a *awake) String() string {
	first := a.sessions
	if len(first) > 3 {
		first = first[:3]
	}
	return fmt.Sprintf("%d agent processes still run; %d sessions not idle, among them %v", a.agents, len(a.sessions), first)
}

type listedSession struct {
	ID     string `json:"sessionId"`
	Status string `json:"status"`
}

// listSessions reads every page of GET /api/sessions.
func listSessions(t *testing.T, d *daemon.Daemon) []listedSession {
	t.Helper()
	var all []listedSession
	cursor := ""
	for {
		path := "/api/sessions?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		st, raw := d.Do("GET", path, nil)
		if st != http.StatusOK {
			t.Fatalf("list sessions: %d %s", st, raw)
		}
		var page struct {
			Sessions   []listedSession `json:"sessions"`
			NextCursor string          `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatalf("list sessions: %v: %s", err, raw)
		}
		all = append(all, page.Sessions...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}
