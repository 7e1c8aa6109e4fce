package agui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func chatFrame(seq uint64, c pb.ChatChunk) *pb.Frame {
	return &pb.Frame{Seq: seq, Event: pb.ChatOf(c)}
}

func turnStart(id uint64) pb.ChatChunk {
	return &pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: id, PromptIds: []uint64{id}}}
}

func stepStart() pb.ChatChunk { return &pb.ChatEvent_StepStart{StepStart: &pb.StepStart{}} }

func partStart(id string, k pb.PartKind) pb.ChatChunk {
	return &pb.ChatEvent_PartStart{PartStart: &pb.PartStart{Id: id, Kind: k}}
}

func partDelta(id string, k pb.PartKind, d string) pb.ChatChunk {
	return &pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: id, Kind: k, Delta: d}}
}

func partEnd(id string, k pb.PartKind) pb.ChatChunk {
	return &pb.ChatEvent_PartEnd{PartEnd: &pb.PartEnd{Id: id, Kind: k}}
}

func turnFinish(id uint64, stop string) pb.ChatChunk {
	return &pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: id, StopReason: stop}}
}

const (
	text      = pb.PartKind_PART_KIND_TEXT
	reasoning = pb.PartKind_PART_KIND_REASONING
)

// events splits a rendered stream into its events' JSON, checking the
// framing.
func events(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	s := string(b)
	for s != "" {
		line, rest, ok := strings.Cut(s, "\n\n")
		if !ok || !strings.HasPrefix(line, "data: ") || strings.Contains(line, "\n") {
			t.Fatalf("not framed as the encoder frames: %q", s)
		}
		ev := strings.TrimPrefix(line, "data: ")
		if !json.Valid([]byte(ev)) {
			t.Fatalf("not JSON: %s", ev)
		}
		out = append(out, ev)
		s = rest
	}
	return out
}

func types(t *testing.T, evs []string) string {
	t.Helper()
	var ts []string
	for _, e := range evs {
		var x struct{ Type string }
		_ = json.Unmarshal([]byte(e), &x)
		ts = append(ts, x.Type)
	}
	return strings.Join(ts, " ")
}

func render(r *Renderer, frames ...*pb.Frame) []byte {
	var b []byte
	for _, f := range frames {
		b = r.Frame(b, f)
	}
	return b
}

func newTestRenderer(head, replayed uint64) *Renderer {
	return NewRenderer(RunOptions{ThreadID: "th", RunID: "run", SessionID: "s1", State: &pb.StateEntries{Head: head}, ReplayedTo: replayed})
}

