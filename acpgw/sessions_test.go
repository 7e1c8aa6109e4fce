package acpgw_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/store"
)

func twoAgents(t *testing.T) daemon.Option {
	return daemon.Agents(
		surfaced.AgentSpec{Name: "max", Argv: testkit.FakeAgent(t)},
		surfaced.AgentSpec{Name: "zoe", Argv: testkit.FakeAgent(t), Images: true},
	)
}

func TestAgentSelection(t *testing.T) {
	d := daemon.Start(t, twoAgents(t))
	cwd := daemon.TempDir(t)

	// Several agents and no header: refused naming all of them.
	none := d.ACPClient()
	res := none.Initialize()
	caps := res["result"].(map[string]any)["agentCapabilities"].(map[string]any)["promptCapabilities"].(map[string]any)
	if caps["image"] != false {
		t.Errorf("no agent chosen, but image %v", caps["image"])
	}
	r := none.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if code, msg, _ := daemon.RPCError(r); code != -32602 || !strings.Contains(msg, `"max"`) || !strings.Contains(msg, `"zoe"`) {
		t.Errorf("no header: %v", r)
	}

	// An unknown name: refused naming it.
	bad := d.ACPClient()
	bad.Agent = "nobody"
	bad.Initialize()
	r = bad.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if code, msg, _ := daemon.RPCError(r); code != -32602 || !strings.Contains(msg, `"nobody"`) {
		t.Errorf("unknown agent: %v", r)
	}

	// The header picks the agent; its capabilities are advertised.
	zoe := d.ACPClient()
	zoe.Agent = "zoe"
	res = zoe.Initialize()
	caps = res["result"].(map[string]any)["agentCapabilities"].(map[string]any)["promptCapabilities"].(map[string]any)
	if caps["image"] != true {
		t.Errorf("zoe takes images, but image %v", caps["image"])
	}
	zs := zoe.NewSession(cwd)
	rec, err := d.Runtime.Store().GetSession(context.Background(), zs)
	if err != nil || rec.Agent != "zoe" || rec.Owner != "local" || rec.Cwd != cwd {
		t.Fatalf("stored session: %+v %v", rec, err)
	}

	// Another agent's session is "no such session" to a max connection.
	max := d.ACPClient()
	max.Agent = "max"
	max.Initialize()
	id := max.Request("session/resume", map[string]any{"sessionId": zs, "cwd": cwd}, zs)
	if code, msg, _ := daemon.RPCError(max.Response(max.Stream(zs), id)); code != -32002 || msg != "No such session." {
		t.Errorf("another agent's session: %d %q", code, msg)
	}
	if l := max.Call("session/list", map[string]any{}); len(l["result"].(map[string]any)["sessions"].([]any)) != 0 {
		t.Errorf("max lists zoe's session: %v", l)
	}
}

