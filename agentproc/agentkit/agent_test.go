package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

func byID(id string) func(agentkittest.Line) bool {
	return func(l agentkittest.Line) bool { return l.Map()["id"] == id }
}

// TestDispatchWhileToolBlocked plays the daemon for a tool that runs a
// command on the agent's own domain: the tool waits for its
// surface_command_result while the daemon first sends the dispatch for that
// very command. The input loop must serve the dispatch meanwhile.
func TestDispatchWhileToolBlocked(t *testing.T) {
	a, logs := newTestAgent(Options{})
	AddSurface(a, counterSurface())
	a.AddTool(incrementTool())
	h := start(t, a, logs)

	h.prompt(t, "p1", "please INCREMENT the counter")
	var cmd agentproc.SurfaceCommand
	h.Await(agentproc.TypeSurfaceCommand, nil).Decode(t, &cmd)
	if cmd.Domain != "counter" || cmd.Action != "increment" || cmd.ID == "" {
		t.Fatalf("surface_command = %+v", cmd)
	}
	// The domain actor runs the command: it dispatches to the agent with its state.
	h.Send(agentproc.SurfaceDispatch{Type: agentproc.TypeSurfaceDispatch, ID: "disp-1", Domain: "counter",
		Action: "increment", State: json.RawMessage(`{"count":41,"log":[]}`), Rev: 9})
	var res agentproc.SurfaceDispatchResult
	h.Await(agentproc.TypeSurfaceDispatchResult, byID("disp-1")).Decode(t, &res)
	assertJSON(t, "result", res.Result, `{"ok":true,"data":{"count":42}}`)
	assertJSON(t, "state", res.State, `{"count":42,"log":[]}`)
	// The actor committed rev 10 and answers the tool.
	h.Send(agentproc.SurfaceCommandResult{Type: agentproc.TypeSurfaceCommandResult, ID: cmd.ID, OK: true,
		Data: json.RawMessage(`{"count":42}`)})

	var end agentproc.Event
	h.Await(agentproc.EventToolExecutionEnd, nil).Decode(t, &end)
	if end.IsError || end.ToolName != "increment" || !strings.Contains(string(end.Result), `count is {\"count\":42}`) {
		t.Fatalf("tool_execution_end = %+v result %s", end, end.Result)
	}
	msgs := h.agentEnd(t)
	last := lastAssistant(t, msgs)
	if last.StopReason != "stop" || !strings.Contains(last.Text(), "42") || !strings.HasPrefix(last.Text(), ScriptedPrefix) {
		t.Fatalf("final message = %+v %q", last, last.Text())
	}
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "user,assistant,toolResult,assistant" {
		t.Errorf("agent_end roles = %s", got)
	}
}

