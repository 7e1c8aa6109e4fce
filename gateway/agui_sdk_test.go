package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// AG-UI's own client (the pinned @ag-ui/client in testdata/npm/ag-ui;
// scripts/test-setup installs it) drives the daemon's AG-UI endpoint: the
// stock HttpAgent, unmodified, which validates every event against
// @ag-ui/core's schemas and verifies the sequence (a malformed event fails
// the run; a field the schema does not know is stripped with a warning,
// and the tests want no warning). The agents are real: examples/hello-agent
// on a scripted model (llmstub) and examples/surface-demo-agent with its
// scripted model and its demo surface.

func aguiDir(t *testing.T) string {
	t.Helper()
	return testkit.NodeFixture(t, "ag-ui", "@ag-ui/client")
}

// aguiScenario is a scenario of testdata/npm/ag-ui/scenarios.mjs running.
type aguiScenario struct {
	t              *testing.T
	name           string
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	stdout, stderr bytes.Buffer
}

// aguiEnv is where a scenario runs: the daemon, the token, the endpoint and
// the thread.
type aguiEnv struct {
	d      *daemon.Daemon
	token  string
	url    string
	thread string
}

func (e aguiEnv) start(t *testing.T, scenario string, args ...string) *aguiScenario {
	t.Helper()
	dir := aguiDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	s := &aguiScenario{t: t, name: scenario, cancel: cancel}
	s.cmd = exec.CommandContext(ctx, "node", append([]string{"scenarios.mjs", scenario}, args...)...)
	s.cmd.Dir = dir
	token := e.token
	if token == "" {
		token = e.d.Token
	}
	s.cmd.Env = append(os.Environ(), "SURFACED_URL="+e.d.URL, "SURFACED_TOKEN="+token, "AGUI_URL="+e.url, "AGUI_THREAD="+e.thread)
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = s.cmd.Wait()
	})
	return s
}

func (s *aguiScenario) wait(out any) {
	s.t.Helper()
	defer s.cancel()
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("node scenarios.mjs %s: %v\nstderr:\n%s\nstdout:\n%s", s.name, err, s.stderr.String(), s.stdout.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(s.stdout.Bytes()), out); err != nil {
		s.t.Fatalf("scenario %s printed %q: %v\nstderr:\n%s", s.name, s.stdout.String(), err, s.stderr.String())
	}
}

func (e aguiEnv) run(t *testing.T, out any, scenario string, args ...string) {
	t.Helper()
	e.start(t, scenario, args...).wait(out)
}

// aguiEvent is an AG-UI event as the client applied it.
type aguiEvent struct {
	Type            string          `json:"type"`
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	MessageID       string          `json:"messageId"`
	Role            string          `json:"role"`
	Delta           json.RawMessage `json:"delta"`
	ToolCallID      string          `json:"toolCallId"`
	ToolCallName    string          `json:"toolCallName"`
	ParentMessageID string          `json:"parentMessageId"`
	Content         json.RawMessage `json:"content"`
	Snapshot        json.RawMessage `json:"snapshot"`
	Message         string          `json:"message"`
	Code            string          `json:"code"`
	Metadata        json.RawMessage `json:"metadata"`
	Outcome         *struct {
		Type       string          `json:"type"`
		Interrupts []aguiInterrupt `json:"interrupts"`
	} `json:"outcome"`
}

func (e aguiEvent) text() string {
	var s string
	_ = json.Unmarshal(e.Delta, &s)
	return s
}

type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message"`
	ResponseSchema json.RawMessage `json:"responseSchema"`
	Metadata       json.RawMessage `json:"metadata"`
}

// aguiMessage is a message of the client's conversation.
type aguiMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	Metadata   json.RawMessage `json:"metadata"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls"`
}

func (m aguiMessage) text() string {
	var s string
	_ = json.Unmarshal(m.Content, &s)
	return s
}

// aguiResult is what a run observed.
type aguiResult struct {
	Events            []aguiEvent     `json:"events"`
	Error             string          `json:"error"`
	Messages          []aguiMessage   `json:"messages"`
	State             json.RawMessage `json:"state"`
	PendingInterrupts []aguiInterrupt `json:"pendingInterrupts"`
	SessionID         string          `json:"sessionId"`
	Warnings          []string        `json:"warnings"`
	StateAfter        struct {
		Entries json.RawMessage `json:"entries"`
	} `json:"stateAfter"`
	Command *struct {
		Status int `json:"status"`
	} `json:"command"`
	Aborted *struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	} `json:"aborted"`
}

