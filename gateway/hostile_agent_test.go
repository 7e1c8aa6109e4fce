package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Misbehaving agents against a real daemon: tiny Python agents, real
// pipes, real HTTP, SSE, WebSocket and ACP clients.

// pyPrelude is what the tests' Python agents share: one JSON line out,
// agent_ready, and a one-message reply to a prompt.
const pyPrelude = `
import json, os, sys, time
out = sys.stdout
def send(v):
    out.write(json.dumps(v, separators=(",", ":")) + "\n")
    out.flush()
def ready(surfaces=()):
    send({"type": "agent_ready", "protocol": "surfaced/1", "name": "py", "surfaces": list(surfaces)})
def say(pid, text):
    send({"type": "response", "id": pid, "command": "prompt", "success": True})
    msg = {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"}
    send({"type": "agent_start"})
    send({"type": "message_start", "message": {"role": "assistant", "content": []}})
    send({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": text}})
    send({"type": "message_end", "message": msg})
    send({"type": "agent_end", "messages": [msg]})
def note(what):
    with open(os.environ["AGENT_NOTES"], "a") as f:
        f.write(what + "\n")
if "AGENT_NOTES" in os.environ:
    note("pid %d" % os.getpid())
`

// pyAgent is an agent spec running prelude+src, with a notes file the
// agent appends to (its pid first).
type pyAgent struct {
	spec  surfaced.AgentSpec
	notes string
}

func newPyAgent(t *testing.T, name, src string) pyAgent {
	t.Helper()
	notes := filepath.Join(t.TempDir(), "notes")
	return pyAgent{
		spec:  surfaced.AgentSpec{Name: name, Argv: testkit.PythonAgent(t, pyPrelude+src), Env: []string{"AGENT_NOTES=" + notes}},
		notes: notes,
	}
}

// lines are the notes the agent wrote so far.
func (a pyAgent) lines() []string {
	b, _ := os.ReadFile(a.notes)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// pid is the agent process's pid, once it has started.
func (a pyAgent) pid(t *testing.T) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, 30*time.Second, func() bool {
		for _, l := range a.lines() {
			if p, ok := strings.CutPrefix(l, "pid "); ok {
				pid, _ = strconv.Atoi(p)
			}
		}
		return pid > 0
	}, "the agent's pid")
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// heapInUse is the daemon's heap in use after a collection (the daemon
// runs in the test's process).
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rssKiB is the process's resident set, for the log.
func rssKiB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// logRecords counts a logger's records by message, and the "suppressed"
// counts of summaries.
type logRecords struct {
	mu         sync.Mutex
	count      map[string]int
	suppressed map[string]int64
}

func newLogRecords() *logRecords {
	return &logRecords{count: map[string]int{}, suppressed: map[string]int64{}}
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count[r.Message]++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			l.suppressed[r.Message] += a.Value.Int64()
		}
		return true
	})
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) get(msg string) (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[msg], l.suppressed[msg]
}

const floodSrc = `
ready()
line = '{"type":"queue_update","steering":[],"followUp":["' + "x" * 100 + '"]}\n'
chunk = line * 1000
written = 0
while True:
    out.write(chunk)
    written += len(chunk)
    if written % (len(chunk) * 100) == 0:
        note("wrote %d" % written)
`

