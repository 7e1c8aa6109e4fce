package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/lograte"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, timeout, cond, "%s", what)
}

// parent stands in for the session: it spawns the agent actor and passes
// on everything the agent actor sends it, without releasing the window
// (the test does).
type parent struct {
	cfg   Config
	child chan *actor.PID
	out   chan any
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(Props(p.cfg))
	case *pb.AgentLine, *pb.AgentLines, *pb.AgentDiagnostic, *pb.AgentExited, *pb.AgentReply:
		p.out <- m
	}
}

// harness runs an agent actor under a parent in an actor system of its own.
type harness struct {
	sys    *actor.ActorSystem
	parent *actor.PID
	agent  *actor.PID
	out    chan any
	window *Window
}

func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet() }))
	if cfg.Window == nil {
		cfg.Window = NewWindow(0)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	p := &parent{cfg: cfg, child: make(chan *actor.PID, 1), out: make(chan any, 1<<16)}
	h := &harness{sys: sys, out: p.out, window: cfg.Window}
	h.parent = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	h.agent = <-p.child
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(h.parent).Wait()
		sys.Shutdown()
	})
	return h
}

// next returns the next message the parent got, releasing its cost when
// release is set.
func (h *harness) next(t *testing.T, release bool) any {
	t.Helper()
	select {
	case m := <-h.out:
		if release {
			h.window.Release(Cost(m))
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("nothing from the agent actor")
		return nil
	}
}

// lines flattens what the parent got into lines.
func lines(m any) []*pb.AgentLine {
	switch v := m.(type) {
	case *pb.AgentLine:
		return []*pb.AgentLine{v}
	case *pb.AgentLines:
		return v.GetLines()
	}
	return nil
}

// An agent that writes faster than the session handles is held back at its
// pipe: the reader hands over no more than the window, and waits.
func TestWindowHoldsTheAgentBack(t *testing.T) {
	const total = 100000 // ~10 MB: far more than the window, the pipe and the reader's buffer
	argv := testkit.PythonAgent(t, `
import json, os, sys
out = sys.stdout
out.write(json.dumps({"type": "hello", "pid": os.getpid()}) + "\n")
pad = "x" * 80
for i in range(100000):
    out.write('{"type":"spam","n":%d,"pad":"%s"}\n' % (i, pad))
out.flush()
`)
	const window = 256 << 10
	h := start(t, Config{SessionID: "s", Incarnation: 1, Spec: proc.Spec{Argv: argv}, Window: NewWindow(window)})

	first := lines(h.next(t, false))
	var hello struct{ PID int }
	if len(first) == 0 || json.Unmarshal(first[0].GetLine(), &hello) != nil || hello.PID == 0 {
		t.Fatalf("first message %v", first)
	}
	got := len(first) - 1
	inFlight := Cost(&pb.AgentLines{Lines: first})
	// Nothing is released: the agent must end up blocked on its full pipe
	// with at most a window (plus the one message that may exceed it) handed
	// over.
	eventually(t, 30*time.Second, "the reader waiting for room and the agent blocked writing its stdout", func() bool {
		for {
			select {
			case m := <-h.out:
				got += len(lines(m))
				inFlight += Cost(m)
				continue
			default:
			}
			break
		}
		return h.window.Waiting() && testkit.BlockedWritingPipe(hello.PID)
	})
	if inFlight > window+maxBatchBytes+maxBatch*lineOverhead || h.window.Used() > window+maxBatchBytes+maxBatch*lineOverhead {
		t.Fatalf("%d bytes handed over (window says %d), the window is %d", inFlight, h.window.Used(), window)
	}
	if got >= total {
		t.Fatalf("all %d lines were handed over with the window full", got)
	}
	t.Logf("held back after %d of %d lines, %d bytes in flight", got, total, inFlight)

	// The session catches up: everything arrives, in order, and the agent
	// exits.
	h.window.Release(inFlight)
	next := got
	for {
		m := h.next(t, true)
		if ex, ok := m.(*pb.AgentExited); ok {
			if ex.GetExitCode() != 0 {
				t.Fatalf("exit %+v", ex)
			}
			break
		}
		for _, l := range lines(m) {
			var v struct{ N int }
			if err := json.Unmarshal(l.GetLine(), &v); err != nil || v.N != next {
				t.Fatalf("line %s, want n=%d", l.GetLine(), next)
			}
			next++
		}
	}
	if next != total {
		t.Fatalf("%d lines arrived, want %d", next, total)
	}
}

// replyTo is a PID whose AgentReplies land in a channel.
func replyTo(t *testing.T, h *harness) (*actor.PID, chan *pb.AgentReply) {
	ch := make(chan *pb.AgentReply, 4)
	pid := h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*pb.AgentReply); ok {
			ch <- r
		}
	}))
	return pid, ch
}

