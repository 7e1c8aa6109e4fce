package surfaced_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
	"github.com/surfaced/surfaced/store/sqlite"
)

const owner = "alice"

var me = &pb.Caller{Subject: owner, Via: "browser"}

type harness struct {
	t  *testing.T
	rt *surfaced.Runtime
	st store.Store
}

type opt func(*surfaced.Config)

func withLimits(l surfaced.Limits) opt { return func(c *surfaced.Config) { c.Limits = l } }
func withDomains(d ...surfaced.DomainBinding) opt {
	return func(c *surfaced.Config) { c.Domains = append(c.Domains, d...) }
}

// withLogs sends the runtime's log, debug lines included, to w.
func withLogs(w io.Writer) opt {
	return func(c *surfaced.Config) {
		c.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// logBuffer is a log destination that the test reads while the runtime
// writes to it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

func withAgent(name string, argv []string) opt {
	return func(c *surfaced.Config) {
		c.Agents = append(c.Agents, surfaced.AgentSpec{Name: name, Argv: argv})
	}
}

func newHarness(t *testing.T, st store.Store, opts ...opt) *harness {
	t.Helper()
	if st == nil {
		st = memstore.New()
	}
	cfg := surfaced.Config{Store: st}
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.Agents) == 0 {
		cfg.Agents = []surfaced.AgentSpec{{Name: "fake", Argv: testkit.FakeAgent(t)}}
	}
	rt, err := surfaced.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, rt: rt, st: st}
	testkit.ShutdownAtCleanup(t, rt)
	return h
}

func (h *harness) create(agent string) string {
	h.t.Helper()
	id, err := h.rt.CreateSession(context.Background(), surfaced.CreateOptions{Owner: owner, Agent: agent})
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
	return id
}

func (h *harness) req(id string, m proto.Message) proto.Message {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.rt.Request(ctx, id, m)
	if err != nil {
		h.t.Fatalf("request %T: %v", m, err)
	}
	return res
}

func (h *harness) subscribe(id, last string) (*testkit.Collector, *pb.SubscribeResult) {
	h.t.Helper()
	c := testkit.NewCollector(h.rt.System())
	h.t.Cleanup(c.Stop)
	res := h.req(id, &pb.Subscribe{Subscriber: c.Pid(), LastEventId: last, ClientKind: "test", Subject: owner}).(*pb.SubscribeResult)
	if !res.GetOk() {
		h.t.Fatalf("subscribe: %v", res.GetError())
	}
	return c, res
}

func (h *harness) cmd(id, domain, action string, args any) *pb.CommandResult {
	h.t.Helper()
	var raw []byte
	if args != nil {
		raw, _ = json.Marshal(args)
	}
	return h.req(id, &pb.RunCommand{Caller: me, Domain: domain, Action: action, Args: raw}).(*pb.CommandResult)
}

func (h *harness) prompt(id, text string) *pb.PromptResult {
	h.t.Helper()
	return h.req(id, &pb.Prompt{Caller: me, Message: text}).(*pb.PromptResult)
}

func (h *harness) waitReady(c *testkit.Collector) {
	h.t.Helper()
	c.Wait(h.t, 10*time.Second, "ready", testkit.Status("ready"))
}

func count(t *testing.T, f testkit.Frame) int {
	t.Helper()
	v, _ := f.Data["value"].(map[string]any)
	n, _ := v["count"].(float64)
	return int(n)
}

func TestAgentHostedCommandAndSnapshot(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	c.Wait(t, 5*time.Second, "initial snapshot", testkit.State("surface:demo", 1))

	res := h.cmd(id, "demo", "increment", nil)
	if !res.GetOk() || string(res.GetData()) != `{"count":1}` || res.GetRev() != 2 {
		t.Fatalf("increment: %v", res)
	}
	f := c.Wait(t, 5*time.Second, "rev 2", testkit.State("surface:demo", 2))
	if count(t, f) != 1 {
		t.Fatalf("snapshot: %s", f.Raw)
	}
	res = h.cmd(id, "demo", "echo", map[string]string{"text": "hi"})
	if !res.GetOk() || string(res.GetData()) != `{"echoed":"hi","size":1}` {
		t.Fatalf("echo: %v", res)
	}
	// Probe, unknown action, unknown domain, a coded failure.
	if r := h.cmd(id, "demo", "surface:demo", nil); !r.GetOk() {
		t.Fatalf("probe: %v", r)
	}
	if r := h.cmd(id, "demo", "nope", nil); r.GetOk() || r.GetError().GetCode() != "unknown_action" {
		t.Fatalf("unknown action: %v", r)
	}
	if r := h.cmd(id, "nosuch", "x", nil); r.GetError().GetCode() != "surface_not_registered" {
		t.Fatalf("unknown domain: %v", r)
	}
	if r := h.cmd(id, "demo", "fail", nil); r.GetError().GetCode() != "nope" || r.GetError().GetMessage() != "failed on purpose" {
		t.Fatalf("coded failure: %v", r)
	}
	sum := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary)
	if len(sum.GetSurfaces()) != 1 || sum.GetSurfaces()[0].GetHosted() != "agent" || sum.GetSurfaces()[0].GetRev() != 3 {
		t.Fatalf("summary surfaces: %v", sum.GetSurfaces())
	}
}

