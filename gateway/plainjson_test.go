package gateway_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/internal/plainjson"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// Bodies and frames carry a user's text as it is: '<', '>' and '&' are one
// byte each, never encoding/json's six-byte HTML escapes (a 12 MB prompt of
// '<' came back from GET …/messages as a 72 MB transcript). One check per
// route that carries user text: the API's bodies and errors, SSE,
// WebSocket frames and replies, the per-turn chat stream, ACP.
func TestUserTextIsNotHTMLEscaped(t *testing.T) {
	const text = "<b>fish&chips</b>"
	type notes struct{ Items []string }
	dom := surface.Define("notes", notes{Items: []string{}}, map[string]surface.Command[notes]{
		"add": surface.Typed(func(ctx *surface.Ctx[notes], a struct{ Text string }) (any, error) {
			ctx.SetState(func(n notes) notes { n.Items = append(n.Items, a.Text); return n })
			return map[string]string{"added": a.Text}, nil
		}),
	}, surface.Data(func(ctx *surface.DataCtx[notes], req surface.DataRequest) (surface.Page, error) {
		return surface.Page{Data: ctx.State.Items}, nil
	}))
	d := daemon.Start(t, daemon.Domains(surfaced.DomainBinding{Domain: dom}))
	acpc := d.ACPClient()
	acpc.Initialize()
	id := acpc.NewSession(daemon.TempDir(t))
	acpStream := acpc.Stream(id)
	titled := d.Create(map[string]any{"title": text})
	sse := d.SSE(id, "")
	sse.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	ws := dialRawWS(t, d, id)

	check := func(route string, raw []byte) {
		t.Helper()
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if bytes.Contains(raw, []byte(esc)) {
				t.Errorf("%s: HTML-escaped (%s): %.300s", route, esc, raw)
				return
			}
		}
		if !bytes.Contains(raw, []byte(text)) {
			t.Errorf("%s: the text is not there as it was sent: %.300s", route, raw)
		}
	}
	// Bodies go as a browser sends them: JSON.stringify does not escape.
	do := func(method, path string, body any, want int) []byte {
		t.Helper()
		if body != nil {
			if _, isString := body.(string); !isString {
				b, err := plainjson.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				body = b
			}
		}
		st, raw := d.Do(method, path, body)
		if st != want {
			t.Fatalf("%s %s: %d %s", method, path, st, raw)
		}
		return raw
	}
	base := "/api/sessions/" + id

	check("GET /api/sessions", do("GET", "/api/sessions", nil, http.StatusOK))
	check("GET /api/sessions/{id}", do("GET", "/api/sessions/"+titled, nil, http.StatusOK))

	do("POST", base+"/prompt", map[string]any{"message": text}, http.StatusAccepted)
	sse.Wait(t, 10*time.Second, "the turn's finish", testkit.IsChat("finish"))
	check("GET …/messages", do("GET", base+"/messages", nil, http.StatusOK))

	do("POST", base+"/state", map[string]any{"key": "test.text", "value": text}, http.StatusOK)
	check("GET …/state", do("GET", base+"/state", nil, http.StatusOK))
	check("POST …/state, the error naming a bad key", do("POST", base+"/state", map[string]any{"key": text, "value": 1}, http.StatusBadRequest))

	check("POST …/surfaces/{domain}/{action}", do("POST", base+"/surfaces/notes/add", map[string]any{"args": map[string]any{"text": text}}, http.StatusOK))
	check("GET …/surfaces/{domain}/data/{path}", do("GET", base+"/surfaces/notes/data/items", nil, http.StatusOK))

	check("POST …/artifacts", do("POST", base+"/artifacts?name="+url.QueryEscape(text), "{}", http.StatusCreated))
	check("GET …/artifacts", do("GET", base+"/artifacts", nil, http.StatusOK))

	// The frames of all that, over SSE and the WebSocket.
	sse.Wait(t, 10*time.Second, "the command's state", testkit.IsState("surface:notes", 2))
	for _, kind := range []string{"data-user-message", "text-delta"} {
		var raw []byte
		for _, e := range sse.All() {
			if e.Kind == "chat" && e.Data["type"] == kind && strings.Contains(e.Raw, "fish") {
				raw = []byte(e.Raw)
			}
		}
		check("SSE "+kind, raw)
	}
	for _, key := range []string{"test.text", "surface:notes"} {
		var raw []byte
		for _, e := range sse.All() {
			if e.Kind == "state" && e.Data["key"] == key {
				raw = []byte(e.Raw)
			}
		}
		check("SSE state "+key, raw)
	}
	ws.send(t, `{"id":"w1","type":"command","domain":"notes","action":"add","args":{"text":"`+text+`"}}`)
	check("WebSocket reply", ws.wait(t, "the reply", func(m string) bool { return strings.Contains(m, `"event":"reply"`) }))
	check("WebSocket state frame", ws.wait(t, "the state frame", func(m string) bool {
		return strings.HasPrefix(m, `{"event":"state"`) && strings.Contains(m, "surface:notes") && strings.Contains(m, "fish")
	}))
	check("WebSocket chat frame", ws.wait(t, "the user message", func(m string) bool { return strings.Contains(m, "data-user-message") && strings.Contains(m, "fish") }))

	// The per-turn chat stream.
	chat, st, body := d.Chat(id, daemon.ChatBody(text))
	if st != http.StatusOK {
		t.Fatalf("chat: %d %s", st, body)
	}
	delta := chat.Wait(t, 10*time.Second, "the echo", func(e testkit.Event) bool {
		return e.Data["type"] == "text-delta" && strings.Contains(e.Raw, "fish")
	})
	check("POST …/chat", []byte(delta.Raw))

	// ACP: the agent's answer to an editor's prompt, and session/list.
	acpc.Prompt(id, text)
	update := acpStream.Wait(t, 10*time.Second, "the agent's answer", func(e testkit.Event) bool {
		return strings.Contains(e.Raw, "agent_message_chunk") && strings.Contains(e.Raw, "fish")
	})
	check("ACP session/update", []byte(update.Raw))
	listID := acpc.Request("session/list", map[string]any{}, "")
	list := acpc.Conn.Wait(t, 10*time.Second, "the session list", func(e testkit.Event) bool {
		v, ok := e.Data["id"].(float64)
		return ok && int64(v) == listID
	})
	check("ACP session/list", []byte(list.Raw))
}

// rawWS is a WebSocket client that keeps each message as it came.
type rawWS struct {
	conn *websocket.Conn
	mu   sync.Mutex
	msgs []string
}

func dialRawWS(t *testing.T, d *daemon.Daemon, id string) *rawWS {
	t.Helper()
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	conn, resp, err := websocket.DefaultDialer.Dial(u, d.Auth())
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	w := &rawWS{conn: conn}
	go func() {
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			w.mu.Lock()
			w.msgs = append(w.msgs, string(data))
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *rawWS) send(t *testing.T, msg string) {
	t.Helper()
	if err := w.conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// wait returns the first message, among all received, that satisfies pred.
func (w *rawWS) wait(t *testing.T, what string, pred func(string) bool) []byte {
	t.Helper()
	var found []byte
	testkit.Eventually(t, 10*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, m := range w.msgs {
			if pred(m) {
				found = []byte(m)
				return true
			}
		}
		return false
	}, "WebSocket: %s", what)
	return found
}