// An agent that floods stdout with lines nobody asked for is held back at
// its pipe: the daemon's memory stays bounded whatever it writes, and a
// DELETE behind the flood answers.
func TestFloodingAgentIsHeldBack(t *testing.T) {
	a := newPyAgent(t, "flood", floodSrc)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Limits(surfaced.Limits{FloodRate: -1}))
	before, rssBefore := heapInUse(), rssKiB()
	id := d.Create(map[string]any{"agent": "flood"})
	pid := a.pid(t)
	const target = 48 << 20
	var wrote int
	testkit.Eventually(t, 5*time.Minute, func() bool {
		for _, l := range a.lines() {
			if v, ok := strings.CutPrefix(l, "wrote "); ok {
				wrote, _ = strconv.Atoi(v)
			}
		}
		return wrote >= target
	}, "the agent to write 48 MiB")
	during, rssDuring := heapInUse(), rssKiB()
	growth := int64(during) - int64(before)
	t.Logf("the agent wrote %d MiB: daemon heap in use %d -> %d MiB, RSS %d -> %d MiB", wrote>>20, before>>20, during>>20, rssBefore>>10, rssDuring>>10)
	if growth > 40<<20 {
		t.Fatalf("the daemon's heap grew %d MiB while the agent wrote %d MiB", growth>>20, wrote>>20)
	}
	// The agent is held back by the daemon (its pipe is full), not done.
	testkit.Eventually(t, 30*time.Second, func() bool { return testkit.BlockedWritingPipe(pid) }, "the agent blocked on its stdout")

	st, out := d.JSON("DELETE", "/api/sessions/"+id, nil)
	if st != 200 {
		t.Fatalf("DELETE of a flooded session: %d %v", st, out)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return !alive(pid) }, "the agent gone")
	t.Logf("after DELETE: heap in use %d MiB, RSS %d MiB", heapInUse()>>20, rssKiB()>>10)
}

// An agent that keeps writing lines nobody asked for is stopped with a
// clear diagnostic: the session's status, a diagnostic frame and the log.
func TestFloodingAgentIsStopped(t *testing.T) {
	a := newPyAgent(t, "flood", floodSrc)
	logs := newLogRecords()
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Limits(surfaced.Limits{FloodBurst: 5000, FloodRate: 100}),
		daemon.Config(func(c *surfaced.Config) { c.Logger = slog.New(logs) }))
	id := d.Create(map[string]any{"agent": "flood"})
	s := d.SSE(id, "")
	pid := a.pid(t)
	diag := s.Wait(t, 60*time.Second, "the flooding diagnostic", func(e testkit.Event) bool {
		return e.Kind == "diagnostic" && e.Data["code"] == "agent_flooding"
	})
	if msg := diag.Data["message"].(string); !strings.Contains(msg, "nobody asked for") || !strings.Contains(msg, "5000 at once and 100 a second") {
		t.Fatalf("diagnostic %q", msg)
	}
	s.Wait(t, 10*time.Second, "the error status", func(e testkit.Event) bool {
		return e.Kind == "session" && e.Data["status"] == "error" && e.Data["code"] == "agent_flooding"
	})
	testkit.Eventually(t, 30*time.Second, func() bool { return !alive(pid) }, "the agent stopped")
	if n, _ := logs.get("agent flooding its output; stopping it"); n != 1 {
		t.Fatalf("%d log records say so", n)
	}
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "hi"}); st != 409 || daemon.ErrCode(out) != "agent_unavailable" {
		t.Fatalf("prompt after the stop: %d %v", st, out)
	}
	// An AG-UI run is refused the same way, before its stream starts.
	if st, body := d.Do("POST", "/api/sessions/"+id+"/ag-ui", aguiBody("t", "hi")); st != 409 {
		t.Fatalf("AG-UI run after the stop: %d %s", st, body)
	} else if code, _ := apiError(t, body); code != "agent_unavailable" {
		t.Fatalf("AG-UI run after the stop: %d %s", st, body)
	}
}

// 100 000 lines on stderr make a bounded number of log records: the first
// of the interval, then one summary that counts the rest.
func TestStderrFloodIsSummarised(t *testing.T) {
	a := newPyAgent(t, "noisy", `
for i in range(100000):
    sys.stderr.write("noise %d\n" % i)
sys.stderr.flush()
ready()
for raw in sys.stdin:
    pass
`)
	logs := newLogRecords()
	d := daemon.Start(t, daemon.Agents(a.spec),
		daemon.Limits(surfaced.Limits{AgentLogLines: 20, AgentLogInterval: time.Hour}),
		daemon.Config(func(c *surfaced.Config) { c.Logger = slog.New(logs) }))
	id := d.Create(map[string]any{"agent": "noisy"})
	s := d.SSE(id, "")
	s.Wait(t, 60*time.Second, "ready", testkit.IsStatus("ready"))
	// The summary comes at the end of the interval, or when the agent ends.
	if st, _ := d.JSON("DELETE", "/api/sessions/"+id, nil); st != 200 {
		t.Fatalf("delete: %d", st)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		_, n := logs.get("agent stderr: records suppressed")
		return n > 0
	}, "the summary")
	n, _ := logs.get("agent stderr")
	summaries, suppressed := logs.get("agent stderr: records suppressed")
	t.Logf("100000 stderr lines: %d records, %d summary records counting %d", n, summaries, suppressed)
	if n != 20 || summaries != 1 || suppressed != 100000-20 {
		t.Fatalf("%d records and %d summaries (%d suppressed) for 100000 stderr lines", n, summaries, suppressed)
	}
}