// TestTurnEventSequence checks the order of pi's events for a tool call.
func TestTurnEventSequence(t *testing.T) {
	a, logs := newTestAgent(Options{})
	a.AddTool(Tool{Name: "echo", Run: func(_ context.Context, _ *ToolCtx, args json.RawMessage) (string, error) {
		var v struct{ Text string }
		err := json.Unmarshal(args, &v)
		return v.Text, err
	}})
	h := start(t, a, logs)
	h.prompt(t, "p", "echo: hi there")
	h.agentEnd(t)

	var seq []string
	var textDeltas, toolDeltas int
	for _, l := range h.Seen {
		switch l.Type {
		case agentproc.EventMessageUpdate:
			var ev agentproc.Event
			l.Decode(t, &ev)
			switch ev.AssistantMessageEvent.Type {
			case agentproc.AMETextDelta:
				textDeltas++
				continue
			case agentproc.AMEToolcallDelta:
				toolDeltas++
				continue
			}
			seq = append(seq, "update:"+ev.AssistantMessageEvent.Type)
		case agentproc.TypeResponse, agentproc.TypeAgentReady:
		default:
			seq = append(seq, l.Type)
		}
	}
	want := []string{
		"agent_start", "turn_start", "message_start", "message_end", // user
		"message_start", "update:text_start", "update:text_end", "update:toolcall_start", "update:toolcall_end", "message_end",
		"tool_execution_start", "tool_execution_end", "message_start", "message_end", "turn_end",
		"turn_start", "message_start", "update:text_start", "update:text_end", "message_end", "turn_end",
		"agent_end",
	}
	if strings.Join(seq, " ") != strings.Join(want, " ") {
		t.Errorf("events:\n got %v\nwant %v", seq, want)
	}
	if textDeltas < 2 || toolDeltas != 2 {
		t.Errorf("text deltas %d (want several), toolcall deltas %d (want 2)", textDeltas, toolDeltas)
	}
	// The tool call carries the arguments assembled from its deltas.
	for _, l := range h.Seen {
		if l.Type == agentproc.EventToolExecutionStart {
			var ev agentproc.Event
			l.Decode(t, &ev)
			assertJSON(t, "args", ev.Args, `{"text":"hi there"}`)
		}
		if l.Type == agentproc.EventToolExecutionEnd {
			var ev agentproc.Event
			l.Decode(t, &ev)
			assertJSON(t, "result", ev.Result, `{"content":[{"type":"text","text":"hi there"}]}`)
		}
	}
}

func TestAbortSlowTurn(t *testing.T) {
	a, logs := newTestAgent(Options{Model: &ScriptedModel{SlowPace: 50 * time.Millisecond}})
	h := start(t, a, logs)
	h.prompt(t, "p", "be slow please")
	h.Await(agentproc.EventMessageUpdate, func(l agentkittest.Line) bool {
		return strings.Contains(string(l.Raw), `"text_delta"`)
	})
	h.Send(agentproc.SimpleCommand{ID: "ab", Type: agentproc.CmdAbort})

	var end agentproc.Event
	h.Await(agentproc.EventMessageEnd, func(l agentkittest.Line) bool {
		return strings.Contains(string(l.Raw), `"role":"assistant"`)
	}).Decode(t, &end)
	if end.Message.StopReason != "aborted" || end.Message.ErrorMessage == "" {
		t.Fatalf("message_end after abort = %+v", end.Message)
	}
	if !strings.HasPrefix(end.Message.Text(), ScriptedPrefix+"Counting slowly:") {
		t.Errorf("aborted message lost its partial text: %q", end.Message.Text())
	}
	if strings.Contains(end.Message.Text(), " 40") {
		t.Errorf("the slow reply ran to the end despite abort: %q", end.Message.Text())
	}
	msgs := h.agentEnd(t)
	if lastAssistant(t, msgs).StopReason != "aborted" {
		t.Errorf("agent_end's last assistant message is not aborted: %+v", msgs)
	}
	var r agentproc.Response
	h.AwaitResponse("ab").Decode(t, &r)
	if !r.Success || r.Command != "abort" {
		t.Errorf("abort answered %+v", r)
	}

	// Abort while idle is a success too, and the agent takes prompts again.
	h.Send(agentproc.SimpleCommand{ID: "ab2", Type: agentproc.CmdAbort})
	h.AwaitResponse("ab2").Decode(t, &r)
	if !r.Success {
		t.Errorf("idle abort answered %+v", r)
	}
	h.prompt(t, "p2", "hello again")
	if last := lastAssistant(t, h.agentEnd(t)); last.StopReason != "stop" {
		t.Errorf("prompt after abort: %+v", last)
	}
}

