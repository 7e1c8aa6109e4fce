package acpgw_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store"
)

func twoAgents(t *testing.T) option {
	return withAgents(
		surfaced.AgentSpec{Name: "max", Argv: testkit.FakeAgent(t)},
		surfaced.AgentSpec{Name: "zoe", Argv: testkit.FakeAgent(t), Images: true},
	)
}

func TestAgentSelection(t *testing.T) {
	d := startDaemon(t, twoAgents(t))
	cwd := tempDir(t)

	// Several agents and no header: refused naming all of them.
	none := d.client()
	res := none.initialize()
	caps := res["result"].(map[string]any)["agentCapabilities"].(map[string]any)["promptCapabilities"].(map[string]any)
	if caps["image"] != false {
		t.Errorf("no agent chosen, but image %v", caps["image"])
	}
	r := none.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if code, msg, _ := rpcError(r); code != -32602 || !strings.Contains(msg, `"max"`) || !strings.Contains(msg, `"zoe"`) {
		t.Errorf("no header: %v", r)
	}

	// An unknown name: refused naming it.
	bad := d.client()
	bad.agent = "nobody"
	bad.initialize()
	r = bad.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if code, msg, _ := rpcError(r); code != -32602 || !strings.Contains(msg, `"nobody"`) {
		t.Errorf("unknown agent: %v", r)
	}

	// The header picks the agent; its capabilities are advertised.
	zoe := d.client()
	zoe.agent = "zoe"
	res = zoe.initialize()
	caps = res["result"].(map[string]any)["agentCapabilities"].(map[string]any)["promptCapabilities"].(map[string]any)
	if caps["image"] != true {
		t.Errorf("zoe takes images, but image %v", caps["image"])
	}
	zs := zoe.newSession(cwd)
	rec, err := d.rt.Store().GetSession(context.Background(), zs)
	if err != nil || rec.Agent != "zoe" || rec.Owner != "local" || rec.Cwd != cwd {
		t.Fatalf("stored session: %+v %v", rec, err)
	}

	// Another agent's session is "no such session" to a max connection.
	max := d.client()
	max.agent = "max"
	max.initialize()
	id := max.request("session/resume", map[string]any{"sessionId": zs, "cwd": cwd}, zs)
	if code, msg, _ := rpcError(max.response(max.stream(zs), id)); code != -32002 || msg != "No such session." {
		t.Errorf("another agent's session: %d %q", code, msg)
	}
	if l := max.call("session/list", map[string]any{}); len(l["result"].(map[string]any)["sessions"].([]any)) != 0 {
		t.Errorf("max lists zoe's session: %v", l)
	}
}

