package acpgw_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// initialize is an initialize POST's status and body, raw.
func initialize(t *testing.T, d *daemon.Daemon, token string) (int, string) {
	t.Helper()
	st, body, _ := d.SendACP(t, "POST", daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": 1}}), http.Header{"Authorization": {"Bearer " + token}})
	return st, body
}

// Finding 8 of issue 14: one subject may hold so many connections, and a
// connection so many sessions; past either the answer says which cap, and
// nothing is created. Another subject is not affected; a slot comes back
// when a connection or a session is closed.
func TestConnectionAndSessionCaps(t *testing.T) {
	d := daemon.Start(t, twoSubjects(t), daemon.ACP(func(o *acpgw.Options) {
		o.ConnectionsPerSubject = 2
		o.SessionsPerConnection = 2
	}))
	first := d.ACPClient()
	first.Token = aliceToken
	first.Initialize()
	second := d.ACPClient()
	second.Token = aliceToken
	second.Initialize()
	st, body := initialize(t, d, aliceToken)
	if st != http.StatusTooManyRequests || !strings.Contains(body, `"too_many_connections"`) {
		t.Fatalf("a third connection: %d %s", st, body)
	}
	if st, body := initialize(t, d, bobToken); st != http.StatusOK {
		t.Fatalf("bob's first connection: %d %s", st, body)
	}
	if st, body, _ := d.SendACP(t, "DELETE", nil, second.Header("")); st != http.StatusAccepted {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	if st, body := initialize(t, d, aliceToken); st != http.StatusOK {
		t.Fatalf("a connection after one closed: %d %s", st, body)
	}

	cwd := daemon.TempDir(t)
	s1 := first.NewSession(cwd)
	first.NewSession(cwd)
	res := first.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if code, msg, data := daemon.RPCError(res); code != -32603 || data["code"] != "too_many_sessions_on_connection" || !strings.Contains(msg, "it has 2") {
		t.Fatalf("a third session on the connection: %v", res)
	}
	if list := first.Call("session/list", map[string]any{}); len(list["result"].(map[string]any)["sessions"].([]any)) != 2 {
		t.Fatalf("the refused session/new created a session: %v", list)
	}
	// A session of hers made elsewhere cannot be attached either, nor read
	// or named in a request.
	other := d.As(aliceToken).Create(map[string]any{"cwd": cwd})
	resume := daemon.MustJSON(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "session/resume", "params": map[string]any{"sessionId": other, "cwd": cwd}})
	if st, body, _ := d.SendACP(t, "POST", resume, first.Header(other)); st != http.StatusTooManyRequests || !strings.Contains(body, "streams for 2 sessions") {
		t.Fatalf("resume of a third session: %d %s", st, body)
	}
	h := first.Header(other)
	h.Set("Accept", "text/event-stream")
	if st, body, _ := d.SendACP(t, "GET", nil, h); st != http.StatusTooManyRequests {
		t.Fatalf("a stream for a third session: %d %s", st, body)
	}
	closeID := first.Request("session/close", map[string]any{"sessionId": s1}, s1)
	first.Response(first.Stream(s1), closeID)
	first.CloseStream(s1)
	testkit.Eventually(t, 10*time.Second, func() bool {
		st, _, _ := d.SendACP(t, "POST", resume, first.Header(other))
		return st == http.StatusAccepted
	}, "a session slot back")
	// The answer goes to the session's stream.
	if res := first.Response(first.Stream(other), 99); res["result"] == nil {
		t.Fatalf("resume after a session was closed: %v", res)
	}
}
