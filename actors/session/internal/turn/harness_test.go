package turn

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// recorder is an Out that writes down everything the machine says, one
// line per call, in order:
//
//	chat <the browser's chunk JSON>      (a tool error adds " code=<error_code>")
//	ui <sticky key|-> <the browser's ui-request JSON>
//	unstick <key>
//	send <line>                          (no answer awaited)
//	call <line>                          (its answer goes to Reply)
//	transcript <role> ...                (one line per entry)
//	record user ...                      (a prompt's entry, before it is accepted)
//	status busy=<bool> queued=<n>
//	title <title>
//	grace <turn id>
//	model <id> images=<bool>
//
// Steps add their own results (prompt, abort, errors) the same way.
type recorder struct {
	t       testing.TB
	m       *Machine
	lines   []string
	entries []store.Entry
	sent    []Command
	// hook, when set, sees each line as it is written.
	hook func(line string)
}

func (r *recorder) add(format string, args ...any) { r.line(fmt.Sprintf(format, args...)) }

func (r *recorder) line(l string) {
	if r.hook != nil {
		r.hook(l)
	}
	r.lines = append(r.lines, l)
}

func (r *recorder) Emit(ev *pb.Event, sticky string) {
	switch e := ev.GetEvent().(type) {
	case *pb.Event_Chat:
		line := "chat " + string(wire.Data(ev))
		if te := e.Chat.GetToolError(); te != nil {
			line += " code=" + te.GetErrorCode()
		}
		if sticky != "" {
			r.t.Errorf("chat event emitted sticky %q", sticky)
		}
		r.line(line)
	case *pb.Event_UiRequest:
		if sticky == "" {
			sticky = "-"
		}
		r.add("ui %s %s", sticky, wire.Data(ev))
	default:
		r.t.Errorf("machine emitted a %s event", pb.KindOf(ev))
	}
}

func (r *recorder) Unstick(key string) { r.add("unstick %s", key) }

func (r *recorder) Send(c Command) {
	r.sent = append(r.sent, c)
	if c.ReplyID == "" {
		r.add("send %s", c.Line)
		return
	}
	var id struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(c.Line, &id); err != nil || id.ID != c.ReplyID || !strings.HasPrefix(id.ID, ReplyPrefix) {
		r.t.Errorf("command %s awaits an answer as %q", c.Line, c.ReplyID)
	}
	r.add("call %s", c.Line)
}

func (r *recorder) Transcript(entries []store.Entry) {
	if len(entries) == 0 {
		r.t.Error("empty transcript append")
	}
	for _, e := range entries {
		r.entries = append(r.entries, e)
		switch e.Role {
		case "user":
			r.add("transcript user %q turn=%d prompt=%d via=%s", e.Text, e.TurnID, e.PromptID, e.Via)
		case "tool":
			r.add("transcript tool %s %s args=%s result=%s error=%t turn=%d", e.ToolCallID, e.ToolName, e.ToolArgs, e.ToolResult, e.IsError, e.TurnID)
		default:
			r.add("transcript %s %q turn=%d", e.Role, e.Text, e.TurnID)
		}
	}
}

func (r *recorder) Record(id uint64, e store.Entry) {
	if e.Role != "user" || e.PromptID != id {
		r.t.Errorf("record of prompt %d: %+v", id, e)
	}
	r.entries = append(r.entries, e)
	r.add("record user %q turn=%d prompt=%d via=%s", e.Text, e.TurnID, e.PromptID, e.Via)
}

func (r *recorder) Status()                  { r.add("status busy=%t queued=%d", r.m.Busy(), r.m.Queued()) }
func (r *recorder) Title(title string)       { r.add("title %s", title) }
func (r *recorder) AbortGrace(turnID uint64) { r.add("grace %d", turnID) }
func (r *recorder) Model(md *proc.Model)     { r.add("model %s images=%t", md.ID, md.AcceptsImages()) }