// TestAbortWhileToolWaits aborts a turn whose tool waits for a
// surface_command_result that never comes.
func TestAbortWhileToolWaits(t *testing.T) {
	a, logs := newTestAgent(Options{})
	AddSurface(a, counterSurface())
	a.AddTool(incrementTool())
	h := start(t, a, logs)
	h.prompt(t, "p", "increment")
	h.Await(agentproc.TypeSurfaceCommand, nil)
	h.Send(agentproc.SimpleCommand{ID: "ab", Type: agentproc.CmdAbort})

	var end agentproc.Event
	h.Await(agentproc.EventToolExecutionEnd, nil).Decode(t, &end)
	if !end.IsError || !strings.Contains(string(end.Result), "Operation aborted") {
		t.Errorf("tool_execution_end = %+v %s", end, end.Result)
	}
	msgs := h.agentEnd(t)
	if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.StopReason != "aborted" {
		t.Errorf("last message = %+v", last)
	}
	h.AwaitResponse("ab")
}

func TestPromptWhileBusy(t *testing.T) {
	a, logs := newTestAgent(Options{Model: &ScriptedModel{SlowPace: 20 * time.Millisecond}})
	h := start(t, a, logs)
	h.prompt(t, "p1", "slow")

	h.Send(agentproc.PromptCommand{ID: "p2", Type: agentproc.CmdPrompt, Message: "hi"})
	var r agentproc.Response
	h.AwaitResponse("p2").Decode(t, &r)
	if r.Success || r.Error != errBusy {
		t.Fatalf("busy prompt answered %+v", r)
	}

	h.Send(agentproc.PromptCommand{ID: "p3", Type: agentproc.CmdPrompt, Message: "and then this", StreamingBehavior: "followUp"})
	h.AwaitResponse("p3").Decode(t, &r)
	if !r.Success {
		t.Fatalf("followUp prompt answered %+v", r)
	}
	var q struct {
		Steering []string `json:"steering"`
		FollowUp []string `json:"followUp"`
	}
	// pi reports the queue before it answers the prompt.
	for _, l := range h.Seen {
		if l.Type == agentproc.EventQueueUpdate {
			l.Decode(t, &q)
			break
		}
	}
	if len(q.FollowUp) != 1 || q.FollowUp[0] != "and then this" || q.Steering == nil {
		t.Errorf("first queue_update = %+v", q)
	}

	msgs := h.agentEnd(t)
	var users []string
	for _, m := range msgs {
		if m.Role == "user" {
			users = append(users, m.Text())
		}
	}
	if strings.Join(users, "|") != "slow|and then this" {
		t.Errorf("one run should answer both prompts, got users %q", users)
	}
	if !strings.Contains(lastAssistant(t, msgs).Text(), "and then this") {
		t.Errorf("the follow-up was not answered: %q", lastAssistant(t, msgs).Text())
	}
	starts := 0
	for _, l := range h.Seen {
		if l.Type == agentproc.EventAgentStart {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("agent_start %d times, want 1", starts)
	}
}

func TestSteerDeliveredBeforeNextModelCall(t *testing.T) {
	release := make(chan struct{})
	a, logs := newTestAgent(Options{})
	a.AddTool(Tool{Name: "echo", Run: func(context.Context, *ToolCtx, json.RawMessage) (string, error) {
		<-release
		return "echoed", nil
	}})
	h := start(t, a, logs)
	h.prompt(t, "p", "echo: x")
	h.Await(agentproc.EventToolExecutionStart, nil)
	h.Send(map[string]any{"id": "s", "type": "steer", "message": "steer this"})
	h.AwaitResponse("s")
	close(release)
	msgs := h.agentEnd(t)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role+":"+m.Text())
	}
	got := strings.Join(roles, " | ")
	if !strings.Contains(got, "toolResult:echoed | user:steer this | assistant:") {
		t.Errorf("steering message not delivered after the tool batch: %s", got)
	}
}

