package acpgw_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// Bad input, one test each: a clear error, and nothing lost.

func initBody() []byte {
	return daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": 1}})
}

func TestPostNotJSON(t *testing.T) {
	d := daemon.Start(t)
	h := http.Header{"Authorization": {"Bearer " + d.Token}, "Content-Type": {"text/plain"}}
	st, body, _ := d.SendACP(t, "POST", initBody(), h)
	if st != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") {
		t.Fatalf("%d %s", st, body)
	}
	// With a charset parameter it is JSON.
	h.Set("Content-Type", "application/json; charset=utf-8")
	if st, body, _ := d.SendACP(t, "POST", initBody(), h); st != http.StatusOK {
		t.Fatalf("%d %s", st, body)
	}
}

func TestPostBatch(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	batch := daemon.MustJSON([]any{map[string]any{"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": map[string]any{}}})
	st, body, _ := d.SendACP(t, "POST", batch, c.Header(""))
	if st != http.StatusNotImplemented || !strings.Contains(body, "batches") {
		t.Fatalf("%d %s", st, body)
	}
	// Nothing of the batch ran, and the connection still works.
	if res := c.Call("session/list", map[string]any{}); res["result"] == nil {
		t.Fatalf("after a batch: %v", res)
	}
	for _, e := range c.Conn.All() {
		if e.Data["id"] == float64(5) {
			t.Fatalf("a batch entry was answered: %v", e.Data)
		}
	}
}

func TestPostInvalidJSON(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	for _, body := range []string{`{"jsonrpc":"2.0","id":1,`, `"hello"`, `{"id":1,"method":"session/list"}`, `{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":{},"method":"session/list"}`, `{"jsonrpc":"2.0","id":1,"method":"session/list","params":3}`} {
		st, resp, _ := d.SendACP(t, "POST", []byte(body), c.Header(""))
		if st != http.StatusBadRequest || !strings.Contains(resp, "Invalid JSON-RPC message") {
			t.Errorf("%s: %d %s", body, st, resp)
		}
	}
}

func TestMissingAndUnknownConnectionID(t *testing.T) {
	d := daemon.Start(t)
	auth := http.Header{"Authorization": {"Bearer " + d.Token}}
	list := daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": map[string]any{}})
	if st, body, _ := d.SendACP(t, "POST", list, auth); st != http.StatusBadRequest || !strings.Contains(body, "Missing Acp-Connection-Id") {
		t.Errorf("missing: %d %s", st, body)
	}
	unknown := http.Header{"Authorization": {"Bearer " + d.Token}, acpgw.HeaderConnectionID: {"nope"}}
	if st, body, _ := d.SendACP(t, "POST", list, unknown); st != http.StatusNotFound || !strings.Contains(body, "Unknown Acp-Connection-Id") {
		t.Errorf("unknown: %d %s", st, body)
	}
	unknown.Set("Accept", "text/event-stream")
	if st, body, _ := d.SendACP(t, "GET", nil, unknown); st != http.StatusNotFound {
		t.Errorf("GET unknown: %d %s", st, body)
	}
	if st, body, _ := d.SendACP(t, "DELETE", nil, unknown); st != http.StatusNotFound {
		t.Errorf("DELETE unknown: %d %s", st, body)
	}
	if st, body, _ := d.SendACP(t, "DELETE", nil, auth); st != http.StatusBadRequest {
		t.Errorf("DELETE missing: %d %s", st, body)
	}
	// initialize on an existing connection is refused, not a second one.
	c := d.ACPClient()
	c.Initialize()
	if st, body, _ := d.SendACP(t, "POST", initBody(), c.Header("")); st != http.StatusBadRequest || !strings.Contains(body, "initialize is not allowed") {
		t.Errorf("initialize again: %d %s", st, body)
	}
	// A deleted connection is gone, and says why.
	if st, _, _ := d.SendACP(t, "DELETE", nil, c.Header("")); st != http.StatusAccepted {
		t.Fatalf("DELETE: %d", st)
	}
	if st, body, _ := d.SendACP(t, "POST", list, c.Header("")); st != http.StatusNotFound || !strings.Contains(body, "closed by the client") {
		t.Errorf("after DELETE: %d %s", st, body)
	}
	select {
	case <-c.Conn.Done():
	case <-time.After(5 * time.Second):
		t.Error("the connection stream did not end after DELETE")
	}
}