func TestListCursorsScopedToCallerAndAgent(t *testing.T) {
	d := daemon.Start(t, twoAgents(t))
	cwd := daemon.TempDir(t)
	ctx := context.Background()
	// 60 sessions of max, 3 of zoe, straight into the store.
	now := time.Now()
	for i := 0; i < 63; i++ {
		agent := "max"
		if i >= 60 {
			agent = "zoe"
		}
		err := d.Runtime.Store().CreateSession(ctx, store.Session{ID: fmt.Sprintf("s%02d-aaaaaaaaaaaaaaaaaaaa", i), Owner: "local", Agent: agent,
			Cwd: cwd, Status: "idle", Title: fmt.Sprintf("title %d", i), Created: now.Add(time.Duration(i) * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
	}
	max := d.ACPClient()
	max.Agent = "max"
	max.Initialize()
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		r := max.Call("session/list", params)
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
			zoe := d.ACPClient()
			zoe.Agent = "zoe"
			zoe.Initialize()
			r := zoe.Call("session/list", map[string]any{"cursor": cursor})
			if code, _, data := daemon.RPCError(r); code != -32602 || data["field"] != "cursor" {
				t.Errorf("max's cursor under zoe: %v", r)
			}
			// Nor to another cwd filter.
			r = max.Call("session/list", map[string]any{"cursor": cursor, "cwd": "/elsewhere"})
			if code, _, _ := daemon.RPCError(r); code != -32602 {
				t.Errorf("cursor under another cwd: %v", r)
			}
		}
	}
	if len(seen) != 60 || pages != 2 {
		t.Errorf("max saw %d sessions in %d pages", len(seen), pages)
	}
}

func TestAgentInfoReplacedWhole(t *testing.T) {
	d := daemon.Start(t, daemon.ACP(func(o *acpgw.Options) { o.AgentInfo = acpgw.AgentInfo{Name: "acme", Version: "2.0.0"} }))
	c := d.ACPClient()
	res := c.Initialize()
	info := res["result"].(map[string]any)["agentInfo"].(map[string]any)
	if info["name"] != "acme" || info["version"] != "2.0.0" || info["title"] != nil {
		t.Errorf("agentInfo %v", info)
	}
}

func TestEventsOnTheBus(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	opened := d.Events.Wait(t, "opened", func(ev any) bool { _, ok := ev.(acpgw.ConnectionOpened); return ok }).(acpgw.ConnectionOpened)
	if opened.ConnectionID != c.ConnID || opened.Subject != "local" || opened.ClientName != "raw-test" {
		t.Errorf("opened %+v", opened)
	}
	cwd := daemon.TempDir(t)
	sid := c.NewSession(cwd)
	att := d.Events.Wait(t, "attached", func(ev any) bool { _, ok := ev.(acpgw.SessionAttached); return ok }).(acpgw.SessionAttached)
	if att != (acpgw.SessionAttached{ConnectionID: c.ConnID, SessionID: sid, Agent: "fake", How: "new"}) {
		t.Errorf("attached %+v", att)
	}
	c2 := d.ACPClient()
	c2.Initialize()
	c2.Stream(sid)
	c2.Response(c2.Conn, c2.Request("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, sid))
	d.Events.Wait(t, "attached by load", func(ev any) bool { a, ok := ev.(acpgw.SessionAttached); return ok && a.How == "load" })
	c2.Response(c2.Stream(sid), c2.Request("session/resume", map[string]any{"sessionId": sid, "cwd": cwd}, sid))
	d.Events.Wait(t, "attached by resume", func(ev any) bool { a, ok := ev.(acpgw.SessionAttached); return ok && a.How == "resume" })

	if st, _, _ := d.SendACP(t, "DELETE", nil, c.Header("")); st != http.StatusAccepted {
		t.Fatal(st)
	}
	closed := d.Events.Wait(t, "closed", func(ev any) bool { _, ok := ev.(acpgw.ConnectionClosed); return ok }).(acpgw.ConnectionClosed)
	if closed != (acpgw.ConnectionClosed{ConnectionID: c.ConnID}) {
		t.Errorf("closed %+v (an orderly close has no fault)", closed)
	}
	// Counted in metrics.
	mfs, err := d.Runtime.Registry().Gather()
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
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	cwd := daemon.TempDir(t)
	sid := c.NewSession(cwd)
	id := c.Prompt(sid, "before")
	c.Turn(sid, id)
	r := c.Response(c.Stream(sid), c.Request("session/close", map[string]any{"sessionId": sid}, sid))
	if r["result"] == nil {
		t.Fatalf("close: %v", r)
	}
	// Closing again is fine; the session still exists and still lists.
	if r := c.Response(c.Stream(sid), c.Request("session/close", map[string]any{"sessionId": sid}, sid)); r["result"] == nil {
		t.Fatalf("close again: %v", r)
	}
	if l := c.Call("session/list", map[string]any{}); len(l["result"].(map[string]any)["sessions"].([]any)) != 1 {
		t.Errorf("list after close: %v", l)
	}
	// A prompt on it attaches again and carries on.
	id = c.Prompt(sid, "after")
	if text, _, resp := c.Turn(sid, id); text != "echo: after" || daemon.StopReason(resp) != "end_turn" {
		t.Errorf("%q %v", text, resp)
	}
}

func TestLoadReplaysBeforeTheAnswer(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	cwd := daemon.TempDir(t)
	sid := c.NewSession(cwd)
	id := c.Prompt(sid, "tool")
	c.Turn(sid, id)

	c2 := d.ACPClient()
	c2.Initialize()
	s := c2.Stream(sid)
	lid := c2.Request("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}, sid)
	c2.Response(c2.Conn, lid)
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
	c3 := d.ACPClient()
	c3.Initialize()
	s3 := c3.Stream(sid)
	c3.Response(s3, c3.Request("session/resume", map[string]any{"sessionId": sid, "cwd": cwd}, sid))
	time.Sleep(200 * time.Millisecond)
	for _, ev := range s3.All() {
		if ev.Data["method"] == "session/update" {
			t.Errorf("resume replayed %v", ev.Data)
		}
	}
}

func TestDialogCancelledWithTheTurn(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	s := c.Stream(sid)
	id := c.Prompt(sid, "ask")
	req := s.Wait(t, 10*time.Second, "the permission request", func(e testkit.Event) bool { return e.Data["method"] == "session/request_permission" })
	c.Notify("session/cancel", map[string]any{"sessionId": sid}, sid)
	// The request is withdrawn on the connection stream...
	c.Conn.Wait(t, 10*time.Second, "$/cancel_request", func(e testkit.Event) bool {
		p, _ := e.Data["params"].(map[string]any)
		return e.Data["method"] == "$/cancel_request" && p["requestId"] == req.Data["id"]
	})
	// ...and the prompt answers cancelled.
	if r := c.Response(s, id); daemon.StopReason(r) != "cancelled" {
		t.Errorf("prompt: %v", r)
	}
	// A late answer to the withdrawn request is accepted and dropped.
	body := daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": req.Data["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}})
	if st, b, _ := d.SendACP(t, "POST", body, c.Header(sid)); st != http.StatusAccepted {
		t.Errorf("late answer: %d %s", st, b)
	}
}

func TestPermissionAnswerNeedsItsSession(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	s := c.Stream(sid)
	id := c.Prompt(sid, "ask")
	req := s.Wait(t, 10*time.Second, "the permission request", func(e testkit.Event) bool { return e.Data["method"] == "session/request_permission" })
	answer := daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": req.Data["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject"}}})
	if st, b, _ := d.SendACP(t, "POST", answer, c.Header("")); st != http.StatusBadRequest || !strings.Contains(b, "Missing Acp-Session-Id") {
		t.Errorf("without the session header: %d %s", st, b)
	}
	if st, b, _ := d.SendACP(t, "POST", answer, c.Header("other")); st != http.StatusBadRequest || !strings.Contains(b, "Mismatched") {
		t.Errorf("with another session: %d %s", st, b)
	}
	if st, b, _ := d.SendACP(t, "POST", answer, c.Header(sid)); st != http.StatusAccepted {
		t.Fatalf("answer: %d %s", st, b)
	}
	text, _, resp := c.Turn(sid, id)
	if !strings.Contains(text, `"confirmed":false`) || daemon.StopReason(resp) != "end_turn" {
		t.Errorf("%q %v", text, resp)
	}
}

func TestQueuedPromptCancelledAtShutdown(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	s, running := c.StartSlowTurn(sid)
	queued := c.Prompt(sid, "queued")
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.Gateway.Shutdown(ctx)
	if err := d.Runtime.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	go d.ACP.Close(ctx)
	for _, id := range []int64{running, queued} {
		if r := c.Response(s, id); daemon.StopReason(r) != "cancelled" {
			t.Errorf("prompt %d at shutdown: %v", id, r)
		}
	}
}

// session/cancel interrupts the running turn only: the queued message is
// still answered, by the next turn.
func TestCancelSparesTheQueue(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	s, running := c.StartSlowTurn(sid)
	queued := c.Prompt(sid, "next")
	time.Sleep(50 * time.Millisecond)
	c.Notify("session/cancel", map[string]any{"sessionId": sid}, sid)
	if r := c.Response(s, running); daemon.StopReason(r) != "cancelled" {
		t.Fatalf("running: %v", r)
	}
	text, _, r := c.Turn(sid, queued)
	if daemon.StopReason(r) != "end_turn" || text != "echo: next" {
		t.Errorf("queued: %q %v", text, r)
	}
}

// A failed turn answers -32603 with the code only; the user reads why in the
// conversation, once (the agent's error, as a browser shows it).
func TestFailedTurnIsInternalError(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	id := c.Prompt(sid, "fail")
	text, _, r := c.Turn(sid, id)
	code, msg, data := daemon.RPCError(r)
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
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	id := c.Prompt(sid, "asktext")
	text, _, r := c.Turn(sid, id)
	if daemon.StopReason(r) != "end_turn" {
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
	d := daemon.Start(t, daemon.Limits(surfaced.Limits{EndedLinger: 50 * time.Millisecond}),
		daemon.ACP(func(o *acpgw.Options) {
			o.Props = func(kind, sessionID string) []actor.PropsOption {
				return []actor.PropsOption{actor.WithDispatcher(held), actor.WithMailbox(mb.Producer())}
			}
		}))
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	_, running := c.StartSlowTurn(sid)

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

	text, _, r := c.Turn(sid, running)
	if !strings.Contains(text, "chunk") {
		t.Fatalf("the chunks queued before the session left were dropped (text %q, answer %v)", text, r)
	}
	if daemon.StopReason(r) != "cancelled" {
		t.Errorf("the running prompt: %v", r)
	}
}

// The runtime's quotas bound session/new as they bound POST /api/sessions.
func TestSessionQuota(t *testing.T) {
	d := daemon.Start(t, daemon.Quotas(surfaced.Quotas{SessionsPerSubject: 1}))
	c := d.ACPClient()
	c.Initialize()
	c.NewSession(daemon.TempDir(t))
	res := c.Call("session/new", map[string]any{"cwd": daemon.TempDir(t), "mcpServers": []any{}})
	code, msg, data := daemon.RPCError(res)
	if code != -32603 || data["code"] != "too_many_sessions" || !strings.Contains(msg, "Too many sessions: you already have 1 open") {
		t.Fatalf("second session past the quota: %v", res)
	}
}

// A failed tool call shows the editor its error text, or, with tool
// payloads withheld, its error class (the tool's code) and never the text.
func TestFailedToolCallShowsItsCode(t *testing.T) {
	for _, withhold := range []bool{false, true} {
		t.Run(map[bool]string{false: "payloads", true: "withheld"}[withhold], func(t *testing.T) {
			d := daemon.Start(t, daemon.ACP(func(o *acpgw.Options) { o.WithholdToolPayloads = withhold }))
			c := d.ACPClient()
			c.Initialize()
			sid := c.NewSession(daemon.TempDir(t))
			s := c.Stream(sid)
			id := c.Prompt(sid, "toolfail")
			var failed map[string]any
			s.Wait(t, 10*time.Second, "the failed tool call", func(e testkit.Event) bool {
				p, _ := e.Data["params"].(map[string]any)
				u, _ := p["update"].(map[string]any)
				if u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed" {
					failed = u
					return true
				}
				return false
			})
			raw, _ := json.Marshal(failed)
			text := string(raw)
			if withhold {
				if !strings.Contains(text, "The tool call failed (disk_full).") || strings.Contains(text, "secret detail") {
					t.Fatalf("withheld payloads: %s; want the code only", text)
				}
			} else if !strings.Contains(text, "secret detail: disk /dev/sda1 is full") {
				t.Fatalf("with payloads: %s; want the error text", text)
			}
			if _, _, resp := c.Turn(sid, id); daemon.StopReason(resp) != "end_turn" {
				t.Fatalf("answer %v", resp)
			}
		})
	}
}

// A tool result that references artifacts reaches the editor with
// resource_link blocks (the signed URL, absolute on the daemon; name, type,
// size) for those of the session; with tool payloads withheld, without.
func TestToolResultArtifactLinks(t *testing.T) {
	for _, withhold := range []bool{false, true} {
		t.Run(map[bool]string{false: "payloads", true: "withheld"}[withhold], func(t *testing.T) {
			d := daemon.Start(t, daemon.Agents(surfaced.AgentSpec{Name: "data", Argv: []string{testkit.Build(t, "./internal/dataagent")}}),
				daemon.ACP(func(o *acpgw.Options) { o.WithholdToolPayloads = withhold }))
			c := d.ACPClient()
			c.Initialize()
			sid := c.NewSession(daemon.TempDir(t))
			s := c.Stream(sid)
			c.Prompt(sid, "increment")
			var done map[string]any
			s.Wait(t, 20*time.Second, "the finished tool call", func(e testkit.Event) bool {
				p, _ := e.Data["params"].(map[string]any)
				u, _ := p["update"].(map[string]any)
				if u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed" {
					done = u
					return true
				}
				return false
			})
			var links []map[string]any
			content, _ := done["content"].([]any)
			for _, c := range content {
				if b, _ := c.(map[string]any)["content"].(map[string]any); b["type"] == "resource_link" {
					links = append(links, b)
				}
			}
			if withhold {
				if len(links) != 0 || len(content) != 0 {
					t.Fatalf("withheld payloads, yet: %v", done)
				}
				return
			}
			if len(links) != 1 {
				t.Fatalf("links %v in %v", links, done)
			}
			l := links[0]
			uri, _ := l["uri"].(string)
			if l["name"] != "chart.png" || l["mimeType"] != "image/png" || l["size"] != float64(len("not really a png")) ||
				!strings.HasPrefix(uri, d.URL+"/api/artifacts/att_") || !strings.Contains(uri, "sig=") {
				t.Fatalf("link %v", l)
			}
			resp, err := http.Get(uri)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != "not really a png" {
				t.Fatalf("the link serves %d %q", resp.StatusCode, b)
			}
		})
	}
}
