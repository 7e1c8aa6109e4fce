package cluster_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// editor is an editor speaking ACP through `surfaced acp`, the stdio bridge,
// to one node.
type editor struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan map[string]any
	stderr *strings.Builder
	mu     sync.Mutex
	nextID int
}

func startEditor(t *testing.T, e *env, nd *node) *editor {
	t.Helper()
	ed := &editor{t: t, lines: make(chan map[string]any, 1000), stderr: &strings.Builder{}}
	ed.cmd = exec.Command(e.bin, "acp", "--url", nd.base, "--token", token)
	ed.cmd.Dir = testkit.RepoRoot()
	ed.in, _ = ed.cmd.StdinPipe()
	out, _ := ed.cmd.StdoutPipe()
	ed.cmd.Stderr = &lockedWriter{mu: &ed.mu, w: ed.stderr}
	if err := ed.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
				ed.lines <- m
			}
		}
	}()
	t.Cleanup(func() {
		ed.in.Close()
		done := make(chan struct{})
		go func() { _ = ed.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = ed.cmd.Process.Kill()
		}
	})
	return ed
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// call sends a request and returns its answer and the notifications that
// came before it.
func (ed *editor) call(method string, params any, timeout time.Duration) (map[string]any, []map[string]any) {
	ed.t.Helper()
	ed.nextID++
	id := ed.nextID
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := fmt.Fprintf(ed.in, "%s\n", b); err != nil {
		ed.t.Fatal(err)
	}
	var before []map[string]any
	deadline := time.After(timeout)
	for {
		select {
		case m := <-ed.lines:
			if _, isReq := m["method"]; !isReq && fmt.Sprint(m["id"]) == fmt.Sprint(id) {
				return m, before
			}
			before = append(before, m)
		case <-deadline:
			ed.mu.Lock()
			defer ed.mu.Unlock()
			ed.t.Fatalf("no answer to %s: got %v\nbridge stderr:\n%s", method, before, ed.stderr.String())
		}
	}
}

func (ed *editor) prompt(sid, text string) (stop, reply string) {
	ed.t.Helper()
	r, before := ed.call("session/prompt", map[string]any{"sessionId": sid,
		"prompt": []any{map[string]any{"type": "text", "text": text}}}, 60*time.Second)
	var sb strings.Builder
	for _, m := range before {
		if m["method"] != "session/update" {
			continue
		}
		u := m["params"].(map[string]any)["update"].(map[string]any)
		if u["sessionUpdate"] == "agent_message_chunk" {
			sb.WriteString(u["content"].(map[string]any)["text"].(string))
		}
	}
	res, _ := r["result"].(map[string]any)
	if res == nil {
		ed.t.Fatalf("prompt %q: %v", text, r)
	}
	return fmt.Sprint(res["stopReason"]), sb.String()
}

// An editor attached to node A works with a session living on node B; when
// B is killed, the editor's next prompt finds the session re-activated on
// another node, with its surface continuing.
func TestACPAcrossNodes(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.extra = []string{"--config", writeLeaseConfig(t, "2s")}
	e.startAll(3)
	a := e.nodes[0]
	ed := startEditor(t, e, a)
	if r, _ := ed.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, 20*time.Second); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	var sid string
	var host *node
	for {
		r, _ := ed.call("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}}, 20*time.Second)
		sid = r["result"].(map[string]any)["sessionId"].(string)
		if host = e.hostOf(t, a, sid); host != a {
			break
		}
	}
	if stop, reply := ed.prompt(sid, "hello"); stop != "end_turn" || !strings.Contains(reply, "echo: hello") {
		t.Fatalf("prompt across nodes: %s %q", stop, reply)
	}
	// A surface command from a browser on the third node.
	var third *node
	for _, nd := range e.nodes {
		if nd != a && nd != host {
			third = nd
		}
	}
	if st, out, err := third.command(sid, "demo", "increment"); st != 200 || err != nil || out["ok"] != true {
		t.Fatalf("command via the third node: %d %v %v", st, out, err)
	}
	host.kill9()
	// A prompt under way as the node dies (sent before node A noticed)
	// answers cancelled, once; the next one reaches the session's new node.
	stop, reply := ed.prompt(sid, "again")
	if stop == "cancelled" {
		t.Logf("the first prompt after the kill was cancelled (it was under way as the node died)")
		stop, reply = ed.prompt(sid, "again")
	}
	if stop != "end_turn" || !strings.Contains(reply, "echo: again") {
		t.Fatalf("prompt after the host died: %s %q", stop, reply)
	}
	if moved := e.hostOf(t, a, sid); moved == host {
		t.Fatalf("the session is still placed on the dead node")
	}
	if count, _ := finalCount(t, a, sid); count != 1 {
		t.Fatalf("the surface did not continue: count %d", count)
	}
}
