package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

func reply(id string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		d, _ := m["data"].(map[string]any)
		return m["event"] == "reply" && d["id"] == id
	}
}

func replyData(m map[string]any) map[string]any { return m["data"].(map[string]any) }

func event(kind string, f func(map[string]any) bool) func(map[string]any) bool {
	return func(m map[string]any) bool {
		d, _ := m["data"].(map[string]any)
		return m["event"] == kind && (f == nil || f(d))
	}
}

func TestWebSocket(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	c := d.WS(id, "")
	c.Wait("ready", event("session", func(d map[string]any) bool { return d["status"] == "ready" }))

	c.Send(map[string]any{"id": "c1", "type": "command", "domain": "demo", "action": "increment"})
	// The reply and the state frame may come in either order.
	got := c.WaitAll(reply("c1"), event("state", func(d map[string]any) bool { return d["key"] == "surface:demo" && d["rev"] == 2.0 }))
	r := replyData(got[0])
	if r["ok"] != true || r["result"].(map[string]any)["data"].(map[string]any)["count"] != 1.0 {
		t.Fatalf("command reply: %v", r)
	}
	last := got[1]["id"].(string)

	c.Send(map[string]any{"id": "c2", "type": "command", "domain": "demo", "action": "fail"})
	if r := replyData(c.Wait("reply c2", reply("c2"))); r["ok"] != false || r["result"].(map[string]any)["error"].(map[string]any)["code"] != "nope" {
		t.Fatalf("failed command reply: %v", r)
	}
	c.Send(map[string]any{"id": "p1", "type": "prompt", "message": "hi ws"})
	// The turn may finish before the reply is written: either order.
	pr := c.WaitAll(reply("p1"), event("chat", func(d map[string]any) bool { return d["type"] == "finish" }))
	if r := replyData(pr[0]); r["ok"] != true || r["accepted"] != true {
		t.Fatalf("prompt reply: %v", r)
	}
	c.Send(map[string]any{"id": "s1", "type": "state", "key": "ui.theme", "value": "dark"})
	if r := replyData(c.Wait("reply s1", reply("s1"))); r["ok"] != true || r["rev"] != 1.0 {
		t.Fatalf("state reply: %v", r)
	}
	c.Send(map[string]any{"id": "s2", "type": "state", "key": "surface:demo", "value": 1})
	if r := replyData(c.Wait("reply s2", reply("s2"))); r["ok"] != false || r["status"] != 403.0 {
		t.Fatalf("surface write over ws: %v", r)
	}
	c.Send(map[string]any{"id": "a1", "type": "abort"})
	c.Wait("reply a1", reply("a1"))
	c.Send(map[string]any{"id": "u1", "type": "ui-response", "uiId": "nope", "confirmed": true})
	if r := replyData(c.Wait("reply u1", reply("u1"))); r["status"] != 409.0 {
		t.Fatalf("unknown dialog: %v", r)
	}

	// Malformed requests each get a clear error reply; the connection lives on.
	bad := []struct {
		send  any
		id    any
		code  string
		field string
	}{
		{"{not json", nil, "invalid_json", ""},
		{`["array"]`, nil, "invalid_json", ""},
		{map[string]any{"type": "command"}, nil, "invalid_field", "id"},
		{map[string]any{"id": "b1"}, "b1", "invalid_field", "type"},
		{map[string]any{"id": "b2", "type": "dance"}, "b2", "unknown_type", "type"},
		{map[string]any{"id": "b3", "type": "command", "action": "x"}, "b3", "invalid_field", "domain"},
		{map[string]any{"id": "b4", "type": "prompt"}, "b4", "invalid_field", "message"},
		{map[string]any{"id": "b5", "type": "prompt", "message": 3}, nil, "invalid_field", "message"},
		{map[string]any{"id": "b6", "type": "state", "key": "a.b", "op": "zap"}, "b6", "invalid_field", "op"},
		{map[string]any{"id": "b7", "type": "command", "domain": "demo", "action": "x", "bogus": 1}, nil, "unknown_field", "bogus"},
	}
	for _, b := range bad {
		c.Send(b.send)
		m := c.Wait("error reply", func(m map[string]any) bool {
			d, _ := m["data"].(map[string]any)
			return m["event"] == "reply" && d["ok"] == false && d["id"] == b.id
		})
		e := replyData(m)["error"].(map[string]any)
		if e["code"] != b.code {
			t.Errorf("%v: want %s, got %v", b.send, b.code, e)
		}
		if b.field != "" {
			f, _ := e["fields"].([]any)
			if len(f) == 0 || f[0] != b.field {
				t.Errorf("%v: want field %s: %v", b.send, b.field, e)
			}
		}
	}
	if err := c.Conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	m0 := c.Wait("binary refused", func(m map[string]any) bool {
		d, _ := m["data"].(map[string]any)
		return m["event"] == "reply" && d["id"] == nil
	})
	if e := replyData(m0)["error"].(map[string]any); e["code"] != "invalid_frame" {
		t.Fatalf("binary frame: %v", e)
	}

	// Resume with ?lastEventId=: exactly the frames after it.
	c2 := d.WS(id, last)
	m := c2.Wait("first replayed frame", func(m map[string]any) bool { return m["event"] != "reply" })
	if m["event"] == "session" && m["data"].(map[string]any)["status"] == "starting" {
		t.Fatalf("resumed WS got sticky state: %v", m)
	}
	seqOf := func(id string) string { return id[strings.LastIndex(id, "-")+1:] }
	lastSeq := seqOf(last)
	if got := seqOf(m["id"].(string)); got == lastSeq {
		t.Fatalf("resume repeated frame %s", got)
	}
}

func TestWebSocketMissedPongsClose(t *testing.T) {
	d := daemon.Start(t, daemon.Gateway(gateway.Limits{WSPing: 100 * time.Millisecond}))
	id := d.Create(nil)
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	conn, _, err := websocket.DefaultDialer.Dial(u, d.Auth())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetPingHandler(func(string) error { return nil }) // never pong
	start := time.Now()
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			break
		}
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("a peer that misses pongs was closed only after %s", el)
	}
}

func TestWebSocketNeedsUpgrade(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	if st, out := d.JSON("GET", "/api/sessions/"+id+"/ws", nil); st != http.StatusBadRequest || daemon.ErrCode(out) != "not_websocket" {
		t.Fatalf("%d %v", st, out)
	}
}

// A command that runs and fails (ok:false) is answered over WebSocket as over
// HTTP: ok:false with the command's result, and no error or status of the
// reply's own (those say the request itself failed).
func TestWebSocketFailedCommandIsItsResult(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	c := d.WS(id, "")
	c.Wait("ready", event("session", func(d map[string]any) bool { return d["status"] == "ready" }))

	st, httpRes := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/fail", map[string]any{})
	if st != http.StatusOK || httpRes["ok"] != false {
		t.Fatalf("over HTTP: %d %v", st, httpRes)
	}
	c.Send(map[string]any{"id": "f1", "type": "command", "domain": "demo", "action": "fail"})
	r := replyData(c.Wait("reply f1", reply("f1")))
	if r["ok"] != false {
		t.Fatalf("reply: %v", r)
	}
	if _, has := r["error"]; has {
		t.Errorf("the reply carries an error of its own: %v", r)
	}
	if _, has := r["status"]; has {
		t.Errorf("the reply carries a status: %v", r)
	}
	res, _ := json.Marshal(r["result"])
	want, _ := json.Marshal(httpRes)
	if string(res) != string(want) {
		t.Errorf("result %s, over HTTP %s", res, want)
	}
}