func TestOwnershipLooksLikeAbsence(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	bob := &pb.Caller{Subject: "bob", Via: "browser"}
	ctx := context.Background()
	// The directory checks the owner before the session: someone else's
	// session is ErrNotFound, exactly as a missing one.
	if _, err := h.rt.Request(ctx, id, &pb.GetSummary{Caller: bob}); err != session.ErrNotFound {
		t.Fatalf("foreign summary: %v", err)
	}
	if _, err := h.rt.Request(ctx, id, &pb.RunCommand{Caller: bob, Domain: "demo", Action: "increment"}); err != session.ErrNotFound {
		t.Fatalf("foreign command: %v", err)
	}
	if _, err := h.rt.Request(ctx, "nosuchsession", &pb.GetSummary{Caller: me}); err != session.ErrNotFound {
		t.Fatalf("missing session: %v", err)
	}
}

func TestDuplicateDomainRejected(t *testing.T) {
	native := surface.Define("other", struct{ N int }{}, map[string]surface.Command[struct{ N int }]{})
	h := newHarness(t, nil,
		withAgent("fake", testkit.FakeAgent(t, "-dup", "-surfaces", "demo,other")),
		withDomains(surfaced.DomainBinding{Domain: native}))
	id := h.create("")
	// Diagnostics are not sticky: replay the frame log from its start so the
	// test sees them however early agent_ready was handled.
	sum := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary)
	c, _ := h.subscribe(id, sum.GetEpoch()+"-0")
	h.waitReady(c)
	var diags []string
	for _, f := range c.All() {
		if f.Kind == "diagnostic" && f.Data["code"] == "duplicate_domain" {
			diags = append(diags, f.Data["message"].(string))
		}
	}
	if len(diags) != 2 {
		t.Fatalf("want 2 duplicate diagnostics (native other, demo twice), got %q", diags)
	}
	sum = h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary)
	hosted := map[string]string{}
	for _, s := range sum.GetSurfaces() {
		hosted[s.GetDomain()] = s.GetHosted()
	}
	if hosted["other"] != "native" || hosted["demo"] != "agent" || len(hosted) != 2 {
		t.Fatalf("first registrations must be kept: %v", hosted)
	}
}