func reply(t *testing.T, ch chan *pb.AgentReply) *pb.AgentReply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no AgentReply")
		return nil
	}
}

// An answer over the line cap fails the command it answers at once: its id
// is read from the line's first bytes.
func TestTooLongAnswerFailsItsCommandAtOnce(t *testing.T) {
	argv := testkit.PythonAgent(t, `
import json, sys
for raw in sys.stdin:
    cmd = json.loads(raw)
    big = "y" * (200 * 1024)
    sys.stdout.write('{"type":"surface_dispatch_result","id":%s,"result":{"ok":true},"state":{"blob":"%s"}}\n' % (json.dumps(cmd["id"]), big))
    sys.stdout.write('{"type":"surface_dispatch_result","id":"other","result":{"ok":true}}\n')
    sys.stdout.flush()
`)
	h := start(t, Config{SessionID: "s", Incarnation: 1, Spec: proc.Spec{Argv: argv, MaxLine: 64 << 10}})
	to, ch := replyTo(t, h)
	line, _ := proc.Marshal(proc.SurfaceDispatch{Type: proc.TypeSurfaceDispatch, ID: "demo#1", Domain: "demo", Action: "x"})
	h.sys.Root.Send(h.agent, &pb.AgentSend{Line: line, ExpectId: "demo#1", ReplyTo: pb.PidOf(to)})
	r := reply(t, ch)
	if r.GetId() != "demo#1" || !r.GetFailed() || r.GetError().GetCode() != proc.CodeLineTooLong ||
		!strings.Contains(r.GetError().GetMessage(), "over the line limit") {
		t.Fatalf("reply %v", r)
	}
	// The session still gets the diagnostic, and the stream goes on.
	var diag *pb.AgentDiagnostic
	for diag == nil {
		if d, ok := h.next(t, true).(*pb.AgentDiagnostic); ok {
			diag = d
		}
	}
	if diag.GetCode() != proc.CodeLineTooLong {
		t.Fatalf("diagnostic %v", diag)
	}
	for {
		if l := lines(h.next(t, true)); len(l) == 1 && l[0].GetId() == "other" {
			break
		}
	}
}

// A command that cannot be written to the agent fails at once (the agent
// does not read its stdin): whoever waits for its answer is told why.
func TestUnwritableCommandFailsAtOnce(t *testing.T) {
	argv := testkit.PythonAgent(t, `
import time
time.sleep(3600)
`)
	h := start(t, Config{SessionID: "s", Incarnation: 1, Spec: proc.Spec{Argv: argv, StdinBytes: 64 << 10}})
	to, ch := replyTo(t, h)
	line, _ := proc.Marshal(proc.PromptCommand{Type: proc.CmdPrompt, ID: "turn.prompt.1", Message: strings.Repeat("<", 100<<10)})
	h.sys.Root.Send(h.agent, &pb.AgentSend{Line: line, ExpectId: "turn.prompt.1", ReplyTo: pb.PidOf(to)})
	r := reply(t, ch)
	if r.GetId() != "turn.prompt.1" || !r.GetFailed() || r.GetError().GetCode() != CodeWriteFailed ||
		!strings.Contains(r.GetError().GetMessage(), "stdin queue full") {
		t.Fatalf("reply %v", r)
	}
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu    sync.Mutex
	count map[string]int
	sum   map[string]int64 // "suppressed" of summaries, by message
}

func (c *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c *countingHandler) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count[r.Message]++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			c.sum[r.Message] += a.Value.Int64()
		}
		return true
	})
	return nil
}
func (c *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countingHandler) WithGroup(string) slog.Handler      { return c }