func TestMismatchedSessionID(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	prompt := func(id int) []byte {
		return daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/prompt",
			"params": map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}})
	}
	if st, body, _ := d.SendACP(t, "POST", prompt(50), c.Header("another-session")); st != http.StatusBadRequest || !strings.Contains(body, "Mismatched Acp-Session-Id") {
		t.Errorf("mismatched: %d %s", st, body)
	}
	if st, body, _ := d.SendACP(t, "POST", prompt(51), c.Header("")); st != http.StatusBadRequest || !strings.Contains(body, "Missing Acp-Session-Id") {
		t.Errorf("missing: %d %s", st, body)
	}
	// Neither ran: the next prompt is the session's first.
	id := c.Prompt(sid, "first")
	text, _, resp := c.Turn(sid, id)
	if text != "echo: first" || daemon.StopReason(resp) != "end_turn" {
		t.Fatalf("%q %v", text, resp)
	}
}

func TestGetWrongAccept(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	h := c.Header("")
	h.Set("Accept", "application/json")
	if st, body, _ := d.SendACP(t, "GET", nil, h); st != http.StatusNotAcceptable || !strings.Contains(body, "text/event-stream") {
		t.Errorf("%d %s", st, body)
	}
	h.Del("Accept")
	if st, _, _ := d.SendACP(t, "GET", nil, h); st != http.StatusNotAcceptable {
		t.Errorf("no Accept: %d", st)
	}
}

func TestSecondReaderConflict(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	_, status, body := testkit.TryOpenSSE(d.ACPURL, c.Header(""))
	if status != http.StatusConflict {
		t.Fatalf("second reader of the connection stream: %d %s", status, body)
	}
}

func TestStreamHeadersFlushAtOnce(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	// A session stream with nothing to say still answers at once.
	done := make(chan int, 1)
	go func() {
		s, st, _ := testkit.TryOpenSSE(d.ACPURL, c.Header("no-such-session-yet"))
		if s != nil {
			defer s.Close()
		}
		done <- st
	}()
	select {
	case st := <-done:
		if st != http.StatusOK {
			t.Fatalf("status %d", st)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the stream's headers did not arrive at once")
	}
}

func TestUnknownMethod(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	for _, m := range []string{"session/fly", "session/set_mode", "authenticate", "_vendor/thing"} {
		params := map[string]any{}
		sid := ""
		if m == "session/set_mode" {
			sid = "s1"
			params = map[string]any{"sessionId": sid, "modeId": "x"}
		}
		res := c.Response(streamOrConn(c, sid), c.Request(m, params, sid))
		if code, msg, data := daemon.RPCError(res); code != -32601 || msg != "Method not found" || data["method"] != m {
			t.Errorf("%s: %v", m, res)
		}
	}
}

// streamOrConn is the stream a request's answer comes on.
func streamOrConn(c *daemon.ACPClient, sid string) *testkit.SSE {
	if sid == "" {
		return c.Conn
	}
	return c.Stream(sid)
}

func TestInvalidParamsNameTheField(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	cwd := daemon.TempDir(t)
	cases := []struct {
		method string
		params any
		field  string
	}{
		{"session/new", map[string]any{"mcpServers": []any{}}, "cwd"},
		{"session/new", map[string]any{"cwd": "relative/dir", "mcpServers": []any{}}, "cwd"},
		{"session/new", map[string]any{"cwd": cwd}, "mcpServers"},
		{"session/new", map[string]any{"cwd": 7, "mcpServers": []any{}}, "cwd"},
		{"session/list", map[string]any{"cwd": "not/absolute"}, "cwd"},
		{"session/list", map[string]any{"cursor": "garbage!"}, "cursor"},
	}
	for _, tc := range cases {
		res := c.Call(tc.method, tc.params)
		code, msg, data := daemon.RPCError(res)
		if code != -32602 || data["field"] != tc.field || !strings.Contains(msg, tc.field) {
			t.Errorf("%s %v: %v", tc.method, tc.params, res)
		}
	}
	// Session-scoped ones come on the session's stream.
	sid := c.NewSession(cwd)
	for _, tc := range []struct {
		params any
		field  string
	}{
		{map[string]any{"sessionId": sid}, "prompt"},
		{map[string]any{"sessionId": sid, "prompt": "text"}, "prompt"},
		{map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"text": "no type"}}}, "prompt[0].type"},
		{map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text"}}}, "prompt[0].text"},
	} {
		res := c.Response(c.Stream(sid), c.Request("session/prompt", tc.params, sid))
		code, msg, data := daemon.RPCError(res)
		if code != -32602 || data["field"] != tc.field || !strings.Contains(msg, "Invalid params") {
			t.Errorf("prompt %v: %v", tc.params, res)
		}
	}
	// initialize: 400 with the JSON-RPC error as the body; no connection.
	st, body, h := d.SendACP(t, "POST", daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": map[string]any{}}),
		http.Header{"Authorization": {"Bearer " + d.Token}})
	var res map[string]any
	_ = json.Unmarshal([]byte(body), &res)
	if code, _, data := daemon.RPCError(res); st != http.StatusBadRequest || code != -32602 || data["field"] != "protocolVersion" || h.Get(acpgw.HeaderConnectionID) != "" {
		t.Errorf("initialize without protocolVersion: %d %s", st, body)
	}
}