type aguiRuns struct {
	Runs     []aguiResult `json:"runs"`
	Warnings []string     `json:"warnings"`
}

func (r aguiResult) types() string {
	var ts []string
	for _, e := range r.Events {
		ts = append(ts, e.Type)
	}
	return compact(ts)
}

func (r aguiResult) of(typ string) []aguiEvent {
	var out []aguiEvent
	for _, e := range r.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (r aguiResult) texts(messageID string) string {
	var b strings.Builder
	for _, e := range r.of("TEXT_MESSAGE_CONTENT") {
		if messageID == "" || e.MessageID == messageID {
			b.WriteString(e.text())
		}
	}
	return b.String()
}

func (r aguiResult) last(t *testing.T) aguiEvent {
	t.Helper()
	if len(r.Events) == 0 {
		t.Fatalf("no events (error %q)", r.Error)
	}
	return r.Events[len(r.Events)-1]
}

// clean fails the test when the client reported an error or a warning.
func (r aguiResult) clean(t *testing.T) {
	t.Helper()
	if r.Error != "" || len(r.Warnings) > 0 {
		t.Fatalf("the client reported: error %q, warnings %q\nevents: %s", r.Error, r.Warnings, r.types())
	}
}

// aguiModel answers by the last user message: reasoning, a tool call whose
// input streams, a tool call the tool refuses, the number of user messages
// the model sees, a stream held until release, or an echo.
func aguiModel(release <-chan struct{}) llmstub.Script {
	return func(r llmstub.Request) llmstub.Reply {
		if r.LastRole() == "tool" {
			return llmstub.Say("The tool answered: ", r.LastToolResult())
		}
		p := r.LastUser()
		switch {
		case strings.Contains(p, "think"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Reasoning("Let me ", "think."), llmstub.Text("Thought ", "through."), llmstub.Finish("stop"))}
		case strings.Contains(p, "toolerr"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.CallTool(0, "call_bad", "echo", map[string]any{}), llmstub.Finish("tool_calls"))}
		case strings.Contains(p, "tool"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("Calling echo."), llmstub.CallToolInParts(0, "call_1", "echo",
				`{"text":`, ` "typed`, ` out, pie`, `ce by piece"}`), llmstub.Finish("tool_calls"))}
		case strings.Contains(p, "history"):
			n := 0
			for _, m := range r.Messages {
				if m.Role == "user" {
					n++
				}
			}
			return llmstub.Say(fmt.Sprintf("I see %d user messages.", n))
		case strings.Contains(p, "hold"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("First, ", "then the rest."), llmstub.Finish("stop")),
				Hold: release, HoldAfter: 1}
		}
		return llmstub.Say("You said: ", p)
	}
}

// helloAGUI is a daemon whose agent "hello" is examples/hello-agent on
// aguiModel; release lets held prompts go on.
func helloAGUI(t *testing.T, opts ...daemon.Option) (d *daemon.Daemon, release func()) {
	t.Helper()
	aguiDir(t)
	ch := make(chan struct{})
	var once sync.Once
	d, _ = helloAgent(t, aguiModel(ch), opts...)
	t.Cleanup(func() { once.Do(func() { close(ch) }) })
	return d, func() { once.Do(func() { close(ch) }) }
}

// demoAGUI is a daemon whose agent "demo" is examples/surface-demo-agent
// on its scripted model.
func demoAGUI(t *testing.T, opts ...daemon.Option) *daemon.Daemon {
	t.Helper()
	aguiDir(t)
	agent := surfaced.AgentSpec{Name: "demo", Argv: []string{testkit.Build(t, "./examples/surface-demo-agent")}}
	return daemon.Start(t, append([]daemon.Option{daemon.Agents(agent)}, opts...)...)
}

func threadEnv(d *daemon.Daemon, agent, thread string) aguiEnv {
	return aguiEnv{d: d, url: d.URL + "/ag-ui/" + agent, thread: thread}
}