func TestDialogs(t *testing.T) {
	a, logs := newTestAgent(Options{})
	h := start(t, a, logs)

	confirmed := true
	h.prompt(t, "p1", "Ask me something")
	var req agentproc.ExtensionUIRequest
	h.Await(agentproc.TypeExtensionUIRequest, nil).Decode(t, &req)
	if req.Method != "confirm" || req.ID == "" || req.Title == "" {
		t.Fatalf("dialog = %+v", req)
	}
	// An answer to another id is ignored and logged.
	h.Send(agentproc.ExtensionUIResponse{Type: agentproc.TypeExtensionUIResponse, ID: "nope", Confirmed: &confirmed})
	h.Send(agentproc.ExtensionUIResponse{Type: agentproc.TypeExtensionUIResponse, ID: req.ID, Confirmed: &confirmed})
	if got := lastAssistant(t, h.agentEnd(t)).Text(); !strings.HasSuffix(got, "You answered yes.") {
		t.Errorf("confirm reply = %q", got)
	}
	if !strings.Contains(logs.String(), "answer for no pending request") {
		t.Errorf("stray answer not logged:\n%s", logs)
	}

	h.prompt(t, "p2", "choose a colour")
	h.Await(agentproc.TypeExtensionUIRequest, nil).Decode(t, &req)
	if req.Method != "select" || len(req.Options) != 3 {
		t.Fatalf("dialog = %+v", req)
	}
	green := "green"
	h.Send(agentproc.ExtensionUIResponse{Type: agentproc.TypeExtensionUIResponse, ID: req.ID, Value: &green})
	if got := lastAssistant(t, h.agentEnd(t)).Text(); !strings.HasSuffix(got, "You chose: green.") {
		t.Errorf("select reply = %q", got)
	}

	h.prompt(t, "p3", "ask again")
	h.Await(agentproc.TypeExtensionUIRequest, nil).Decode(t, &req)
	h.Send(agentproc.ExtensionUIResponse{Type: agentproc.TypeExtensionUIResponse, ID: req.ID, Cancelled: true})
	if got := lastAssistant(t, h.agentEnd(t)).Text(); !strings.HasSuffix(got, "You dismissed the question.") {
		t.Errorf("cancelled reply = %q", got)
	}

	// A dialog pending when the turn is aborted ends the turn as aborted.
	h.prompt(t, "p4", "ask once more")
	h.Await(agentproc.TypeExtensionUIRequest, nil)
	h.Send(agentproc.SimpleCommand{ID: "ab", Type: agentproc.CmdAbort})
	if last := lastAssistant(t, h.agentEnd(t)); last.StopReason != "aborted" {
		t.Errorf("abort during dialog: %+v", last)
	}
}

func TestDialogTimeoutAndNotices(t *testing.T) {
	a, logs := newTestAgent(Options{})
	h := start(t, a, logs)

	ans, err := a.Dialog(context.Background(), agentproc.ExtensionUIRequest{Method: "input", Title: "name?", Timeout: 30})
	if err != nil || !ans.Cancelled {
		t.Errorf("timed-out dialog = %+v, %v", ans, err)
	}
	h.Await(agentproc.TypeExtensionUIRequest, nil)

	if _, err := a.Dialog(context.Background(), agentproc.ExtensionUIRequest{Method: "notify"}); err == nil {
		t.Error("Dialog accepted a notice method")
	}
	if err := a.Notify(agentproc.ExtensionUIRequest{Method: "confirm"}); err == nil {
		t.Error("Notify accepted a dialog method")
	}
	if err := a.Notify(agentproc.ExtensionUIRequest{Method: "setStatus", StatusKey: "k", StatusText: "busy"}); err != nil {
		t.Fatal(err)
	}
	var req agentproc.ExtensionUIRequest
	h.Await(agentproc.TypeExtensionUIRequest, nil).Decode(t, &req)
	if req.Method != "setStatus" || req.StatusText != "busy" || req.ID == "" {
		t.Errorf("notice = %+v", req)
	}
}

