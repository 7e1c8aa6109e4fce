package surfaced_test

import (
	"context"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

// A command sent while the session's agent is starting waits for it to
// register its domains, instead of failing with surface_not_registered; it
// fails with that code only once the agent is ready without the domain.
func TestCommandsWaitForStartingAgent(t *testing.T) {
	// The agent takes a moment before it announces its domains, so that the
	// command surely comes first.
	slow := func(t *testing.T) []string { return testkit.FakeAgent(t, "-ready-delay", "400ms") }

	t.Run("right after the session is created", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", slow(t)))
		id := h.create("")
		if r := h.cmd(id, "demo", "increment", nil); !r.GetOk() || r.GetRev() != 2 {
			t.Fatalf("first command: %v", r)
		}
	})

	t.Run("right after a daemon restart", func(t *testing.T) {
		dir := t.TempDir()
		open := func() store.Store {
			st, err := sqlite.Open(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		st1 := open()
		h1 := newHarness(t, st1, withAgent("fake", slow(t)))
		id := h1.create("")
		if r := h1.cmd(id, "demo", "increment", nil); !r.GetOk() {
			t.Fatalf("before the restart: %v", r)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h1.rt.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		st1.Close()
		st2 := open()
		t.Cleanup(func() { st2.Close() })
		h2 := newHarness(t, st2, withAgent("fake", slow(t)))
		// The command wakes the session: its agent starts now.
		if r := h2.cmd(id, "demo", "increment", nil); !r.GetOk() || string(r.GetData()) != `{"count":2}` {
			t.Fatalf("first command after the restart: %v", r)
		}
	})

	t.Run("while a crashed agent is restarted", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", slow(t)), withLimits(surfaced.Limits{RestartBackoff: 300 * time.Millisecond}))
		id := h.create("")
		c, _ := h.subscribe(id, "")
		h.waitReady(c)
		h.cmd(id, "demo", "crash", nil)
		c.Wait(t, 5*time.Second, "crash status", testkit.Status("error"))
		if r := h.cmd(id, "demo", "increment", nil); !r.GetOk() || string(r.GetData()) != `{"count":1}` {
			t.Fatalf("a command while the agent restarts: %v", r)
		}
	})

	t.Run("a domain the ready agent did not register", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", slow(t)))
		id := h.create("")
		r := h.cmd(id, "nosuch", "increment", nil)
		if r.GetError().GetCode() != "surface_not_registered" {
			t.Fatalf("unregistered domain: %v", r)
		}
		// Answered only once the agent was ready (one mailbox: the summary
		// is the state after the answer).
		if st := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary).GetStatus(); st != "ready" {
			t.Fatalf("surface_not_registered while the agent was %s", st)
		}
	})

	t.Run("a plain pi agent, which declares none", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "plain")))
		id := h.create("")
		if r := h.cmd(id, "demo", "increment", nil); r.GetError().GetCode() != "surface_not_registered" {
			t.Fatalf("plain agent: %v", r)
		}
		if st := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary).GetStatus(); st != "ready" {
			t.Fatalf("surface_not_registered while the plain agent was %s", st)
		}
	})

	t.Run("the wait is bounded by the command's deadline", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "silent")),
			withLimits(surfaced.Limits{ReadyTimeout: time.Minute}))
		id := h.create("")
		r := h.req(id, &pb.RunCommand{Caller: me, Domain: "demo", Action: "increment",
			DeadlineMs: time.Now().Add(200 * time.Millisecond).UnixMilli()}).(*pb.CommandResult)
		if r.GetError().GetCode() != "agent_unavailable" {
			t.Fatalf("a command that waited its time: %v", r)
		}
	})

	t.Run("an agent that never gets ready", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "silent")),
			withLimits(surfaced.Limits{ReadyTimeout: 300 * time.Millisecond}))
		id := h.create("")
		r := h.cmd(id, "demo", "increment", nil)
		if r.GetError().GetCode() != "agent_unavailable" {
			t.Fatalf("a command for an agent that timed out: %v", r)
		}
	})

	t.Run("the session ends while the command waits", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "silent")),
			withLimits(surfaced.Limits{ReadyTimeout: time.Minute}))
		id := h.create("")
		h.req(id, &pb.GetSummary{Caller: me}) // activated
		pid := h.rt.Local().Lookup(id)
		root := h.rt.System().Root
		// One sender, one mailbox: the command is queued before the stop.
		cmd := root.RequestFuture(pid, &pb.RunCommand{Caller: me, Domain: "demo", Action: "increment"}, 30*time.Second)
		stop := root.RequestFuture(pid, &pb.Stop{Caller: me}, 30*time.Second)
		t0 := time.Now()
		res, err := cmd.Result()
		if err != nil {
			t.Fatal(err)
		}
		if r := res.(*pb.CommandResult); r.GetRefused().GetCode() != "session_ended" {
			t.Fatalf("a waiting command when the session ended: %v", r)
		}
		if _, err := stop.Result(); err != nil {
			t.Fatal(err)
		}
		t.Logf("answered %s after the stop was sent", time.Since(t0).Round(time.Millisecond))
	})
}
