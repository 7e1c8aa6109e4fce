package mcpgw_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// post sends body to the mount with the headers of a stateless tools/call
// of run_command (changed by hdr) and returns the status, the content type
// and the JSON-RPC message of the answer, with the answer's bytes as they
// came.
func post(t *testing.T, d *daemon.Daemon, body string, hdr map[string]string) (int, string, map[string]any, string) {
	t.Helper()
	resp := send(t, d, "/mcp", body, withHeaders(v2026("tools/call", "run_command"), hdr))
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	data := string(b)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(data))
		sc.Buffer(nil, 1<<20)
		data = ""
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = d
			}
		}
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(data), &m)
	return resp.StatusCode, resp.Header.Get("Content-Type") + "; " + resp.Header.Get("Cache-Control"), m, string(b)
}

// callBody is a stateless tools/call of run_command with this id and these
// arguments; extraMeta adds keys to its _meta.
func callBody(id, args, extraMeta string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_command","arguments":` + args + `,` +
		meta2026("")[:len(meta2026(""))-1] + extraMeta + `}}}`
}

// sdkOnly is a _meta key the SDK ignores and the mount does not serve
// itself: the same request, answered by the SDK.
const sdkOnly = `,"io.example/ignored":true`

// statefulCall is a tools/call of run_command in a stateful session;
// extraMeta, when set, is its _meta's content.
func statefulCall(id, args, extraMeta string) string {
	meta := ""
	if extraMeta != "" {
		meta = `,"_meta":{` + extraMeta[1:] + `}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_command","arguments":` + args + meta + `}}`
}

// initialize opens a stateful MCP session as a plain client would and
// returns the headers of its requests.
func initialize(t *testing.T, d *daemon.Daemon) map[string]string {
	t.Helper()
	hdr := map[string]string{"Mcp-Protocol-Version": "", "Mcp-Method": "", "Mcp-Name": ""}
	resp := send(t, d, "/mcp", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"plain","version":"1"}}}`, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	hdr["Mcp-Session-Id"], hdr["Mcp-Protocol-Version"] = sid, "2025-11-25"
	if st, _, _, body := post(t, d, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr); st != 202 {
		t.Fatalf("notifications/initialized: %d %s", st, body)
	}
	return hdr
}

// TestFastCallAnswersAsTheSDK: the tools/call of run_command the mount
// serves itself, stateless or in a stateful session, answers what the SDK
// answers for the same request — status, headers, the JSON-RPC message —
// for results, command failures, arguments that do not fit, and sessions
// that are not the caller's.
func TestFastCallAnswersAsTheSDK(t *testing.T) {
	d := daemon.Start(t, daemon.Agents(fakeAgent(t, "-schemas")), twoSubjects(t)).As(aliceToken)
	id := d.Create(nil)
	ready(t, d, id)
	other := d.As(bobToken).Create(nil)
	t.Run(stateless, func(t *testing.T) { sameAnswers(t, d, id, other, callBody, nil) })
	t.Run(stateful, func(t *testing.T) { sameAnswers(t, d, id, other, statefulCall, initialize(t, d)) })
}

func sameAnswers(t *testing.T, d *daemon.Daemon, id, other string, callBody func(id, args, extraMeta string) string, hdr map[string]string) {

	for _, c := range []struct{ name, id, args string }{
		{"unknown action", `1`, `{"sessionId":"` + id + `","domain":"demo","action":"nosuch"}`},
		{"command failure", `"a string id"`, `{"sessionId":"` + id + `","domain":"demo","action":"fail"}`},
		{"args that do not fit the command", `-3`, `{"sessionId":"` + id + `","domain":"demo","action":"echo","args":{"text":5}}`},
		{"args that do not fit the tool", `4`, `{"sessionId":7}`},
		{"a field the tool does not have", `5`, `{"sessionId":"` + id + `","domain":"demo","action":"increment","by":2}`},
		{"missing fields", `6`, `{"domain":"demo"}`},
		{"no arguments", `7`, `{}`},
		{"someone else's session", `8`, `{"sessionId":"` + other + `","domain":"demo","action":"increment"}`},
		{"no such session", `9`, `{"sessionId":"nosuchsession0000000000000","domain":"demo","action":"increment"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st1, h1, fast, _ := post(t, d, callBody(c.id, c.args, ""), hdr)
			st2, h2, sdk, _ := post(t, d, callBody(c.id, c.args, sdkOnly), hdr)
			if st1 != st2 || h1 != h2 || !reflect.DeepEqual(fast, sdk) {
				t.Errorf("the mount answered\n  %d %s %v\nthe SDK\n  %d %s %v", st1, h1, fast, st2, h2, sdk)
			}
		})
	}

	// A command that applies: the same answer but for its rev (one more
	// through the SDK, which ran second). The echo's '<' shows who answered:
	// the mount writes JSON without HTML escapes, the SDK with them.
	args := `{"sessionId":"` + id + `","domain":"demo","action":"echo","args":{"text":"<fits>"}}`
	st1, h1, fast, rawFast := post(t, d, callBody("10", args, ""), hdr)
	st2, h2, sdk, rawSDK := post(t, d, callBody("10", args, sdkOnly), hdr)
	if !strings.Contains(rawFast, `<fits>`) || !strings.Contains(rawSDK, `\u003cfits\u003e`) {
		t.Fatalf("not the paths expected:\n mount: %s\n SDK: %s", rawFast, rawSDK)
	}
	rev := func(m map[string]any) float64 {
		sc, _ := m["result"].(map[string]any)["structuredContent"].(map[string]any)
		r, _ := sc["rev"].(float64)
		delete(sc, "rev")
		delete(sc["data"].(map[string]any), "size") // the echo's log grows
		res := m["result"].(map[string]any)
		res["content"] = nil // the same structured content, as text
		return r
	}
	r1, r2 := rev(fast), rev(sdk)
	if st1 != 200 || st1 != st2 || h1 != h2 || r1 == 0 || r2 != r1+1 || !reflect.DeepEqual(fast, sdk) {
		t.Errorf("the mount answered\n  %d %s rev %v %v\nthe SDK\n  %d %s rev %v %v", st1, h1, r1, fast, st2, h2, r2, sdk)
	}
}

