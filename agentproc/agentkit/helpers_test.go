package agentkit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

// logBuffer collects an agent's log output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// harness runs an agent in-process over io.Pipes.
type harness struct {
	*agentkittest.Conn
	agent *Agent
	logs  *logBuffer
	ready agentproc.AgentReady
	stdin io.WriteCloser
	errc  chan error
}

// start runs a on pipes and reads its agent_ready.
func start(t *testing.T, a *Agent, logs *logBuffer) *harness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{agent: a, logs: logs, stdin: inW, errc: make(chan error, 1)}
	go func() {
		err := a.Run(ctx, inR, outW)
		outW.Close()
		h.errc <- err
	}()
	h.Conn = agentkittest.NewConn(t, inW, outR)
	h.Conn.Timeout = 10 * time.Second
	first := h.Next()
	if first.Type != agentproc.TypeAgentReady {
		t.Fatalf("first line is %s, want agent_ready", first)
	}
	first.Decode(t, &h.ready)
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.errc:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its input closed")
		}
		cancel()
		if t.Failed() && logs != nil {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	return h
}

// newTestAgent returns an agent with a scripted model whose Exit is stubbed
// and a captured log.
func newTestAgent(opts Options) (*Agent, *logBuffer) {
	logs := &logBuffer{}
	opts.Logger = testLogger(logs)
	if opts.Model == nil {
		opts.Model = &ScriptedModel{SlowPace: 5 * time.Millisecond, Exit: func(int) {}}
	}
	return New(opts), logs
}

// prompt sends a prompt and checks that it is accepted at once.
func (h *harness) prompt(t *testing.T, id, message string) {
	t.Helper()
	h.Send(agentproc.PromptCommand{ID: id, Type: agentproc.CmdPrompt, Message: message})
	var r agentproc.Response
	h.AwaitResponse(id).Decode(t, &r)
	if !r.Success || r.Command != agentproc.CmdPrompt {
		t.Fatalf("prompt %q answered %+v", message, r)
	}
}

// agentEnd waits for agent_end and returns its messages.
func (h *harness) agentEnd(t *testing.T) []agentproc.AgentMessage {
	t.Helper()
	var ev agentproc.Event
	h.Await(agentproc.EventAgentEnd, nil).Decode(t, &ev)
	return ev.Messages
}

// lastAssistant returns the last assistant message of msgs.
func lastAssistant(t *testing.T, msgs []agentproc.AgentMessage) *agentproc.AgentMessage {
	t.Helper()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == string(RoleAssistant) {
			return &msgs[i]
		}
	}
	t.Fatalf("no assistant message in %+v", msgs)
	return nil
}

// counterState is the state of the test domain "counter".
type counterState struct {
	Count int      `json:"count"`
	Log   []string `json:"log"`
}

func counterSurface() Surface[counterState] {
	return Surface[counterState]{
		Domain:  "counter",
		Initial: counterState{Log: []string{}},
		Commands: map[string]Command[counterState]{
			"increment": Func[counterState](func(ctx *SurfaceCtx[counterState], _ json.RawMessage) (any, error) {
				ctx.SetState(func(s counterState) counterState { s.Count++; return s })
				return map[string]int{"count": ctx.Get().Count}, nil
			}),
		},
	}
}

// incrementTool runs counter.increment through the daemon.
func incrementTool() Tool {
	return Tool{Name: "increment", Description: "add one", Run: func(ctx context.Context, tc *ToolCtx, _ json.RawMessage) (string, error) {
		data, err := tc.SurfaceCommand(ctx, "counter", "increment", nil)
		if err != nil {
			return "", err
		}
		return "count is " + strings.TrimSpace(string(data)), nil
	}}
}
