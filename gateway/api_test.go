package gateway_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// The main flow over real listeners: create, stream, prompt, command, state,
// abort, delete.
func TestSessionLifecycle(t *testing.T) {
	d := daemon.Start(t)
	st, out := d.JSON("GET", "/api/agents", nil)
	if st != 200 || len(out["agents"].([]any)) != 1 {
		t.Fatalf("agents: %d %v", st, out)
	}
	id := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	s.Wait(t, 5*time.Second, "initial snapshot", testkit.IsState("surface:demo", 1))

	st, out = d.JSON("GET", "/api/sessions/"+id, nil)
	if st != 200 || out["status"] != "ready" || len(out["surfaces"].([]any)) != 1 {
		t.Fatalf("summary: %d %v", st, out)
	}
	st, out = d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil)
	if st != 200 || out["ok"] != true || out["data"].(map[string]any)["count"] != 1.0 {
		t.Fatalf("command: %d %v", st, out)
	}
	s.Wait(t, 5*time.Second, "rev 2", testkit.IsState("surface:demo", 2))
	st, out = d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/fail", map[string]any{"args": map[string]any{}})
	if st != 200 || out["ok"] != false || daemon.ErrCode(out) != "nope" {
		t.Fatalf("failing command answers 200 ok:false: %d %v", st, out)
	}

	st, out = d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "hello there"})
	if st != 202 || out["accepted"] != true || out["queued"] != false {
		t.Fatalf("prompt: %d %v", st, out)
	}
	um := s.Wait(t, 5*time.Second, "user message", testkit.IsChat("data-user-message"))
	if um.Data["data"].(map[string]any)["text"] != "hello there" {
		t.Fatalf("%v", um.Raw)
	}
	var text strings.Builder
	for {
		ev := s.Wait(t, 5*time.Second, "reply", testkit.IsKind("chat"))
		if ev.Data["type"] == "text-delta" {
			text.WriteString(ev.Data["delta"].(string))
		}
		if ev.Data["type"] == "finish" {
			break
		}
	}
	if text.String() != "echo: hello there" {
		t.Fatalf("reply %q", text.String())
	}
	st, out = d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	msgs := out["messages"].([]any)
	if st != 200 || len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "user" || msgs[1].(map[string]any)["text"] != "echo: hello there" {
		t.Fatalf("messages: %d %v", st, out)
	}

	st, out = d.JSON("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "canvas.model", "value": "m1"})
	if st != 200 || out["rev"] != 1.0 {
		t.Fatalf("state: %d %v", st, out)
	}
	s.Wait(t, 5*time.Second, "pref", testkit.IsState("canvas.model", 1))
	st, out = d.JSON("GET", "/api/sessions/"+id+"/state", nil)
	entries := out["entries"].(map[string]any)
	if st != 200 || entries["canvas.model"].(map[string]any)["value"] != "m1" || entries["surface:demo"] == nil {
		t.Fatalf("get state: %d %v", st, out)
	}

	// Abort a slow turn.
	d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "slow please"})
	s.Wait(t, 5*time.Second, "deltas", testkit.IsChat("text-delta"))
	st, out = d.JSON("POST", "/api/sessions/"+id+"/abort", nil)
	if st != 200 || out["wasBusy"] != true {
		t.Fatalf("abort: %d %v", st, out)
	}
	s.Wait(t, 5*time.Second, "abort chunk", testkit.IsChat("abort"))
	fin := s.Wait(t, 5*time.Second, "finish", testkit.IsChat("finish"))
	if fin.Data["messageMetadata"].(map[string]any)["stopReason"] != "cancelled" {
		t.Fatalf("%s", fin.Raw)
	}

	st, _ = d.JSON("DELETE", "/api/sessions/"+id, nil)
	if st != 200 {
		t.Fatalf("delete: %d", st)
	}
	end := s.Wait(t, 5*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "stopped" {
		t.Fatalf("%s", end.Raw)
	}
	<-s.Done()
	if st, out = d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "x"}); st != 409 || daemon.ErrCode(out) != "session_ended" {
		t.Fatalf("prompt after delete: %d %v", st, out)
	}
	if st, out = d.JSON("GET", "/api/sessions/"+id, nil); st != 200 || out["status"] != "ended" {
		t.Fatalf("ended summary: %d %v", st, out)
	}
	if _, status, _ := testkit.TryOpenSSE(d.URL+"/api/sessions/"+id+"/events", d.Auth()); status != 409 {
		t.Fatalf("stream of an ended session: %d", status)
	}
	st, out = d.JSON("GET", "/api/sessions", nil)
	if st != 200 || len(out["sessions"].([]any)) != 1 || out["sessions"].([]any)[0].(map[string]any)["status"] != "ended" {
		t.Fatalf("list: %d %v", st, out)
	}
}