func TestNativeDomain(t *testing.T) {
	type counter struct {
		N   int      `json:"n"`
		Log []string `json:"log"`
	}
	def := surface.Define("counter", counter{Log: []string{}}, map[string]surface.Command[counter]{
		"add": surface.Typed(func(ctx *surface.Ctx[counter], a struct {
			By int `json:"by"`
		}) (any, error) {
			ctx.SetState(func(c counter) counter { c.N += a.By; return c })
			return map[string]int{"n": ctx.Get().N}, nil
		}),
		"boom": func(ctx *surface.Ctx[counter], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c counter) counter { c.N = -1; return c })
			panic("boom")
		},
		"refuse": func(ctx *surface.Ctx[counter], _ json.RawMessage) (any, error) {
			return nil, surface.Errorf("refused", "not today")
		},
		"plain": func(ctx *surface.Ctx[counter], _ json.RawMessage) (any, error) {
			return nil, fmt.Errorf("disk on fire")
		},
	})
	h := newHarness(t, nil, withDomains(surfaced.DomainBinding{Domain: def}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	c.Wait(t, 5*time.Second, "initial", testkit.State("surface:counter", 1))
	if r := h.cmd(id, "counter", "add", map[string]int{"by": 5}); !r.GetOk() || string(r.GetData()) != `{"n":5}` {
		t.Fatalf("add: %v", r)
	}
	c.Wait(t, 5*time.Second, "rev 2", testkit.State("surface:counter", 2))
	for _, tc := range []struct {
		action string
		args   any
		code   string
	}{
		{"boom", nil, "dispatch_failed"},
		{"refuse", nil, "refused"},
		{"plain", nil, "dispatch_failed"},
		{"add", map[string]string{"by": "x"}, "invalid_args"},
		{"add", map[string]int{"by": 1, "extra": 2}, "invalid_args"},
		{"missing", nil, "unknown_action"},
	} {
		r := h.cmd(id, "counter", tc.action, tc.args)
		if r.GetOk() || r.GetError().GetCode() != tc.code {
			t.Errorf("%s %v: want %s, got %v", tc.action, tc.args, tc.code, r)
		}
	}
	// The panic changed nothing: the next add continues from 5.
	if r := h.cmd(id, "counter", "add", map[string]int{"by": 1}); string(r.GetData()) != `{"n":6}` || r.GetRev() != 3 {
		t.Fatalf("after panic: %v", r)
	}
}

// The two-client theorem: UI commands and agent tool commands on one domain,
// interleaved from many goroutines, give a gap-free rev sequence and the
// right final count.
func TestTwoClientTheorem(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	const uiClients, perClient, toolCalls = 8, 25, 50
	var wg sync.WaitGroup
	for i := 0; i < uiClients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perClient; j++ {
				if r := h.cmd(id, "demo", "increment", nil); !r.GetOk() {
					t.Errorf("ui increment: %v", r)
					return
				}
			}
		}()
	}
	if r := h.prompt(id, fmt.Sprintf("tools %d", toolCalls)); !r.GetAccepted() {
		t.Fatalf("prompt: %v", r)
	}
	wg.Wait()
	c.Wait(t, 20*time.Second, "turn end", testkit.Chat("finish"))
	total := uiClients*perClient + toolCalls
	last := c.Wait(t, 10*time.Second, "final rev", testkit.State("surface:demo", float64(total+1)))
	if count(t, last) != total {
		t.Fatalf("final count %d, want %d", count(t, last), total)
	}
	var revs []int
	for _, f := range c.All() {
		if f.Kind == "state" && f.Data["key"] == "surface:demo" {
			revs = append(revs, int(f.Data["rev"].(float64)))
		}
	}
	for i, r := range revs {
		if r != i+1 {
			t.Fatalf("revs not gap-free at %d: %v", i, revs)
		}
	}
}

func TestInboxJoinsQueuedPrompts(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	if r := h.prompt(id, "slow one"); r.GetQueued() {
		t.Fatalf("first prompt should run at once: %v", r)
	}
	c.Wait(t, 5*time.Second, "first turn start", testkit.Chat("start"))
	a, b := h.prompt(id, "second"), h.prompt(id, "third")
	if !a.GetQueued() || !b.GetQueued() || b.GetPromptId() != a.GetPromptId()+1 {
		t.Fatalf("queued: %v %v", a, b)
	}
	c.Wait(t, 10*time.Second, "first finish", testkit.Chat("finish"))
	start := c.Wait(t, 10*time.Second, "second turn", testkit.Chat("start"))
	ids := start.Data["messageMetadata"].(map[string]any)["promptIds"].([]any)
	if len(ids) != 2 {
		t.Fatalf("second turn answers both queued prompts: %v", ids)
	}
	var text strings.Builder
	for {
		f := c.Wait(t, 10*time.Second, "reply", func(f testkit.Frame) bool { return f.Kind == "chat" })
		if f.Data["type"] == "text-delta" {
			text.WriteString(f.Data["delta"].(string))
		}
		if f.Data["type"] == "finish" {
			break
		}
	}
	if text.String() != "echo: second\n\nthird" {
		t.Fatalf("joined prompt: %q", text.String())
	}
}

func TestKVRules(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	set := func(key, val string, del bool) *pb.SetStateResult {
		return h.req(id, &pb.SetState{Caller: me, Key: key, Value: []byte(val), Delete: del}).(*pb.SetStateResult)
	}
	if r := set("surface:demo", `{"count":99}`, false); r.GetError().GetCode() != "surface_read_only" {
		t.Fatalf("surface write: %v", r)
	}
	for _, k := range []string{"nodots", "Canvas.model", "canvas.", ".x", "a..b", "canvas.Model"} {
		if r := set(k, `1`, false); r.GetError().GetCode() != "invalid_key" {
			t.Errorf("key %q: %v", k, r)
		}
	}
	if r := set("canvas.model", `not json`, false); r.GetError().GetCode() != "invalid_value" {
		t.Fatalf("bad value: %v", r)
	}
	if r := set("canvas.model", `"a"`, false); !r.GetOk() || r.GetRev() != 1 {
		t.Fatalf("set: %v", r)
	}
	if r := set("canvas.model", `"b"`, false); r.GetRev() != 2 {
		t.Fatalf("set again: %v", r)
	}
	if r := set("canvas.model", ``, true); r.GetRev() != 3 {
		t.Fatalf("delete: %v", r)
	}
	f := c.Wait(t, 5*time.Second, "tombstone", testkit.State("canvas.model", 3))
	if f.Data["deleted"] != true || f.Data["value"] != nil {
		t.Fatalf("tombstone frame: %s", f.Raw)
	}
	// The agent may write generic keys, never surface:*.
	h.prompt(id, `state surface:demo {"count":7}`)
	c.Wait(t, 5*time.Second, "refusal", func(f testkit.Frame) bool { return f.Kind == "diagnostic" && f.Data["code"] == "state_refused" })
	h.prompt(id, `state notes.todo "x"`)
	c.Wait(t, 5*time.Second, "agent write", testkit.State("notes.todo", 1))
	entries := h.req(id, &pb.GetState{Caller: me}).(*pb.StateEntries)
	for _, e := range entries.GetEntries() {
		if e.GetKey() == "surface:demo" && e.GetRev() != 1 {
			t.Fatalf("surface:demo changed through the KV: %v", e)
		}
	}
}

func TestReadinessFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "silent")),
			withLimits(surfaced.Limits{ReadyTimeout: 300 * time.Millisecond}))
		id := h.create("")
		c, _ := h.subscribe(id, "")
		f := c.Wait(t, 5*time.Second, "error", testkit.Status("error"))
		if f.Data["code"] != "ready_timeout" {
			t.Fatalf("%s", f.Raw)
		}
		if r := h.prompt(id, "hi"); r.GetError().GetCode() != "agent_unavailable" {
			t.Fatalf("prompt on a failed session: %v", r)
		}
	})
	t.Run("exit before ready", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "exit-early")))
		id := h.create("")
		c, _ := h.subscribe(id, "")
		f := c.Wait(t, 5*time.Second, "error", testkit.Status("error"))
		if f.Data["code"] != "exit_before_ready" || !strings.Contains(f.Data["detail"].(string), "exiting early on purpose") {
			t.Fatalf("%s", f.Raw)
		}
	})
	t.Run("spawn failure", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", []string{"/nonexistent/agent"}))
		id := h.create("")
		c, _ := h.subscribe(id, "")
		f := c.Wait(t, 5*time.Second, "error", testkit.Status("error"))
		if f.Data["code"] != "spawn_failed" {
			t.Fatalf("%s", f.Raw)
		}
	})
	t.Run("plain pi agent", func(t *testing.T) {
		h := newHarness(t, nil, withAgent("fake", testkit.FakeAgent(t, "-mode", "plain")))
		id := h.create("")
		c, _ := h.subscribe(id, "")
		h.waitReady(c)
		if sum := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary); len(sum.GetSurfaces()) != 0 {
			t.Fatalf("a plain agent has no surfaces: %v", sum.GetSurfaces())
		}
		h.prompt(id, "hello")
		c.Wait(t, 5*time.Second, "finish", testkit.Chat("finish"))
	})
}

func TestSettleWindowTimeout(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, nil, withLimits(surfaced.Limits{SettleWindow: 200 * time.Millisecond}), withLogs(&logs))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	r := h.cmd(id, "demo", "sleep", map[string]int{"ms": 600})
	if r.GetOk() || r.GetError().GetCode() != "timeout" {
		t.Fatalf("want timeout: %v", r)
	}
	// The domain goes on; the late answer is ignored.
	if r := h.cmd(id, "demo", "increment", nil); !r.GetOk() || string(r.GetData()) != `{"count":1}` {
		t.Fatalf("after timeout: %v", r)
	}
	// The barrier: the late answer arrived and was ignored, by the domain
	// (still waiting for it) or by the session (the agent had forgotten it).
	testkit.Eventually(t, 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, "late or unknown dispatch result ignored") || strings.Contains(l, "late surface_dispatch_result ignored")
	}, "the late answer to the timed-out command to arrive")
	if r := h.cmd(id, "demo", "increment", nil); string(r.GetData()) != `{"count":2}` || r.GetRev() != 3 {
		t.Fatalf("late answer must not commit: %v", r)
	}
}