func TestRenderTurn(t *testing.T) {
	r := newTestRenderer(0, 0)
	start := events(t, r.Start(nil))
	if start[0] != `{"type":"RUN_STARTED","threadId":"th","runId":"run","metadata":{"surfaced":{"sessionId":"s1"}}}` ||
		start[1] != `{"type":"STATE_SNAPSHOT","snapshot":{"entries":{},"surfaces":{}}}` {
		t.Fatalf("start: %q", start)
	}
	b := render(r,
		chatFrame(1, turnStart(7)),
		chatFrame(2, stepStart()),
		chatFrame(3, partStart("7-1-r0", reasoning)),
		chatFrame(4, partDelta("7-1-r0", reasoning, "hmm")),
		chatFrame(5, partEnd("7-1-r0", reasoning)),
		chatFrame(6, partStart("7-1-t1", text)),
		chatFrame(7, partDelta("7-1-t1", text, "Hi \"you\"")),
		chatFrame(8, partEnd("7-1-t1", text)),
		// A call whose input did not stream, then one that did.
		chatFrame(9, &pb.ChatEvent_ToolInput{ToolInput: &pb.ToolInputAvailable{ToolCallId: "c1", ToolName: "echo", Input: []byte(`{"text":"x"}`)}}),
		chatFrame(10, &pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: "c1", Output: []byte(`{"partial":1}`), Preliminary: true}}),
		chatFrame(11, &pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: "c1", Output: []byte(`{"content":[{"type":"text","text":"x"}]}`)}}),
		chatFrame(12, &pb.ChatEvent_StepStart{StepStart: &pb.StepStart{}}),
		chatFrame(13, &pb.ChatEvent_ToolInputStart{ToolInputStart: &pb.ToolInputStart{ToolCallId: "c2", ToolName: "fail"}}),
		chatFrame(14, &pb.ChatEvent_ToolInputDelta{ToolInputDelta: &pb.ToolInputDelta{ToolCallId: "c2", Delta: `{}`}}),
		chatFrame(15, &pb.ChatEvent_ToolInput{ToolInput: &pb.ToolInputAvailable{ToolCallId: "c2", ToolName: "fail", Input: []byte(`{}`)}}),
		chatFrame(16, &pb.ChatEvent_ToolError{ToolError: &pb.ToolError{ToolCallId: "c2", ErrorText: "no", ErrorCode: "disk_full"}}),
		chatFrame(17, turnFinish(7, "end_turn")),
		chatFrame(18, partDelta("7-1-t1", text, "after the end")),
	)
	got := events(t, b)
	want := []string{
		`{"type":"REASONING_START","messageId":"reasoning-7-1-r0"}`,
		`{"type":"REASONING_MESSAGE_START","messageId":"reasoning-7-1-r0","role":"reasoning"}`,
		`{"type":"REASONING_MESSAGE_CONTENT","messageId":"reasoning-7-1-r0","delta":"hmm"}`,
		`{"type":"REASONING_MESSAGE_END","messageId":"reasoning-7-1-r0"}`,
		`{"type":"REASONING_END","messageId":"reasoning-7-1-r0"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"turn-7","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"turn-7","delta":"Hi \"you\""}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"turn-7"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"echo","parentMessageId":"turn-7"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"text\":\"x\"}"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"result-c1","toolCallId":"c1","content":"x","role":"tool"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"fail","parentMessageId":"turn-7-2"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":"{}"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c2"}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"result-c2","toolCallId":"c2","content":"no","role":"tool","metadata":{"surfaced":{"error":"disk_full"}}}`,
		`{"type":"RUN_FINISHED","threadId":"th","runId":"run","metadata":{"surfaced":{"turnId":7,"stopReason":"end_turn"}}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b := r.End(nil, delivery.EndFinal); b != nil {
		t.Fatalf("after the finish, End wrote %s", b)
	}
}

// A run that ends while parts are open closes them first: AG-UI ends a run
// only with everything closed.
func TestRenderEnds(t *testing.T) {
	open := []*pb.Frame{
		chatFrame(1, turnStart(3)),
		chatFrame(2, partDelta("3-1-t0", text, "half")),
		chatFrame(3, partDelta("3-1-r1", reasoning, "mid")),
		chatFrame(4, &pb.ChatEvent_ToolInputStart{ToolInputStart: &pb.ToolInputStart{ToolCallId: "c", ToolName: "t"}}),
	}
	const closing = "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT TOOL_CALL_START " +
		"TEXT_MESSAGE_END REASONING_MESSAGE_END REASONING_END TOOL_CALL_END "
	for _, c := range []struct {
		name   string
		end    func(r *Renderer, b []byte) []byte
		want   string
		detail string
	}{
		{"failed", func(r *Renderer, b []byte) []byte {
			b = r.Frame(b, chatFrame(5, &pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: "It broke.", Code: "agent_exited"}}))
			return r.Frame(b, chatFrame(6, turnFinish(3, "error")))
		}, closing + "RUN_ERROR", `{"type":"RUN_ERROR","message":"It broke.","code":"agent_exited"}`},
		{"cancelled", func(r *Renderer, b []byte) []byte {
			b = r.Frame(b, chatFrame(5, &pb.ChatEvent_TurnAbort{TurnAbort: &pb.TurnAbort{}}))
			return r.Frame(b, chatFrame(6, turnFinish(3, "cancelled")))
		}, closing + "RUN_FINISHED", `{"type":"RUN_FINISHED","threadId":"th","runId":"run","outcome":{"type":"cancelled"},"metadata":{"surfaced":{"turnId":3,"stopReason":"cancelled"}}}`},
		{"interrupted", func(r *Renderer, b []byte) []byte {
			b = r.Frame(b, &pb.Frame{Seq: 5, Event: pb.UIRequestOf(&pb.UIRequestEvent{Id: "d1", Method: "select", Title: "Pick", Options: []string{"a", "b"}})})
			return r.End(b, delivery.EndFinal)
		}, closing + "RUN_FINISHED", `{"type":"RUN_FINISHED","threadId":"th","runId":"run","outcome":{"type":"interrupt","interrupts":[{"id":"d1","reason":"select","message":"Pick",` +
			`"responseSchema":{"type":"object","properties":{"value":{"type":"string","enum":["a","b"]}},"required":["value"],"additionalProperties":false},` +
			`"metadata":{"surfaced":{"method":"select","title":"Pick","options":["a","b"]}}}]},"metadata":{"surfaced":{"turnId":3}}}`},
		{"cut", func(r *Renderer, b []byte) []byte { return r.End(b, delivery.EndSlowConsumer) }, closing + "RUN_ERROR",
			`{"type":"RUN_ERROR","message":"The stream was cut: the client read too slowly. The turn goes on in the session: its effects reach the next run's state.","code":"slow_consumer"}`},
		{"client gone", func(r *Renderer, b []byte) []byte { return r.End(b, delivery.EndClientGone) },
			strings.TrimSpace(strings.Split(closing, "TEXT_MESSAGE_END")[0]), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRenderer(0, 0)
			evs := events(t, c.end(r, render(r, open...)))
			if got := types(t, evs); got != c.want {
				t.Fatalf("events\n got %s\nwant %s", got, c.want)
			}
			if c.detail != "" && evs[len(evs)-1] != c.detail {
				t.Fatalf("last event\n got %s\nwant %s", evs[len(evs)-1], c.detail)
			}
		})
	}
}

// A resume run joins its turn from the turn's start: what was replayed is
// not sent again, and a part or call still open in the session opens again
// on the client (the interrupted run closed it there).
func TestRenderResume(t *testing.T) {
	r := newTestRenderer(10, 6)
	b := render(r,
		chatFrame(1, turnStart(4)),
		chatFrame(2, stepStart()),
		chatFrame(3, stepStart()),
		chatFrame(4, partDelta("4-2-t0", text, "before the dialog")),
		chatFrame(5, &pb.ChatEvent_ToolInput{ToolInput: &pb.ToolInputAvailable{ToolCallId: "c", ToolName: "ask", Input: []byte(`{}`)}}),
		&pb.Frame{Seq: 6, Event: pb.UIRequestOf(&pb.UIRequestEvent{Id: "d", Method: "confirm"})},
		&pb.Frame{Seq: 7, Event: pb.UIRequestOf(&pb.UIRequestEvent{Id: "d", Method: "confirm", Resolved: true})},
		chatFrame(8, &pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: "c", Output: []byte(`"yes"`)}}),
		chatFrame(9, partDelta("4-2-t0", text, " and after")),
		chatFrame(10, turnFinish(4, "end_turn")),
	)
	want := []string{
		`{"type":"TOOL_CALL_RESULT","messageId":"result-c","toolCallId":"c","content":"yes","role":"tool"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"turn-4-2","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"turn-4-2","delta":" and after"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"turn-4-2"}`,
		`{"type":"RUN_FINISHED","threadId":"th","runId":"run","metadata":{"surfaced":{"turnId":4,"stopReason":"end_turn"}}}`,
	}
	if got := events(t, b); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// State frames the snapshot holds (up to its head) are not sent again.
func TestRenderStateAfterHead(t *testing.T) {
	r := NewRenderer(RunOptions{ThreadID: "th", RunID: "run", State: &pb.StateEntries{Head: 5,
		Entries: []*pb.KVEntry{{Key: "k", Value: []byte(`1`), Rev: 2}}}})
	b := render(r,
		&pb.Frame{Seq: 5, Event: pb.StateOf("k", []byte(`1`), 2, false)},
		&pb.Frame{Seq: 5, Event: pb.StatusOf(&pb.StatusEvent{Surfaces: []*pb.SurfaceInfo{{Domain: "d"}}})},
		&pb.Frame{Seq: 6, Event: pb.StateOf("k", []byte(`2`), 3, false)},
	)
	got := events(t, b)
	if len(got) != 1 || got[0] != `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/entries/k/value","value":2},{"op":"replace","path":"/entries/k/rev","value":3}]}` {
		t.Fatalf("got %q", got)
	}
}

func TestAnswerOf(t *testing.T) {
	for _, c := range []struct {
		entry ResumeEntry
		want  Answer
		field string
	}{
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "cancelled"}, Answer{ID: "d", Which: "cancelled"}, ""},
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "resolved", Payload: []byte(`{"value":"x"}`)}, Answer{ID: "d", Which: "value", Value: "x"}, ""},
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "resolved", Payload: []byte(`{"confirmed":false}`)}, Answer{ID: "d", Which: "confirmed"}, ""},
		{ResumeEntry{Field: "resume[1]", InterruptID: "d", Status: "resolved"}, Answer{}, "resume[1].payload"},
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "resolved", Payload: []byte(`"x"`)}, Answer{}, "resume[0].payload"},
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "resolved", Payload: []byte(`{"value":"x","confirmed":true}`)}, Answer{}, "resume[0].payload"},
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "resolved", Payload: []byte(`{"confirmed":"yes"}`)}, Answer{}, "resume[0].payload.confirmed"},
		{ResumeEntry{Field: "resume[0]", InterruptID: "d", Status: "resolved", Payload: []byte(`{"value":3}`)}, Answer{}, "resume[0].payload.value"},
	} {
		a, err := AnswerOf(c.entry)
		if c.field != "" {
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != c.field {
				t.Errorf("%s: %v, want a refusal of %s", c.entry.Payload, err, c.field)
			}
			continue
		}
		if err != nil || a != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.entry.Payload, a, err, c.want)
		}
	}
}