// A prompt POSTed while no stream is open loses nothing: the client resumes
// from the last id it saw and gets the whole reply.
func TestPromptBeforeStreamResumes(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	last := s.LastID()
	s.Close()
	d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "while away"})
	time.Sleep(300 * time.Millisecond)
	s2 := d.SSE(id, last)
	s2.Wait(t, 5*time.Second, "user message", testkit.IsChat("data-user-message"))
	s2.Wait(t, 5*time.Second, "start", testkit.IsChat("start"))
	s2.Wait(t, 5*time.Second, "text", testkit.IsChat("text-delta"))
	s2.Wait(t, 5*time.Second, "finish", testkit.IsChat("finish"))
	for _, ev := range s2.All() {
		if ev.Kind == "session" && ev.Data["status"] == "starting" {
			t.Fatalf("a resumed stream must not replay sticky state: %v", s2.All())
		}
	}
}

func TestTwoClientsOneSession(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	a, b := d.SSE(id, ""), d.SSE(id, "")
	a.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	b.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	for i := 0; i < 5; i++ {
		d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil)
	}
	ea := a.Wait(t, 5*time.Second, "rev 6", testkit.IsState("surface:demo", 6))
	eb := b.Wait(t, 5*time.Second, "rev 6", testkit.IsState("surface:demo", 6))
	if ea.ID != eb.ID {
		t.Fatalf("both clients see the same frame id: %s %s", ea.ID, eb.ID)
	}
}

func TestResync(t *testing.T) {
	d := daemon.Start(t, daemon.Limits(surfaced.Limits{ReplayFrames: 8}))
	id := d.Create(nil)
	s := d.SSE(id, "")
	first := s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	s.Close()
	for i := 0; i < 20; i++ {
		d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil)
	}
	s2 := d.SSE(id, first.ID)
	r := s2.Wait(t, 5*time.Second, "resync", testkit.IsKind("resync"))
	if r.Data["reason"] == "" {
		t.Fatal(r.Raw)
	}
	s2.Wait(t, 5*time.Second, "sticky state", testkit.IsState("surface:demo", 21))
	// Garbage and foreign-epoch ids resync too.
	for _, last := range []string{"garbage", "abc-1", "-5"} {
		s3 := d.SSE(id, last)
		s3.Wait(t, 5*time.Second, "resync", testkit.IsKind("resync"))
		s3.Close()
	}
}

func TestSlowConsumerIsCut(t *testing.T) {
	// A long QueueAge keeps the stalled client's blocked write alive until the
	// test reads, so it can see the end frame (a client stuck longer than
	// QueueAge is simply disconnected).
	d := daemon.Start(t, daemon.Gateway(gateway.Limits{QueueBytes: 1 << 20, QueueAge: time.Minute}))
	slow := stalledBehindFastClient(t, d)
	// The slow one was cut with a reason.
	rest := slow.ReadAll(t, 30*time.Second)
	if !strings.Contains(rest, "event: end\ndata: {\"reason\":\"slow_consumer\"}") {
		t.Fatalf("slow client was not cut with end{slow_consumer}; tail: %q", tail(rest, 300))
	}
	st, out := d.JSON("GET", "/metrics", nil)
	if st != 200 || !strings.Contains(out["_raw"].(string), `surfaced_slow_consumer_cuts_total{kind="sse"} 1`) {
		t.Fatalf("metrics: %s", tail(fmt.Sprint(out["_raw"]), 2000))
	}
}

