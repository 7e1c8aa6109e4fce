package pitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The real pi hosting surfaces through @surfaced/agent's createSurface (the
// extension testdata/npm/pi/extensions/lab.ts, the domain "lab"), under the
// real daemon, against the scripted model server.

// LabExtension is the pi extension of these tests.
func LabExtension() string { return filepath.Join(ExtensionsDir(), "lab.ts") }

// labAgent is the real pi with the lab extension.
func labAgent(t testing.TB, home string) surfaced.AgentSpec {
	return Agent(t, "pi", home, "-e", LabExtension())
}

// quiet is a model that answers every prompt with one word.
func quiet(t testing.TB) *llmstub.Server {
	return model(t, func(llmstub.Request) llmstub.Reply { return llmstub.Say("ok") })
}

// command runs domain/action over HTTP and returns the status and the result.
func (d *daemon) command(id, domain, action string, args any) (int, map[string]any) {
	d.t.Helper()
	body := map[string]any{}
	if args != nil {
		body["args"] = args
	}
	return d.do("POST", "/api/sessions/"+id+"/surfaces/"+domain+"/"+action, body)
}

// mustCommand runs a command that must succeed and returns its data.
func (d *daemon) mustCommand(id, domain, action string, args any) map[string]any {
	d.t.Helper()
	st, res := d.command(id, domain, action, args)
	if st != http.StatusOK || res["ok"] != true {
		d.t.Fatalf("%s/%s: %d %v", domain, action, st, res)
	}
	data, _ := res["data"].(map[string]any)
	return data
}

// labSession makes a session on a daemon running pi with the lab extension
// and waits until lab is registered.
func labSession(t *testing.T, limits surfaced.Limits, cfg Config, gw ...gateway.Limits) (*daemon, string, *testkit.SSE) {
	t.Helper()
	var g gateway.Limits
	if len(gw) > 0 {
		g = gw[0]
	}
	if limits.ReadyTimeout == 0 {
		// pi starts in seconds, but in many more on a machine busy with other builds:
		// the test's own wait bounds it.
		limits.ReadyTimeout = wait
	}
	d := startDaemonWith(t, limits, g, labAgent(t, Home(t, cfg)))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	s.Wait(t, wait, "the lab's initial snapshot", testkit.IsState("surface:lab", 1))
	return d, id, s
}

// stateEntry is the value of a key of the session state (GET …/state).
func stateEntry(d *daemon, id, key string) any {
	d.t.Helper()
	st, all := d.do("GET", "/api/sessions/"+id+"/state", nil)
	if st != http.StatusOK {
		d.t.Fatalf("GET state: %d %v", st, all)
	}
	e, _ := all["entries"].(map[string]any)[key].(map[string]any)
	return e["value"]
}

// stayedReady fails the test when the session left ready after it was
// ready first, or the daemon sent a diagnostic.
func stayedReady(t *testing.T, s *testkit.SSE) {
	t.Helper()
	wasReady := false
	for _, e := range s.All() {
		switch {
		case e.Kind == "diagnostic":
			t.Fatalf("a diagnostic: %s", e.Raw)
		case e.Kind == "session" && e.Data["status"] == "ready":
			wasReady = true
		case e.Kind == "session" && wasReady:
			t.Fatalf("the session did not stay ready: %s", e.Raw)
		}
	}
}