// An answer over the line cap fails its command at once with
// line_too_long, not with a timeout when the settle window ends.
func TestTooLongAnswerFailsAtOnce(t *testing.T) {
	a := newPyAgent(t, "big", `
ready([{"domain": "big", "commands": ["get"], "initialState": {}}])
for raw in sys.stdin:
    m = json.loads(raw)
    if m.get("type") == "surface_dispatch":
        out.write('{"type":"surface_dispatch_result","id":%s,"result":{"ok":true},"state":{"blob":"%s"}}\n' % (json.dumps(m["id"]), "z" * 200000))
        out.flush()
`)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Limits(surfaced.Limits{MaxLine: 64 << 10, SettleWindow: time.Hour}))
	id := d.Create(map[string]any{"agent": "big"})
	s := d.SSE(id, "")
	s.Wait(t, 30*time.Second, "ready", testkit.IsStatus("ready"))
	st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/big/get", nil)
	if st != 200 || out["ok"] != false || daemon.ErrCode(out) != "line_too_long" {
		t.Fatalf("command answered too long: %d %v", st, out)
	}
	s.Wait(t, 10*time.Second, "the line_too_long diagnostic", func(e testkit.Event) bool {
		return e.Kind == "diagnostic" && e.Data["code"] == "line_too_long"
	})
	if _, out := d.JSON("GET", "/api/sessions/"+id+"/state", nil); out["entries"].(map[string]any)["surface:big"].(map[string]any)["rev"] != 1.0 {
		t.Fatalf("the state changed: %v", out)
	}
}

// pyEcho answers every prompt with the length of the line it read and the
// number of '<' in it.
const pyEcho = `
ready()
for raw in sys.stdin:
    m = json.loads(raw)
    if m.get("type") == "prompt":
        say(m["id"], "%d %d" % (len(raw.encode()), raw.count("<")))
`

// Prompts are bounded at the door (413 with the limit named, over HTTP,
// WebSocket and ACP), and what passes reaches the agent without HTML
// escaping: a '<' is one byte on the pipe, not six.
func TestPromptSizeAtTheDoor(t *testing.T) {
	a := newPyAgent(t, "echo", pyEcho)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Limits(surfaced.Limits{PromptBytes: 256 << 10}))
	id := d.Create(map[string]any{"agent": "echo"})
	s := d.SSE(id, "")
	s.Wait(t, 30*time.Second, "ready", testkit.IsStatus("ready"))

	big := strings.Repeat("<", 300<<10)
	st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": big})
	if msg, _ := out["error"].(map[string]any)["message"].(string); st != 413 || daemon.ErrCode(out) != "too_large" ||
		!strings.Contains(msg, "262144-byte limit") || !strings.Contains(msg, "limits.prompt_bytes") {
		t.Fatalf("HTTP prompt over the limit: %d %v", st, out)
	}

	ws := d.WS(id, "")
	ws.Send(map[string]any{"id": "p1", "type": "prompt", "message": strings.Repeat("a", 257<<10)})
	r := ws.Wait("the reply", func(m map[string]any) bool {
		d, _ := m["data"].(map[string]any)
		return m["event"] == "reply" && d["id"] == "p1"
	})["data"].(map[string]any)
	if r["ok"] != false || r["status"] != 413.0 || r["error"].(map[string]any)["code"] != "too_large" {
		t.Fatalf("WebSocket prompt over the limit: %v", r)
	}

	c := d.ACPClient()
	c.Agent = "echo"
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	resp := c.Response(c.Stream(sid), c.Prompt(sid, big))
	e, _ := resp["error"].(map[string]any)
	if e == nil || e["code"] != -32602.0 || !strings.Contains(e["message"].(string), "262144-byte limit") {
		t.Fatalf("ACP prompt over the limit: %v", resp)
	}

	// Within the limit, '<' travels as itself.
	fine := strings.Repeat("<", 200<<10)
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": fine}); st != 202 {
		t.Fatalf("prompt within the limit: %d %v", st, out)
	}
	ev := s.Wait(t, 30*time.Second, "the agent's answer", testkit.IsChat("text-delta"))
	var n, lt int
	fmt.Sscanf(ev.Data["delta"].(string), "%d %d", &n, &lt)
	if lt != len(fine) || n > len(fine)+200 {
		t.Fatalf("the agent read a line of %d bytes with %d '<' for a prompt of %d '<'", n, lt, len(fine))
	}
}