func TestPrompt(t *testing.T) {
	for _, c := range []struct {
		body   string
		text   string
		media  int
		ok     bool
		refuse string
	}{
		{`{"threadId":"t","runId":"r","messages":[]}`, "", 0, false, ""},
		{`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"old"},{"id":"2","role":"assistant","content":"a"}]}`, "", 0, false, ""},
		{`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"old"},{"id":"2","role":"user","content":"new"}]}`, "new", 0, true, ""},
		{`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},
			{"type":"image","source":{"type":"data","value":"aGk=","mimeType":"image/png"}}]}]}`, "ab", 1, true, ""},
		{`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":" "}]}`, "", 0, false, "messages[0].content"},
	} {
		in, err := Decode([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		p, ok, err := in.Prompt()
		if c.refuse != "" {
			if fe, isFE := err.(*FieldError); !isFE || fe.Field != c.refuse {
				t.Errorf("%s: %v, want a refusal of %s", c.body, err, c.refuse)
			}
			continue
		}
		if err != nil || ok != c.ok || p.Text != c.text || len(p.Media) != c.media {
			t.Errorf("%s: %+v %v %v", c.body, p, ok, err)
		}
	}
}

func TestSessionID(t *testing.T) {
	a := SessionID("alice", "demo", "t1")
	if !strings.HasPrefix(a, ThreadPrefix) || len(a) != len(ThreadPrefix)+26 || a != SessionID("alice", "demo", "t1") {
		t.Fatalf("SessionID: %q", a)
	}
	for _, other := range []string{SessionID("bob", "demo", "t1"), SessionID("alice", "hello", "t1"), SessionID("alice", "demo", "t2"),
		SessionID("alicedemo", "", "t1"), SessionID("alic", "edemo", "t1")} {
		if other == a {
			t.Fatalf("two threads share %s", a)
		}
	}
}

// Decode never panics, whatever the body.
func FuzzDecode(f *testing.F) {
	for _, s := range schemaCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := Decode(body)
		if err == nil {
			_, _, _ = in.Prompt()
			for _, e := range in.Resume {
				_, _ = AnswerOf(e)
			}
		}
	})
}