func TestAgentCrashRestartKeepsRevs(t *testing.T) {
	h := newHarness(t, nil, withLimits(surfaced.Limits{RestartBackoff: 50 * time.Millisecond}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	for i := 0; i < 3; i++ {
		h.cmd(id, "demo", "increment", nil)
	}
	// Killed mid-command: the command answers agent_unavailable.
	if r := h.cmd(id, "demo", "crash", nil); r.GetError().GetCode() != "agent_unavailable" {
		t.Fatalf("crash command: %v", r)
	}
	f := c.Wait(t, 5*time.Second, "crash status", testkit.Status("error"))
	if f.Data["code"] != "agent_crashed" {
		t.Fatalf("%s", f.Raw)
	}
	h.waitReady(c)
	r := h.cmd(id, "demo", "increment", nil)
	if string(r.GetData()) != `{"count":4}` || r.GetRev() != 5 {
		t.Fatalf("after restart: %v", r)
	}
	// A crash during a turn ends the turn with an error and the session goes on.
	h.prompt(id, "crash now")
	c.Wait(t, 5*time.Second, "turn error", testkit.Chat("error"))
	c.Wait(t, 5*time.Second, "finish", testkit.Chat("finish"))
	h.waitReady(c)
	h.prompt(id, "still there?")
	c.Wait(t, 5*time.Second, "finish", testkit.Chat("finish"))
}

func TestRestartPolicyExhausted(t *testing.T) {
	h := newHarness(t, nil, withLimits(surfaced.Limits{RestartBackoff: 10 * time.Millisecond, RestartMax: 2}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	for i := 0; i < 3; i++ {
		h.waitReady(c)
		h.cmd(id, "demo", "crash", nil)
	}
	f := c.Wait(t, 5*time.Second, "ended", testkit.Status("ended"))
	if f.Data["code"] != "restart_exhausted" {
		t.Fatalf("%s", f.Raw)
	}
	end := c.Wait(t, 5*time.Second, "end", func(f testkit.Frame) bool { return f.Kind == "end" })
	if end.Data["reason"] != "crashed" {
		t.Fatalf("%s", end.Raw)
	}
}

func TestResumeAndResync(t *testing.T) {
	h := newHarness(t, nil, withLimits(surfaced.Limits{ReplayFrames: 16}))
	id := h.create("")
	c, sub := h.subscribe(id, "")
	h.waitReady(c)
	if sub.GetMode() != "fresh" {
		t.Fatal(sub)
	}
	h.cmd(id, "demo", "increment", nil)
	f := c.Wait(t, 5*time.Second, "rev 2", testkit.State("surface:demo", 2))
	h.cmd(id, "demo", "increment", nil)
	h.cmd(id, "demo", "increment", nil)
	c.Wait(t, 5*time.Second, "rev 4", testkit.State("surface:demo", 4))

	// Resume right after rev 2: exactly the frames after it.
	c2, sub2 := h.subscribe(id, f.ID)
	if sub2.GetMode() != "resumed" || sub2.GetReplayed() != 2 {
		t.Fatalf("resume: %v", sub2)
	}
	g := c2.Wait(t, 2*time.Second, "rev 3", testkit.State("surface:demo", 3))
	if g.Seq != f.Seq+1 {
		t.Fatalf("resumed frame seq %d, want %d", g.Seq, f.Seq+1)
	}
	// Out of the window: resync and sticky state.
	for i := 0; i < 20; i++ {
		h.cmd(id, "demo", "increment", nil)
	}
	c3, sub3 := h.subscribe(id, f.ID)
	if sub3.GetMode() != "resync" {
		t.Fatalf("want resync: %v", sub3)
	}
	c3.Wait(t, 2*time.Second, "resync frame", func(f testkit.Frame) bool { return f.Kind == "resync" })
	c3.Wait(t, 2*time.Second, "sticky", testkit.State("surface:demo", 24))
	// Another epoch: resync.
	if _, s := h.subscribe(id, "zzz-3"); s.GetMode() != "resync" {
		t.Fatalf("foreign epoch: %v", s)
	}
}

// Revs, snapshots, transcript and the session list survive a daemon restart
// (a new runtime on the same SQLite directory).
func TestDaemonRestartKeepsRevs(t *testing.T) {
	dir := t.TempDir()
	open := func() store.Store {
		st, err := sqlite.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st1 := open()
	h1 := newHarness(t, st1)
	id := h1.create("")
	c, _ := h1.subscribe(id, "")
	h1.waitReady(c)
	for i := 0; i < 3; i++ {
		h1.cmd(id, "demo", "increment", nil)
	}
	h1.req(id, &pb.SetState{Caller: me, Key: "ui.theme", Value: []byte(`"dark"`)})
	h1.prompt(id, "remember me")
	c.Wait(t, 5*time.Second, "finish", testkit.Chat("finish"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h1.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.Wait(t, 5*time.Second, "end shutdown", func(f testkit.Frame) bool { return f.Kind == "end" && f.Data["reason"] == "shutdown" })
	st1.Close()

	st2 := open()
	t.Cleanup(func() { st2.Close() }) // after the runtime's own cleanup (LIFO)
	rec, err := st2.GetSession(context.Background(), id)
	if err != nil || rec.Status != "idle" {
		t.Fatalf("stored session after shutdown: %+v %v", rec, err)
	}
	h2 := newHarness(t, st2)
	c2, _ := h2.subscribe(id, "")
	f := c2.Wait(t, 10*time.Second, "stored snapshot", testkit.State("surface:demo", 4))
	if count(t, f) != 3 {
		t.Fatalf("snapshot after restart: %s", f.Raw)
	}
	h2.waitReady(c2)
	if r := h2.cmd(id, "demo", "increment", nil); r.GetRev() != 5 || string(r.GetData()) != `{"count":4}` {
		t.Fatalf("after restart: %v", r)
	}
	if r := h2.req(id, &pb.SetState{Caller: me, Key: "ui.theme", Value: []byte(`"light"`)}).(*pb.SetStateResult); r.GetRev() != 2 {
		t.Fatalf("pref rev after restart: %v", r)
	}
	tr := h2.req(id, &pb.GetMessages{Caller: me}).(*pb.Transcript)
	if len(tr.GetEntries()) != 2 || tr.GetEntries()[0].GetText() != "remember me" {
		t.Fatalf("transcript after restart: %v", tr.GetEntries())
	}
}

// A plain pi agent never receives surface lines, and its id-less refusals
// never reach clients.
func TestPlainAgentGetsNoSurfaceLines(t *testing.T) {
	log := filepath.Join(t.TempDir(), "stdin.log")
	script := filepath.Join(t.TempDir(), "agent.sh")
	// A plain agent that records its stdin and answers get_commands and
	// prompts like pi, plus an id-less "Unknown command" refusal.
	os.WriteFile(script, []byte(`#!/bin/sh
while IFS= read -r line; do
  printf '%s\n' "$line" >> `+log+`
  id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  case "$line" in
    *'"type":"get_commands"'*) printf '{"type":"response","id":"%s","command":"get_commands","success":true,"data":{"commands":[]}}\n' "$id";;
    *'"type":"prompt"'*) printf '{"type":"response","id":"%s","command":"prompt","success":true}\n' "$id"
       printf '{"type":"response","command":"bogus","success":false,"error":"Unknown command: bogus"}\n'
       printf '{"type":"agent_start"}\n{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"hi"}}\n'
       printf '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"stopReason":"stop"}}\n{"type":"agent_end","messages":[]}\n';;
  esac
done
`), 0o755)
	h := newHarness(t, nil, withAgent("pi", []string{"/bin/sh", script}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	h.cmd(id, "demo", "increment", nil)
	h.req(id, &pb.SetState{Caller: me, Key: "ui.theme", Value: []byte(`"dark"`)})
	h.prompt(id, "hello")
	c.Wait(t, 5*time.Second, "finish", testkit.Chat("finish"))
	b, _ := os.ReadFile(log)
	if strings.Contains(string(b), "surface_") || strings.Contains(string(b), "state_changed") {
		t.Fatalf("a plain agent got surfaced/1 lines:\n%s", b)
	}
	for _, f := range c.All() {
		if strings.Contains(string(f.Raw), "Unknown command") {
			t.Fatalf("pi's refusal reached a client: %s", f.Raw)
		}
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// A session ended while a turn runs closes the turn (finish, cancelled)
// before its end frame, and its actor still leaves after EndedLinger: the
// agent is stopped on purpose, so its exit does not close the turn.
func TestSessionEndedMidTurn(t *testing.T) {
	h := newHarness(t, nil, withLimits(surfaced.Limits{EndedLinger: 200 * time.Millisecond}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	if r := h.prompt(id, "slow"); r.GetError() != nil {
		t.Fatalf("prompt: %v", r.GetError())
	}
	c.Wait(t, 10*time.Second, "a chunk", testkit.Chat("text-delta"))
	h.req(id, &pb.Stop{Caller: me, Reason: "stopped"})
	end := c.Wait(t, 5*time.Second, "end", func(f testkit.Frame) bool { return f.Kind == "end" })
	var finish *testkit.Frame
	for _, f := range c.All() {
		if f.Kind == "chat" && f.Data["type"] == "finish" {
			finish = &f
		}
	}
	if finish == nil || finish.Seq > end.Seq {
		t.Fatalf("no finish before the end frame: %v", c.All())
	}
	if md, _ := finish.Data["messageMetadata"].(map[string]any); md["stopReason"] != "cancelled" {
		t.Errorf("finish: %v", finish.Data)
	}
	if s := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary); s.GetBusy() {
		t.Errorf("an ended session is busy: %v", s)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(h.rt.Local().Live()) == 0 },
		"the session ended mid-turn to leave; live: %v", later(func() string { return fmt.Sprint(h.rt.Local().Live()) }))
}

// A session put to sleep mid-turn (the daemon shuts down) closes the turn as
// cancelled before its end frame, keeps what the agent said so far in the
// transcript, and answers a queued message as not answered.
func TestShutdownMidTurn(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	h.prompt(id, "slow")
	c.Wait(t, 10*time.Second, "a chunk", testkit.Chat("text-delta"))
	h.prompt(id, "queued")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	end := c.Wait(t, 5*time.Second, "end", func(f testkit.Frame) bool { return f.Kind == "end" })
	if end.Data["reason"] != "shutdown" {
		t.Fatalf("end: %v", end.Data)
	}
	var finishes []string
	for _, f := range c.All() {
		if f.Kind == "chat" && f.Data["type"] == "finish" && f.Seq < end.Seq {
			md, _ := f.Data["messageMetadata"].(map[string]any)
			finishes = append(finishes, fmt.Sprint(md["stopReason"]))
		}
	}
	if strings.Join(finishes, ",") != "cancelled,cancelled" {
		t.Fatalf("finishes before end: %v (want the running turn and the queued message, cancelled)", finishes)
	}
	entries, err := h.st.Transcript(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var said string
	for _, e := range entries {
		if e.Role == "assistant" {
			said += e.Text
		}
	}
	if !strings.HasPrefix(said, "chunk0 ") {
		t.Errorf("the transcript lost what the agent said before the shutdown: %q", said)
	}
}

// An ended session's actor goes away after EndedLinger even when clients
// were watching it end.
func TestEndedSessionActorLeaves(t *testing.T) {
	h := newHarness(t, nil, withLimits(surfaced.Limits{EndedLinger: 200 * time.Millisecond}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	h.req(id, &pb.Stop{Caller: me, Reason: "stopped"})
	c.Wait(t, 5*time.Second, "end", func(f testkit.Frame) bool { return f.Kind == "end" })
	testkit.Eventually(t, 5*time.Second, func() bool { return len(h.rt.Local().Live()) == 0 },
		"the ended session's actor to leave; live: %v", later(func() string { return fmt.Sprint(h.rt.Local().Live()) }))
	// It still answers reads (a new activation, in ended mode).
	if s := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary); s.GetStatus() != "ended" {
		t.Fatalf("summary after it left: %v", s)
	}
}

// surfaceAvailable reads a session frame's availability of domain: 1 yes, 0
// no, -1 not listed.
func surfaceAvailable(f testkit.Frame, domain string) int {
	list, _ := f.Data["surfaces"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		if m["domain"] == domain {
			if m["available"] == true {
				return 1
			}
			return 0
		}
	}
	return -1
}

// A domain's availability follows its agent: when the agent crashes its
// agent-hosted domain stays listed but unavailable (read-only), in the
// listing and on the session stream, until the restarted agent declares it
// again.
func TestSurfaceAvailabilityFollowsTheAgent(t *testing.T) {
	h := newHarness(t, nil, withLimits(surfaced.Limits{RestartBackoff: 50 * time.Millisecond}))
	id := h.create("")
	c, _ := h.subscribe(id, "")
	c.Wait(t, 10*time.Second, "ready with demo available", func(f testkit.Frame) bool {
		return f.Kind == "session" && f.Data["status"] == "ready" && surfaceAvailable(f, "demo") == 1
	})
	list := h.req(id, &pb.ListSurfaces{Caller: me}).(*pb.SurfaceList)
	if len(list.GetSurfaces()) != 1 || !list.GetSurfaces()[0].GetAvailable() {
		t.Fatalf("listing %v; want demo available", list.GetSurfaces())
	}

	h.cmd(id, "demo", "crash", nil) // the agent exits in the middle of the command
	c.Wait(t, 10*time.Second, "crashed with demo unavailable", func(f testkit.Frame) bool {
		return f.Kind == "session" && f.Data["status"] == "error" && surfaceAvailable(f, "demo") == 0
	})
	c.Wait(t, 10*time.Second, "ready again with demo available", func(f testkit.Frame) bool {
		return f.Kind == "session" && f.Data["status"] == "ready" && surfaceAvailable(f, "demo") == 1 &&
			f.Seq > 0
	})
	if r := h.cmd(id, "demo", "increment", nil); !r.GetOk() {
		t.Fatalf("after the restart: %v", r)
	}
}

// surfaced_surface_commands_total counts commands by outcome: ok or the
// error code, whatever hosts the domain.
func TestCommandOutcomeMetric(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	h.cmd(id, "demo", "increment", nil)
	h.cmd(id, "demo", "fail", nil)
	h.cmd(id, "demo", "nope", nil)
	h.cmd(id, "missing", "x", nil)
	want := map[string]float64{"ok": 1, "nope": 1, "unknown_action": 1, "surface_not_registered": 1}
	mfs, err := h.rt.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "surfaced_surface_commands_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("outcome %q counted %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	for _, k := range []string{"agent", "native"} {
		if _, ok := got[k]; ok {
			t.Errorf("outcome labelled by hosting kind %q: %v", k, got)
		}
	}
}

// turnOf reads the ids of a start or finish chunk.
func turnOf(f testkit.Frame) (turnID float64, promptIDs []any, messageID string) {
	md, _ := f.Data["messageMetadata"].(map[string]any)
	turnID, _ = md["turnId"].(float64)
	promptIDs, _ = md["promptIds"].([]any)
	messageID, _ = f.Data["messageId"].(string)
	return
}

// Turn and prompt ids are unique for the life of a session: after a daemon
// restart (and after an agent restart) the next prompt and turn get new ids,
// so the chat's messageId never repeats and the transcript never holds two
// turns with one id.
func TestTurnAndPromptIDsSurviveRestarts(t *testing.T) {
	dir := t.TempDir()
	open := func() store.Store {
		st, err := sqlite.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	seen := map[string]bool{}
	var lastPrompt, lastTurn float64
	check := func(c *testkit.Collector, h *harness, id, text string) {
		t.Helper()
		r := h.prompt(id, text)
		if !r.GetAccepted() {
			t.Fatalf("prompt refused: %v", r.GetError())
		}
		if p := float64(r.GetPromptId()); p <= lastPrompt {
			t.Fatalf("prompt id %v after %v: ids must only rise", p, lastPrompt)
		} else {
			lastPrompt = p
		}
		start := c.Wait(t, 10*time.Second, "start of "+text, func(f testkit.Frame) bool {
			if f.Kind != "chat" || f.Data["type"] != "start" {
				return false
			}
			_, ps, _ := turnOf(f)
			return len(ps) == 1 && ps[0] == float64(r.GetPromptId())
		})
		turnID, _, msgID := turnOf(start)
		if turnID <= lastTurn || seen[msgID] {
			t.Fatalf("turn %v (messageId %q) after turn %v: ids must be new", turnID, msgID, lastTurn)
		}
		lastTurn = turnID
		seen[msgID] = true
		c.Wait(t, 10*time.Second, "finish of "+text, func(f testkit.Frame) bool {
			id, _, _ := turnOf(f)
			return f.Kind == "chat" && f.Data["type"] == "finish" && id == turnID
		})
	}

	st1 := open()
	h1 := newHarness(t, st1, withLimits(surfaced.Limits{RestartBackoff: 10 * time.Millisecond}))
	id := h1.create("")
	c1, _ := h1.subscribe(id, "")
	h1.waitReady(c1)
	check(c1, h1, id, "one")
	check(c1, h1, id, "two")
	// The agent crashes and is restarted: ids go on.
	h1.cmd(id, "demo", "crash", nil)
	c1.Wait(t, 10*time.Second, "crashed", testkit.Status("error"))
	c1.Wait(t, 10*time.Second, "ready again", testkit.Status("ready"))
	check(c1, h1, id, "three")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h1.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st1.Close()

	st2 := open()
	t.Cleanup(func() { st2.Close() })
	h2 := newHarness(t, st2)
	c2, _ := h2.subscribe(id, "")
	h2.waitReady(c2)
	check(c2, h2, id, "four")

	tr := h2.req(id, &pb.GetMessages{Caller: me}).(*pb.Transcript)
	turns := map[uint64]int{}
	for _, e := range tr.GetEntries() {
		if e.GetRole() == "user" {
			turns[e.GetTurnId()]++
		}
	}
	if len(turns) != 4 {
		t.Fatalf("transcript turns %v; want four distinct turns", turns)
	}
}

// later is a fmt.Stringer computed when a failure message is formatted.
type later func() string

func (f later) String() string { return f() }

// A caller may name the new session (an AG-UI thread's derived id): the
// name is taken once; a second creation, whoever asks, is ErrSessionExists
// and touches nothing of the first.
func TestCreateSessionWithID(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	id, err := h.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: owner, ID: "agui-thread-1"})
	if err != nil || id != "agui-thread-1" {
		t.Fatalf("create: %q %v", id, err)
	}
	if _, err := h.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: "bob", ID: "agui-thread-1"}); !errors.Is(err, surfaced.ErrSessionExists) {
		t.Fatalf("second create: %v", err)
	}
	if rec, err := h.st.GetSession(ctx, "agui-thread-1"); err != nil || rec.Owner != owner {
		t.Fatalf("the session: %+v %v", rec, err)
	}
	if _, err := h.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: owner, ID: strings.Repeat("x", 200)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an over-long id: %v", err)
	}
}