// pyDeaf announces itself and never reads its stdin.
const pyDeaf = `
ready()
time.sleep(3600)
`

// A prompt that cannot be written to the agent ends its turn with an error
// at once: the session is not left busy, and ACP's session/prompt is
// answered.
func TestUnwritablePromptEndsTheTurn(t *testing.T) {
	a := newPyAgent(t, "deaf", pyDeaf)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Limits(surfaced.Limits{StdinBytes: 64 << 10}))
	id := d.Create(map[string]any{"agent": "deaf"})
	s := d.SSE(id, "")
	s.Wait(t, 30*time.Second, "ready", testkit.IsStatus("ready"))
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": strings.Repeat("a", 100<<10)}); st != 202 {
		t.Fatalf("prompt: %d %v", st, out)
	}
	e := s.Wait(t, 30*time.Second, "the error chunk", testkit.IsChat("error"))
	if txt := e.Data["errorText"].(string); !strings.Contains(txt, "did not reach the agent") || !strings.Contains(txt, "stdin queue full") {
		t.Fatalf("error %q", txt)
	}
	fin := s.Wait(t, 10*time.Second, "finish", testkit.IsChat("finish"))
	if fin.Data["messageMetadata"].(map[string]any)["stopReason"] != "error" {
		t.Fatalf("%s", fin.Raw)
	}
	if _, out := d.JSON("GET", "/api/sessions/"+id, nil); out["busy"] != false {
		t.Fatalf("the session stays busy: %v", out)
	}

	c := d.ACPClient()
	c.Agent = "deaf"
	c.Initialize()
	sid := c.NewSession(daemon.TempDir(t))
	resp := c.Response(c.Stream(sid), c.Prompt(sid, strings.Repeat("b", 100<<10)))
	if resp["error"] == nil && daemon.StopReason(resp) == "" {
		t.Fatalf("ACP prompt answered %v", resp)
	}
}

// pyQueue hosts domain q: "hold" answers after 3 s with count+100 (late),
// "inc" answers count+1 at once. It notes every dispatch it receives.
const pyQueue = `
ready([{"domain": "q", "commands": ["hold", "inc"], "initialState": {"count": 0}}])
for raw in sys.stdin:
    m = json.loads(raw)
    if m.get("type") != "surface_dispatch":
        continue
    note("dispatch %s %s deadline=%s" % (m["action"], m["id"], m.get("deadline")))
    st = m["state"]
    if m["action"] == "hold":
        time.sleep(3)
        st["count"] += 100
    else:
        st["count"] += 1
    send({"type": "surface_dispatch_result", "id": m["id"], "result": {"ok": True, "data": st}, "state": st})
`