func errorCode(res map[string]any) string {
	e, _ := res["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// The extension registers its domain in agent_ready: agent-hosted, available,
// with its commands, its initial snapshot, and the image support of the
// model pi runs (a surfaced/1 agent is not asked).
func TestPiExtensionRegistersItsSurface(t *testing.T) {
	srv := quiet(t)
	d, id, _ := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL, Images: true})
	st, sum := d.do("GET", "/api/sessions/"+id, nil)
	if st != http.StatusOK {
		t.Fatal(st, sum)
	}
	var lab map[string]any
	for _, s := range sum["surfaces"].([]any) {
		if m := s.(map[string]any); m["domain"] == "lab" {
			lab = m
		}
	}
	if lab == nil || lab["hosted"] != "agent" || lab["available"] != true || lab["rev"] != 1.0 {
		t.Fatalf("surfaces: %v", sum["surfaces"])
	}
	if cmds := fmt.Sprint(lab["commands"]); !strings.Contains(cmds, "inc") || !strings.Contains(cmds, "slow") {
		t.Errorf("commands: %v", cmds)
	}
	if sum["images"] != true {
		t.Errorf("images = %v; the model takes images", sum["images"])
	}
	if data := d.mustCommand(id, "lab", "inc", nil); data["n"] != 1.0 {
		t.Fatalf("lab/inc: %v", data)
	}
	// The probe is answered by the domain.
	if st, res := d.command(id, "lab", "surface:lab", nil); st != http.StatusOK || res["ok"] != true {
		t.Fatalf("probe: %d %v", st, res)
	}
}

// 5 000 commands at up to 500/s on the pi-hosted domain with the default
// flood limits: pi refuses each surface_dispatch ("Unknown command"), the
// daemon expects those refusals; none is refused, every one counts, and the
// agent is the same process at the end.
func TestPiHostedCommandsAtLoad(t *testing.T) {
	const total, rate, inFlight = 5000, 500, 32
	srv := quiet(t)
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	pid := d.mustCommand(id, "lab", "pid", nil)["pid"]

	var failed atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	for i := 0; i < total; i++ {
		<-tick.C
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, res := d.command(id, "lab", "inc", nil)
			if st != http.StatusOK || res["ok"] != true {
				if failed.Add(1) == 1 {
					firstErr.Store(fmt.Sprintf("%d %v", st, res))
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d commands failed; the first: %v", n, total, firstErr.Load())
	}
	if data := d.mustCommand(id, "lab", "pid", nil); data["pid"] != pid {
		t.Fatalf("pi was restarted: pid %v, then %v", pid, data["pid"])
	}
	if data := d.mustCommand(id, "lab", "inc", nil); data["n"] != float64(total+1) {
		t.Fatalf("n = %v after %d commands", data["n"], total+1)
	}
	stayedReady(t, s)
}

// With the flood limits lowered to a burst of 30, a busy pi-hosted domain
// is not stopped either (before the daemon expected pi's refusals, it was
// stopped as agent_flooding after 31 commands).
func TestPiRefusalsAreNotAFlood(t *testing.T) {
	srv := quiet(t)
	d, id, s := labSession(t, surfaced.Limits{FloodBurst: 30, FloodRate: 1}, Config{BaseURL: srv.URL})
	for i := 1; i <= 200; i++ {
		if data := d.mustCommand(id, "lab", "inc", nil); data["n"] != float64(i) {
			t.Fatalf("n = %v at command %d", data["n"], i)
		}
	}
	// The agent's own commands (a tool's) and clients' state writes are expected too.
	for i := range 40 {
		d.mustCommand(id, "lab", "kv_set", map[string]any{"key": "lab.k", "value": i})
		if st, out := d.do("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "ui.n", "value": i}); st != http.StatusOK {
			t.Fatal(st, out)
		}
	}
	d.mustCommand(id, "lab", "inc", nil)
	stayedReady(t, s)
}

// A pi extension that really floods (lines nobody asked for: refusals of
// surface lines the daemon never wrote) is still stopped.
func TestPiFloodingExtensionIsStopped(t *testing.T) {
	srv := quiet(t)
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	d.mustCommand(id, "lab", "inc", nil)
	d.mustCommand(id, "lab", "flood", map[string]any{"lines": 30000})
	st := s.Wait(t, wait, "the agent stopped for flooding", func(e testkit.Event) bool {
		return e.Kind == "session" && e.Data["status"] == "error"
	})
	if st.Data["code"] != "agent_flooding" {
		t.Fatalf("session: %v", st.Data)
	}
}

// A command from HTTP and commands from the model's tool calls interleave
// on one domain: one writer, every rev once, no gaps.
func TestPiCommandAndToolCallInterleave(t *testing.T) {
	const toolCalls, clientCommands = 8, 40
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		calls := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				calls++
			}
		}
		if calls < toolCalls {
			return llmstub.Reply{Events: llmstub.Stream(llmstub.CallTool(0, fmt.Sprintf("call_%d", calls), "lab_inc", map[string]any{}), llmstub.Finish("tool_calls"))}
		}
		return llmstub.Say("counted ", r.LastToolResult())
	})
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	d.prompt(id, "count with me")
	done := make(chan error, 1)
	go func() {
		for range clientCommands {
			st, res := d.command(id, "lab", "inc", nil)
			if st != http.StatusOK || res["ok"] != true {
				done <- fmt.Errorf("lab/inc: %d %v", st, res)
				return
			}
		}
		done <- nil
	}()
	tr := nextTurn(t, s)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(tr.of("tool-output-available")); n != toolCalls {
		t.Fatalf("%d tool results, want %d", n, toolCalls)
	}
	want := float64(toolCalls + clientCommands)
	testkit.Eventually(t, wait, func() bool {
		v, _ := stateEntry(d, id, "surface:lab").(map[string]any)
		return v != nil && v["n"] == want
	}, "lab's n to reach %v", want)
	// Every state frame of lab, in order: revs 1, 2, 3 … with n one more each time.
	var revs []float64
	for _, e := range s.All() {
		if testkit.IsState("surface:lab", 0)(e) {
			revs = append(revs, e.Data["rev"].(float64))
			if n := e.Data["value"].(map[string]any)["n"].(float64); n != e.Data["rev"].(float64)-1 {
				t.Fatalf("rev %v holds n = %v", e.Data["rev"], n)
			}
		}
	}
	for i, r := range revs {
		if r != float64(i+1) {
			t.Fatalf("revs are not 1, 2, 3 …: %v", revs)
		}
	}
	if len(revs) != int(want)+1 {
		t.Fatalf("%d lab state frames, want %v (revs %v)", len(revs), want+1, revs)
	}
}

