package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

func count(out map[string]any) float64 {
	d, _ := out["data"].(map[string]any)
	n, _ := d["count"].(float64)
	return n
}

// A surface command sent again with the same Idempotency-Key is answered
// with the first attempt's result, marked as replayed, and does not run
// again; a key is a client's, for one command.
func TestIdempotencyKeyOverHTTP(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	inc := "/api/sessions/" + id + "/surfaces/demo/increment"
	key := func(k ...string) http.Header { return http.Header{"Idempotency-Key": k} }

	st, out := d.JSON("POST", inc, nil, key("k1"))
	if st != 200 || out["ok"] != true || count(out) != 1 || out["replayed"] != nil {
		t.Fatalf("first attempt: %d %v", st, out)
	}
	st, out = d.JSON("POST", inc, nil, key("k1"))
	if st != 200 || out["ok"] != true || count(out) != 1 || out["replayed"] != true {
		t.Fatalf("retry: %d %v", st, out)
	}
	// The IETF draft's quoted form is the same key.
	st, out = d.JSON("POST", inc, nil, key(`"k1"`))
	if st != 200 || count(out) != 1 || out["replayed"] != true {
		t.Fatalf("retry with the key quoted: %d %v", st, out)
	}
	// The same key with another command is refused, and runs nothing.
	st, out = d.JSON("POST", inc, map[string]any{"args": map[string]any{"by": 2}}, key("k1"))
	if st != 422 || daemon.ErrCode(out) != "idempotency_key_reused" {
		t.Fatalf("the key with other args: %d %v", st, out)
	}
	st, out = d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/echo", nil, key("k1"))
	if st != 422 || daemon.ErrCode(out) != "idempotency_key_reused" {
		t.Fatalf("the key with another action: %d %v", st, out)
	}
	// Without a key every request is a command of its own.
	for want := 2.0; want <= 3; want++ {
		if st, out := d.JSON("POST", inc, nil); st != 200 || count(out) != want || out["replayed"] != nil {
			t.Fatalf("without a key: %d %v (want count %v)", st, out, want)
		}
	}
	// A command that failed did not happen: it is not remembered, and the
	// same key runs it again.
	for i := 0; i < 2; i++ {
		st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/fail", nil, key("f1"))
		if st != 200 || out["ok"] != false || daemon.ErrCode(out) != "nope" || out["replayed"] != nil {
			t.Fatalf("failing command, attempt %d: %d %v", i+1, st, out)
		}
	}

	// Malformed keys are refused before anything runs.
	for name, h := range map[string]http.Header{
		"blank":       key(" "),
		"too long":    key(strings.Repeat("k", 256)),
		"a space":     key("two words"),
		"not ASCII":   key("clé"),
		"a quote":     key(`a"b`),
		"two headers": key("k8", "k9"),
	} {
		st, out := d.JSON("POST", inc, nil, h)
		if st != 400 || daemon.ErrCode(out) != "invalid_idempotency_key" {
			t.Errorf("%s: %d %v", name, st, out)
		}
	}
	if st, out := d.JSON("POST", inc, nil, key(strings.Repeat("k", 255))); st != 200 || count(out) != 4 {
		t.Fatalf("a 255-character key: %d %v", st, out)
	}
	if st, out := d.JSON("GET", "/api/sessions/"+id+"/state", nil); st != 200 ||
		out["entries"].(map[string]any)["surface:demo"].(map[string]any)["rev"] != 5.0 {
		t.Fatalf("state: %d %v", st, out)
	}
}

// Over the WebSocket a command's request id is its idempotency key within
// its connection; idempotencyKey names it across connections.
func TestIdempotencyKeyOverWebSocket(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	reply := func(id string) func(map[string]any) bool {
		return func(m map[string]any) bool {
			data, _ := m["data"].(map[string]any)
			return m["event"] == "reply" && data["id"] == id
		}
	}
	result := func(m map[string]any) map[string]any {
		r, _ := m["data"].(map[string]any)["result"].(map[string]any)
		return r
	}
	c1 := d.WS(id, "")
	c1.Send(map[string]any{"id": "w1", "type": "command", "domain": "demo", "action": "increment"})
	if r := result(c1.Wait("w1", reply("w1"))); count(r) != 1 || r["replayed"] != nil {
		t.Fatalf("first: %v", r)
	}
	c1.Send(map[string]any{"id": "w1", "type": "command", "domain": "demo", "action": "increment"})
	if r := result(c1.Wait("w1 again", reply("w1"))); count(r) != 1 || r["replayed"] != true {
		t.Fatalf("the same request id on the same connection: %v", r)
	}
	// Another connection's w1 is another command.
	c2 := d.WS(id, "")
	c2.Send(map[string]any{"id": "w1", "type": "command", "domain": "demo", "action": "increment"})
	if r := result(c2.Wait("w1 on another connection", reply("w1"))); count(r) != 2 || r["replayed"] != nil {
		t.Fatalf("w1 on another connection: %v", r)
	}
	// A client's own key holds across connections.
	c1.Send(map[string]any{"id": "a", "type": "command", "domain": "demo", "action": "increment", "idempotencyKey": "k-42"})
	if r := result(c1.Wait("a", reply("a"))); count(r) != 3 {
		t.Fatalf("with idempotencyKey: %v", r)
	}
	c2.Send(map[string]any{"id": "b", "type": "command", "domain": "demo", "action": "increment", "idempotencyKey": "k-42"})
	if r := result(c2.Wait("b", reply("b"))); count(r) != 3 || r["replayed"] != true {
		t.Fatalf("the key again on another connection: %v", r)
	}
	// The same key over HTTP too.
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil, http.Header{"Idempotency-Key": {"k-42"}}); st != 200 || count(out) != 3 || out["replayed"] != true {
		t.Fatalf("the key over HTTP: %d %v", st, out)
	}
	c1.Send(map[string]any{"id": "bad", "type": "command", "domain": "demo", "action": "increment", "idempotencyKey": "has space"})
	m := c1.Wait("bad", reply("bad"))
	data := m["data"].(map[string]any)
	e, _ := data["error"].(map[string]any)
	if data["ok"] != false || e["code"] != "invalid_idempotency_key" || data["status"] != 400.0 {
		t.Fatalf("a malformed idempotencyKey: %v", m)
	}
	if f, _ := e["fields"].([]any); len(f) != 1 || f[0] != "idempotencyKey" {
		t.Fatalf("a malformed idempotencyKey names the field: %v", m)
	}
}
