package acpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/acpgw/bridge"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// editorSide drives bridge.Run the way an editor does: lines on its stdin,
// lines from its stdout.
type editorSide struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan map[string]any
	stderr *lockedBuffer
	exit   chan int
	kept   []map[string]any
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func runBridge(t *testing.T, o bridge.Options) *editorSide {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	e := &editorSide{t: t, in: inW, lines: make(chan map[string]any, 1000), stderr: &lockedBuffer{}, exit: make(chan int, 1)}
	o.Stdin, o.Stdout, o.Stderr = inR, outW, e.stderr
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		e.exit <- bridge.Run(ctx, o)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the bridge wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			e.lines <- m
		}
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		select {
		case <-e.exit:
		case <-time.After(5 * time.Second):
			t.Error("the bridge did not stop")
		}
	})
	return e
}

func (e *editorSide) send(v any) {
	e.t.Helper()
	if _, err := fmt.Fprintf(e.in, "%s\n", daemon.MustJSON(v)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *editorSide) request(id any, method string, params any) {
	e.t.Helper()
	e.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// next returns the first message (kept ones first) that pred accepts, and
// the messages before it, which it keeps for later calls.
func (e *editorSide) next(what string, timeout time.Duration, pred func(map[string]any) bool) (map[string]any, []map[string]any) {
	e.t.Helper()
	var before []map[string]any
	for i, m := range e.kept {
		if pred(m) {
			before = append(before, e.kept[:i]...)
			e.kept = append(e.kept[:i:i], e.kept[i+1:]...)
			return m, before
		}
	}
	before = append(before, e.kept...)
	e.kept = nil
	deadline := time.After(timeout)
	for {
		select {
		case m := <-e.lines:
			if pred(m) {
				e.kept = append(e.kept, before...)
				return m, before
			}
			before = append(before, m)
		case <-deadline:
			e.t.Fatalf("no %s; got %v; stderr:\n%s", what, before, e.stderr.String())
		}
	}
}

// answer waits for the response to id.
func (e *editorSide) answer(id any, timeout time.Duration) (map[string]any, []map[string]any) {
	e.t.Helper()
	return e.next(fmt.Sprintf("answer to %v", id), timeout, func(m map[string]any) bool {
		_, isReq := m["method"]
		return !isReq && fmt.Sprint(m["id"]) == fmt.Sprint(id)
	})
}

func (e *editorSide) waitStderr(what string, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(e.stderr.String(), what) {
		if time.Now().After(deadline) {
			e.t.Fatalf("stderr never said %q:\n%s", what, e.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The bridge through an outage: the prompt in flight answers cancelled, the
// editor's messages queue (past the bound, a request is refused at once),
// the bridge reconnects and resumes, the queue goes out, and a late answer
// to a request of the lost connection is dropped.
func TestBridgeOutage(t *testing.T) {
	d := daemon.Start(t)
	e := runBridge(t, bridge.Options{URL: d.URL, Token: d.Token, MinDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxQueued: 3})

	e.request(0, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if r, _ := e.answer(0, 10*time.Second); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	// Not JSON: ignored with a word on stderr, the relay goes on.
	fmt.Fprintln(e.in, "this is not json")
	e.request(1, "session/new", map[string]any{"cwd": daemon.TempDir(t), "mcpServers": []any{}})
	r, _ := e.answer(1, 10*time.Second)
	sid := r["result"].(map[string]any)["sessionId"].(string)
	if !strings.Contains(e.stderr.String(), "not a JSON-RPC message") {
		t.Errorf("stderr: %s", e.stderr.String())
	}

	// A dialog is open and a slow turn runs when the daemon goes away.
	e.request(2, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "ask"}}})
	isPermission := func(m map[string]any) bool { return m["method"] == "session/request_permission" }
	perm, _ := e.next("permission request", 10*time.Second, isPermission)
	e.kept = nil
	d.Outage()
	r, _ = e.answer(2, 10*time.Second)
	if daemon.StopReason(r) != "cancelled" {
		t.Errorf("the prompt in flight: %v", r)
	}
	e.waitStderr("lost the connection", 5*time.Second)

	// The late answer to the lost connection's dialog, then four requests:
	// three queue, the fourth is refused at once.
	e.send(map[string]any{"jsonrpc": "2.0", "id": perm["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}})
	for i := 10; i < 14; i++ {
		e.request(i, "session/list", map[string]any{})
	}
	r, _ = e.answer(13, 5*time.Second)
	if code, msg, _ := daemon.RPCError(r); code != -32000 || !strings.Contains(msg, "queued") {
		t.Errorf("past the queue bound: %v", r)
	}

	d.Restore()
	e.waitStderr("reconnected to", 10*time.Second)
	for i := 10; i < 13; i++ {
		r, _ := e.answer(i, 10*time.Second)
		if sessions := r["result"].(map[string]any)["sessions"].([]any); len(sessions) != 1 {
			t.Errorf("queued list %d: %v", i, r)
		}
	}
	// The session was resumed: the dialog still open is put to the editor
	// again; answering it ends the turn.
	again, _ := e.next("the dialog again", 10*time.Second, isPermission)
	if again["id"] == perm["id"] {
		t.Errorf("the dialog came again with the lost connection's id")
	}
	e.send(map[string]any{"jsonrpc": "2.0", "id": again["id"], "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}})
	e.kept = nil
	// A prompt on it streams and answers.
	e.request(20, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "back"}}})
	r, before := e.answer(20, 10*time.Second)
	var text strings.Builder
	for _, m := range before {
		if m["method"] == "session/update" {
			u := m["params"].(map[string]any)["update"].(map[string]any)
			if u["sessionUpdate"] == "agent_message_chunk" {
				text.WriteString(u["content"].(map[string]any)["text"].(string))
			}
		}
	}
	if daemon.StopReason(r) != "end_turn" || !strings.HasSuffix(text.String(), "echo: back") {
		t.Errorf("after the outage: %v, text %q", r, text.String())
	}
}

// A session the daemon no longer has is forgotten on reconnection (-32002),
// and only then.
func TestBridgeForgetsOnlyMissingSessions(t *testing.T) {
	d := daemon.Start(t)
	e := runBridge(t, bridge.Options{URL: d.URL, Token: d.Token, MinDelay: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond})
	e.request(0, "initialize", map[string]any{"protocolVersion": 1})
	e.answer(0, 10*time.Second)
	e.request(1, "session/new", map[string]any{"cwd": daemon.TempDir(t), "mcpServers": []any{}})
	r, _ := e.answer(1, 10*time.Second)
	sid := r["result"].(map[string]any)["sessionId"].(string)

	d.Outage()
	e.waitStderr("lost the connection", 5*time.Second)
	// The session ends while the bridge is away.
	st, out := deleteSession(t, d, sid)
	if st != 200 && st != 204 {
		t.Fatalf("DELETE session: %d %s", st, out)
	}
	d.Restore()
	e.waitStderr("is not on", 10*time.Second)
	e.waitStderr("reconnected to", 10*time.Second)
	if !strings.Contains(e.stderr.String(), sid) {
		t.Errorf("stderr does not name the session: %s", e.stderr.String())
	}
}

func deleteSession(t *testing.T, d *daemon.Daemon, sid string) (int, string) {
	t.Helper()
	// The HTTP API is down during the outage; the runtime is not.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := d.Runtime.Request(ctx, sid, &pb.Stop{Caller: &pb.Caller{System: true}, Reason: "stopped"})
	if err != nil {
		return 500, err.Error()
	}
	return 200, fmt.Sprint(res)
}
