// Package agentkittest drives surfaced/1 agents in tests the way the daemon
// would: JSONL over real pipes (or any reader/writer pair), with helpers to
// build an agent binary, wait for a line of a given type, and stand in for an
// OpenAI-compatible server.
package agentkittest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultTimeout bounds each wait of a Conn.
const DefaultTimeout = 15 * time.Second

// Line is one JSONL line written by the agent.
type Line struct {
	Type string
	Raw  []byte
}

// Decode unmarshals the line into v, failing the test on error.
func (l Line) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(l.Raw, v); err != nil {
		t.Fatalf("decode %s line %s: %v", l.Type, l.Raw, err)
	}
}

// Map returns the line as a generic JSON object.
func (l Line) Map() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(l.Raw, &m)
	return m
}

func (l Line) String() string { return string(l.Raw) }

// Conn is the daemon's end of an agent's stdin/stdout.
type Conn struct {
	t     testing.TB
	w     io.Writer
	wmu   sync.Mutex
	lines chan Line
	done  chan struct{} // closed when the agent's output has ended
	// Timeout bounds each wait; DefaultTimeout unless changed.
	Timeout time.Duration
	// Seen holds every line read so far, in order.
	Seen []Line
}

// NewConn reads the agent's lines from r and writes commands to w.
func NewConn(t testing.TB, w io.Writer, r io.Reader) *Conn {
	c := &Conn{t: t, w: w, lines: make(chan Line, 4096), done: make(chan struct{}), Timeout: DefaultTimeout}
	go func() {
		br := bufio.NewReader(r)
		for {
			raw, err := br.ReadBytes('\n')
			raw = bytes.TrimRight(raw, "\r\n")
			if len(raw) > 0 {
				var env struct {
					Type string `json:"type"`
				}
				if jerr := json.Unmarshal(raw, &env); jerr != nil {
					env.Type = "!invalid"
				}
				c.lines <- Line{Type: env.Type, Raw: raw}
			}
			if err != nil {
				close(c.lines)
				close(c.done)
				return
			}
		}
	}()
	return c
}

// Send writes v as one line.
func (c *Conn) Send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatalf("encode %T: %v", v, err)
	}
	c.SendRaw(string(b))
}

// SendRaw writes s followed by '\n'. It fails the test when the agent does
// not take the line within Timeout: an agent must keep reading its input
// whatever its tools and turns are doing.
func (c *Conn) SendRaw(s string) {
	c.t.Helper()
	done := make(chan error, 1)
	go func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		_, err := io.WriteString(c.w, s+"\n")
		done <- err
	}()
	t := time.NewTimer(c.Timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			c.t.Fatalf("write to agent: %v", err)
		}
	case <-t.C:
		c.t.Fatalf("the agent did not read its input within %v (blocked input loop?); line: %.200s", c.Timeout, s)
	}
}

// Next returns the next line, failing the test after Timeout or at EOF.
func (c *Conn) Next() Line {
	c.t.Helper()
	l, st := c.next(c.Timeout)
	if st != got {
		c.t.Fatalf("no line (%s) within %v; seen: %s", st, c.Timeout, c.dump())
	}
	return l
}

type nextState int

const (
	got nextState = iota
	closed
	timedOut
)

func (s nextState) String() string {
	return [...]string{"got", "output ended", "timed out"}[s]
}

func (c *Conn) next(wait time.Duration) (Line, nextState) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return Line{}, closed
		}
		c.Seen = append(c.Seen, l)
		return l, got
	case <-t.C:
		return Line{}, timedOut
	}
}

// Await skips lines until one of type typ for which match (if not nil)
// reports true, and returns it. It fails the test after Timeout.
func (c *Conn) Await(typ string, match func(Line) bool) Line {
	c.t.Helper()
	deadline := time.Now().Add(c.Timeout)
	for {
		l, st := c.next(time.Until(deadline))
		if st != got {
			c.t.Fatalf("no %s line (%s) within %v; seen: %s", typ, st, c.Timeout, c.dump())
		}
		if l.Type == typ && (match == nil || match(l)) {
			return l
		}
	}
}

// AwaitResponse waits for the pi response to the command with id.
func (c *Conn) AwaitResponse(id string) Line {
	c.t.Helper()
	return c.Await("response", func(l Line) bool { return l.Map()["id"] == id })
}

// EOF waits until the agent's output ends and returns the lines read on the way.
func (c *Conn) EOF() []Line {
	c.t.Helper()
	var rest []Line
	deadline := time.Now().Add(c.Timeout)
	for {
		l, st := c.next(time.Until(deadline))
		switch st {
		case closed:
			return rest
		case timedOut:
			c.t.Fatalf("agent output did not end within %v; seen: %s", c.Timeout, c.dump())
		}
		rest = append(rest, l)
	}
}

func (c *Conn) dump() string {
	var sb strings.Builder
	for _, l := range c.Seen {
		sb.WriteString("\n  ")
		if len(l.Raw) > 400 {
			sb.Write(l.Raw[:400])
			sb.WriteString("…")
		} else {
			sb.Write(l.Raw)
		}
	}
	return sb.String()
}

// Build compiles the main package in dir into t.TempDir() and returns the
// binary's path. It uses the go command on PATH (go test puts its own first).
func Build(t testing.TB, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build %s: %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(abs))
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// Proc is an agent subprocess connected over real pipes.
type Proc struct {
	*Conn
	Cmd *exec.Cmd

	stdin  io.WriteCloser
	stderr *lockedBuffer
	waited chan struct{}
	err    error
}

// Start runs bin with the test's environment minus SURFACED_LLM_* (so that
// a developer's settings never leak into a test), plus env ("K=V"). The
// process is stopped when the test ends; its stderr is logged if the test failed.
func Start(t testing.TB, bin string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURFACED_LLM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, stdin: stdin, stderr: &lockedBuffer{}, waited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p.Conn = NewConn(t, stdin, stdout)
	go func() {
		// Wait closes stdout only after the reader has hit EOF, which is what
		// cmd.Wait requires of StdoutPipe users.
		<-p.Conn.done
		p.err = cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.waited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-p.waited
		}
		if t.Failed() {
			t.Logf("agent stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// CloseStdin ends the agent's input, as the daemon does when it stops a session.
func (p *Proc) CloseStdin() error { return p.stdin.Close() }

// Wait waits for the process to exit and returns its exit code.
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.waited:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	if p.err != nil {
		return -1, p.err
	}
	return 0, nil
}

// Stderr returns what the process wrote to stderr so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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