func TestPiQueries(t *testing.T) {
	a, logs := newTestAgent(Options{Name: "q", SessionID: "sess-1"})
	AddSurface(a, counterSurface())
	h := start(t, a, logs)

	h.Send(agentproc.SimpleCommand{ID: "c", Type: agentproc.CmdGetCommands})
	var r agentproc.Response
	h.AwaitResponse("c").Decode(t, &r)
	assertJSON(t, "get_commands", r.Data,
		`{"commands":[{"name":"surface:counter","description":"agent-authoritative-surface probe: counter","source":"extension"}]}`)

	h.Send(agentproc.SimpleCommand{ID: "m0", Type: agentproc.CmdGetMessages})
	h.AwaitResponse("m0").Decode(t, &r)
	assertJSON(t, "empty history", r.Data, `{"messages":[]}`)

	// The probe runs as an extension command: answered, no turn.
	h.prompt(t, "probe", "/surface:counter")

	h.prompt(t, "p", "hello")
	h.agentEnd(t)

	h.Send(agentproc.SimpleCommand{ID: "s", Type: agentproc.CmdGetState})
	h.AwaitResponse("s").Decode(t, &r)
	var st sessionState
	if err := json.Unmarshal(r.Data, &st); err != nil {
		t.Fatal(err)
	}
	if st.IsStreaming || st.MessageCount != 2 || st.SessionID != "sess-1" || st.Model == nil || st.Model.ID != "scripted" {
		t.Errorf("get_state = %s", r.Data)
	}

	h.Send(agentproc.SimpleCommand{ID: "m", Type: agentproc.CmdGetMessages})
	h.AwaitResponse("m").Decode(t, &r)
	var hist struct{ Messages []agentproc.AgentMessage }
	if err := json.Unmarshal(r.Data, &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Messages) != 2 || hist.Messages[0].Text() != "hello" || hist.Messages[1].Role != "assistant" {
		t.Errorf("get_messages = %s", r.Data)
	}
	runs := 0
	for _, l := range h.Seen {
		if l.Type == agentproc.EventAgentStart {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("%d runs; the probe command must not start one", runs)
	}
}

func TestUnknownAndInvalidLines(t *testing.T) {
	a, logs := newTestAgent(Options{MaxLineBytes: 1024})
	h := start(t, a, logs)

	h.Send(map[string]any{"id": "x", "type": "set_model", "provider": "a", "modelId": "b"})
	var r agentproc.Response
	h.Await(agentproc.TypeResponse, nil).Decode(t, &r)
	if r.Success || r.Command != "set_model" || r.Error != "Unknown command: set_model" || r.ID != "x" {
		t.Errorf("unknown command answered %+v", r)
	}
	h.Send(map[string]any{"type": "bogus"})
	r = agentproc.Response{}
	h.Await(agentproc.TypeResponse, nil).Decode(t, &r)
	if r.Success || r.ID != "" || r.Error != "Unknown command: bogus" {
		t.Errorf("id-less unknown command answered %+v", r)
	}

	for _, bad := range []string{
		`not json`,
		`{"type":`,
		`["array"]`,
		`{"id":"no-type"}`,
		`{"type":42}`,
		`{"type":"surface_dispatch","id":"d","state":"x","rev":"nine"}`,
		`{"type":"prompt","id":"p","message":7}`,
		`{"type":"state_changed","key":1}`,
		`{"type":"prompt","message":"` + strings.Repeat("x", 2000) + `"}`,
		"",
		"   ",
		"\r",
	} {
		h.SendRaw(bad)
	}
	// The loop goes on: a query after the junk is answered, and the junk got
	// no answers of its own.
	h.SendRaw("{\"id\":\"alive\",\"type\":\"get_state\"}\r")
	h.AwaitResponse("alive")
	for _, l := range h.Seen {
		if l.Type == agentproc.TypeResponse && l.Map()["id"] != "alive" && l.Map()["command"] != "set_model" && l.Map()["command"] != "bogus" {
			t.Errorf("junk line got an answer: %s", l)
		}
	}
	log := logs.String()
	for _, want := range []string{"not a JSON object with a string type", "bad fields", "exceeds the 1024-byte limit"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestStateLines(t *testing.T) {
	var seen []agentproc.StateChanged
	a, logs := newTestAgent(Options{OnStateChanged: func(sc agentproc.StateChanged) { seen = append(seen, sc) }})
	h := start(t, a, logs)

	if err := a.SetState("canvas.model", map[string]string{"id": "m1"}); err != nil {
		t.Fatal(err)
	}
	var set agentproc.StateSet
	h.Await(agentproc.TypeStateSet, nil).Decode(t, &set)
	if set.Key != "canvas.model" {
		t.Errorf("state_set = %+v", set)
	}
	assertJSON(t, "value", set.Value, `{"id":"m1"}`)
	if err := a.DeleteState("canvas.model"); err != nil {
		t.Fatal(err)
	}
	var del agentproc.StateDelete
	h.Await(agentproc.TypeStateDelete, nil).Decode(t, &del)
	if del.Key != "canvas.model" {
		t.Errorf("state_delete = %+v", del)
	}
	if err := a.SetState("surface:demo", 1); err == nil {
		t.Error("SetState wrote a surface snapshot key")
	}
	if err := a.DeleteState(""); err == nil {
		t.Error("DeleteState accepted an empty key")
	}

	h.Send(agentproc.StateChanged{Type: agentproc.TypeStateChanged, Key: "ui.theme", Value: json.RawMessage(`"dark"`), Rev: 1})
	h.Send(agentproc.StateChanged{Type: agentproc.TypeStateChanged, Key: "ui.zoom", Value: json.RawMessage(`2`), Rev: 1})
	h.Send(agentproc.StateChanged{Type: agentproc.TypeStateChanged, Key: "ui.zoom", Rev: 2, Deleted: true})
	h.Send(agentproc.SimpleCommand{ID: "sync", Type: agentproc.CmdGetState}) // lines are handled in order
	h.AwaitResponse("sync")
	if v, ok := a.Pref("ui.theme"); !ok || string(v) != `"dark"` {
		t.Errorf("Pref(ui.theme) = %s, %v", v, ok)
	}
	if _, ok := a.Pref("ui.zoom"); ok {
		t.Error("a deleted key is still a preference")
	}
	if p := a.Prefs(); len(p) != 1 {
		t.Errorf("Prefs() = %v", p)
	}
	if len(seen) != 3 || !seen[2].Deleted {
		t.Errorf("OnStateChanged saw %+v", seen)
	}
}

func TestSurfaceGetAndFailedCommand(t *testing.T) {
	a, logs := newTestAgent(Options{})
	h := start(t, a, logs)
	ctx := context.Background()

	type out struct {
		state json.RawMessage
		rev   uint64
		err   error
	}
	got := make(chan out, 1)
	go func() {
		s, rev, err := a.SurfaceGet(ctx, "demo")
		got <- out{s, rev, err}
	}()
	var g agentproc.SurfaceGet
	h.Await(agentproc.TypeSurfaceGet, nil).Decode(t, &g)
	h.Send(agentproc.SurfaceGetResult{Type: agentproc.TypeSurfaceGetResult, ID: g.ID, OK: true,
		State: json.RawMessage(`{"count":3}`), Rev: 12})
	if o := <-got; o.err != nil || o.rev != 12 || string(o.state) != `{"count":3}` {
		t.Errorf("SurfaceGet = %s %d %v", o.state, o.rev, o.err)
	}

	errc := make(chan error, 1)
	go func() {
		_, err := a.SurfaceCommand(ctx, "canvas", "edit", map[string]int{"x": 1})
		errc <- err
	}()
	var c agentproc.SurfaceCommand
	h.Await(agentproc.TypeSurfaceCommand, nil).Decode(t, &c)
	assertJSON(t, "args", c.Args, `{"x":1}`)
	// An answer of the wrong type for this id does not resolve the call.
	h.Send(agentproc.SurfaceGetResult{Type: agentproc.TypeSurfaceGetResult, ID: c.ID, OK: true})
	h.Send(agentproc.SurfaceCommandResult{Type: agentproc.TypeSurfaceCommandResult, ID: c.ID,
		Error: &agentproc.ErrorBody{Code: agentproc.CodeSurfaceNotRegistered, Message: "no canvas"}})
	err := <-errc
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != agentproc.CodeSurfaceNotRegistered || ce.Message != "no canvas" {
		t.Errorf("SurfaceCommand error = %v", err)
	}

	// A call pending when the agent stops is released.
	go func() {
		_, err := a.SurfaceCommand(ctx, "demo", "increment", nil)
		errc <- err
	}()
	h.Await(agentproc.TypeSurfaceCommand, nil)
	h.stdin.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("pending call ended with %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pending SurfaceCommand was not released when the agent stopped")
	}
}

func TestScriptedOutcomes(t *testing.T) {
	var exitCode atomic.Int32
	exitCode.Store(-1)
	a, logs := newTestAgent(Options{Model: &ScriptedModel{Exit: func(c int) { exitCode.Store(int32(c)) }}})
	h := start(t, a, logs)

	h.prompt(t, "f", "please fail")
	last := lastAssistant(t, h.agentEnd(t))
	if last.StopReason != "error" || !strings.Contains(last.ErrorMessage, "scripted failure") {
		t.Errorf("fail: %+v", last)
	}

	h.prompt(t, "l", "something LONG")
	if last := lastAssistant(t, h.agentEnd(t)); last.StopReason != "length" {
		t.Errorf("long: %+v", last)
	}

	h.prompt(t, "t", "think about it")
	msgs := h.agentEnd(t)
	var blocks []agentproc.ContentBlock
	if err := json.Unmarshal(lastAssistant(t, msgs).Content, &blocks); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].Type != "thinking" || blocks[0].Thinking == "" || blocks[1].Type != "text" {
		t.Errorf("think: blocks %+v", blocks)
	}

	h.prompt(t, "c", "crash now")
	h.agentEnd(t)
	if exitCode.Load() != 3 {
		t.Errorf("crash called Exit(%d), want 3", exitCode.Load())
	}

	h.prompt(t, "e", "echo: nobody home")
	if got := lastAssistant(t, h.agentEnd(t)).Text(); !strings.Contains(got, "no echo tool") {
		t.Errorf("echo without tool: %q", got)
	}
	h.prompt(t, "task", "what is my task?")
	if got := lastAssistant(t, h.agentEnd(t)).Text(); !strings.Contains(got, "You said: “what is my task?”") {
		t.Errorf("default reply: %q", got)
	}
}

// loopingModel calls the tool "again" forever.
type loopingModel struct{ calls atomic.Int32 }

func (m *loopingModel) Stream(_ context.Context, _ Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		n := m.calls.Add(1)
		_ = yield(Delta{Kind: DeltaToolCall, Index: 0, ID: fmt.Sprintf("c%d", n), Name: "again"}, nil) &&
			yield(Delta{Kind: DeltaToolCallArgs, Index: 0, Text: "{}"}, nil) &&
			yield(Delta{Kind: DeltaFinish, Reason: StopToolUse}, nil)
	}
}