func TestPromptUnsupportedBlock(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	for _, tc := range []struct {
		block map[string]any
		want  string
	}{
		{map[string]any{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}, `"audio"`},
		{map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///x", "text": "x"}}, `"resource"`},
		{map[string]any{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}, `"image"`}, // the fake agent takes none
	} {
		id := c.Request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "look"}, tc.block}}, sid)
		res := c.Response(c.Stream(sid), id)
		if code, msg, _ := daemon.RPCError(res); code != -32602 || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %v", tc.block, res)
		}
	}
	// No text at all.
	id := c.Request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{}}, sid)
	if code, msg, _ := daemon.RPCError(c.Response(c.Stream(sid), id)); code != -32602 || !strings.Contains(msg, "no text") {
		t.Errorf("empty prompt: %d %s", code, msg)
	}
	// A resource link reaches the agent as "name (uri)".
	id = c.Request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{
		map[string]any{"type": "text", "text": "see"},
		map[string]any{"type": "resource_link", "name": "main.go", "uri": "file:///src/main.go"}}}, sid)
	text, _, resp := c.Turn(sid, id)
	if text != "echo: see\n\nmain.go (file:///src/main.go)" || daemon.StopReason(resp) != "end_turn" {
		t.Errorf("resource link: %q %v", text, resp)
	}
}

// writeTokens writes a tokens file for subjects -> tokens.
func writeTokens(t *testing.T, entries map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.json")
	daemon.WriteTokens(t, path, entries)
	return path
}

const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef01"
)

func twoSubjects(t *testing.T) daemon.Option {
	path := writeTokens(t, map[string]string{"alice": aliceToken, "bob": bobToken})
	return daemon.Guard(func(g *guard.Config) { g.TokensFile = path })
}

func TestForeignAndMissingSessionsAnswerAlike(t *testing.T) {
	d := daemon.Start(t, twoSubjects(t))
	alice := d.ACPClient()
	alice.Token = aliceToken
	alice.Initialize()
	aliceSession := alice.NewSession(daemon.TempDir(t))

	bob := d.ACPClient()
	bob.Token = bobToken
	bob.Initialize()
	cwd := daemon.TempDir(t)
	strip := func(res map[string]any) string {
		delete(res, "id")
		return string(daemon.MustJSON(res))
	}
	for _, tc := range []struct {
		method string
		params func(sid string) map[string]any
	}{
		{"session/load", func(sid string) map[string]any {
			return map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}
		}},
		{"session/resume", func(sid string) map[string]any { return map[string]any{"sessionId": sid, "cwd": cwd} }},
		{"session/prompt", func(sid string) map[string]any {
			return map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "hi"}}}
		}},
		{"session/close", func(sid string) map[string]any { return map[string]any{"sessionId": sid} }},
	} {
		answer := func(sid string) string {
			id := bob.Request(tc.method, tc.params(sid), sid)
			s := bob.Stream(sid)
			if tc.method == "session/load" {
				s = bob.Conn
			}
			return strip(bob.Response(s, id))
		}
		foreign, missing := answer(aliceSession), answer("abcdefghijklmnopqrstuvwxyz")
		if foreign != missing || !strings.Contains(foreign, `"code":-32002`) || !strings.Contains(foreign, `"message":"No such session."`) {
			t.Errorf("%s: foreign %s, missing %s", tc.method, foreign, missing)
		}
	}
	// Bob's list does not show Alice's session; Alice's does.
	if res := bob.Call("session/list", map[string]any{}); len(res["result"].(map[string]any)["sessions"].([]any)) != 0 {
		t.Errorf("bob's list: %v", res)
	}
	if res := alice.Call("session/list", map[string]any{}); len(res["result"].(map[string]any)["sessions"].([]any)) != 1 {
		t.Errorf("alice's list: %v", res)
	}
	// Nothing Bob sent reached Alice's session.
	id := alice.Prompt(aliceSession, "mine")
	if text, _, _ := alice.Turn(aliceSession, id); text != "echo: mine" {
		t.Errorf("alice's session saw %q", text)
	}
}

