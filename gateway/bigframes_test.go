package gateway_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// A resume from anywhere inside the replay window is written as the client
// reads it: the replay is what the client is owed, not a backlog, so it does
// not count toward the queue's byte bound. Every point of a window full of
// 100 KB frames (4 MiB, four times the queue) resumes to the head, over SSE
// and WebSocket, with every frame exactly once; a client that stops reading
// during its replay is still cut.
func TestResumeInsideTheWindowIsPacedByTheSocket(t *testing.T) {
	// The default limits (1 MiB, 10 s), as a user meets them: a client that
	// reads is never cut, however loaded the machine.
	d := daemon.Start(t)
	id := d.Create(nil)
	watch := d.SSE(id, "")
	watch.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	const writes = 50 // more than the window keeps
	big := strings.Repeat("x", 100_000)
	for i := range writes {
		if st, out := d.JSON("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "test.big", "value": big}); st != http.StatusOK {
			t.Fatalf("state write %d: %d %v", i, st, out)
		}
	}
	watch.Wait(t, 10*time.Second, "the last write", testkit.IsState("test.big", writes))
	// The ids as the watcher saw them; its sticky frames share the head's.
	var ids []string
	for _, ev := range watch.All() {
		if ev.ID != "" && (len(ids) == 0 || ids[len(ids)-1] != ev.ID) {
			ids = append(ids, ev.ID)
		}
	}
	head := ids[len(ids)-1]

	resumes := map[string]func(last string) (got []string, how string){
		"sse": func(last string) ([]string, string) { return resumeSSE(t, d, id, last, head) },
		"ws":  func(last string) ([]string, string) { return resumeWS(t, d, id, last, head) },
	}
	for _, kind := range []string{"sse", "ws"} {
		resume := resumes[kind]
		var oldest string
		// From just behind the head backwards, until the window ends.
		for i := len(ids) - 2; i >= 0; i-- {
			got, how := resume(ids[i])
			if how == "resync" {
				break
			}
			if how != "" {
				t.Fatalf("%s: resuming after %s (%d frames behind) ended with %s after %d frames", kind, ids[i], len(ids)-1-i, how, len(got))
			}
			if want := ids[i+1:]; strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("%s: resuming after %s: got %d frames %v, want %d %v", kind, ids[i], len(got), got, len(want), want)
			}
			oldest = ids[i]
		}
		behind := len(ids) - 1 - indexOf(ids, oldest)
		t.Logf("%s: resumed from each of the last %d positions", kind, behind)
		// The window is 4 MiB: about 41 of these frames.
		if behind < 38 {
			t.Fatalf("%s: only the last %d positions resumed; the window holds about 41 frames of 100 KB", kind, behind)
		}
	}

	// A client that stops reading while its replay is written is cut once it
	// has taken nothing for the queue's age, and finds its end frame when it
	// reads again (at once: a client that does not read within the end grace
	// is dropped without one).
	oldest := ids[len(ids)-38]
	h := d.Auth()
	h.Set("Last-Event-ID", oldest)
	slowSSE := testkit.DialStalledSSE(t, d.URL, "/api/sessions/"+id+"/events", h)
	testkit.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(metrics(t, d), `surfaced_slow_consumer_cuts_total{kind="sse"} 1`)
	}, "the stalled SSE resume cut")
	if rest := slowSSE.ReadAll(t, 30*time.Second); !strings.Contains(rest, "event: end\ndata: {\"reason\":\"slow_consumer\"}") {
		t.Fatalf("the stalled SSE resume was not told end{slow_consumer}; tail: %q", tail(rest, 300))
	}
	slowWS := dialStalledWSAfter(t, d, id, oldest)
	testkit.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(metrics(t, d), `surfaced_slow_consumer_cuts_total{kind="ws"} 1`)
	}, "the stalled WebSocket resume cut")
	if last := readUntilClose(t, slowWS); last != `{"event":"end","data":{"reason":"slow_consumer"}}` {
		t.Fatalf("the stalled WebSocket resume's last message was %.200q, not end{slow_consumer}", last)
	}
}

// readUntilClose reads a WebSocket until the server closes it with a
// policy-violation close, and returns the last message before it.
func readUntilClose(t *testing.T, conn *websocket.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var last string
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
				t.Fatalf("the stream ended with %v, not a policy-violation close", err)
			}
			return last
		}
		last = string(data)
	}
}