func TestStepLimitAndToolFailures(t *testing.T) {
	m := &loopingModel{}
	a, logs := newTestAgent(Options{Model: m, MaxSteps: 3})
	a.AddTool(Tool{Name: "again", Run: func(context.Context, *ToolCtx, json.RawMessage) (string, error) {
		panic("tool bug")
	}})
	h := start(t, a, logs)
	h.prompt(t, "p", "loop")
	msgs := h.agentEnd(t)
	last := lastAssistant(t, msgs)
	if m.calls.Load() != 3 || last.StopReason != "error" || !strings.Contains(last.ErrorMessage, "MaxSteps") {
		t.Errorf("calls %d, last %+v", m.calls.Load(), last)
	}
	var results int
	for _, msg := range msgs {
		if msg.Role == "toolResult" {
			results++
			if !msg.IsError || !strings.Contains(msg.Text(), "panicked: tool bug") {
				t.Errorf("tool result %+v %q", msg, msg.Text())
			}
		}
	}
	if results != 3 {
		t.Errorf("%d tool results, want 3", results)
	}
}

// scriptModel plays fixed deltas.
type scriptModel []Delta

func (m scriptModel) Stream(context.Context, Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		for _, d := range m {
			if !yield(d, nil) {
				return
			}
		}
	}
}