// stalledBehindFastClient opens a session with two clients, a fast one and
// one that stalls, and sends 100 frames of 100 KiB: the stalled client's
// socket buffers absorb a few MiB, then its queue grows. The fast client
// gets every one.
func stalledBehindFastClient(t *testing.T, d *daemon.Daemon) *testkit.Stalled {
	t.Helper()
	id := d.Create(nil)
	fast := d.SSE(id, "")
	fast.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	slow := testkit.DialStalledSSE(t, d.URL, "/api/sessions/"+id+"/events", d.Auth())
	big := strings.Repeat("x", 100<<10)
	for i := 0; i < 100; i++ {
		if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/fill", map[string]any{"args": map[string]any{"text": big}}); st != 200 {
			t.Fatalf("fill: %d %v", st, out)
		}
	}
	fast.Wait(t, 10*time.Second, "last rev", testkit.IsState("surface:demo", 101))
	return slow
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestBadInput(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	cases := []struct {
		name, method, path string
		body               any
		hdr                http.Header
		status             int
		code               string
		field              string
	}{
		{"not json", "POST", "/api/sessions/" + id + "/prompt", "{nope", nil, 400, "invalid_json", ""},
		{"wrong type", "POST", "/api/sessions/" + id + "/prompt", `{"message": 5}`, nil, 400, "invalid_field", "message"},
		{"unknown field", "POST", "/api/sessions/" + id + "/prompt", `{"message":"x","mesage":"y"}`, nil, 400, "unknown_field", "mesage"},
		{"missing field", "POST", "/api/sessions/" + id + "/prompt", `{}`, nil, 400, "invalid_field", "message"},
		{"empty prompt", "POST", "/api/sessions/" + id + "/prompt", `{"message":"  "}`, nil, 400, "empty_prompt", "message"},
		{"two values", "POST", "/api/sessions/" + id + "/prompt", `{"message":"a"} {"message":"b"}`, nil, 400, "invalid_json", ""},
		{"array body", "POST", "/api/sessions/" + id + "/prompt", `["x"]`, nil, 400, "invalid_json", ""},
		{"not json type", "POST", "/api/sessions/" + id + "/prompt", `{"message":"x"}`, http.Header{"Content-Type": {"text/plain"}}, 415, "unsupported_media_type", ""},
		{"too large", "POST", "/api/sessions/" + id + "/surfaces/demo/echo", `{"args":{"text":"` + strings.Repeat("y", 2<<20) + `"}}`, nil, 413, "too_large", ""},
		{"bad image", "POST", "/api/sessions/" + id + "/prompt", `{"message":"x","images":[{"mimeType":"text/plain","data":"AA=="}]}`, nil, 400, "invalid_field", "images[0].mimeType"},
		{"bad base64", "POST", "/api/sessions/" + id + "/prompt", `{"message":"x","images":[{"mimeType":"image/png","data":"!!"}]}`, nil, 400, "invalid_field", "images[0].data"},
		{"surface write", "POST", "/api/sessions/" + id + "/state", `{"key":"surface:demo","value":{"count":9}}`, nil, 403, "surface_read_only", ""},
		{"bad key", "POST", "/api/sessions/" + id + "/state", `{"key":"Nope","value":1}`, nil, 400, "invalid_key", "key"},
		{"no value", "POST", "/api/sessions/" + id + "/state", `{"key":"a.b"}`, nil, 400, "invalid_field", "value"},
		{"bad op", "POST", "/api/sessions/" + id + "/state", `{"key":"a.b","op":"merge"}`, nil, 400, "invalid_field", "op"},
		{"ui none", "POST", "/api/sessions/" + id + "/ui-response", `{"id":"x"}`, nil, 400, "invalid_field", ""},
		{"ui unknown", "POST", "/api/sessions/" + id + "/ui-response", `{"id":"x","confirmed":true}`, nil, 409, "unknown_ui_request", ""},
		{"unknown session", "GET", "/api/sessions/doesnotexist", nil, nil, 404, "not_found", ""},
		{"unknown session stream", "GET", "/api/sessions/doesnotexist/events", nil, nil, 404, "not_found", ""},
		{"bad agent", "POST", "/api/sessions", `{"agent":"nope"}`, nil, 400, "invalid_agent", "agent"},
		{"bad cwd", "POST", "/api/sessions", `{"cwd":"/does/not/exist"}`, nil, 400, "invalid_cwd", "cwd"},
		{"relative cwd", "POST", "/api/sessions", `{"cwd":"rel/path"}`, nil, 400, "invalid_cwd", "cwd"},
		{"bad limit", "GET", "/api/sessions?limit=0", nil, nil, 400, "invalid_field", "limit"},
		{"bad cursor", "GET", "/api/sessions?cursor=bogus", nil, nil, 400, "invalid_field", "cursor"},
		{"no route", "GET", "/api/nothing", nil, nil, 404, "no_route", ""},
		{"bad last-event-id", "GET", "/api/sessions/" + id + "/events", nil, http.Header{"Last-Event-ID": {strings.Repeat("9", 200)}}, 400, "invalid_field", "Last-Event-ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, out := d.JSON(tc.method, tc.path, tc.body, tc.hdr)
			if st != tc.status || daemon.ErrCode(out) != tc.code {
				t.Fatalf("want %d %s, got %d %v", tc.status, tc.code, st, out)
			}
			msg, _ := out["error"].(map[string]any)["message"].(string)
			if msg == "" {
				t.Fatalf("no message: %v", out)
			}
			if tc.field != "" {
				fields, _ := out["error"].(map[string]any)["fields"].([]any)
				if len(fields) == 0 || fields[0] != tc.field {
					t.Fatalf("want field %q named: %v", tc.field, out)
				}
			}
		})
	}
}