// pi killed in the middle of a command: the command answers
// agent_unavailable; pi is started again, declares lab again, and the
// snapshot and its revs go on where they were.
func TestPiKilledMidCommand(t *testing.T) {
	srv := quiet(t)
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	for range 3 {
		d.mustCommand(id, "lab", "inc", nil)
	}
	pid := int(d.mustCommand(id, "lab", "pid", nil)["pid"].(float64))
	answer := make(chan map[string]any, 1)
	go func() {
		_, res := d.command(id, "lab", "slow", map[string]any{"ms": 60000})
		answer <- res
	}()
	s.Wait(t, wait, "the slow command running in pi", func(e testkit.Event) bool {
		return e.Kind == "state" && e.Data["key"] == "lab.slow"
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-answer:
		if res["ok"] != false || errorCode(res) != "agent_unavailable" {
			t.Fatalf("the command in flight answered %v", res)
		}
	case <-time.After(wait):
		t.Fatal("the command in flight got no answer")
	}
	s.Wait(t, wait, "the crash", func(e testkit.Event) bool { return e.Kind == "session" && e.Data["code"] == "agent_crashed" })
	ready(t, s)
	data := d.mustCommand(id, "lab", "inc", nil)
	if data["n"] != 4.0 {
		t.Fatalf("n = %v after the restart, want 4", data["n"])
	}
	s.Wait(t, wait, "rev 5", testkit.IsState("surface:lab", 5))
	if p := int(d.mustCommand(id, "lab", "pid", nil)["pid"].(float64)); p == pid {
		t.Fatal("the same pi answers after it was killed")
	}
}

// A 1 MiB snapshot and a 200 KiB command result arrive whole while pi
// streams text on the same stdout.
func TestPiLargeLinesWhileStreaming(t *testing.T) {
	words := make([]string, 400)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	srv := model(t, func(llmstub.Request) llmstub.Reply {
		return llmstub.Reply{Events: llmstub.Stream(llmstub.Text(words...), llmstub.Finish("stop")), Delay: 5 * time.Millisecond}
	})
	// A client's queue must hold a frame of the snapshot (1 MiB by default: this one is larger).
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL}, gateway.Limits{QueueBytes: 8 << 20})
	d.prompt(id, "talk")
	s.Wait(t, wait, "the text streaming", testkit.IsChat("text-delta"))
	const snap, result = 1 << 20, 200 << 10
	var wg sync.WaitGroup
	wg.Add(2)
	var bigData, resData map[string]any
	go func() { defer wg.Done(); bigData = d.mustCommand(id, "lab", "big", map[string]any{"bytes": snap}) }()
	go func() { defer wg.Done(); resData = d.mustCommand(id, "lab", "result", map[string]any{"bytes": result}) }()
	wg.Wait()
	if bigData["bytes"] != float64(snap) {
		t.Fatalf("big: %v", bigData)
	}
	if txt, _ := resData["text"].(string); len(txt) != result || strings.Trim(txt, "r") != "" {
		t.Fatalf("result of %d bytes, want %d", len(txt), result)
	}
	st := s.Wait(t, wait, "the 1 MiB snapshot", func(e testkit.Event) bool {
		if !testkit.IsState("surface:lab", 0)(e) {
			return false
		}
		blob, _ := e.Data["value"].(map[string]any)["blob"].(string)
		return blob != ""
	})
	if blob := st.Data["value"].(map[string]any)["blob"].(string); len(blob) != snap || strings.Trim(blob, "b") != "" {
		t.Fatalf("snapshot blob of %d bytes, want %d", len(blob), snap)
	}
	// (Wait above may have passed the turn's end by: look at everything seen.)
	testkit.Eventually(t, wait, func() bool {
		for _, e := range s.All() {
			if testkit.IsChat("finish")(e) {
				return true
			}
		}
		return false
	}, "the turn's end")
	var text strings.Builder
	for _, e := range s.All() {
		if testkit.IsChat("text-delta")(e) {
			text.WriteString(e.Data["delta"].(string))
		}
	}
	if got := text.String(); got != strings.Join(words, "") {
		t.Fatalf("the streamed text was broken: %q", got)
	}
}