// TestFastCallLeavesTheRestToTheSDK: a request the mount does not serve
// itself in full goes to the SDK unchanged, which answers or refuses it as
// it does any request; nothing is applied by a refused one.
func TestFastCallLeavesTheRestToTheSDK(t *testing.T) {
	d := daemon.Start(t, daemon.Agents(fakeAgent(t, "-schemas")))
	id := d.Create(nil)
	ready(t, d, id)
	inc := `{"sessionId":"` + id + `","domain":"demo","action":"increment"}`
	for _, c := range []struct {
		name, body string
		hdr        map[string]string
		status     int
		want       string // in the answer's bytes
	}{
		{"Mcp-Name names another tool", strings.Replace(callBody("1", inc, ""), `"run_command"`, `"read_snapshot"`, 1), nil, 400, "Mcp-Name"},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":` + inc + `}}`, nil, 400, "_meta"},
		{"_meta of another version", strings.Replace(callBody("1", inc, ""), `"2026-07-28"`, `"2025-11-25"`, 1), nil, 400, "does not match"},
		{"a batch", "[" + callBody("1", inc, "") + "]", nil, 400, ""},
		{"not JSON", callBody("1", inc, "")[:40], nil, 400, ""},
		{"accepts no event stream", callBody("1", inc, ""), map[string]string{"Accept": "application/json"}, 400, "Accept"},
		{"wrong content type", callBody("1", inc, ""), map[string]string{"Content-Type": "text/plain"}, 415, ""},
		{"too large", callBody("1", `{"sessionId":"`+id+`","domain":"demo","action":"echo","args":{"text":"`+strings.Repeat("x", 5<<20)+`"}}`, ""), nil, 413, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := demoRev(t, d, id)
			st, _, _, body := post(t, d, c.body, c.hdr)
			if st != c.status || !strings.Contains(body, c.want) {
				t.Errorf("%d %s, want %d with %q", st, body, c.status, c.want)
			}
			if after := demoRev(t, d, id); after != before {
				t.Errorf("rev %v after a refused request, was %v", after, before)
			}
		})
	}
	// What the SDK takes and the mount does not serve itself (a progress
	// token, a field it ignores, bytes after the request) still runs the
	// command, through the SDK.
	for _, body := range []string{
		callBody("4", inc, "") + ` {}`,
		callBody("2", inc, `,"progressToken":"p1"`),
		strings.Replace(callBody("3", inc, ""), `"jsonrpc":"2.0"`, `"jsonrpc":"2.0","extra":1`, 1),
	} {
		before := demoRev(t, d, id)
		st, _, msg, raw := post(t, d, body, nil)
		res, _ := msg["result"].(map[string]any)
		if st != 200 || res == nil || res["isError"] == true || demoRev(t, d, id) != before+1 {
			t.Errorf("%s: %d %s", body, st, raw)
		}
	}

	// A stateful session's: a progress token goes to the SDK; a session
	// that was closed, or never opened, is the SDK's 404 before anything
	// runs.
	hdr := initialize(t, d)
	before := demoRev(t, d, id)
	if st, _, _, raw := post(t, d, statefulCall("1", inc, `,"progressToken":"p1"`), hdr); st != 200 || demoRev(t, d, id) != before+1 {
		t.Errorf("with a progress token: %d %s", st, raw)
	}
	req, _ := http.NewRequest("DELETE", d.MCPURL, nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Mcp-Session-Id", hdr["Mcp-Session-Id"])
	req.Header.Set("Mcp-Protocol-Version", hdr["Mcp-Protocol-Version"])
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	for _, sid := range []string{hdr["Mcp-Session-Id"], "NOSUCHSESSION"} {
		hdr["Mcp-Session-Id"] = sid
		before := demoRev(t, d, id)
		if st, _, _, raw := post(t, d, statefulCall("2", inc, ""), hdr); st != 404 || demoRev(t, d, id) != before {
			t.Errorf("session %s: %d %s", sid, st, raw)
		}
	}
}
