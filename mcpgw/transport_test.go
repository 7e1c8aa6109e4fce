package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// raw posts body to the mount as a client would, with the token and the
// headers given, and reads the answer: its status, and its JSON-RPC
// messages (the SSE events' data, or the JSON body).
func raw(t *testing.T, d *daemon.Daemon, path, body string, hdr map[string]string) (int, []map[string]any, string) {
	t.Helper()
	resp := send(t, d, path, body, hdr)
	defer resp.Body.Close()
	var msgs []map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					msgs = append(msgs, m)
					if _, final := m["id"]; final && (m["result"] != nil || m["error"] != nil) {
						break
					}
				}
			}
		}
		return resp.StatusCode, msgs, ""
	}
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		msgs = append(msgs, m)
	}
	return resp.StatusCode, msgs, string(b)
}

// send posts body to the mount with the token, a JSON body's headers and
// the headers given (an empty value removes one; "Host" sets the request's
// host), within 20 s.
func send(t *testing.T, d *daemon.Daemon, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", d.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		switch {
		case v == "":
			req.Header.Del(k)
		case k == "Host":
			req.Host = v
		default:
			req.Header.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// v2026 are the headers of a stateless request.
func v2026(method, name string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": stateless, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

func meta2026(extra string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}` + extra
}

// TestBadInput: malformed JSON-RPC, an unknown tool and args that do not
// fit a command's schema get clear errors, and nothing is applied.
func TestBadInput(t *testing.T) {
	d := daemon.Start(t, daemon.Agents(fakeAgent(t, "-schemas")))
	id := d.Create(nil)
	ready(t, d, id)

	for _, c := range []struct {
		name, body string
		hdr        map[string]string
		status     int
		want       string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, nil, 400, ""},
		{"not JSON (stateless)", `{"jsonrpc":"2.0","id":1,`, v2026("tools/list", ""), 400, ""},
		{"a method that is not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, nil, 400, ""},
		{"not a JSON-RPC message", `[1,2,3]`, nil, 400, ""},
		{"wrong content type", `{}`, map[string]string{"Content-Type": "text/plain"}, 415, ""},
		{"accepts no event stream", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, map[string]string{"Accept": "application/json"}, 400, ""},
		{"unknown method (stateless)", `{"jsonrpc":"2.0","id":1,"method":"frobnicate","params":{` + meta2026("") + `}}`, v2026("frobnicate", ""), 404, "-32601"},
		{"a session id nobody gave out", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": "nope", "Mcp-Protocol-Version": stateful}, 404, ""},
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":"` + strings.Repeat("x", 5<<20) + `"}}}`, nil, 413, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, msgs, body := raw(t, d, "/mcp", c.body, c.hdr)
			if st != c.status {
				t.Errorf("status %d, want %d: %v %s", st, c.status, msgs, body)
			}
			if c.want != "" {
				b, _ := json.Marshal(msgs)
				if !strings.Contains(string(b), c.want) {
					t.Errorf("answer %s lacks %s", b, c.want)
				}
			}
		})
	}

	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			c := connect(t, d, d.Token, "/mcp", v)
			// An unknown tool is a protocol error, -32602.
			_, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
			var we *jsonrpc.Error
			if err == nil || !(strings.Contains(err.Error(), "-32602") || (asRPC(err, &we) && we.Code == jsonrpc.CodeInvalidParams)) {
				t.Errorf("unknown tool: %v", err)
			}
			// A tool's own args that do not fit its schema: isError.
			out, res := c.call(t, "run_command", map[string]any{"sessionId": 7})
			if !res.IsError {
				t.Errorf("run_command with a number for sessionId: %v", out)
			}
			// A command's args that do not fit the agent's schema: isError,
			// invalid_args, nothing applied.
			before := demoRev(t, d, id)
			for _, args := range []any{map[string]any{"text": 5}, map[string]any{}, map[string]any{"text": "x", "extra": true}, []any{1}, "text"} {
				out, res := c.call(t, "run_command", map[string]any{"sessionId": id, "domain": "demo", "action": "echo", "args": args})
				if !res.IsError || (errCode(out) != "invalid_args") {
					t.Errorf("echo %v: %v", args, out)
				}
			}
			if after := demoRev(t, d, id); after != before {
				t.Errorf("rev %v after refused commands, was %v", after, before)
			}
			out, res = c.call(t, "run_command", map[string]any{"sessionId": id, "domain": "demo", "action": "echo", "args": map[string]any{"text": "fits"}})
			if res.IsError || out["rev"] != before+1 {
				t.Errorf("echo that fits: %v", out)
			}
			// A command's own failure is a tool result with its code.
			out, res = c.call(t, "run_command", map[string]any{"sessionId": id, "domain": "demo", "action": "fail"})
			if !res.IsError || errCode(out) != "nope" {
				t.Errorf("fail: %v", out)
			}
			out, res = c.call(t, "run_command", map[string]any{"sessionId": id, "domain": "demo", "action": "nosuch"})
			if !res.IsError || errCode(out) != "unknown_action" {
				t.Errorf("nosuch: %v", out)
			}
		})
	}
	// The browser's HTTP API checks the same schema (the domain actor does).
	st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/echo", map[string]any{"args": map[string]any{"text": 5}})
	if st != 200 || out["ok"] != false || daemon.ErrCode(out) != "invalid_args" {
		t.Errorf("HTTP echo with a number: %d %v", st, out)
	}
}

func asRPC(err error, we **jsonrpc.Error) bool { return errors.As(err, we) }

func demoRev(t *testing.T, d *daemon.Daemon, id string) float64 {
	t.Helper()
	_, out := d.JSON("GET", "/api/sessions/"+id+"/state", nil)
	return out["entries"].(map[string]any)["surface:demo"].(map[string]any)["rev"].(float64)
}

