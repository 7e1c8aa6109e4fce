package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced/internal/testkit"
)

const acpTestToken = "bridge-test-token-0123456789abcdef"

// acpDaemon is the real binary serving one fake agent on a fixed port, so
// that it can be stopped and started again where the bridge expects it.
type acpDaemon struct {
	t      *testing.T
	bin    string
	addr   string
	data   string
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func (d *acpDaemon) start() {
	d.t.Helper()
	cmd := exec.Command(d.bin, "run", "--addr", d.addr, "--data-dir", d.data, "--token", acpTestToken, "--", testkit.FakeAgent(d.t)[0])
	cmd.Dir = testkit.RepoRoot()
	stdout, _ := cmd.StdoutPipe()
	d.stderr = &syncBuffer{}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.cmd = cmd
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "surfaced: open ") {
			d.t.Fatalf("daemon start line %q; stderr:\n%s", line, d.stderr.String())
		}
	case <-time.After(60 * time.Second):
		d.t.Fatalf("the daemon did not start; stderr:\n%s", d.stderr.String())
	}
}

func (d *acpDaemon) kill() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_ = d.cmd.Wait()
	d.cmd = nil
}

func startACPDaemon(t *testing.T) *acpDaemon {
	d := &acpDaemon{t: t, bin: testkit.Build(t, "./cmd/surfaced"), addr: freeAddr(t), data: t.TempDir()}
	d.start()
	t.Cleanup(d.kill)
	return d
}

// syncBuffer is a strings.Builder safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) waitFor(t *testing.T, what string, timeout time.Duration) {
	t.Helper()
	testkit.Eventually(t, timeout, func() bool { return strings.Contains(s.String(), what) }, "%q in:\n%s", what, s)
}

// writeWatch passes writes through and closes written once a write holding
// marker has returned: the bytes are in the pipe, for the reader to take.
type writeWatch struct {
	io.Writer
	marker  []byte
	once    sync.Once
	written chan struct{}
}

func (w *writeWatch) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	if err == nil && bytes.Contains(p, w.marker) {
		w.once.Do(func() { close(w.written) })
	}
	return n, err
}

// bridgeProc is `surfaced acp` with its stdio in the test's hands.
type bridgeProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *syncBuffer
	exited chan struct{}
	code   int
}

func startBridge(t *testing.T, args ...string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(testkit.Build(t, "./cmd/surfaced"), append([]string{"acp"}, args...)...)
	cmd.Env = append(os.Environ(), "SURFACED_TOKEN=")
	b := &bridgeProc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	var err error
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if b.stdout, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			b.code = ee.ExitCode()
		}
		close(b.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-b.exited
	})
	return b
}

func (b *bridgeProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.exited:
		return b.code
	case <-time.After(15 * time.Second):
		t.Fatalf("the bridge did not exit; stderr:\n%s", b.stderr.String())
	}
	return -1
}

// recordingClient is an ACP client that records the session updates.
type recordingClient struct {
	mu      sync.Mutex
	text    map[acp.SessionId]*strings.Builder
	updates chan acp.SessionNotification
}

func newRecordingClient() *recordingClient {
	return &recordingClient{text: map[acp.SessionId]*strings.Builder{}, updates: make(chan acp.SessionNotification, 1000)}
}

func (c *recordingClient) takeText(sid acp.SessionId) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.text[sid]
	if b == nil {
		return ""
	}
	s := b.String()
	b.Reset()
	return s
}

func (c *recordingClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if u := n.Update.AgentMessageChunk; u != nil && u.Content.Text != nil {
		c.mu.Lock()
		if c.text[n.SessionId] == nil {
			c.text[n.SessionId] = &strings.Builder{}
		}
		c.text[n.SessionId].WriteString(u.Content.Text.Text)
		c.mu.Unlock()
	}
	select {
	case c.updates <- n:
	default:
	}
	return nil
}

func (c *recordingClient) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

func (c *recordingClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound("fs/read_text_file")
}

func (c *recordingClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound("fs/write_text_file")
}

func (c *recordingClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound("terminal/create")
}

func (c *recordingClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound("terminal/kill")
}

func (c *recordingClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound("terminal/output")
}

func (c *recordingClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound("terminal/release")
}

func (c *recordingClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound("terminal/wait_for_exit")
}

func textPrompt(sid acp.SessionId, text string) acp.PromptRequest {
	return acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}}
}

