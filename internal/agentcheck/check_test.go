package agentcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/internal/testkit"
)

// exampleSpec is an example agent as the daemon has it: its manifest, built
// when it is a Go agent.
func exampleSpec(t *testing.T, dir string) surfaced.AgentSpec {
	t.Helper()
	m, err := config.LoadManifest(filepath.Join(testkit.RepoRoot(), "examples", dir))
	if err != nil {
		t.Fatal(err)
	}
	ms := []config.Manifest{m}
	if err := config.Build(context.Background(), ms, t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	specs, err := config.AgentSpecs(ms)
	if err != nil {
		t.Fatal(err)
	}
	return specs[0]
}

func fake(flags ...string) func(t *testing.T) surfaced.AgentSpec {
	return func(t *testing.T) surfaced.AgentSpec {
		return surfaced.AgentSpec{Name: "fake", Argv: testkit.FakeAgent(t, flags...)}
	}
}

// check runs a check and fails the test when it could not run.
func check(t *testing.T, o Options) *Report {
	t.Helper()
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func written(r *Report) string {
	var b bytes.Buffer
	_ = r.Write(&b)
	return b.String()
}

// outcomes lists "step=outcome" for every step.
func outcomes(r *Report) string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Name+"="+s.Outcome.String())
	}
	return strings.Join(out, " ")
}

func TestExamplesPass(t *testing.T) {
	for _, tc := range []struct {
		dir   string
		opts  Options
		steps string
	}{
		{"surface-demo-agent", Options{Command: "demo/increment", Abort: true, AbortPrompt: "slow"},
			"start=ok surface demo=ok command demo/increment=ok prompt=ok abort=ok restart=ok"},
		{"hello-agent", Options{Abort: true, AbortPrompt: "slow"}, "start=ok prompt=ok abort=ok restart=ok"},
		{"python-agent", Options{Command: "notes/add", Args: json.RawMessage(`{"text":"milk"}`), Prompt: "note eggs", Abort: true},
			"start=ok surface notes=ok command notes/add=ok prompt=ok abort=ok restart=ok"},
		// The standalone Node agent of @surfaced/agent passes what the Go agentkit passes.
		{"node-agent", Options{Command: "demo/increment", Abort: true, AbortPrompt: "slow"},
			"start=ok surface demo=ok command demo/increment=ok prompt=ok abort=ok restart=ok"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			switch tc.dir {
			case "python-agent":
				testkit.Python3(t)
			case "node-agent":
				testkit.Node(t)
			}
			o := tc.opts
			o.Agent = exampleSpec(t, tc.dir)
			rep := check(t, o)
			if got := outcomes(rep); got != tc.steps || !rep.OK() {
				t.Fatalf("steps %s, want %s:\n%s", got, tc.steps, written(rep))
			}
			// The chosen command ran before the restart and after it (the
			// check fails when its rev does not go on from the one before).
			if o.Command != "" && !strings.Contains(rep.Step("restart").Summary, o.Command+" then: rev ") {
				t.Errorf("restart: %s", rep.Step("restart").Summary)
			}
			if a := rep.Step("abort"); a.Outcome == Passed && !strings.Contains(a.Summary, "(cancelled)") {
				t.Errorf("abort: %s", a.Summary)
			}
			// Stopped as the daemon stops it, an example exits cleanly.
			if r := rep.Step("restart"); len(r.Notes) > 0 {
				t.Errorf("restart notes: %q", r.Notes)
			}
			if p := rep.Step("prompt"); !strings.Contains(p.Seen, "agent_start") || !strings.Contains(p.Seen, "agent_end") {
				t.Errorf("prompt seen: %s", p.Seen)
			}
		})
	}
}

func TestPythonAgentToolCall(t *testing.T) {
	testkit.Python3(t)
	rep := check(t, Options{Agent: exampleSpec(t, "python-agent"), Prompt: "note buy milk"})
	p := rep.Step("prompt")
	if !rep.OK() || !strings.Contains(p.Summary, `"Noted: {\"count\": 1}"`) || !strings.Contains(p.Summary, "tools: note") {
		t.Fatalf("prompt: %s\n%s", p.Summary, written(rep))
	}
	if r := rep.Step("restart"); !strings.Contains(r.Summary, "notes at rev 2 as before") {
		t.Fatalf("restart: %s", r.Summary)
	}
}