// One frame larger than the whole queue reaches every client that reads:
// the bound counts a backlog, not one frame. Prompts of 1, 2 and 8 MiB (the
// fake agent answers "echo: " and the prompt, so each turn carries two such
// frames) reach a fast SSE, WebSocket and ACP reader whole; a reader that
// stalled is cut.
func TestOneFrameLargerThanTheQueueReachesClientsThatRead(t *testing.T) {
	// The default limits (1 MiB, 10 s): the stalled reader is cut by its
	// backlog, the fast ones read at whatever pace the machine allows.
	d := daemon.Start(t)
	acpc := d.ACPClient()
	acpc.Initialize()
	id := acpc.NewSession(daemon.TempDir(t))
	acpStream := acpc.Stream(id)
	sse := d.SSE(id, "")
	sse.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	ws := d.WS(id, "")
	ws.Wait("ready", event("session", func(d map[string]any) bool { return d["status"] == "ready" }))
	slow := testkit.DialStalledSSE(t, d.URL, "/api/sessions/"+id+"/events", d.Auth())

	for _, size := range []int{1 << 20, 2 << 20, 8 << 20} {
		prompt := strings.Repeat("p", size)
		if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": prompt}); st != http.StatusAccepted {
			t.Fatalf("prompt of %d bytes: %d %v", size, st, out)
		}
		isUser := func(e testkit.Event) bool {
			return e.Kind == "chat" && e.Data["type"] == "data-user-message" && len(e.Data["data"].(map[string]any)["text"].(string)) == size
		}
		sse.Wait(t, 30*time.Second, fmt.Sprintf("SSE: the user message of %d bytes", size), isUser)
		sse.Wait(t, 30*time.Second, fmt.Sprintf("SSE: the echo of %d bytes", size), func(e testkit.Event) bool {
			return e.Kind == "chat" && e.Data["type"] == "text-delta" && len(e.Data["delta"].(string)) == size
		})
		sse.Wait(t, 30*time.Second, "SSE: the turn's finish", testkit.IsChat("finish"))
		ws.Wait(fmt.Sprintf("WebSocket: the user message of %d bytes", size), event("chat", func(d map[string]any) bool {
			return d["type"] == "data-user-message" && len(d["data"].(map[string]any)["text"].(string)) == size
		}))
		ws.Wait(fmt.Sprintf("WebSocket: the echo of %d bytes", size), event("chat", func(d map[string]any) bool {
			return d["type"] == "text-delta" && len(d["delta"].(string)) == size
		}))
		ws.Wait("WebSocket: the turn's finish", event("chat", func(d map[string]any) bool { return d["type"] == "finish" }))
		acpStream.Wait(t, 30*time.Second, fmt.Sprintf("ACP: the user message of %d bytes", size), acpChunk("user_message_chunk", size))
		acpStream.Wait(t, 30*time.Second, fmt.Sprintf("ACP: the echo of %d bytes", size), acpChunk("agent_message_chunk", size))
	}
	testkit.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(metrics(t, d), `surfaced_slow_consumer_cuts_total{kind="sse"} 1`)
	}, "the stalled reader cut")
	if rest := slow.ReadAll(t, 30*time.Second); !strings.Contains(rest, "event: end\ndata: {\"reason\":\"slow_consumer\"}") {
		t.Fatalf("the stalled reader was not told end{slow_consumer}; tail: %q", tail(rest, 300))
	}
	m := metrics(t, d)
	for _, kind := range []string{"ws", "acp"} {
		if strings.Contains(m, `surfaced_slow_consumer_cuts_total{kind="`+kind+`"}`) && !strings.Contains(m, `surfaced_slow_consumer_cuts_total{kind="`+kind+`"} 0`) {
			t.Fatalf("a fast %s reader was cut:\n%s", kind, grepLines(m, "slow_consumer"))
		}
	}
	for _, e := range sse.All() {
		if e.Kind == "end" {
			t.Fatalf("the fast SSE reader got %s", e.Raw)
		}
	}
}

func acpChunk(kind string, size int) func(testkit.Event) bool {
	return func(e testkit.Event) bool {
		params, _ := e.Data["params"].(map[string]any)
		u, _ := params["update"].(map[string]any)
		c, _ := u["content"].(map[string]any)
		text, _ := c["text"].(string)
		return u["sessionUpdate"] == kind && len(text) == size
	}
}

// resumeSSE resumes a session's event stream after last and reads it until
// the frame head: it returns the ids it got, and "" or how the stream ended
// before head (resync, end, closed).
func resumeSSE(t *testing.T, d *daemon.Daemon, id, last, head string) ([]string, string) {
	t.Helper()
	h := d.Auth()
	h.Set("Last-Event-ID", last)
	h.Set("Accept", "text/event-stream")
	req, _ := http.NewRequest("GET", d.URL+"/api/sessions/"+id+"/events", nil)
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume after %s: %d", last, resp.StatusCode)
	}
	r := bufio.NewReaderSize(resp.Body, 256<<10)
	var got []string
	var kind, evID string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return got, "closed"
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			evID = line[len("id: "):]
		case line == "" && kind != "":
			switch {
			case kind == "resync":
				return got, "resync"
			case kind == "end":
				return got, "end"
			}
			got = append(got, evID)
			if evID == head {
				return got, ""
			}
			kind, evID = "", ""
		}
	}
}

// resumeWS is resumeSSE over the WebSocket.
func resumeWS(t *testing.T, d *daemon.Daemon, id, last, head string) ([]string, string) {
	t.Helper()
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws?lastEventId=" + last
	conn, resp, err := websocket.DefaultDialer.Dial(u, d.Auth())
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	defer conn.Close()
	var got []string
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return got, "closed"
		}
		var m struct{ Event, ID string }
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("a message that is not JSON: %.200q", data)
		}
		switch m.Event {
		case "resync", "end":
			return got, m.Event
		}
		got = append(got, m.ID)
		if m.ID == head {
			return got, ""
		}
	}
}

// dialStalledWSAfter opens a WebSocket resumed after last with a tiny
// receive buffer, and does not read it.
func dialStalledWSAfter(t *testing.T, d *daemon.Daemon, id, last string) *websocket.Conn {
	t.Helper()
	dialer := websocket.Dialer{NetDialContext: testkit.StalledDialer().DialContext, HandshakeTimeout: 10 * time.Second}
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws?lastEventId=" + last
	conn, resp, err := dialer.Dial(u, d.Auth())
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func indexOf(ids []string, id string) int {
	for i, v := range ids {
		if v == id {
			return i
		}
	}
	return -1
}