// A command whose caller stops waiting is answered with what happened to
// it, and what it was told is the truth: one answered timeout never runs
// later, and the late answer of one that timed out is not applied. The
// command's deadline travels to the agent.
func TestCommandDeadlines(t *testing.T) {
	a := newPyAgent(t, "queue", pyQueue)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Gateway(gateway.Limits{RequestTimeout: 2 * time.Second}),
		daemon.Limits(surfaced.Limits{SettleWindow: time.Hour}))
	id := d.Create(map[string]any{"agent": "queue"})
	s := d.SSE(id, "")
	s.Wait(t, 30*time.Second, "ready", testkit.IsStatus("ready"))

	// A hold the agent answers after 3 s, over HTTP: its caller waits 2 s.
	held := make(chan map[string]any, 1)
	go func() {
		st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/q/hold", nil)
		out["_status"] = st
		held <- out
	}()
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(strings.Join(a.lines(), "\n"), "dispatch hold") }, "the hold dispatched")
	// Behind it, commands whose callers wait 1 s: two more holds and an inc.
	type answer struct {
		action string
		res    *pb.CommandResult
		err    error
	}
	answers := make(chan answer, 3)
	for _, act := range []string{"hold", "hold", "inc"} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			res, err := d.Runtime.Request(ctx, id, &pb.RunCommand{Caller: &pb.Caller{System: true}, Domain: "q", Action: act})
			r, _ := res.(*pb.CommandResult)
			answers <- answer{act, r, err}
		}()
	}
	for range 3 {
		r := <-answers
		if r.err != nil || r.res.GetOk() || r.res.GetError().GetCode() != "timeout" || !strings.Contains(r.res.GetError().GetMessage(), "not run") {
			t.Fatalf("%s behind the hold: %v %v, want timeout (not run)", r.action, r.res, r.err)
		}
	}
	// The caller of the first hold is told timeout before it gives up (not
	// 503 "try again").
	out := <-held
	if out["_status"] != 200 || out["ok"] != false || daemon.ErrCode(out) != "timeout" {
		t.Fatalf("the held command: %v", out)
	}
	// Its late answer (count+100) is ignored; the commands that timed out in
	// the queue never run. One more inc shows the truth.
	var final map[string]any
	testkit.Eventually(t, 30*time.Second, func() bool {
		st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/q/inc", nil)
		final = out
		return st == 200 && out["ok"] == true
	}, "a last inc to run")
	if got := final["data"].(map[string]any)["count"]; got != 1.0 {
		t.Fatalf("count %v: a command answered as failed was applied", got)
	}
	notes := strings.Join(a.lines(), "\n")
	if n := strings.Count(notes, "dispatch hold"); n != 1 {
		t.Fatalf("the agent received %d holds; the queued ones expired before their turn:\n%s", n, notes)
	}
	if !strings.Contains(notes, "deadline=20") {
		t.Fatalf("no deadline reached the agent:\n%s", notes)
	}
}

// A command whose caller has gone (its request withdrawn: timed out, or
// the client disconnected) is dropped before it reaches the agent.
func TestCommandOfAGoneCallerIsNotRun(t *testing.T) {
	a := newPyAgent(t, "queue", pyQueue)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Gateway(gateway.Limits{RequestTimeout: 10 * time.Second}))
	id := d.Create(map[string]any{"agent": "queue"})
	s := d.SSE(id, "")
	s.Wait(t, 30*time.Second, "ready", testkit.IsStatus("ready"))
	held := make(chan int, 1)
	go func() {
		st, _ := d.JSON("POST", "/api/sessions/"+id+"/surfaces/q/hold", nil)
		held <- st
	}()
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(strings.Join(a.lines(), "\n"), "dispatch hold") }, "the hold dispatched")
	// An inc queued behind the hold, whose caller then goes away: its
	// request is withdrawn as the directory does when a request's context
	// ends.
	sys := d.Runtime.System()
	fut := sys.Root.RequestFuture(d.Runtime.Local().Lookup(id), &pb.RunCommand{Caller: &pb.Caller{System: true}, Domain: "q", Action: "inc"}, time.Hour)
	sys.Root.Send(fut.PID(), "the caller left")
	if st := <-held; st != 200 {
		t.Fatalf("hold: %d", st)
	}
	st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/q/inc", nil)
	if st != 200 || out["data"].(map[string]any)["count"] != 101.0 {
		t.Fatalf("inc after the hold: %d %v (the abandoned inc must not have run)", st, out)
	}
	if n := strings.Count(strings.Join(a.lines(), "\n"), "dispatch inc"); n != 1 {
		t.Fatalf("the agent received %d incs", n)
	}
	if n := counterValue(t, d, "surfaced_surface_commands_total", "cancelled"); n != 1 {
		t.Fatalf("%v commands counted cancelled", n)
	}
}