func TestAGUIText(t *testing.T) {
	d, _ := helloAGUI(t)
	var r aguiResult
	threadEnv(d, "hello", "text").run(t, &r, "run", "hello there")
	r.clean(t)
	if got := r.types(); got != "RUN_STARTED STATE_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT* TEXT_MESSAGE_END RUN_FINISHED" {
		t.Fatalf("events: %s", got)
	}
	start := r.Events[0]
	if start.ThreadID != "text" || start.RunID == "" || r.SessionID == "" || !strings.HasPrefix(r.SessionID, "agui-") {
		t.Fatalf("RUN_STARTED: %+v (session %q)", start, r.SessionID)
	}
	fin := r.last(t)
	if fin.ThreadID != "text" || fin.RunID != start.RunID || fin.Outcome != nil {
		t.Fatalf("RUN_FINISHED: %+v", fin)
	}
	if len(r.Messages) != 2 || r.Messages[1].Role != "assistant" || !strings.HasPrefix(r.Messages[1].ID, "turn-") ||
		r.Messages[1].text() != "You said: hello there" {
		t.Fatalf("messages: %+v", r.Messages)
	}
}

func TestAGUIReasoning(t *testing.T) {
	d, _ := helloAGUI(t)
	var r aguiResult
	threadEnv(d, "hello", "reasoning").run(t, &r, "run", "think about it")
	r.clean(t)
	want := "RUN_STARTED STATE_SNAPSHOT REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT* " +
		"REASONING_MESSAGE_END REASONING_END TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT* TEXT_MESSAGE_END RUN_FINISHED"
	if got := r.types(); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	var reasoning, answer string
	for _, m := range r.Messages {
		switch m.Role {
		case "reasoning":
			reasoning = m.text()
		case "assistant":
			answer = m.text()
		}
	}
	if reasoning != "Let me think." || answer != "Thought through." {
		t.Fatalf("messages: %+v", r.Messages)
	}
	if rs := r.of("REASONING_MESSAGE_START"); rs[0].Role != "reasoning" || !strings.HasPrefix(rs[0].MessageID, "reasoning-") {
		t.Fatalf("REASONING_MESSAGE_START: %+v", rs[0])
	}
}

// A tool call's input streams as the model writes it: one TOOL_CALL_ARGS
// per fragment, the fragments joined are the call's arguments.
func TestAGUIToolCallStreams(t *testing.T) {
	d, _ := helloAGUI(t)
	var r aguiResult
	threadEnv(d, "hello", "tool").run(t, &r, "run", "use the tool")
	r.clean(t)
	want := "RUN_STARTED STATE_SNAPSHOT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS* " +
		"TOOL_CALL_END TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT* TEXT_MESSAGE_END RUN_FINISHED"
	if got := r.types(); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	start := r.of("TOOL_CALL_START")[0]
	first := r.of("TEXT_MESSAGE_START")
	if start.ToolCallID != "call_1" || start.ToolCallName != "echo" || start.ParentMessageID != first[0].MessageID {
		t.Fatalf("TOOL_CALL_START: %+v (text %+v)", start, first[0])
	}
	var args []string
	for _, e := range r.of("TOOL_CALL_ARGS") {
		args = append(args, e.text())
	}
	if want := []string{`{"text":`, ` "typed`, ` out, pie`, `ce by piece"}`}; !reflect.DeepEqual(args, want) {
		t.Fatalf("args: %q, want %q", args, want)
	}
	res := r.of("TOOL_CALL_RESULT")[0]
	if res.MessageID != "result-call_1" || res.Role != "tool" || string(res.Content) != `"typed out, piece by piece"` {
		t.Fatalf("TOOL_CALL_RESULT: %+v", res)
	}
	if first[1].MessageID != first[0].MessageID+"-2" || r.texts(first[1].MessageID) != "The tool answered: typed out, piece by piece" {
		t.Fatalf("the second step: %+v %q", first[1], r.texts(first[1].MessageID))
	}
	// The client's conversation: the call on the first message, its result,
	// the answer.
	var call, result bool
	for _, m := range r.Messages {
		if m.ID == first[0].MessageID && len(m.ToolCalls) == 1 && m.ToolCalls[0].Function.Arguments == `{"text": "typed out, piece by piece"}` {
			call = true
		}
		if m.Role == "tool" && m.ToolCallID == "call_1" && m.text() == "typed out, piece by piece" {
			result = true
		}
	}
	if !call || !result {
		t.Fatalf("messages: %+v", r.Messages)
	}
}