func TestConnectionBoundToSubject(t *testing.T) {
	d := daemon.Start(t, twoSubjects(t))
	alice := d.ACPClient()
	alice.Token = aliceToken
	alice.Initialize()
	// Bob presents Alice's connection id with his own (valid) token.
	h := alice.Header("")
	h.Set("Authorization", "Bearer "+bobToken)
	list := daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": map[string]any{}})
	if st, body, _ := d.SendACP(t, "POST", list, h); st != http.StatusForbidden {
		t.Errorf("POST: %d %s", st, body)
	}
	h.Set("Accept", "text/event-stream")
	h.Set(acpgw.HeaderSessionID, "x")
	if st, body, _ := d.SendACP(t, "GET", nil, h); st != http.StatusForbidden {
		t.Errorf("GET: %d %s", st, body)
	}
	if st, body, _ := d.SendACP(t, "DELETE", nil, h); st != http.StatusForbidden {
		t.Errorf("DELETE: %d %s", st, body)
	}
	// A bad token is refused before the protocol.
	h.Set("Authorization", "Bearer wrong-token-0000000000")
	st, _, rh := d.SendACP(t, "POST", list, h)
	if st != http.StatusUnauthorized || rh.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("bad token: %d %v", st, rh)
	}
	// Alice's connection is untouched.
	if res := alice.Call("session/list", map[string]any{}); res["result"] == nil {
		t.Errorf("alice: %v", res)
	}
}

func TestNeverOpenedGETIsBounded(t *testing.T) {
	// Six answers to session/list fit (73 bytes each, counted, the largest
	// one aside: one message is never a backlog), a seventh does not.
	const limit = 6
	d := daemon.Start(t, daemon.ACP(func(o *acpgw.Options) { o.BufferBytes = 400 }))
	// A client that never opens its GET streams.
	st, body, h := d.SendACP(t, "POST", initBody(), http.Header{"Authorization": {"Bearer " + d.Token}})
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, body)
	}
	cid := h.Get(acpgw.HeaderConnectionID)
	hdr := http.Header{"Authorization": {"Bearer " + d.Token}, acpgw.HeaderConnectionID: {cid}}
	list := func(id int) []byte {
		return daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/list", "params": map[string]any{}})
	}
	// The answers are buffered, up to the bound...
	for i := 1; i <= limit; i++ {
		if st, body, _ := d.SendACP(t, "POST", list(i), hdr); st != http.StatusAccepted {
			t.Fatalf("request %d: %d %s", i, st, body)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if st, _, _ := d.SendACP(t, "POST", list(100), hdr); st != http.StatusAccepted {
		t.Fatalf("the connection closed before the bound")
	}
	// ... past it the connection closes, with a reason on the bus and for
	// the next request.
	ev := d.Events.Wait(t, "the connection's fault", func(ev any) bool {
		c, ok := ev.(acpgw.ConnectionClosed)
		return ok && c.ConnectionID == cid
	}).(acpgw.ConnectionClosed)
	if !strings.Contains(ev.Fault, "waited for a stream reader") {
		t.Errorf("fault %q", ev.Fault)
	}
	st, body, _ = d.SendACP(t, "POST", list(101), hdr)
	if st != http.StatusNotFound || !strings.Contains(body, "waited for a stream reader") {
		t.Errorf("after the bound: %d %s", st, body)
	}
}

func TestBufferedUntilReaderAttaches(t *testing.T) {
	d := daemon.Start(t)
	st, body, h := d.SendACP(t, "POST", initBody(), http.Header{"Authorization": {"Bearer " + d.Token}})
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, body)
	}
	hdr := http.Header{"Authorization": {"Bearer " + d.Token}, acpgw.HeaderConnectionID: {h.Get(acpgw.HeaderConnectionID)}}
	// session/new answered before any GET: the answer waits for the reader.
	if st, body, _ := d.SendACP(t, "POST", daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "session/new",
		"params": map[string]any{"cwd": daemon.TempDir(t), "mcpServers": []any{}}}), hdr); st != http.StatusAccepted {
		t.Fatalf("%d %s", st, body)
	}
	time.Sleep(300 * time.Millisecond)
	s := testkit.OpenSSE(t, d.ACPURL, hdr)
	ev := s.Wait(t, 10*time.Second, "the buffered answer", func(e testkit.Event) bool { return e.Data["id"] == float64(7) })
	if ev.Data["result"].(map[string]any)["sessionId"] == "" {
		t.Fatalf("%v", ev.Data)
	}
}