// A thrown error, a SurfaceCommandError and an {ok:false} result reach the
// caller with their codes; none changes the snapshot.
func TestPiCommandFailuresKeepTheirCodes(t *testing.T) {
	srv := quiet(t)
	d, id, _ := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	for _, tc := range []struct{ action, code, message string }{
		{"throws", "dispatch_failed", "the handler broke"},
		{"coded", "out_of_stock", "nothing left to sell"},
		{"refuses", "not_allowed", "the lab refuses"},
		{"nope", "unknown_action", ""},
	} {
		st, res := d.command(id, "lab", tc.action, nil)
		e, _ := res["error"].(map[string]any)
		if st != http.StatusOK || res["ok"] != false || e["code"] != tc.code || (tc.message != "" && e["message"] != tc.message) {
			t.Errorf("lab/%s: %d %v, want %s %q", tc.action, st, res, tc.code, tc.message)
		}
	}
	if data := d.mustCommand(id, "lab", "inc", nil); data["n"] != 1.0 {
		t.Fatalf("n = %v: a failed command changed the state", data["n"])
	}
}

// getSessionState: a client's write reaches the extension (state_changed),
// the extension's write reaches the clients (state_set), and surface:* is
// refused to it.
func TestPiSessionStateRoundTrip(t *testing.T) {
	srv := quiet(t)
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	if st, out := d.do("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "ui.colour", "value": "teal"}); st != http.StatusOK {
		t.Fatal(st, out)
	}
	testkit.Eventually(t, wait, func() bool {
		return d.mustCommand(id, "lab", "kv_get", map[string]any{"key": "ui.colour"})["value"] == "teal"
	}, "the extension to see the client's write")
	d.mustCommand(id, "lab", "kv_set", map[string]any{"key": "lab.answer", "value": map[string]any{"n": 42}})
	f := s.Wait(t, wait, "the extension's write", func(e testkit.Event) bool { return e.Kind == "state" && e.Data["key"] == "lab.answer" })
	if v, _ := f.Data["value"].(map[string]any); v["n"] != 42.0 {
		t.Fatalf("state frame %v", f.Data)
	}
	if v, _ := stateEntry(d, id, "lab.answer").(map[string]any); v["n"] != 42.0 {
		t.Fatalf("GET state: lab.answer = %v", v)
	}
	if d.mustCommand(id, "lab", "kv_get", map[string]any{"key": "lab.answer"})["value"] == nil {
		t.Fatal("the extension does not see its own write")
	}
	st, res := d.command(id, "lab", "kv_set", map[string]any{"key": "surface:lab", "value": 1})
	if st != http.StatusOK || errorCode(res) != "state_refused" {
		t.Fatalf("kv_set surface:lab: %d %v", st, res)
	}
}