func TestAuthAndOwnership(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": "alice-secret-token", "bob": "bob-secret-token-1"})
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }))
	alice, bob := d.As("alice-secret-token"), d.As("bob-secret-token-1")
	id := alice.Create(nil)

	if st, out := d.As("wrong").JSON("GET", "/api/sessions", nil); st != 401 || daemon.ErrCode(out) != "unauthorized" {
		t.Fatalf("bad token: %d %v", st, out)
	}
	noAuth := http.Header{"Authorization": nil}
	if st, _ := d.JSON("GET", "/api/sessions", nil, noAuth); st != 401 {
		t.Fatalf("no token: %d", st)
	}
	// Someone else's session is a 404 everywhere, like a missing one.
	for _, p := range []struct{ m, path string }{
		{"GET", "/api/sessions/" + id}, {"DELETE", "/api/sessions/" + id}, {"GET", "/api/sessions/" + id + "/messages"},
		{"POST", "/api/sessions/" + id + "/prompt"}, {"POST", "/api/sessions/" + id + "/abort"},
		{"GET", "/api/sessions/" + id + "/surfaces"}, {"POST", "/api/sessions/" + id + "/surfaces/demo/increment"},
		{"GET", "/api/sessions/" + id + "/state"}, {"POST", "/api/sessions/" + id + "/state"},
		{"POST", "/api/sessions/" + id + "/ui-response"},
	} {
		var body any
		if p.m == "POST" {
			body = map[string]any{}
			switch {
			case strings.HasSuffix(p.path, "/prompt"):
				body = map[string]any{"message": "x"}
			case strings.HasSuffix(p.path, "/state"):
				body = map[string]any{"key": "a.b", "value": 1}
			case strings.HasSuffix(p.path, "/ui-response"):
				body = map[string]any{"id": "x", "cancelled": true}
			}
		}
		st, out := bob.JSON(p.m, p.path, body)
		if st != 404 || daemon.ErrCode(out) != "not_found" {
			t.Errorf("bob %s %s: %d %v", p.m, p.path, st, out)
		}
	}
	if _, status, _ := testkit.TryOpenSSE(d.URL+"/api/sessions/"+id+"/events", bob.Auth()); status != 404 {
		t.Errorf("bob's stream of alice's session: %d", status)
	}
	if st, out := bob.JSON("GET", "/api/sessions", nil); st != 200 || len(out["sessions"].([]any)) != 0 {
		t.Errorf("bob lists alice's sessions: %v", out)
	}
	// Removing alice's token closes her live stream within a second.
	s := alice.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	daemon.WriteTokens(t, tokens, map[string]string{"bob": "bob-secret-token-1"})
	end := s.Wait(t, 2*time.Second, "revoked", testkit.IsKind("end"))
	if end.Data["reason"] != "revoked" {
		t.Fatalf("%s", end.Raw)
	}
}