func TestAuthAndOriginGates(t *testing.T) {
	d := daemon.Start(t, daemon.Guard(func(g *guard.Config) { g.BrowserOrigins = []string{"http://localhost:5173"} }))
	// No credential: 401 with the challenge, before any protocol.
	st, _, h := d.SendACP(t, "POST", initBody(), http.Header{})
	if st != http.StatusUnauthorized || h.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("no credential: %d %v", st, h)
	}
	// An origin nobody listed is refused, even from loopback.
	hdr := http.Header{"Authorization": {"Bearer " + d.Token}, "Origin": {"http://127.0.0.1:9999"}}
	if st, _, _ := d.SendACP(t, "POST", initBody(), hdr); st != http.StatusForbidden {
		t.Errorf("unlisted origin: %d", st)
	}
	// A listed one is admitted, and can read the connection id.
	hdr.Set("Origin", "http://localhost:5173")
	st, body, h := d.SendACP(t, "POST", initBody(), hdr)
	if st != http.StatusOK || h.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		!strings.Contains(h.Get("Access-Control-Expose-Headers"), acpgw.HeaderConnectionID) {
		t.Errorf("listed origin: %d %s %v", st, body, h)
	}
	// A preflight from it is answered.
	pre := http.Header{"Origin": {"http://localhost:5173"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"acp-connection-id, content-type, authorization"}}
	st, _, h = d.SendACP(t, "OPTIONS", nil, pre)
	if st != http.StatusNoContent || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "DELETE") {
		t.Errorf("preflight: %d %v", st, h)
	}
	// A 401 to a listed origin is readable by the browser client too.
	st, _, h = d.SendACP(t, "POST", initBody(), http.Header{"Origin": {"http://localhost:5173"}})
	if st != http.StatusUnauthorized || h.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("401 without CORS headers: %d %v", st, h)
	}
	// A Host the daemon does not answer to is refused.
	req, _ := http.NewRequest("POST", d.ACPURL, strings.NewReader(string(initBody())))
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d", resp.StatusCode)
	}
}

func TestPathWithSlashAndOthers(t *testing.T) {
	d := daemon.Start(t)
	auth := http.Header{"Authorization": {"Bearer " + d.Token}, "Content-Type": {"application/json"}}
	req, _ := http.NewRequest("POST", d.ACPURL+"/", strings.NewReader(string(initBody())))
	for k, v := range auth {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/acp/: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("POST", d.ACPURL+"/other", strings.NewReader(string(initBody())))
	for k, v := range auth {
		req.Header[k] = v
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/acp/other: %d", resp.StatusCode)
	}
	if st, _, h := d.SendACP(t, "PUT", initBody(), auth); st != http.StatusMethodNotAllowed || h.Get("Allow") == "" {
		t.Errorf("PUT: %d %v", st, h)
	}
}