// 100 000 stderr lines and 100 000 invalid stdout lines make a bounded
// number of log records: the first of the interval, then a summary that
// counts the rest.
func TestAgentFloodsDoNotFloodTheLog(t *testing.T) {
	argv := testkit.PythonAgent(t, `
import sys
err, out = sys.stderr, sys.stdout
for i in range(100000):
    err.write("noise %d\n" % i)
    out.write("not json %d\n" % i)
err.flush()
out.flush()
`)
	logs := &countingHandler{count: map[string]int{}, sum: map[string]int64{}}
	h := start(t, Config{SessionID: "s", Incarnation: 1, Spec: proc.Spec{Argv: argv},
		Logger: slog.New(logs), LogRate: lograte.Config{Lines: 20, Interval: time.Hour}})
	diags := 0
	for {
		m := h.next(t, true)
		if _, ok := m.(*pb.AgentDiagnostic); ok {
			diags++
		}
		if _, ok := m.(*pb.AgentExited); ok {
			break
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	t.Logf("log records: %v; summaries: %v", logs.count, logs.sum)
	if diags != 100000 {
		t.Fatalf("%d diagnostics reached the session, want every one", diags)
	}
	if logs.count["agent stderr"] != 20 || logs.count["agent line dropped"] != 20 {
		t.Fatalf("records %v, want 20 of each", logs.count)
	}
	if logs.sum["agent stderr: records suppressed"] != 100000-20 || logs.sum["agent lines dropped: records suppressed"] != 100000-20 {
		t.Fatalf("summaries %v: every line not logged is counted", logs.sum)
	}
	total := 0
	for _, n := range logs.count {
		total += n
	}
	if total > 50 {
		t.Fatalf("%d log records for 200 000 lines", total)
	}
}

// pi answers every line it does not know with an id-less "Unknown command"
// failure, the surface lines of a surfaced/1 extension inside it included.
// Those refusals are expected, one per surface line written, and go no
// further; a refusal beyond them, of a line the daemon never wrote, or of
// a line pi knows, reaches the session like any line nobody asked for.
func TestPiRefusalsOfSurfaceLinesAreExpected(t *testing.T) {
	argv := testkit.PythonAgent(t, `
import json, sys
out = sys.stdout
n = 0
for raw in sys.stdin:
    cmd = json.loads(raw)
    if cmd["type"] == "done":
        # One refusal more than was sent, one of a type never sent, one of a
        # type pi knows, and one that is not pi's text: all unexpected.
        for c in ("state_changed", "surface_fetch", "get_state"):
            out.write(json.dumps({"type": "response", "command": c, "success": False, "error": "Unknown command: " + c}) + "\n")
        out.write(json.dumps({"type": "response", "command": "state_changed", "success": False, "error": "no"}) + "\n")
        out.write(json.dumps({"type": "marker"}) + "\n")
        out.flush()
        continue
    out.write(json.dumps({"type": "response", "command": cmd["type"], "success": False, "error": "Unknown command: " + cmd["type"]}) + "\n")
    out.flush()
`)
	h := start(t, Config{SessionID: "s", Incarnation: 1, Spec: proc.Spec{Argv: argv}})
	send := func(v any) {
		line, err := proc.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		h.sys.Root.Send(h.agent, &pb.AgentSend{Line: line})
	}
	const n = 500
	for i := range n {
		send(proc.SurfaceDispatch{Type: proc.TypeSurfaceDispatch, ID: fmt.Sprintf("demo#%d", i), Domain: "demo", Action: "increment"})
		send(proc.StateChanged{Type: proc.TypeStateChanged, Key: "ui.theme", Value: json.RawMessage(`"dark"`), Rev: uint64(i)})
	}
	send(map[string]string{"type": "done"})
	var got []string
	for {
		for _, l := range lines(h.next(t, true)) {
			if l.GetType() == "marker" {
				want := []string{"state_changed: Unknown command: state_changed", "surface_fetch: Unknown command: surface_fetch",
					"get_state: Unknown command: get_state", "state_changed: no"}
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("lines that reached the session: %q, want %q", got, want)
				}
				return
			}
			var r proc.Response
			if err := json.Unmarshal(l.GetLine(), &r); err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Command+": "+r.Error)
		}
	}
}
