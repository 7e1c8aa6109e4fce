package agentkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
)

func msg(role, stop string, blocks ...agentproc.ContentBlock) agentproc.AgentMessage {
	return agentproc.AgentMessage{Role: role, StopReason: stop, Content: mustJSON(blocks)}
}

func TestModelMessages(t *testing.T) {
	text := func(s string) agentproc.ContentBlock { return agentproc.ContentBlock{Type: "text", Text: s} }
	call := func(id, args string) agentproc.ContentBlock {
		return agentproc.ContentBlock{Type: "toolCall", ID: id, Name: "t", Arguments: json.RawMessage(args)}
	}
	result := func(id, s string) agentproc.AgentMessage {
		m := msg("toolResult", "", text(s))
		m.ToolCallID, m.ToolName = id, "t"
		return m
	}
	history := []agentproc.AgentMessage{
		msg("user", "", text("one"), agentproc.ContentBlock{Type: "image", Data: "AA", MimeType: "image/png"}),
		msg("assistant", "toolUse", text("calling"), agentproc.ContentBlock{Type: "thinking", Thinking: "hidden"},
			call("a", `{"x":1}`), call("b", `"{broken"`)),
		result("a", "ra"),
		// b never got a result (aborted): a synthetic one is added.
		msg("user", "", text("two")),
		msg("assistant", "aborted", text("half")),  // dropped
		msg("assistant", "error", call("c", `{}`)), // dropped, with its call
		result("c", "orphan"),                      // dropped: answers no live call
		msg("user", "", text("three")),
		msg("assistant", "stop"), // empty: dropped
	}
	got := modelMessages(history)
	var lines []string
	for _, m := range got {
		line := fmt.Sprintf("%s:%q", m.Role, m.Text)
		for _, tc := range m.ToolCalls {
			line += fmt.Sprintf(" call(%s,%s)", tc.ID, tc.Arguments)
		}
		if m.ToolCallID != "" {
			line += fmt.Sprintf(" for=%s err=%v", m.ToolCallID, m.IsError)
		}
		if len(m.Images) > 0 {
			line += fmt.Sprintf(" images=%d", len(m.Images))
		}
		lines = append(lines, line)
	}
	want := []string{
		`user:"one" images=1`,
		`assistant:"calling" call(a,{"x":1}) call(b,{broken)`,
		`toolResult:"ra" for=a err=false`,
		`toolResult:"No result provided" for=b err=true`,
		`user:"two"`,
		`user:"three"`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestScriptedModelIsDeterministic(t *testing.T) {
	req := Request{Messages: []Message{{Role: RoleUser, Text: "Please think, then increment"}},
		Tools: []ToolSpec{{Name: "increment"}}}
	run := func() string {
		var sb strings.Builder
		for d, err := range (&ScriptedModel{}).Stream(context.Background(), req) {
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "%d|%s|%d|%s|%s|%s\n", d.Kind, d.Text, d.Index, d.ID, d.Name, d.Reason)
		}
		return sb.String()
	}
	first := run()
	if second := run(); first != second {
		t.Errorf("two runs differ:\n%s\n%s", first, second)
	}
	for _, want := range []string{"|The prompt asks me to think. |", "|(scripted model — |", "|0|scripted-call-1|increment|\n", "4|{|", "4|}|", "|toolUse\n"} {
		if !strings.Contains(first, want) {
			t.Errorf("stream lacks %q:\n%s", want, first)
		}
	}
}

func TestScriptedSlowIsAbortable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &ScriptedModel{SlowPace: 20 * time.Millisecond}
	n := 0
	var gotErr error
	for d, err := range m.Stream(ctx, Request{Messages: []Message{{Role: RoleUser, Text: "slow"}}}) {
		if err != nil {
			gotErr = err
			break
		}
		if d.Kind == DeltaText {
			n++
			if n == 3 {
				cancel()
			}
		}
	}
	if gotErr != context.Canceled || n != 3 {
		t.Errorf("after cancel: %d deltas, err %v", n, gotErr)
	}
}

func TestScriptedNoUI(t *testing.T) {
	var text strings.Builder
	for d, err := range (&ScriptedModel{}).Stream(context.Background(), Request{Messages: []Message{{Role: RoleUser, Text: "ask"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(d.Text)
	}
	if !strings.Contains(text.String(), "no user interface is attached") {
		t.Errorf("reply %q", text.String())
	}
}