func TestHostAndOriginGates(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	paths := []string{"/api/sessions", "/api/sessions/" + id + "/events", "/api/sessions/" + id + "/ws", "/", "/metrics", "/healthz"}
	for _, p := range paths {
		if st, out := d.JSON("GET", p, nil, http.Header{"Host": {"evil.example.com"}}); st != 403 || daemon.ErrCode(out) != "host_not_allowed" {
			t.Errorf("Host gate on %s: %d %v", p, st, out)
		}
		if st, out := d.JSON("GET", p, nil, http.Header{"Origin": {"http://evil.example.com"}}); st != 403 || daemon.ErrCode(out) != "origin_not_allowed" {
			t.Errorf("Origin gate on %s: %d %v", p, st, out)
		}
	}
	if st, _ := d.JSON("GET", "/api/sessions", nil, http.Header{"Origin": {d.URL}}); st != 200 {
		t.Errorf("own origin refused: %d", st)
	}
	if st, _ := d.JSON("GET", "/healthz", nil, http.Header{"Authorization": nil}); st != 200 {
		t.Errorf("healthz: %d", st)
	}
}

// Agent dialogs reach the browser as ui-request frames, stay sticky until
// answered, and the answer reaches the agent.
func TestAgentDialogs(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "ask me"})
	req := s.Wait(t, 5*time.Second, "dialog", testkit.IsKind("ui-request"))
	if req.Data["method"] != "confirm" || req.Data["title"] != "Proceed?" {
		t.Fatalf("%s", req.Raw)
	}
	uiID := req.Data["id"].(string)
	// A client arriving now sees the open dialog in its sticky state.
	late := d.SSE(id, "")
	late.Wait(t, 5*time.Second, "sticky dialog", func(e testkit.Event) bool { return e.Kind == "ui-request" && e.Data["id"] == uiID })
	late.Close()

	if st, out := d.JSON("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": uiID, "confirmed": true}); st != 200 {
		t.Fatalf("ui-response: %d %v", st, out)
	}
	s.Wait(t, 5*time.Second, "resolved", func(e testkit.Event) bool { return e.Kind == "ui-request" && e.Data["resolved"] == true })
	var text strings.Builder
	for {
		ev := s.Wait(t, 5*time.Second, "reply", testkit.IsKind("chat"))
		if ev.Data["type"] == "text-delta" {
			text.WriteString(ev.Data["delta"].(string))
		}
		if ev.Data["type"] == "finish" {
			break
		}
	}
	if !strings.Contains(text.String(), `"confirmed":true`) {
		t.Fatalf("the agent did not get the answer: %q", text.String())
	}
	// Answered dialogs are gone: a second answer is a 409, and a new client
	// does not see it.
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": uiID, "confirmed": true}); st != 409 {
		t.Fatalf("second answer: %d %v", st, out)
	}
	again := d.SSE(id, "")
	again.Wait(t, 5*time.Second, "sticky state", testkit.IsStatus("ready"))
	time.Sleep(100 * time.Millisecond)
	for _, e := range again.All() {
		if e.Kind == "ui-request" {
			t.Fatalf("an answered dialog is still sticky: %s", e.Raw)
		}
	}

	// Abort cancels a pending dialog: the agent hears cancelled.
	d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "ask again"})
	req2 := s.Wait(t, 5*time.Second, "dialog 2", func(e testkit.Event) bool { return e.Kind == "ui-request" && e.Data["resolved"] == nil })
	d.JSON("POST", "/api/sessions/"+id+"/abort", nil)
	s.Wait(t, 5*time.Second, "resolved by abort", func(e testkit.Event) bool {
		return e.Kind == "ui-request" && e.Data["id"] == req2.Data["id"] && e.Data["resolved"] == true
	})
	s.Wait(t, 5*time.Second, "finish", testkit.IsChat("finish"))
}