// Data pages of the pi-hosted domain, with ETag and 304 (answered by the
// daemon without asking pi) until the rev changes.
func TestPiDataPages(t *testing.T) {
	srv := quiet(t)
	d, id, _ := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	get := func(path, etag string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "GET", d.url+"/api/sessions/"+id+"/surfaces/lab/data/"+path, nil)
		for k, v := range d.auth() {
			req.Header[k] = v
		}
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	resp, page := get("rows?from=5&n=3", "")
	if resp.StatusCode != http.StatusOK || fmt.Sprint(page["rows"]) != "[5 6 7]" || page["rev"] != 1.0 {
		t.Fatalf("page: %d %v", resp.StatusCode, page)
	}
	etag := resp.Header.Get("ETag")
	if etag != `"rows-5-3-1"` || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=60") {
		t.Fatalf("headers: %v", resp.Header)
	}
	if resp, _ := get("rows?from=5&n=3", etag); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: %d", resp.StatusCode)
	}
	d.mustCommand(id, "lab", "inc", nil)
	resp, page = get("rows?from=5&n=3", etag)
	if resp.StatusCode != http.StatusOK || page["rev"] != 2.0 || resp.Header.Get("ETag") != `"rows-5-3-2"` {
		t.Fatalf("after a change: %d %v %v", resp.StatusCode, page, resp.Header.Get("ETag"))
	}
	if resp, out := get("nothing", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown page: %d %v", resp.StatusCode, out)
	}
}

// The hooks: hydrate runs each time pi starts (its first start, and after
// a crash), onTurnEnd after each turn, each as a command of its domain.
func TestPiSurfaceHooks(t *testing.T) {
	srv := quiet(t)
	d, id, s := labSession(t, surfaced.Limits{}, Config{BaseURL: srv.URL})
	hooks := func(want string) {
		t.Helper()
		testkit.Eventually(t, wait, func() bool {
			v, _ := stateEntry(d, id, "surface:hooks").(map[string]any)
			return fmt.Sprint(v) == want
		}, "hooks to be %s", want)
	}
	hooks("map[starts:1 turns:0]")
	d.prompt(id, "hello")
	s.Wait(t, wait, "the turn's end", testkit.IsChat("finish"))
	hooks("map[starts:1 turns:1]")
	pid := int(d.mustCommand(id, "lab", "pid", nil)["pid"].(float64))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	hooks("map[starts:2 turns:1]")
	// A client may run them too.
	if st, res := d.command(id, "hooks", "hydrate", nil); st != http.StatusOK || res["ok"] != true {
		t.Fatalf("hooks/hydrate: %d %v", st, res)
	}
	hooks("map[starts:3 turns:1]")
}