// only keeps the lines that begin with one of prefixes (all without any).
func only(lines []string, prefixes ...string) []string {
	if len(prefixes) == 0 {
		return lines
	}
	out := []string{}
	for _, l := range lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// newMachine makes a machine recording into a new recorder.
func newMachine(t testing.TB, cfg Config) (*Machine, *recorder) {
	r := &recorder{t: t}
	cfg.Out = r
	if cfg.Images == nil {
		cfg.Images = func() bool { return false }
	}
	m := New(cfg)
	r.m = m
	return m, r
}

// ---------------------------------------------------------------------------
// Steps: what the session feeds the machine.

type step func(m *Machine, r *recorder)

// steps flattens steps and lists of steps.
func steps(s ...any) []step {
	var out []step
	for _, x := range s {
		switch v := x.(type) {
		case step:
			out = append(out, v)
		case func(*Machine, *recorder):
			out = append(out, v)
		case []step:
			out = append(out, v...)
		default:
			panic(fmt.Sprintf("not a step: %T", x))
		}
	}
	return out
}

func play(m *Machine, r *recorder, s []step) {
	for _, st := range s {
		st(m, r)
	}
}

// forget drops what was recorded so far: a scenario's expectations begin after it.
func forget() step { return func(m *Machine, r *recorder) { r.lines = nil } }

func ready() step { return func(m *Machine, r *recorder) { m.AgentReady() } }

// prompt sends a prompt from the browser and its record is durable at once;
// its result is recorded as "prompt <id> [queued]" or "refused <code>".
func prompt(text string) step { return promptFull(Prompt{Text: text, Via: "browser"}) }

func promptFull(p Prompt) step {
	return func(m *Machine, r *recorder) {
		id, err := m.Prompt(p)
		if err != nil {
			r.add("refused %s", err.GetCode())
			return
		}
		recordedStep(id)(m, r)
	}
}

// promptRecording sends a prompt whose record stays in flight until
// recorded or unrecorded.
func promptRecording(text string) step {
	return func(m *Machine, r *recorder) {
		id, err := m.Prompt(Prompt{Text: text, Via: "browser"})
		if err != nil {
			r.add("refused %s", err.GetCode())
			return
		}
		r.add("recording %d", id)
	}
}

// recordedStep says prompt id's record is durable; the prompt's answer is
// recorded as "prompt <id> [queued]", or "not waiting <id>".
func recordedStep(id uint64) step {
	return func(m *Machine, r *recorder) {
		a, ok := m.Recorded(id)
		switch {
		case !ok:
			r.add("not waiting %d", id)
		case a.Queued:
			r.add("prompt %d queued", a.ID)
		default:
			r.add("prompt %d", a.ID)
		}
	}
}

// unrecorded says prompt id's record failed.
func unrecorded(id uint64) step {
	return func(m *Machine, r *recorder) { m.Unrecorded(id); r.add("dropped %d", id) }
}

// pi feeds agent lines (pi events); a line the machine refuses is recorded
// as "invalid <error>".
func pi(lines ...any) step {
	return func(m *Machine, r *recorder) {
		for _, l := range lines {
			b := lineOf(l)
			var env struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(b, &env) != nil {
				env.Type = "message_update" // the tests' broken lines pose as one
			}
			var err error
			if env.Type == proc.TypeExtensionUIRequest {
				err = m.UIRequest(b)
			} else {
				err = m.AgentLine(env.Type, b)
			}
			if err != nil {
				r.add("invalid %s", reason(err))
			}
		}
	}
}

// reason is an error's text up to the decoder's own words (which change
// with Go's versions); TestInvalidLines checks the rest.
func reason(err error) string {
	s, _, _ := strings.Cut(err.Error(), ": ")
	return s
}

// typed feeds one agent line under an explicit type.
func typed(typ, line string) step {
	return func(m *Machine, r *recorder) {
		if err := m.AgentLine(typ, []byte(line)); err != nil {
			r.add("invalid %s", reason(err))
		}
	}
}

func lineOf(l any) []byte {
	switch v := l.(type) {
	case string:
		return []byte(v)
	case []byte:
		return v
	}
	b, err := json.Marshal(l)
	if err != nil {
		panic(err)
	}
	return b
}

// The ids the tests answer: "" stands for the running turn's prompt or
// barrier.
func promptID(m *Machine, id string) string {
	if id == "" && m.cur != nil {
		return m.cur.promptReq
	}
	return id
}

func settleID(m *Machine, id string) string {
	if id == "" && m.cur != nil {
		return m.cur.settleID
	}
	return id
}

// accepted answers the prompt command with success, as pi does before its run.
func accepted() step { return acceptedAs("") }

func acceptedAs(id string) step {
	return func(m *Machine, r *recorder) {
		id := promptID(m, id)
		m.Reply(id, lineOf(ev{"type": "response", "id": id, "command": "prompt", "success": true}), false)
	}
}

// refusedBy answers the prompt command with a failure.
func refusedBy(msg string) step {
	return func(m *Machine, r *recorder) {
		id := promptID(m, "")
		resp := ev{"type": "response", "id": id, "command": "prompt", "success": false}
		if msg != "" {
			resp["error"] = msg
		}
		m.Reply(id, lineOf(resp), false)
	}
}

// reply answers a command with a raw line ("" id: the running prompt).
func reply(id, line string, failed bool) step {
	return func(m *Machine, r *recorder) {
		id := promptID(m, id)
		m.Reply(id, []byte(line), failed)
	}
}

// state answers the barrier (get_state) as pi does.
func state(streaming bool) step {
	return func(m *Machine, r *recorder) {
		id := settleID(m, "")
		m.Reply(id, lineOf(ev{"type": "response", "id": id, "command": "get_state", "success": true,
			"data": ev{"model": ev{"id": "replay", "provider": "replay", "input": []string{"text"}},
				"isStreaming": streaming, "isCompacting": false, "messageCount": 0}}), false)
	}
}

// stateUnknown answers the barrier as an agent that does not know get_state.
func stateUnknown() step {
	return func(m *Machine, r *recorder) {
		id := settleID(m, "")
		m.Reply(id, lineOf(ev{"type": "response", "id": id, "command": "get_state", "success": false, "error": "Unknown command: get_state"}), false)
	}
}

func abort() step {
	return func(m *Machine, r *recorder) {
		if m.Abort() {
			r.add("abort busy")
		} else {
			r.add("abort idle")
		}
	}
}

func graceExpired(turnID uint64) step {
	return func(m *Machine, r *recorder) { m.AbortGraceExpired(turnID) }
}

func gone(how string) step { return func(m *Machine, r *recorder) { m.AgentGone(how, false) } }

func stoppedAndGone() step {
	return func(m *Machine, r *recorder) { m.AgentStopped(); m.AgentGone("signal killed", true) }
}

func closeAs(why string) step { return func(m *Machine, r *recorder) { m.Close(why) } }

func failInbox(why string) step { return func(m *Machine, r *recorder) { m.FailInbox(why) } }

func answer(id, which, value string, confirmed bool) step {
	return func(m *Machine, r *recorder) {
		if err := m.UIResponse(id, which, value, confirmed); err != nil {
			r.add("refused %s", err.GetCode())
		}
	}
}

// ---------------------------------------------------------------------------
// pi lines

type ev = map[string]any

func textStart(i int) ev {
	return ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_start", "contentIndex": i}}
}

func textDelta(i int, s string) ev {
	return ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_delta", "contentIndex": i, "delta": s}}
}

func textEnd(i int) ev {
	return ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_end", "contentIndex": i}}
}

func thinking(typ string, i int, delta string) ev {
	e := ev{"type": "thinking_" + typ, "contentIndex": i}
	if delta != "" {
		e["delta"] = delta
	}
	return ev{"type": "message_update", "assistantMessageEvent": e}
}

func assistant(stop, errMsg string, text string) ev {
	m := ev{"role": "assistant", "content": []ev{{"type": "text", "text": text}}, "stopReason": stop}
	if errMsg != "" {
		m["errorMessage"] = errMsg
	}
	return m
}

func messageStart() ev {
	return ev{"type": "message_start", "message": ev{"role": "assistant", "content": []any{}}}
}

// run is one pi run: agent_start … agent_end with the assistant message.
func run(msg ev, deltas ...string) []any {
	lines := []any{ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart()}
	if len(deltas) > 0 {
		lines = append(lines, textStart(0))
		for _, d := range deltas {
			lines = append(lines, textDelta(0, d))
		}
	}
	return append(lines, ev{"type": "message_end", "message": msg}, ev{"type": "turn_end", "message": msg, "toolResults": []any{}},
		ev{"type": "agent_end", "messages": []any{msg}})
}

func concat(parts ...[]any) []any {
	var out []any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// check compares the recorded lines (those with prefixes) with want.
func check(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	var b strings.Builder
	n := max(len(got), len(want))
	for i := range n {
		g, w := "", ""
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := "  "
		if g != w {
			mark = "! "
		}
		fmt.Fprintf(&b, "%s%d got:  %s\n", mark, i, g)
		if g != w {
			fmt.Fprintf(&b, "%s%d want: %s\n", mark, i, w)
		}
	}
	t.Errorf("output differs:\n%s", b.String())
}

// scenario is one table row: steps in, the recorded lines (filtered by
// prefixes) out.
type scenario struct {
	name  string
	cfg   Config
	steps []step
	only  []string
	want  []string
}

func runScenarios(t *testing.T, cases []scenario) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, r := newMachine(t, c.cfg)
			play(m, r, c.steps)
			check(t, only(r.lines, c.only...), c.want)
		})
	}
}