// TestHostAndOriginGates: the mount is behind the same gates as /acp (DNS
// rebinding: a Host the daemon does not answer to, an Origin it does not
// allow), for both protocol versions.
func TestHostAndOriginGates(t *testing.T) {
	d := daemon.Start(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026("") + `}}`
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
		code string
	}{
		{"rebound host", map[string]string{"Host": "evil.example:" + port(d)}, init, "host_not_allowed"},
		{"rebound host (stateless)", withHeaders(v2026("tools/list", ""), map[string]string{"Host": "attacker.test"}), list, "host_not_allowed"},
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, init, "origin_not_allowed"},
		{"foreign origin (stateless)", withHeaders(v2026("tools/list", ""), map[string]string{"Origin": "https://evil.example"}), list, "origin_not_allowed"},
		{"null origin", map[string]string{"Origin": "null"}, init, "origin_not_allowed"},
		{"no token", map[string]string{"Authorization": ""}, init, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, msgs, body := raw(t, d, "/mcp", c.body, c.hdr)
			want := http.StatusForbidden
			if c.code == "" {
				want = http.StatusUnauthorized
			}
			if st != want || !strings.Contains(body, c.code) {
				t.Errorf("%d %v %s", st, msgs, body)
			}
		})
	}
	// The daemon's own origin passes.
	st, msgs, _ := raw(t, d, "/mcp", init, map[string]string{"Origin": d.URL})
	if st != 200 || len(msgs) == 0 || msgs[0]["result"] == nil {
		t.Errorf("own origin: %d %v", st, msgs)
	}
}

func port(d *daemon.Daemon) string { return d.Addr[strings.LastIndex(d.Addr, ":")+1:] }

func withHeaders(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// TestListenRefused: a 2026-07-28 subscriptions/listen naming another
// subject's session answers as for a missing one.
func TestListenRefused(t *testing.T) {
	d := daemon.Start(t, twoSubjects(t))
	alice := d.As(aliceToken)
	id := alice.Create(nil)
	ready(t, alice, id)
	bob := d.As(bobToken)
	var answers []string
	for _, sid := range []string{id, strings.Repeat("a", len(id))} {
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + meta2026(`,"notifications":{"resourceSubscriptions":["surfaced://sessions/`+sid+`/surfaces/demo"]}`) + `}}`
		st, msgs, _ := raw(t, bob, "/mcp", body, v2026("subscriptions/listen", ""))
		if len(msgs) == 0 {
			t.Fatalf("listen %s: %d %v", sid, st, msgs)
		}
		last := msgs[len(msgs)-1]
		e, _ := last["error"].(map[string]any)
		if e == nil || e["code"] != float64(jsonrpc.CodeInvalidParams) {
			t.Errorf("listen %s: %v", sid, msgs)
		}
		answers = append(answers, strings.ReplaceAll(e["message"].(string), sid, "ID"))
	}
	if answers[0] != answers[1] {
		t.Errorf("foreign %q, missing %q", answers[0], answers[1])
	}
}

// TestSessionTools: a client attached to a session sees its commands as
// tools with the declared schemas, and runs them; a session it does not own
// is not found.
func TestSessionTools(t *testing.T) {
	d := daemon.Start(t, daemon.Agents(fakeAgent(t, "-schemas")))
	id := d.Create(nil)
	ready(t, d, id)
	browser := d.SSE(id, "")
	defer browser.Close()
	for i, v := range versions {
		t.Run(v, func(t *testing.T) {
			c := connect(t, d, d.Token, "/mcp/sessions/"+id, v)
			tools, err := c.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*mcp.Tool{}
			for _, tl := range tools.Tools {
				byName[tl.Name] = tl
			}
			inc, echo := byName["demo_increment"], byName["demo_echo"]
			if inc == nil || echo == nil || byName["prompt"] == nil {
				t.Fatalf("tools: %v", names(tools.Tools))
			}
			schema, _ := json.Marshal(echo.InputSchema)
			if !strings.Contains(string(schema), `"required":["text"]`) || echo.Description == "" || !strings.HasPrefix(echo.Description, "Append text to the log.") {
				t.Errorf("demo_echo: %s %q", schema, echo.Description)
			}
			if s, _ := json.Marshal(inc.InputSchema); string(s) != `{"type":"object"}` {
				t.Errorf("demo_increment: %s", s)
			}
			out, res := c.call(t, "demo_increment", map[string]any{})
			if res.IsError || out["rev"] != float64(2+i) {
				t.Fatalf("demo_increment: %v", out)
			}
			browser.Wait(t, 10*time.Second, "the browser sees it", func(e testkit.Event) bool {
				return e.Kind == "state" && e.Data["rev"] == float64(2+i)
			})
			out, res = c.call(t, "demo_echo", map[string]any{"text": 3})
			if !res.IsError || errCode(out) != "invalid_args" {
				t.Errorf("demo_echo with a number: %v", out)
			}
			rs, err := c.ListResources(context.Background(), nil)
			if err != nil || len(rs.Resources) != 2 || rs.Resources[0].URI != "surfaced://sessions/"+id+"/surfaces/demo" {
				t.Errorf("resources/list: %v %v", rs, err)
			}
		})
	}
	// Another subject attached to it: not found (initialize passes, the
	// session's tools do not).
	for _, p := range []string{"/mcp/sessions/a/b", "/mcp/other", "/mcp/sessions/"} {
		if st, _, body := raw(t, d, p, `{}`, nil); st != 404 {
			t.Errorf("%s: %d %s", p, st, body)
		}
	}
}

func names(ts []*mcp.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}