// The Node agent's tool runs demo/increment through the daemon; the prompt
// step sees it.
func TestNodeAgentToolCall(t *testing.T) {
	testkit.Node(t)
	rep := check(t, Options{Agent: exampleSpec(t, "node-agent"), Prompt: "increment please"})
	p := rep.Step("prompt")
	if !rep.OK() || !strings.Contains(p.Summary, "tools: increment") {
		t.Fatalf("prompt: %s\n%s", p.Summary, written(rep))
	}
	if r := rep.Step("restart"); !strings.Contains(r.Summary, "demo at rev 2 as before") {
		t.Fatalf("restart: %s", r.Summary)
	}
}

func TestPlainPiAgentPasses(t *testing.T) {
	rep := check(t, Options{Agent: fake("-mode", "plain")(t)})
	if !rep.OK() || outcomes(rep) != "start=ok prompt=ok restart=ok" {
		t.Fatalf("%s", written(rep))
	}
	if s := rep.Step("start").Summary; !strings.Contains(s, "a plain pi agent (it answered get_commands and sent no agent_ready)") {
		t.Fatalf("start: %s", s)
	}
}

// TestBrokenAgents runs the check on agents that break the protocol, each
// in one way, and asserts the exact problem it reports.
func TestBrokenAgents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent func(t *testing.T) surfaced.AgentSpec
		opts  Options
		step  string // the step that fails
		want  Problem
		steps string // every step's outcome, when it matters
	}{
		{
			name: "never ready", agent: fake("-mode", "silent"), opts: Options{ReadyTimeout: 500 * time.Millisecond},
			step: "start", steps: "start=FAIL prompt=skip restart=skip",
			want: Problem{What: "The agent did not become ready within 500ms.",
				Expected: `agent_ready as its first line (a surfaced/1 agent), or an answer to get_commands with "success": true (a plain pi agent)`,
				Came:     "nothing on stdout, nor on stderr (if the agent is only slow to start, give it longer: --ready-timeout)"},
		},
		{
			name: "exits early", agent: fake("-mode", "exit-early"),
			step: "start", steps: "start=FAIL prompt=skip restart=skip",
			want: Problem{What: "The agent exited before it was ready (exit code 2).",
				Expected: "agent_ready (or an answer to get_commands), then the agent runs until its stdin ends",
				Came:     "nothing on stdout", Stderr: "fakeagent: exiting early on purpose"},
		},
		{
			name: "cannot start", agent: func(*testing.T) surfaced.AgentSpec {
				return surfaced.AgentSpec{Name: "missing", Argv: []string{"/does/not/exist/agent"}}
			},
			step: "start", steps: "start=FAIL prompt=skip restart=skip",
			want: Problem{What: "The agent could not be started.", Expected: "a program the daemon can run: /does/not/exist/agent",
				Came: `the agent could not start: agentproc: start "/does/not/exist/agent": fork/exec /does/not/exist/agent: no such file or directory`},
		},
		{
			name: "duplicate domains", agent: fake("-dup"),
			step: "start", steps: "start=FAIL surface demo=ok prompt=ok restart=ok",
			want: Problem{What: "The daemon refused a domain the agent declared.",
				Expected: "each domain declared once in agent_ready, and none the daemon hosts natively",
				Came:     `domain "demo" is already registered earlier in agent_ready; the first registration is kept`},
		},
		{
			name: "bad line", agent: fake("-bad-line"),
			step: "start", steps: "start=FAIL surface demo=ok prompt=ok restart=ok",
			want: Problem{What: "The daemon dropped or refused a line of the agent.",
				Expected: `every line on stdout one JSON object with a string "type", of a type and with the fields the protocol gives it (logs go to stderr)`,
				Came:     `agent line dropped: invalid character 'f' at offset 0: "fakeagent starting (not JSON)"`},
		},
		{
			name: "another protocol", agent: fake("-protocol", "surfaced/2"),
			step: "start",
			want: Problem{What: `agent_ready announces the protocol "surfaced/2".`, Expected: `"protocol": "surfaced/1"`,
				Came: `{"name":"fake","protocol":"surfaced/2","surfaces":[{"commands":["increment","echo","fill","sleep","crash","fail","badresult"],"domain":"demo","initialState":{"count":0,"log":[]}}],"type":"agent_ready"…`},
		},
		{
			name: "no agent_start", agent: fake("-no-agent-start"),
			step: "prompt", steps: "start=ok surface demo=ok prompt=FAIL restart=ok",
			want: Problem{What: "The agent wrote no agent_start for the prompt.",
				Expected: "agent_start when the run begins: the daemon tells a run from a prompt handled without one by it"},
		},
		{
			name: "turn never ends", agent: fake(), opts: Options{Prompt: "hang on", Timeout: time.Second},
			step: "prompt", steps: "start=ok surface demo=ok prompt=FAIL restart=ok",
			want: Problem{What: "The turn did not end within 1s.", Expected: "agent_start, the turn's events, then agent_end"},
		},
		{
			name: "turn fails", agent: fake(), opts: Options{Prompt: "fail please"},
			step: "prompt",
			want: Problem{What: "The turn failed: The model request failed: the model failed on purpose.",
				Expected: `a run that ends with agent_end, its last assistant message with "stopReason": "stop"`},
		},
		{
			name: "crash during the turn", agent: fake(), opts: Options{Prompt: "crash now"},
			step: "prompt", steps: "start=ok surface demo=ok prompt=FAIL restart=ok",
			want: Problem{What: "The turn failed: The agent stopped during the turn (exit code 3).",
				Expected: `a run that ends with agent_end, its last assistant message with "stopReason": "stop"`},
		},
		{
			name: "abort ignored", agent: fake("-ignore-abort"), opts: Options{Abort: true, AbortPrompt: "hang on", Timeout: time.Second},
			step: "abort", steps: "start=ok surface demo=ok prompt=ok abort=FAIL restart=ok",
			want: Problem{What: "The agent did not end the turn within 1s of the abort; the daemon ended it.",
				Expected: `agent_end soon after {"type":"abort"}, its last assistant message with "stopReason": "aborted"`},
		},
		{
			name: "deaf to SIGTERM", agent: fake("-ignore-term"),
			step: "restart", steps: "start=ok surface demo=ok prompt=ok restart=FAIL",
			want: Problem{What: "The agent did not exit when it was stopped; the daemon killed it (SIGKILL) 2s after closing its stdin and sending SIGTERM.",
				Expected: "the agent exits when its stdin ends (or on SIGTERM)", Came: "still running 2s later"},
		},
		{
			name: "surfaces forgotten after a restart",
			agent: func(t *testing.T) surfaced.AgentSpec {
				return fake("-surfaces-once", filepath.Join(t.TempDir(), "started"))(t)
			},
			step: "restart", steps: "start=ok surface demo=ok prompt=ok restart=FAIL",
			want: Problem{What: "The agent did not declare demo again after the restart.",
				Expected: "the same surfaces in agent_ready after every start: the daemon keeps their snapshots and revs",
				Came:     `agent_ready (surfaced/1, name "fake") declares no surfaces`},
		},
		{
			name: "dispatch not answered", agent: fake(),
			opts: Options{Command: "demo/sleep", Args: json.RawMessage(`{"ms":3000}`), SettleWindow: 500 * time.Millisecond},
			step: "command demo/sleep",
			want: Problem{What: "The agent did not answer the surface_dispatch within the settle window (500ms).",
				Expected: "a surface_dispatch_result with the dispatch's id",
				Came:     `no surface_dispatch_result with "id": "demo#1" within 500ms`},
		},
		{
			name: "dispatch result without ok", agent: fake(), opts: Options{Command: "demo/badresult"},
			step: "command demo/badresult",
			want: Problem{What: "The command failed: the agent answered without a valid result ({ok, data?} or {ok:false, error}).",
				Expected: `{"type":"surface_dispatch_result","id":…,"result":{"ok":true,"data":…},"state":…} or "result":{"ok":false,"error":{"code":…,"message":…}}`,
				Came:     `{"id":"demo#1","result":{"done":true},"type":"surface_dispatch_result"}`},
		},
		{
			name: "agent exits on a command", agent: fake(), opts: Options{Command: "demo/crash"},
			step: "command demo/crash", steps: "start=ok surface demo=ok command demo/crash=FAIL prompt=ok restart=ok",
			want: Problem{What: "The agent was gone before it answered the command.",
				Expected: "a surface_dispatch_result; the agent keeps running", Came: "the agent exited (exit code 4)"},
		},
		{
			name: "no such command", agent: fake(), opts: Options{Command: "demo/nope"},
			step: "command demo/nope",
			want: Problem{What: `There is no command demo/nope: surface "demo" has no command "nope".`,
				Expected: "one of the declared commands: demo/increment, demo/echo, demo/fill, demo/sleep, demo/crash, demo/fail, demo/badresult",
				Came:     "demo/nope"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Agent = tc.agent(t)
			rep := check(t, o)
			if rep.OK() {
				t.Fatalf("the check passed:\n%s", written(rep))
			}
			if tc.steps != "" && outcomes(rep) != tc.steps {
				t.Errorf("steps %s, want %s:\n%s", outcomes(rep), tc.steps, written(rep))
			}
			s := rep.Step(tc.step)
			if s == nil || s.Outcome != Failed || len(s.Problems) == 0 {
				t.Fatalf("step %q did not fail:\n%s", tc.step, written(rep))
			}
			got := s.Problems[0]
			if tc.want.Came == "" {
				got.Came = "" // what the agent wrote varies with timing; What and Expected do not
			}
			if tc.want.Stderr == "" {
				got.Stderr = ""
			}
			if got != tc.want {
				t.Fatalf("problem\n got  %+v\n want %+v\nreport:\n%s", got, tc.want, written(rep))
			}
			if rep.Failed() != strings.Count(outcomes(rep), "=FAIL") {
				t.Fatalf("Failed() = %d for %s", rep.Failed(), outcomes(rep))
			}
		})
	}
}