func TestAGUIToolError(t *testing.T) {
	d, _ := helloAGUI(t)
	var r aguiResult
	threadEnv(d, "hello", "toolerr").run(t, &r, "run", "toolerr please")
	r.clean(t)
	res := r.of("TOOL_CALL_RESULT")
	if len(res) != 1 || res[0].ToolCallID != "call_bad" || !strings.Contains(string(res[0].Content), "missing") ||
		string(res[0].Metadata) != `{"surfaced":{"error":"tool_error"}}` {
		t.Fatalf("TOOL_CALL_RESULT: %+v", res)
	}
	if r.last(t).Type != "RUN_FINISHED" {
		t.Fatalf("events: %s", r.types())
	}
	for _, m := range r.Messages {
		if m.Role == "tool" && string(m.Metadata) != `{"surfaced":{"error":"tool_error"}}` {
			t.Fatalf("the tool message: %+v", m)
		}
	}
}

// The agent process dies in the middle of the turn: the run ends with
// RUN_ERROR, code agent_exited, after the text it streamed was closed.
func TestAGUIAgentCrash(t *testing.T) {
	d := demoAGUI(t)
	var r aguiResult
	threadEnv(d, "demo", "crash").run(t, &r, "run", "please crash")
	if len(r.Warnings) > 0 {
		t.Fatalf("warnings: %q", r.Warnings)
	}
	last := r.last(t)
	if last.Type != "RUN_ERROR" || last.Code != "agent_exited" || !strings.Contains(last.Message, "exit code 3") {
		t.Fatalf("last event: %+v (events %s)", last, r.types())
	}
	// The text was closed before. (Whether the demo surface's availability
	// delta lands before the turn's error depends on the order the session
	// reports its agent's exit in: the run ends at the error either way.)
	if !strings.HasSuffix(r.types(), "TEXT_MESSAGE_END RUN_ERROR") && !strings.HasSuffix(r.types(), "TEXT_MESSAGE_END STATE_DELTA RUN_ERROR") {
		t.Fatalf("events: %s", r.types())
	}
}

// A second client's message while the first's turn runs waits in the
// session's inbox; each run streams its own turn and nothing of the other.
func TestAGUIQueued(t *testing.T) {
	d, release := helloAGUI(t)
	env := threadEnv(d, "hello", "queued")
	s := env.start(t, "queued", "hold on", "and then this")
	// The second message is queued behind the held turn: then the model
	// may go on.
	id := ""
	testkit.Eventually(t, 60*time.Second, func() bool {
		st, ls := d.JSON("GET", "/api/sessions?limit=10", nil)
		if st != 200 {
			return false
		}
		for _, x := range ls["sessions"].([]any) {
			id = x.(map[string]any)["sessionId"].(string)
		}
		if id == "" {
			return false
		}
		st, sum := d.JSON("GET", "/api/sessions/"+id, nil)
		return st == 200 && sum["queued"] == float64(1)
	}, "the second message queued")
	release()
	var out aguiRuns
	s.wait(&out)
	if len(out.Warnings) > 0 {
		t.Fatalf("warnings: %q", out.Warnings)
	}
	r1, r2 := out.Runs[0], out.Runs[1]
	if r1.Error != "" || r2.Error != "" || r1.SessionID != id || r2.SessionID != id {
		t.Fatalf("runs: %q %q, sessions %q %q (want %q)", r1.Error, r2.Error, r1.SessionID, r2.SessionID, id)
	}
	if r1.texts("") != "First, then the rest." || r2.texts("") != "You said: and then this" {
		t.Fatalf("texts: %q / %q", r1.texts(""), r2.texts(""))
	}
	m1, m2 := r1.of("TEXT_MESSAGE_START")[0].MessageID, r2.of("TEXT_MESSAGE_START")[0].MessageID
	if m1 == m2 {
		t.Fatalf("both runs streamed %s", m1)
	}
}