// counterValue reads one labelled counter from the daemon's registry.
func counterValue(t *testing.T, d *daemon.Daemon, name, label string) float64 {
	t.Helper()
	mfs, err := d.Runtime.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A domain's queue is bounded: past it a command is refused at once with
// 429 queue_full, and nothing refused runs.
func TestCommandQueueBounded(t *testing.T) {
	a := newPyAgent(t, "queue", pyQueue)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Gateway(gateway.Limits{RequestTimeout: 10 * time.Second}),
		daemon.Limits(surfaced.Limits{CommandQueue: 2}))
	id := d.Create(map[string]any{"agent": "queue"})
	s := d.SSE(id, "")
	s.Wait(t, 30*time.Second, "ready", testkit.IsStatus("ready"))

	type answer struct {
		st  int
		out map[string]any
	}
	answers := make(chan answer, 8)
	run := func(action string) {
		st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/q/"+action, nil)
		answers <- answer{st, out}
	}
	go run("hold")
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Contains(strings.Join(a.lines(), "\n"), "dispatch hold") }, "the hold dispatched")
	for range 3 {
		go run("inc")
	}
	// Two wait behind the hold; the third is refused without waiting for it.
	first := <-answers
	if first.st != 429 || daemon.ErrCode(first.out) != "queue_full" {
		t.Fatalf("first answer %d %v, want 429 queue_full while the hold runs", first.st, first.out)
	}
	okIncs := 0
	for range 3 {
		r := <-answers
		if r.st != 200 {
			t.Fatalf("%d %v", r.st, r.out)
		}
		if r.out["ok"] == true {
			if c := r.out["data"].(map[string]any)["count"].(float64); c > 100 {
				okIncs++ // after the hold
			}
		}
	}
	if okIncs != 2 {
		t.Fatalf("%d incs ran after the hold, want the 2 that were queued", okIncs)
	}
}

// The stream and the API say the same about a domain's availability, from
// the same state: after an agent is stopped for flooding, the last session
// frame and GET /api/sessions/{id} both say its domain takes no commands
// (the frame said available while the API said not: the status went out
// before the agent was stopped, and nothing sent it again).
func TestAvailabilityAfterAFloodIsTheSameOnTheStreamAndTheAPI(t *testing.T) {
	a := newPyAgent(t, "flood", `
ready([{"domain": "box", "commands": ["poke"], "initialState": {}}])
line = '{"type":"queue_update","steering":[],"followUp":["x"]}\n'
while True:
    out.write(line * 1000)
`)
	d := daemon.Start(t, daemon.Agents(a.spec), daemon.Limits(surfaced.Limits{FloodBurst: 2000, FloodRate: 100}))
	id := d.Create(map[string]any{"agent": "flood"})
	s := d.SSE(id, "")
	pid := a.pid(t)
	s.Wait(t, 60*time.Second, "the error status", func(e testkit.Event) bool {
		return e.Kind == "session" && e.Data["status"] == "error" && e.Data["code"] == "agent_flooding"
	})
	testkit.Eventually(t, 30*time.Second, func() bool { return !alive(pid) }, "the agent stopped")
	// A barrier: a frame the session sends after everything before it.
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "test.barrier", "value": 1}); st != 200 {
		t.Fatalf("state: %d %v", st, out)
	}
	s.Wait(t, 10*time.Second, "the barrier", testkit.IsState("test.barrier", 0))
	var frame map[string]any
	for _, e := range s.All() {
		if e.Kind == "session" {
			frame = e.Data
		}
	}
	st, summary := d.JSON("GET", "/api/sessions/"+id, nil)
	if st != 200 {
		t.Fatalf("summary: %d %v", st, summary)
	}
	availability := func(v any) string {
		list, _ := v.([]any)
		var out []string
		for _, x := range list {
			m := x.(map[string]any)
			out = append(out, fmt.Sprintf("%s:%v", m["domain"], m["available"]))
		}
		return strings.Join(out, ",")
	}
	fromStream, fromAPI := availability(frame["surfaces"]), availability(summary["surfaces"])
	t.Logf("stream %q (status %v), API %q (status %v)", fromStream, frame["status"], fromAPI, summary["status"])
	if fromStream != fromAPI || frame["status"] != summary["status"] {
		t.Fatalf("the stream's last session frame says %q (status %v), the API %q (status %v)", fromStream, frame["status"], fromAPI, summary["status"])
	}
	if fromAPI != "box:false" {
		t.Fatalf("a stopped agent's domain is %q", fromAPI)
	}
}