func TestToolCallEdgeCases(t *testing.T) {
	a, logs := newTestAgent(Options{MaxSteps: 1, Model: scriptModel{
		{Kind: DeltaToolCall, Index: 0, ID: "a", Name: "missing"},
		{Kind: DeltaToolCall, Index: 1, ID: "b", Name: "real"},
		{Kind: DeltaToolCallArgs, Index: 1, Text: `{"broken`},
		{Kind: DeltaToolCallArgs, Index: 2, Text: `{}`}, // no header: gets a generated id, no name
	}})
	a.AddTool(Tool{Name: "real", Run: func(context.Context, *ToolCtx, json.RawMessage) (string, error) {
		t.Error("a tool ran with malformed arguments")
		return "", nil
	}})
	h := start(t, a, logs)
	h.prompt(t, "p", "x")
	msgs := h.agentEnd(t)
	if msgs[1].StopReason != "toolUse" {
		t.Errorf("stop reason %q, want toolUse inferred from the tool calls", msgs[1].StopReason)
	}
	var texts []string
	for _, m := range msgs {
		if m.Role == "toolResult" {
			texts = append(texts, m.ToolCallID+"="+m.Text())
		}
	}
	got := strings.Join(texts, "\n")
	for _, want := range []string{"a=Tool missing not found", `b=Invalid arguments for tool real: not a JSON object: {"broken`, "Tool  not found"} {
		if !strings.Contains(got, want) {
			t.Errorf("tool results lack %q:\n%s", want, got)
		}
	}
}

