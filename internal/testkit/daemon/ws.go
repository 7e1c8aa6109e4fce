package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// WS is a real WebSocket client of a session, its messages read by a
// goroutine and decoded.
type WS struct {
	t    testing.TB
	Conn *websocket.Conn
	msgs chan map[string]any
}

// WS opens a session's WebSocket, resumed after last when it is set.
func (d *Daemon) WS(id, last string) *WS {
	d.t.Helper()
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	if last != "" {
		u += "?lastEventId=" + last
	}
	conn, resp, err := websocket.DefaultDialer.Dial(u, d.Auth())
	if err != nil {
		d.t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	c := &WS{t: d.t, Conn: conn, msgs: make(chan map[string]any, 10000)}
	go func() {
		defer close(c.msgs)
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(data, &m) != nil {
				m = map[string]any{"_raw": string(data)}
			}
			c.msgs <- m
		}
	}()
	d.t.Cleanup(func() { conn.Close() })
	return c
}

// Send sends a request: a string as it is, anything else as JSON.
func (c *WS) Send(v any) {
	c.t.Helper()
	var err error
	if s, ok := v.(string); ok {
		err = c.Conn.WriteMessage(websocket.TextMessage, []byte(s))
	} else {
		err = c.Conn.WriteJSON(v)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// Wait returns the next message that satisfies pred.
func (c *WS) Wait(what string, pred func(map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.t.Fatalf("connection closed waiting for %s", what)
			}
			if pred(m) {
				return m
			}
		case <-deadline:
			c.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// WaitAll waits until every predicate matched one message, in any order.
func (c *WS) WaitAll(preds ...func(map[string]any) bool) []map[string]any {
	c.t.Helper()
	out := make([]map[string]any, len(preds))
	left := len(preds)
	deadline := time.After(10 * time.Second)
	for left > 0 {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.t.Fatal("connection closed")
			}
			for i, p := range preds {
				if out[i] == nil && p(m) {
					out[i] = m
					left--
					break
				}
			}
		case <-deadline:
			c.t.Fatalf("timed out; matched %v", out)
		}
	}
	return out
}