func TestMetrics(t *testing.T) {
	d := daemon.Start(t, daemon.Limits(surfaced.Limits{ReplayFrames: 8, RestartBackoff: 20 * time.Millisecond}))
	id := d.Create(nil)
	s := d.SSE(id, "")
	first := s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "badline"})
	s.Wait(t, 5*time.Second, "finish", testkit.IsChat("finish"))
	d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/crash", nil)
	s.Wait(t, 5*time.Second, "restarted", testkit.IsStatus("ready"))
	last := s.LastID()
	s.Close()
	resumed := d.SSE(id, last)
	for i := 0; i < 10; i++ {
		d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil)
	}
	resumed.Wait(t, 5*time.Second, "resumed frames", testkit.IsKind("state"))
	d.SSE(id, first.ID).Wait(t, 5*time.Second, "resync", testkit.IsKind("resync"))
	st, out := d.JSON("GET", "/metrics", nil)
	body := out["_raw"].(string)
	if st != 200 {
		t.Fatalf("metrics: %d", st)
	}
	for _, want := range []string{
		"surfaced_sessions_active 1",
		"surfaced_sessions_created_total 1",
		`surfaced_clients{kind="sse"}`,
		`surfaced_frames_total{kind="chat"}`,
		`surfaced_subscriptions_total{mode="fresh"}`,
		`surfaced_subscriptions_total{mode="resumed"} 1`,
		`surfaced_subscriptions_total{mode="resync"} 1`,
		"surfaced_agent_restarts_total 1",
		`surfaced_agent_exits_total{reason="crashed"} 1`,
		`surfaced_jsonl_errors_total{code="invalid_json"} 1`,
		`surfaced_jsonl_errors_total{code="missing_type"} 1`,
		"surfaced_prompts_total 1",
		"surfaced_dispatch_workers ",
		"surfaced_dispatch_workers_started_total ",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A client whose socket stops taking data is cut when a write has been
// blocked for the queue's age, even when no more frames come to find it
// behind: the cut is counted at once, and the client, reading again, finds
// end{slow_consumer} behind what was blocked.
func TestSlowConsumerCutWhenTheWriteStalls(t *testing.T) {
	d := daemon.Start(t, daemon.Gateway(gateway.Limits{QueueBytes: 64 << 20, QueueAge: 2 * time.Second}))
	// The frames fill the stalled client's socket buffers well inside the
	// age bound; then nothing more comes.
	slow := stalledBehindFastClient(t, d)
	testkit.Eventually(t, 15*time.Second, func() bool {
		_, out := d.JSON("GET", "/metrics", nil)
		return strings.Contains(out["_raw"].(string), `surfaced_slow_consumer_cuts_total{kind="sse"} 1`)
	}, "the cut counted")
	rest := slow.ReadAll(t, 30*time.Second)
	if !strings.Contains(rest, "event: end\ndata: {\"reason\":\"slow_consumer\"}") {
		t.Fatalf("the stalled client was not told end{slow_consumer}; tail: %q", tail(rest, 300))
	}
}