// OnReady runs after agent_ready and may call the daemon; OnAgentEnd runs
// after each agent_end, and the next run does not wait for it.
func TestReadyAndAgentEndHooks(t *testing.T) {
	readyCalls := make(chan error, 1)
	ends := make(chan struct{}, 4)
	var a *Agent
	a, logs := newTestAgent(Options{
		OnReady: func(ctx context.Context) {
			_, err := a.SurfaceCommand(ctx, "canvas", "sync", nil)
			readyCalls <- err
		},
		OnAgentEnd: func(ctx context.Context) {
			if ctx.Err() == nil {
				ends <- struct{}{}
			}
		},
	})
	h := start(t, a, logs)

	// The hook's command comes after agent_ready (start read it first).
	var c agentproc.SurfaceCommand
	h.Await(agentproc.TypeSurfaceCommand, nil).Decode(t, &c)
	if c.Domain != "canvas" || c.Action != "sync" {
		t.Fatalf("OnReady sent %+v", c)
	}
	h.Send(agentproc.SurfaceCommandResult{Type: agentproc.TypeSurfaceCommandResult, ID: c.ID, OK: true})
	if err := <-readyCalls; err != nil {
		t.Fatalf("OnReady's command: %v", err)
	}

	for i, id := range []string{"p1", "p2"} {
		h.Send(agentproc.PromptCommand{ID: id, Type: agentproc.CmdPrompt, Message: "hello"})
		h.Await(agentproc.EventAgentEnd, nil)
		select {
		case <-ends:
		case <-time.After(10 * time.Second):
			t.Fatalf("OnAgentEnd did not run after run %d", i+1)
		}
	}
}
