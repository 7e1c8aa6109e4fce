package cluster_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// chat posts a message to a session's per-turn chat endpoint through this
// node.
func (nd *node) chat(t testing.TB, id, text string) *testkit.SSE {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": id, "trigger": "submit-message", "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}},
	}})
	s, status, errBody := testkit.TryOpenSSERequest(http.MethodPost, nd.base+"/api/sessions/"+id+"/chat",
		http.Header{"Authorization": {"Bearer " + token}}, body)
	if status != http.StatusOK {
		t.Fatalf("chat via node %d: %d %s", nd.i, status, errBody)
	}
	t.Cleanup(s.Close)
	return s
}

// chatToEnd reads a per-turn chat stream to its end: its text, and whether
// the last two events were finish and [DONE].
func chatToEnd(t testing.TB, s *testkit.SSE) (text string, finished bool) {
	t.Helper()
	var evs []testkit.Event
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				var b strings.Builder
				for _, e := range evs {
					if e.Data["type"] == "text-delta" {
						b.WriteString(e.Data["delta"].(string))
					}
				}
				n := len(evs)
				return b.String(), n >= 2 && evs[n-2].Data["type"] == "finish" && evs[n-1].Raw == "[DONE]"
			}
			evs = append(evs, ev)
		case <-deadline:
			t.Fatalf("the chat stream did not end: %v", evs)
		}
	}
}

// The per-turn chat endpoint works on any node: a message posted through a
// node that does not host the session streams its turn, and a resume
// through a third node replays the running turn from its start.
func TestChatAcrossNodes(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.startAll(3)
	id, host, others := e.remoteSession(t)
	via, third := others[0], others[1]
	if text, done := chatToEnd(t, via.chat(t, id, "hello cluster")); text != "echo: hello cluster" || !done {
		t.Fatalf("chat via node %d to node %d: %q finished %v", via.i, host.i, text, done)
	}

	// A dialog holds the next turn open while it is resumed elsewhere.
	events := host.sse(t, id, "")
	s := via.chat(t, id, "ask")
	start := s.Wait(t, 20*time.Second, "start", func(e testkit.Event) bool { return e.Data["type"] == "start" })
	ui := events.Wait(t, 20*time.Second, "dialog", testkit.IsKind("ui-request"))
	r := third.chatResume(t, id)
	again := r.Wait(t, 20*time.Second, "replayed start", func(e testkit.Event) bool { return e.Data["type"] == "start" })
	if again.Raw != start.Raw {
		t.Fatalf("resumed through node %d: %s, want %s", third.i, again.Raw, start.Raw)
	}
	if st, err := third.do("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": ui.Data["id"], "confirmed": true}, nil); st != 200 || err != nil {
		t.Fatalf("answer: %d %v", st, err)
	}
	for _, c := range []*testkit.SSE{s, r} {
		if text, done := chatToEnd(t, c); !strings.HasPrefix(text, "dialog said ") || !done {
			t.Fatalf("after the dialog: %q finished %v", text, done)
		}
	}
}

// chatResume opens GET …/chat/stream through this node.
func (nd *node) chatResume(t testing.TB, id string) *testkit.SSE {
	t.Helper()
	return testkit.OpenSSE(t, nd.base+"/api/sessions/"+id+"/chat/stream", http.Header{"Authorization": {"Bearer " + token}})
}