// The agent's dialog ends the run with the interrupt outcome; the next
// run's resume entry answers it as a browser's ui-response does, and
// streams the rest of the turn.
func TestAGUIInterruptResume(t *testing.T) {
	d := demoAGUI(t)
	for _, c := range []struct {
		prompt, payload, reason, answer string
		options                         []string
	}{
		{"ask me", `{"confirmed":true}`, "confirm", "You answered yes.", nil},
		{"choose one", `{"value":"green"}`, "select", "You chose: green.", []string{"red", "green", "blue"}},
		{"ask again", "cancel", "confirm", "You dismissed the question.", nil},
	} {
		t.Run(c.reason+"-"+c.payload, func(t *testing.T) {
			var out aguiRuns
			threadEnv(d, "demo", "dialog-"+c.prompt).run(t, &out, "interrupt", c.prompt, c.payload)
			if len(out.Warnings) > 0 {
				t.Fatalf("warnings: %q", out.Warnings)
			}
			r1, r2 := out.Runs[0], out.Runs[1]
			r1.clean(t)
			fin := r1.last(t)
			if fin.Type != "RUN_FINISHED" || fin.Outcome == nil || fin.Outcome.Type != "interrupt" || len(fin.Outcome.Interrupts) != 1 {
				t.Fatalf("the first run ended with %+v (events %s)", fin, r1.types())
			}
			i := fin.Outcome.Interrupts[0]
			if i.ID == "" || i.Reason != c.reason || len(r1.PendingInterrupts) != 1 || r1.PendingInterrupts[0].ID != i.ID {
				t.Fatalf("interrupt: %+v, pending %+v", i, r1.PendingInterrupts)
			}
			var schema struct {
				Required   []string `json:"required"`
				Properties map[string]struct {
					Type string   `json:"type"`
					Enum []string `json:"enum"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(i.ResponseSchema, &schema); err != nil || len(schema.Required) != 1 {
				t.Fatalf("responseSchema %s: %v", i.ResponseSchema, err)
			}
			if c.options != nil && !reflect.DeepEqual(schema.Properties["value"].Enum, c.options) {
				t.Fatalf("responseSchema %s", i.ResponseSchema)
			}
			r2.clean(t)
			if r2.last(t).Type != "RUN_FINISHED" || r2.last(t).Outcome != nil || !strings.HasSuffix(r2.texts(""), c.answer) ||
				len(r2.PendingInterrupts) != 0 || r2.SessionID != r1.SessionID {
				t.Fatalf("the resumed run: %s, text %q, pending %+v", r2.types(), r2.texts(""), r2.PendingInterrupts)
			}
		})
	}
}

// A second run of a client on its thread continues the thread's session
// (the model sees both messages) though the client sends back its whole
// state, its tools, its context and its forwardedProps.
func TestAGUISecondRunContinues(t *testing.T) {
	d, _ := helloAGUI(t)
	var out aguiRuns
	threadEnv(d, "hello", "history").run(t, &out, "twice", "history one", "history two")
	if len(out.Warnings) > 0 {
		t.Fatalf("warnings: %q", out.Warnings)
	}
	r1, r2 := out.Runs[0], out.Runs[1]
	r1.clean(t)
	r2.clean(t)
	if r1.SessionID == "" || r2.SessionID != r1.SessionID {
		t.Fatalf("sessions %q, %q", r1.SessionID, r2.SessionID)
	}
	if r1.texts("") != "I see 1 user messages." || r2.texts("") != "I see 2 user messages." {
		t.Fatalf("texts %q, %q", r1.texts(""), r2.texts(""))
	}
	st, msgs := d.JSON("GET", "/api/sessions/"+r1.SessionID+"/messages", nil)
	if st != 200 || len(msgs["messages"].([]any)) != 4 {
		t.Fatalf("transcript: %d %v", st, msgs)
	}
	for _, m := range msgs["messages"].([]any) {
		if m := m.(map[string]any); m["role"] == "user" && m["via"] != "ag-ui" {
			t.Fatalf("a prompt of a run is recorded via %v, want ag-ui", m["via"])
		}
	}
}

// A threadId is its caller's: another subject's run with the same value
// gets a session of its own and reaches nothing of the first.
func TestAGUIThreadIsTheCallers(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": "alice-secret-token", "bob": "bob-secret-token-1"})
	d := demoAGUI(t, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }))
	alice := threadEnv(d, "demo", "shared-name")
	alice.token = "alice-secret-token"
	bob := alice
	bob.token = "bob-secret-token-1"

	var a1 aguiResult
	alice.run(t, &a1, "run", "increment it")
	a1.clean(t)
	var b1 aguiResult
	bob.run(t, &b1, "run", "hello from bob")
	b1.clean(t)
	if a1.SessionID == "" || b1.SessionID == a1.SessionID {
		t.Fatalf("alice's session %q, bob's %q", a1.SessionID, b1.SessionID)
	}
	if n := counter(t, b1.State); n != 0 {
		t.Fatalf("bob's state shows the count %d: %s", n, b1.State)
	}
	if len(b1.Messages) != 2 {
		t.Fatalf("bob's messages: %+v", b1.Messages)
	}
	if st, _ := d.As("bob-secret-token-1").Do("GET", "/api/sessions/"+a1.SessionID, nil); st != 404 {
		t.Fatalf("bob reads alice's session: %d", st)
	}
	// Alice's thread goes on where she left it.
	var a2 aguiResult
	alice.run(t, &a2, "run", "increment it again")
	a2.clean(t)
	if a2.SessionID != a1.SessionID || counter(t, a2.State) != 2 {
		t.Fatalf("alice's second run: session %q, state %s", a2.SessionID, a2.State)
	}
}

// counter reads the demo surface's count from an AG-UI state document.
func counter(t *testing.T, state json.RawMessage) int {
	t.Helper()
	var s struct {
		Entries map[string]struct {
			Value struct {
				Count int `json:"count"`
			} `json:"value"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(state, &s); err != nil {
		t.Fatalf("state %s: %v", state, err)
	}
	return s.Entries["surface:demo"].Value.Count
}

// The state a client holds after a run (the STATE_SNAPSHOT with every
// STATE_DELTA applied, by the client's own patcher) is exactly the
// session's (GET …/state), with the changes the agent's tool made and those
// a browser's command made while the run streamed.
func TestAGUIStateMatches(t *testing.T) {
	d := demoAGUI(t)
	env := threadEnv(d, "demo", "state")
	t.Run("tool", func(t *testing.T) {
		var r aguiResult
		env.run(t, &r, "run", "increment please")
		r.clean(t)
		sameState(t, r)
		if len(r.of("STATE_DELTA")) == 0 || counter(t, r.State) != 1 {
			t.Fatalf("deltas %d, state %s", len(r.of("STATE_DELTA")), r.State)
		}
	})
	t.Run("browser", func(t *testing.T) {
		var r aguiResult
		env.run(t, &r, "command", "slow please", "demo", "increment")
		r.clean(t)
		if r.Command == nil || r.Command.Status != 200 {
			t.Fatalf("the browser's command: %+v", r.Command)
		}
		sameState(t, r)
		if counter(t, r.State) != 2 {
			t.Fatalf("state %s", r.State)
		}
		// The delta came during the run, before its end.
		if !strings.Contains(r.types(), "STATE_DELTA TEXT_MESSAGE_CONTENT") {
			t.Fatalf("events: %s", r.types())
		}
	})
	t.Run("no prompt", func(t *testing.T) {
		var r aguiResult
		env.run(t, &r, "state")
		r.clean(t)
		if r.types() != "RUN_STARTED STATE_SNAPSHOT RUN_FINISHED" {
			t.Fatalf("events: %s", r.types())
		}
		sameState(t, r)
	})
}

// sameState compares the client's state's entries with GET …/state's.
func sameState(t *testing.T, r aguiResult) {
	t.Helper()
	var mine struct {
		Entries  any            `json:"entries"`
		Surfaces map[string]any `json:"surfaces"`
	}
	var theirs any
	if err := json.Unmarshal(r.State, &mine); err != nil {
		t.Fatalf("state %s: %v", r.State, err)
	}
	if err := json.Unmarshal(r.StateAfter.Entries, &theirs); err != nil {
		t.Fatalf("GET …/state %s: %v", r.StateAfter.Entries, err)
	}
	if !reflect.DeepEqual(mine.Entries, theirs) {
		t.Fatalf("the client's state:\n%s\nGET …/state:\n%s", r.State, r.StateAfter.Entries)
	}
	if d, ok := mine.Surfaces["demo"].(map[string]any); !ok || d["available"] != true {
		t.Fatalf("surfaces: %v", mine.Surfaces)
	}
}

// POST …/abort cancels the run's turn: RUN_FINISHED with the cancelled
// outcome. The client going away does not.
func TestAGUIAbort(t *testing.T) {
	d := demoAGUI(t)
	t.Run("abort", func(t *testing.T) {
		var r aguiResult
		threadEnv(d, "demo", "abort").run(t, &r, "abort", "slow please")
		r.clean(t)
		if r.Aborted == nil || r.Aborted.Status != 200 {
			t.Fatalf("abort: %+v", r.Aborted)
		}
		fin := r.last(t)
		if fin.Type != "RUN_FINISHED" || fin.Outcome == nil || fin.Outcome.Type != "cancelled" {
			t.Fatalf("last event %+v (events %s)", fin, r.types())
		}
	})
	t.Run("client gone", func(t *testing.T) {
		var r aguiResult
		threadEnv(d, "demo", "gone").run(t, &r, "close", "slow please")
		if r.SessionID == "" {
			t.Fatalf("no session: %+v", r)
		}
		// The turn runs to its end in the session.
		testkit.Eventually(t, 30*time.Second, func() bool {
			st, msgs := d.JSON("GET", "/api/sessions/"+r.SessionID+"/messages", nil)
			if st != 200 {
				return false
			}
			for _, m := range msgs["messages"].([]any) {
				if mm := m.(map[string]any); mm["role"] == "assistant" && strings.HasSuffix(fmt.Sprint(mm["text"]), " 40") {
					return true
				}
			}
			return false
		}, "the turn to finish")
	})
}

// The stream is framed as @ag-ui/encoder frames it: "data: <JSON>" and a
// blank line per event, from the first byte, each event byte for byte what
// the encoder writes for it (the state's stored values aside).
func TestAGUIFraming(t *testing.T) {
	d, _ := helloAGUI(t)
	var out struct {
		Status      int      `json:"status"`
		ContentType string   `json:"contentType"`
		Events      int      `json:"events"`
		Exactly     int      `json:"exactly"`
		Bad         []string `json:"bad"`
		Tail        string   `json:"tail"`
		First       string   `json:"first"`
	}
	threadEnv(d, "hello", "frames").run(t, &out, "frames", "hello \"quoted\" <tag> & \u2028 \t tab")
	if out.Status != 200 || out.ContentType != "text/event-stream" || out.Events < 5 || out.Exactly != out.Events ||
		len(out.Bad) > 0 || out.Tail != "" || out.First != "data:" {
		t.Fatalf("frames: %+v", out)
	}
}

// The Python example agent (examples/python-agent, not a line of it AG-UI's)
// is an AG-UI agent: its tool call and its answer stream to the stock
// client, and the note it adds reaches the client's state as a delta that
// leaves it equal to GET …/state.
func TestAGUIPythonAgent(t *testing.T) {
	aguiDir(t)
	py := testkit.Python3(t)
	agent := surfaced.AgentSpec{Name: "notes", Argv: []string{py, filepath.Join(testkit.RepoRoot(), "examples", "python-agent", "agent.py")}}
	d := daemon.Start(t, daemon.Agents(agent))
	var r aguiResult
	threadEnv(d, "notes", "python").run(t, &r, "run", "note eggs")
	r.clean(t)
	starts := r.of("TOOL_CALL_START")
	if len(starts) != 1 || starts[0].ToolCallName != "note" || len(r.of("TOOL_CALL_RESULT")) != 1 || len(r.of("STATE_DELTA")) == 0 {
		t.Fatalf("events: %s", r.types())
	}
	if !strings.Contains(r.texts(""), "Noted") {
		t.Fatalf("texts %q", r.texts(""))
	}
	var mine struct {
		Entries map[string]struct {
			Value struct {
				Items []string `json:"items"`
			} `json:"value"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(r.State, &mine); err != nil {
		t.Fatalf("state %s: %v", r.State, err)
	}
	if items := mine.Entries["surface:notes"].Value.Items; len(items) == 0 || items[len(items)-1] != "eggs" {
		t.Fatalf("the client's state: %s", r.State)
	}
	var a, b any
	_ = json.Unmarshal(r.State, &a)
	_ = json.Unmarshal(r.StateAfter.Entries, &b)
	if !reflect.DeepEqual(a.(map[string]any)["entries"], b) {
		t.Fatalf("the client's state:\n%s\nGET …/state:\n%s", r.State, r.StateAfter.Entries)
	}
}