// coder/acp-go-sdk's ClientSideConnection through the real `surfaced acp`
// against the real daemon, which is killed and started again in the middle:
// the in-flight prompt answers cancelled, the bridge reconnects and resumes,
// and the next prompt works.
func TestACPBridgeSurvivesDaemonRestart(t *testing.T) {
	d := startACPDaemon(t)
	b := startBridge(t, "--url", "http://"+d.addr, "--token", acpTestToken)
	rec := newRecordingClient()
	const outagePrompt = "after the restart"
	stdin := &writeWatch{Writer: b.stdin, marker: []byte(outagePrompt), written: make(chan struct{})}
	conn := acp.NewClientSideConnection(rec, stdin, b.stdout)
	conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	init, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientInfo: &acp.Implementation{Name: "go-sdk-test", Version: "1"}})
	if err != nil {
		t.Fatalf("initialize: %v\nbridge:\n%s", err, b.stderr.String())
	}
	if init.AgentInfo == nil || init.AgentInfo.Name != "surfaced" || !init.AgentCapabilities.LoadSession {
		t.Errorf("initialize: %+v", init)
	}
	cwd, _ := filepath.EvalSymlinks(t.TempDir())
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	res, err := conn.Prompt(ctx, textPrompt(sess.SessionId, "before the restart"))
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	if got := rec.takeText(sess.SessionId); got != "echo: before the restart" {
		t.Errorf("streamed %q", got)
	}

	// A slow turn is running when the daemon dies without a word.
	slow := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := conn.Prompt(ctx, textPrompt(sess.SessionId, "slow one"))
		if err != nil {
			t.Errorf("slow prompt: %v", err)
		}
		slow <- r
	}()
	deadline := time.After(20 * time.Second)
	for !strings.HasPrefix(rec.takeTextPeek(sess.SessionId), "chunk0") {
		select {
		case <-rec.updates:
		case <-deadline:
			t.Fatal("the slow turn did not start")
		}
	}
	d.kill()
	select {
	case r := <-slow:
		if r.StopReason != acp.StopReasonCancelled {
			t.Errorf("the in-flight prompt answered %q, want cancelled", r.StopReason)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the in-flight prompt was not answered; bridge:\n%s", b.stderr.String())
	}
	b.stderr.waitFor(t, "lost the connection", 10*time.Second)

	// A prompt sent during the outage waits for the daemon to come back.
	after := make(chan error, 1)
	var afterRes acp.PromptResponse
	go func() {
		r, err := conn.Prompt(ctx, textPrompt(sess.SessionId, outagePrompt))
		afterRes = r
		after <- err
	}()
	// The daemon starts only once the prompt is in the bridge's stdin.
	select {
	case <-stdin.written:
	case <-time.After(10 * time.Second):
		t.Fatal("the prompt during the outage was never written to the bridge")
	}
	d.start()
	select {
	case err := <-after:
		if err != nil || afterRes.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt after the restart: %+v %v\nbridge:\n%s\ndaemon:\n%s", afterRes, err, b.stderr.String(), d.stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("the prompt after the restart was not answered; bridge:\n%s", b.stderr.String())
	}
	b.stderr.waitFor(t, "reconnected to", time.Second)
	rec.takeText(sess.SessionId) // the slow turn's chunks
	// The text of the resumed session's turn arrived.
	res, err = conn.Prompt(ctx, textPrompt(sess.SessionId, "and again"))
	if err != nil || res.StopReason != acp.StopReasonEndTurn || rec.takeText(sess.SessionId) != "echo: and again" {
		t.Fatalf("and again: %+v %v", res, err)
	}
	// The resumed session is the same one: it lists once, with its cwd.
	list, err := conn.ListSessions(ctx, acp.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionId != sess.SessionId || list.Sessions[0].Cwd != cwd {
		t.Errorf("list: %+v %v", list, err)
	}

	// The editor closes stdin: exit 0.
	b.stdin.Close()
	if code := b.wait(t); code != 0 {
		t.Errorf("exit %d after stdin closed; stderr:\n%s", code, b.stderr.String())
	}
	t.Logf("bridge stderr:\n%s", b.stderr.String())
}

func (c *recordingClient) takeTextPeek(sid acp.SessionId) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.text[sid]; b != nil {
		return b.String()
	}
	return ""
}

func TestACPBridgeExitCodes(t *testing.T) {
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{{"extra"}, {"--bogus"}, {"--url", "ftp://host"}, {"--url", "http://"}} {
			b := startBridge(t, args...)
			b.stdin.Close()
			if code := b.wait(t); code != 2 {
				t.Errorf("%v: exit %d; stderr:\n%s", args, code, b.stderr.String())
			}
		}
	})
	t.Run("never answered", func(t *testing.T) {
		b := startBridge(t, "--url", "http://"+freeAddr(t))
		fmt.Fprintln(b.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		line, _ := bufio.NewReader(b.stdout).ReadString('\n')
		var resp map[string]any
		_ = json.Unmarshal([]byte(line), &resp)
		if resp["id"] != float64(1) || resp["error"] == nil {
			t.Errorf("the editor's initialize got %q", line)
		}
		if code := b.wait(t); code != 3 {
			t.Errorf("exit %d; stderr:\n%s", code, b.stderr.String())
		}
		if !strings.Contains(b.stderr.String(), "did not answer") {
			t.Errorf("stderr does not say why: %s", b.stderr.String())
		}
	})
	t.Run("editor closed", func(t *testing.T) {
		b := startBridge(t)
		b.stdin.Close()
		if code := b.wait(t); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("editor pipe broke", func(t *testing.T) {
		d := startACPDaemon(t)
		b := startBridge(t, "--url", "http://"+d.addr, "--token", acpTestToken)
		b.stdout.Close() // the editor stops reading
		fmt.Fprintln(b.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		if code := b.wait(t); code != 1 {
			t.Errorf("exit %d; stderr:\n%s", code, b.stderr.String())
		}
	})
	t.Run("bad token", func(t *testing.T) {
		d := startACPDaemon(t)
		b := startBridge(t, "--url", "http://"+d.addr, "--token", "not-the-token-at-all")
		fmt.Fprintln(b.stdin, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":1}}`)
		line, _ := bufio.NewReader(b.stdout).ReadString('\n')
		var resp struct {
			ID    string `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(line), &resp)
		if resp.ID != "i" || resp.Error.Code != -32000 || !strings.Contains(resp.Error.Message, "401") {
			t.Errorf("the editor got %q", line)
		}
		b.stdin.Close()
		if code := b.wait(t); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
}