func TestAgentFailureIsAValidAnswer(t *testing.T) {
	rep := check(t, Options{Agent: fake()(t), Command: "demo/fail"})
	s := rep.Step("command demo/fail")
	if !rep.OK() || !strings.Contains(s.Summary, "nope: failed on purpose (a valid answer; the state is unchanged)") {
		t.Fatalf("%s", written(rep))
	}
}

func TestAgainAfterRestartIsANote(t *testing.T) {
	rep := check(t, Options{Agent: fake("-dup")(t)})
	r := rep.Step("restart")
	if r.Outcome != Passed || len(r.Notes) != 1 || r.Notes[0] != "Again: The daemon refused a domain the agent declared." {
		t.Fatalf("restart %+v\n%s", r, written(rep))
	}
}

func TestWriteReport(t *testing.T) {
	rep := &Report{Agent: "fake", Argv: []string{"fake", "-x"}}
	s := rep.step("start")
	s.fail(Problem{What: "The agent did not become ready within 1s.", Expected: "agent_ready", Came: "nothing on stdout", Stderr: "boom"})
	s = rep.step("prompt")
	s.Outcome, s.Summary = Skipped, "the agent never became ready"
	want := `surfaced agent check: fake (fake -x)

FAIL  start
      problem: The agent did not become ready within 1s.
        expected: agent_ready
        came: nothing on stdout
        stderr: boom
skip  prompt: the agent never became ready

FAIL: 1 of 2 checks failed.
`
	if got := written(rep); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{
		{Agent: surfaced.AgentSpec{Name: "x", Argv: []string{"true"}}, Command: "nodomain"},
		{Agent: surfaced.AgentSpec{Name: "x", Argv: []string{"true"}}, Command: "a/b", Args: json.RawMessage(`{nope`)},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