func TestListCursorsScopedToCallerAndAgent(t *testing.T) {
	d := startDaemon(t, twoAgents(t))
	cwd := tempDir(t)
	ctx := context.Background()
	// 60 sessions of max, 3 of zoe, straight into the store.
	now := time.Now()
	for i := 0; i < 63; i++ {
		agent := "max"
		if i >= 60 {
			agent = "zoe"
		}
		err := d.rt.Store().CreateSession(ctx, store.Session{ID: fmt.Sprintf("s%02d-aaaaaaaaaaaaaaaaaaaa", i), Owner: "local", Agent: agent,
			Cwd: cwd, Status: "idle", Title: fmt.Sprintf("title %d", i), Created: now.Add(time.Duration(i) * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
	}
	max := d.client()
	max.agent = "max"
	max.initialize()
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		r := max.call("session/list", params)
		res := r["result"].(map[string]any)
		for _, s := range res["sessions"].([]any) {
			item := s.(map[string]any)
			if seen[item["sessionId"].(string)] {
				t.Fatalf("seen twice: %v", item)
			}
			seen[item["sessionId"].(string)] = true
			if item["cwd"] != cwd || !strings.HasPrefix(item["title"].(string), "title ") || item["updatedAt"] == "" {
				t.Errorf("item %v", item)
			}
		}
		pages++
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
		if pages == 1 {
			// The cursor does not cross to another agent's listing.
			zoe := d.client()
			zoe.agent = "zoe"
			zoe.initialize()
			r := zoe.call("session/list", map[string]any{"cursor": cursor})
			if code, _, data := rpcError(r); code != -32602 || data["field"] != "cursor" {
				t.Errorf("max's cursor under zoe: %v", r)
			}
			// Nor to another cwd filter.
			r = max.call("session/list", map[string]any{"cursor": cursor, "cwd": "/elsewhere"})
			if code, _, _ := rpcError(r); code != -32602 {
				t.Errorf("cursor under another cwd: %v", r)
			}
		}
	}
	if len(seen) != 60 || pages != 2 {
		t.Errorf("max saw %d sessions in %d pages", len(seen), pages)
	}
}

func TestAgentInfoReplacedWhole(t *testing.T) {
	d := startDaemon(t, withACP(func(o *acpgw.Options) { o.AgentInfo = acpgw.AgentInfo{Name: "acme", Version: "2.0.0"} }))
	c := d.client()
	res := c.initialize()
	info := res["result"].(map[string]any)["agentInfo"].(map[string]any)
	if info["name"] != "acme" || info["version"] != "2.0.0" || info["title"] != nil {
		t.Errorf("agentInfo %v", info)
	}
}

func TestEventsOnTheBus(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	opened := d.events.wait(t, "opened", func(ev any) bool { _, ok := ev.(acpgw.ConnectionOpened); return ok }).(acpgw.ConnectionOpened)
	if opened.ConnectionID != c.connID || opened.Subject != "local" || opened.ClientName != "raw-test" {
		t.Errorf("opened %+v", opened)
	}
	cwd := tempDir(t)
	sid := c.newSession(cwd)
	att := d.events.wait(t, "attached", func(ev any) bool { _, ok := ev.(acpgw.SessionAttached); return ok }).(acpgw.SessionAttached)
	if att != (acpgw.SessionAttached{ConnectionID: c.connID, SessionID: sid, Agent: "fake", How: "new"}) {
		t.Errorf("attached %+v", att)
	}
	c2 := d.client()
	c2.initialize()
	c2.stream(sid)
	c2.response(c2.conn, c2.request("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, sid))
	d.events.wait(t, "attached by load", func(ev any) bool { a, ok := ev.(acpgw.SessionAttached); return ok && a.How == "load" })
	c2.response(c2.stream(sid), c2.request("session/resume", map[string]any{"sessionId": sid, "cwd": cwd}, sid))
	d.events.wait(t, "attached by resume", func(ev any) bool { a, ok := ev.(acpgw.SessionAttached); return ok && a.How == "resume" })

	if st, _, _ := d.send(t, "DELETE", nil, c.header("")); st != http.StatusAccepted {
		t.Fatal(st)
	}
	closed := d.events.wait(t, "closed", func(ev any) bool { _, ok := ev.(acpgw.ConnectionClosed); return ok }).(acpgw.ConnectionClosed)
	if closed != (acpgw.ConnectionClosed{ConnectionID: c.connID}) {
		t.Errorf("closed %+v (an orderly close has no fault)", closed)
	}
	// Counted in metrics.
	mfs, err := d.rt.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "surfaced_acp_events_total" {
			found = len(mf.GetMetric()) >= 4
		}
	}
	if !found {
		t.Error("surfaced_acp_events_total is missing or incomplete")
	}
}

func TestCloseReleasesOnlyTheAttachment(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	cwd := tempDir(t)
	sid := c.newSession(cwd)
	id := c.prompt(sid, "before")
	c.turn(sid, id)
	r := c.response(c.stream(sid), c.request("session/close", map[string]any{"sessionId": sid}, sid))
	if r["result"] == nil {
		t.Fatalf("close: %v", r)
	}
	// Closing again is fine; the session still exists and still lists.
	if r := c.response(c.stream(sid), c.request("session/close", map[string]any{"sessionId": sid}, sid)); r["result"] == nil {
		t.Fatalf("close again: %v", r)
	}
	if l := c.call("session/list", map[string]any{}); len(l["result"].(map[string]any)["sessions"].([]any)) != 1 {
		t.Errorf("list after close: %v", l)
	}
	// A prompt on it attaches again and carries on.
	id = c.prompt(sid, "after")
	if text, _, resp := c.turn(sid, id); text != "echo: after" || stopReason(resp) != "end_turn" {
		t.Errorf("%q %v", text, resp)
	}
}

func TestLoadReplaysBeforeTheAnswer(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	cwd := tempDir(t)
	sid := c.newSession(cwd)
	id := c.prompt(sid, "tool")
	c.turn(sid, id)

	c2 := d.client()
	c2.initialize()
	s := c2.stream(sid)
	lid := c2.request("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, sid)
	c2.response(c2.conn, lid)
	// Everything replayed had arrived when the answer did.
	var kinds []string
	for len(kinds) < 3 {
		ev := s.Wait(t, 2*time.Second, "the replay", func(testkit.Event) bool { return true })
		u := ev.Data["params"].(map[string]any)["update"].(map[string]any)
		k := u["sessionUpdate"].(string)
		if k == "tool_call" {
			k += ":" + u["status"].(string) + ":" + u["kind"].(string)
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, ","); got != "user_message_chunk,tool_call:completed:other,agent_message_chunk" {
		t.Errorf("replay: %s", got)
	}
	// Resume replays nothing.
	c3 := d.client()
	c3.initialize()
	s3 := c3.stream(sid)
	c3.response(s3, c3.request("session/resume", map[string]any{"sessionId": sid, "cwd": cwd}, sid))
	time.Sleep(200 * time.Millisecond)
	for _, ev := range s3.All() {
		if ev.Data["method"] == "session/update" {
			t.Errorf("resume replayed %v", ev.Data)
		}
	}
}

func TestDialogCancelledWithTheTurn(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	s := c.stream(sid)
	id := c.prompt(sid, "ask")
	req := s.Wait(t, 10*time.Second, "the permission request", func(e testkit.Event) bool { return e.Data["method"] == "session/request_permission" })
	c.notify("session/cancel", map[string]any{"sessionId": sid}, sid)
	// The request is withdrawn on the connection stream...
	c.conn.Wait(t, 10*time.Second, "$/cancel_request", func(e testkit.Event) bool {
		p, _ := e.Data["params"].(map[string]any)
		return e.Data["method"] == "$/cancel_request" && p["requestId"] == req.Data["id"]
	})
	// ...and the prompt answers cancelled.
	if r := c.response(s, id); stopReason(r) != "cancelled" {
		t.Errorf("prompt: %v", r)
	}
	// A late answer to the withdrawn request is accepted and dropped.
	body := mustJSON(map[string]any{"jsonrpc": "2.0", "id": req.Data["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}})
	if st, b, _ := d.send(t, "POST", body, c.header(sid)); st != http.StatusAccepted {
		t.Errorf("late answer: %d %s", st, b)
	}
}

func TestPermissionAnswerNeedsItsSession(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	s := c.stream(sid)
	id := c.prompt(sid, "ask")
	req := s.Wait(t, 10*time.Second, "the permission request", func(e testkit.Event) bool { return e.Data["method"] == "session/request_permission" })
	answer := mustJSON(map[string]any{"jsonrpc": "2.0", "id": req.Data["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject"}}})
	if st, b, _ := d.send(t, "POST", answer, c.header("")); st != http.StatusBadRequest || !strings.Contains(b, "Missing Acp-Session-Id") {
		t.Errorf("without the session header: %d %s", st, b)
	}
	if st, b, _ := d.send(t, "POST", answer, c.header("other")); st != http.StatusBadRequest || !strings.Contains(b, "Mismatched") {
		t.Errorf("with another session: %d %s", st, b)
	}
	if st, b, _ := d.send(t, "POST", answer, c.header(sid)); st != http.StatusAccepted {
		t.Fatalf("answer: %d %s", st, b)
	}
	text, _, resp := c.turn(sid, id)
	if !strings.Contains(text, `"confirmed":false`) || stopReason(resp) != "end_turn" {
		t.Errorf("%q %v", text, resp)
	}
}

func TestQueuedPromptCancelledAtShutdown(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	s, running := c.startSlowTurn(sid)
	queued := c.prompt(sid, "queued")
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.gw.Shutdown(ctx)
	if err := d.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	go d.srv.Close(ctx)
	for _, id := range []int64{running, queued} {
		if r := c.response(s, id); stopReason(r) != "cancelled" {
			t.Errorf("prompt %d at shutdown: %v", id, r)
		}
	}
}

// session/cancel interrupts the running turn only: the queued message is
// still answered, by the next turn.
func TestCancelSparesTheQueue(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	s, running := c.startSlowTurn(sid)
	queued := c.prompt(sid, "next")
	time.Sleep(50 * time.Millisecond)
	c.notify("session/cancel", map[string]any{"sessionId": sid}, sid)
	if r := c.response(s, running); stopReason(r) != "cancelled" {
		t.Fatalf("running: %v", r)
	}
	text, _, r := c.turn(sid, queued)
	if stopReason(r) != "end_turn" || text != "echo: next" {
		t.Errorf("queued: %q %v", text, r)
	}
}

// A failed turn answers -32603 with the code only; the user reads why in the
// conversation, once (the agent's error, as a browser shows it).
func TestFailedTurnIsInternalError(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	id := c.prompt(sid, "fail")
	text, _, r := c.turn(sid, id)
	code, msg, data := rpcError(r)
	if code != -32603 || msg != "Internal error" || data["code"] != "turn_failed" || strings.Contains(fmt.Sprint(r), "on purpose") {
		t.Errorf("%v", r)
	}
	if strings.Count(text, "the model failed on purpose") != 1 {
		t.Errorf("the failure is not shown once in the conversation: %q", text)
	}
}

// A text dialog (input/editor) in the editor's own turn cannot be shown: it
// is cancelled, the agent hears so, and the editor is told why.
func TestTextDialogCancelledForEditor(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	id := c.prompt(sid, "asktext")
	text, _, r := c.turn(sid, id)
	if stopReason(r) != "end_turn" {
		t.Fatalf("prompt: %v", r)
	}
	if !strings.Contains(text, "cannot show") || !strings.Contains(text, `"cancelled":true`) {
		t.Errorf("conversation: %q", text)
	}
}

// The updates a session sent just before its actor stopped reach the editor
// even when the session's Terminated notice is queued behind them: protoactor
// takes system messages first, so the attachment must not end on the notice
// alone. The attachment's mailbox is held while a slow turn's chunks queue up;
// then the session is deleted and its actor leaves; then the mailbox runs.
func TestUpdatesQueuedBeforeTheSessionLeftAreDelivered(t *testing.T) {
	held := &testkit.HeldDispatcher{}
	mb := testkit.NewCountingMailbox()
	d := startDaemon(t, withLimits(surfaced.Limits{EndedLinger: 50 * time.Millisecond}),
		withACP(func(o *acpgw.Options) {
			o.Props = func(kind, sessionID string) []actor.PropsOption {
				return []actor.PropsOption{actor.WithDispatcher(held), actor.WithMailbox(mb.Producer())}
			}
		}))
	c := d.client()
	c.initialize()
	sid := c.newSession(tempDir(t))
	_, running := c.startSlowTurn(sid)

	held.Hold()
	deadline := time.Now().Add(10 * time.Second)
	for mb.UserMessageCount() < 2 { // chunks waiting in the attachment's mailbox
		if time.Now().After(deadline) {
			t.Fatalf("no chunks queued: %d", mb.UserMessageCount())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st, out := deleteSession(t, d, sid); st != 200 && st != 204 {
		t.Fatalf("DELETE session: %d %s", st, out)
	}
	for mb.SystemPosted("*actor.Terminated") == 0 { // the session actor left: Terminated is queued
		if time.Now().After(deadline) {
			t.Fatalf("the session actor did not leave")
		}
		time.Sleep(5 * time.Millisecond)
	}
	held.Release()

	text, _, r := c.turn(sid, running)
	if !strings.Contains(text, "chunk") {
		t.Fatalf("the chunks queued before the session left were dropped (text %q, answer %v)", text, r)
	}
	if stopReason(r) != "cancelled" {
		t.Errorf("the running prompt: %v", r)
	}
}

// The runtime's quotas bound session/new as they bound POST /api/sessions.
func TestSessionQuota(t *testing.T) {
	d := startDaemon(t, withQuotas(surfaced.Quotas{SessionsPerSubject: 1}))
	c := d.client()
	c.initialize()
	c.newSession(tempDir(t))
	res := c.call("session/new", map[string]any{"cwd": tempDir(t), "mcpServers": []any{}})
	code, msg, data := rpcError(res)
	if code != -32603 || data["code"] != "too_many_sessions" || !strings.Contains(msg, "Too many sessions: you already have 1 open") {
		t.Fatalf("second session past the quota: %v", res)
	}
}
