package pitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
)

// Translation of pi event sequences the real pi produces only under
// conditions a test cannot make cheaply, replayed by internal/pitest/replayagent.

func replayAgent(t *testing.T, prompts map[string][]any) surfaced.AgentSpec {
	t.Helper()
	b, err := json.Marshal(map[string]any{"prompts": prompts})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return surfaced.AgentSpec{Name: "replay", Argv: []string{testkit.Build(t, "./internal/pitest/replayagent")},
		Env: []string{"REPLAY_SCRIPT=" + file}}
}

type ev = map[string]any

func textDelta(i int, s string) ev {
	return ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_delta", "contentIndex": i, "delta": s}}
}

func assistant(stop, errMsg string, text string) ev {
	m := ev{"role": "assistant", "content": []ev{{"type": "text", "text": text}}, "stopReason": stop}
	if errMsg != "" {
		m["errorMessage"] = errMsg
	}
	return m
}

// run emits one pi run: agent_start … agent_end with the assistant message.
func run(msg ev, deltas ...string) []any {
	steps := []any{ev{"type": "agent_start"}, ev{"type": "turn_start"}, ev{"type": "message_start", "message": ev{"role": "assistant", "content": []any{}}}}
	if len(deltas) > 0 {
		steps = append(steps, ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_start", "contentIndex": 0}})
		for _, d := range deltas {
			steps = append(steps, textDelta(0, d))
		}
	}
	return append(steps, ev{"type": "message_end", "message": msg}, ev{"type": "turn_end", "message": msg, "toolResults": []any{}},
		ev{"type": "agent_end", "messages": []any{msg}})
}

// thenAtOnce makes the last step of steps and more one step written in one go.
func thenAtOnce(steps []any, more ...any) []any {
	out := append([]any(nil), steps[:len(steps)-1]...)
	return append(out, append([]any{steps[len(steps)-1]}, more...))
}

func concat(parts ...[]any) []any {
	var out []any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestTranslateOverflowCompactionRetries(t *testing.T) {
	overflow := assistant("error", "context_length_exceeded: prompt is too long", "")
	agent := replayAgent(t, map[string][]any{
		// The failed run, then the compaction pi runs and a second run.
		"compact ok": concat(thenAtOnce(run(overflow), ev{"type": "compaction_start", "reason": "overflow"}),
			[]any{ev{"$sleep": 50},
				ev{"type": "compaction_end", "reason": "overflow", "result": ev{"summary": "s"}, "aborted": false, "willRetry": true}, ev{"$sleep": 50}},
			run(assistant("stop", "", "after compaction"), "after ", "compaction")),
		// The compaction fails: one error, the compaction's.
		"compact fails": concat(thenAtOnce(run(overflow), ev{"type": "compaction_start", "reason": "overflow"}),
			[]any{ev{"type": "compaction_end", "reason": "overflow", "aborted": false, "willRetry": false, "errorMessage": "Context overflow recovery failed: quota"}}),
	})
	d := startDaemon(t, surfaced.Limits{}, agent)
	id := d.create("")
	s := d.sse(id)
	ready(t, s)

	d.prompt(id, "compact ok")
	tr := nextTurn(t, s)
	if tr.stopReason() != "end_turn" || tr.text() != "after compaction" || len(tr.of("error")) != 0 {
		t.Fatalf("compaction that retries: %q %q %v", tr.stopReason(), tr.text(), tr.of("error"))
	}
	if n := len(tr.of("data-agent-event")); n != 2 {
		t.Errorf("%d agent events (compaction_start, compaction_end), want 2", n)
	}

	d.prompt(id, "compact fails")
	tr = nextTurn(t, s)
	errs := tr.of("error")
	if tr.stopReason() != "error" || len(errs) != 1 || errs[0].Data["errorText"] != "The model request failed: Context overflow recovery failed: quota" {
		t.Fatalf("compaction that fails: %q %v", tr.stopReason(), errs)
	}
}

func TestTranslateWillRetryKeepsTheTurn(t *testing.T) {
	failed := assistant("error", "503 overloaded", "")
	steps := run(failed)
	steps[len(steps)-1] = ev{"type": "agent_end", "messages": []any{failed}, "willRetry": true}
	agent := replayAgent(t, map[string][]any{
		"go": concat(steps, []any{ev{"$sleep": 30}}, run(assistant("stop", "", "ok"), "ok")),
	})
	d := startDaemon(t, surfaced.Limits{}, agent)
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "go")
	tr := nextTurn(t, s)
	if tr.stopReason() != "end_turn" || tr.text() != "ok" || len(tr.of("error")) != 0 {
		t.Fatalf("turn: %q %q %v", tr.stopReason(), tr.text(), tr.of("error"))
	}
}

// A message cut short (no text_end) still closes its part; the failing
// message's error is the turn's one error.
func TestTranslateClosesPartsAndReportsErrors(t *testing.T) {
	cut := assistant("error", "terminated", "par")
	agent := replayAgent(t, map[string][]any{
		"cut": run(cut, "par"),
		"two blocks": concat([]any{ev{"type": "agent_start"}, ev{"type": "turn_start"},
			ev{"type": "message_start", "message": ev{"role": "assistant", "content": []any{}}},
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "thinking_start", "contentIndex": 0}},
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "thinking_delta", "contentIndex": 0, "delta": "hmm"}},
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_start", "contentIndex": 1}},
			textDelta(1, "an"), textDelta(1, "swer"),
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "thinking_end", "contentIndex": 0}},
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "text_end", "contentIndex": 1}},
		}, run(assistant("stop", "", "answer"))[3:]),
	})
	d := startDaemon(t, surfaced.Limits{}, agent)
	id := d.create("")
	s := d.sse(id)
	ready(t, s)

	d.prompt(id, "cut")
	tr := nextTurn(t, s)
	checkParts(t, tr, "text")
	if errs := tr.of("error"); tr.stopReason() != "error" || len(errs) != 1 || errs[0].Data["errorText"] != "The model request failed: terminated" {
		t.Fatalf("cut turn: %q %v", tr.stopReason(), errs)
	}

	d.prompt(id, "two blocks")
	tr = nextTurn(t, s)
	checkParts(t, tr, "text")
	checkParts(t, tr, "reasoning")
	if tr.text() != "answer" || tr.reasoning() != "hmm" || tr.stopReason() != "end_turn" {
		t.Fatalf("two blocks: %q %q %q", tr.text(), tr.reasoning(), tr.stopReason())
	}
	// Part ids differ between the thinking and the text block.
	r := tr.of("reasoning-start")[0].Data["id"]
	x := tr.of("text-start")[0].Data["id"]
	if r == x || !strings.Contains(x.(string), "t1") {
		t.Errorf("part ids: reasoning %v, text %v", r, x)
	}
}

// A prompt pi answers without starting a run (an extension command) ends
// its turn once get_state says nothing runs; one that is answered before its
// run starts does not.
func TestTranslatePromptWithoutRun(t *testing.T) {
	agent := replayAgent(t, map[string][]any{
		"/cmd": {ev{"$respond": true}},
		// Answered first, the run starting a little later (an extension's
		// before_agent_start); get_state says it streams meanwhile.
		"slow start": concat([]any{ev{"$streaming": true}, ev{"$respond": true}, ev{"$sleep": 200}},
			run(assistant("stop", "", "late"), "late"), []any{ev{"$streaming": false}}),
	})
	d := startDaemon(t, surfaced.Limits{}, agent)
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "/cmd")
	if tr := nextTurn(t, s); tr.stopReason() != "end_turn" || len(tr.chunks) != 0 {
		t.Fatalf("command turn: %q %v", tr.stopReason(), tr.chunks)
	}
	d.prompt(id, "slow start")
	if tr := nextTurn(t, s); tr.stopReason() != "end_turn" || tr.text() != "late" {
		t.Fatalf("slow start: %q %q", tr.stopReason(), tr.text())
	}
}
