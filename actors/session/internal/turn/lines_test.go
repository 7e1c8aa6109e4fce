package turn

import (
	"errors"
	"strings"
	"testing"
)

func TestNotices(t *testing.T) {
	runScenarios(t, []scenario{{
		name: "agent events clients may show pass as they came",
		steps: steps(pi(
			`{"type":"queue_update","steering":["a"],"followUp":[]}`,
			`{"type":"thinking_level_changed","level":"high"}`,
			`{"type":"extension_error","extensionPath":"/x.ts","event":"tool_call","error":"boom"}`,
			`{"type":"session_info_changed","name":"Refactor"}`,
			`{"type":"session_info_changed"}`,
			`{"type":"some_future_event","x":1}`,
		)),
		want: []string{
			`chat {"type":"data-agent-event","data":{"type":"queue_update","steering":["a"],"followUp":[]},"transient":true}`,
			`chat {"type":"data-agent-event","data":{"type":"thinking_level_changed","level":"high"},"transient":true}`,
			`chat {"type":"data-agent-event","data":{"type":"extension_error","extensionPath":"/x.ts","event":"tool_call","error":"boom"},"transient":true}`,
			`title Refactor`,
		},
	}})
}

func TestInvalidLines(t *testing.T) {
	runScenarios(t, []scenario{{
		name: "a broken line changes nothing; the turn goes on",
		steps: steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, messageStart(), textDelta(0, "a")), forget(),
			typed("message_update", `{"type":"message_update",`),
			typed("message_update", `{"type":"message_update","assistantMessageEvent":null}`),
			typed("message_update", `{"type":"message_update"}`),
			typed("message_update", `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":7}}`),
			typed("agent_end", `{"type":"agent_end","messages":"nope"}`),
			typed("tool_execution_start", `[1,2]`),
			pi(textDelta(0, "b"))),
		want: []string{
			`invalid message_update is not a valid event`,
			`invalid message_update is not a valid event`,
			`invalid agent_end is not a valid event`,
			`invalid tool_execution_start is not a valid event`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"b"}`,
		},
	}, {
		name:  "a broken line outside a turn is reported too",
		steps: steps(typed("message_update", `nope`), typed("turn_start", `{`)),
		want: []string{
			`invalid message_update is not a valid event`,
			`invalid turn_start is not a valid event`,
		},
	}})

	// Every refused line says which line type it was, and wraps the
	// decoder's reason.
	m, r := newMachine(t, Config{})
	for _, c := range []struct{ typ, line string }{
		{"message_update", `{"type":"message_update",`},
		{"message_update", `{"assistantMessageEvent":{"type":"text_delta","delta":7}}`},
		{"agent_end", `{"type":"agent_end","messages":"nope"}`},
		{"tool_execution_start", `[1,2]`},
	} {
		err := m.AgentLine(c.typ, []byte(c.line))
		if err == nil || !strings.HasPrefix(err.Error(), c.typ+" is not a valid event: ") || errors.Unwrap(err) == nil {
			t.Errorf("%s: error %v", c.line, err)
		}
	}
	if len(r.lines) != 0 {
		t.Errorf("refused lines said %v", r.lines)
	}
}
