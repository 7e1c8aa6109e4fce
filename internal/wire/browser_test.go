package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   *pb.Event
		kind string
		want string
	}{
		{"state", pb.StateOf("surface:demo", []byte(`{"count":1}`), 2, false), pb.KindState, `{"key":"surface:demo","value":{"count":1},"rev":2}`},
		{"state deleted", pb.StateOf("ui.theme", []byte(`"x"`), 3, true), pb.KindState, `{"key":"ui.theme","rev":3,"deleted":true}`},
		{"status", pb.StatusOf(&pb.StatusEvent{Status: "ready", Busy: true, Queued: 2}), pb.KindSession, `{"status":"ready","busy":true,"queued":2,"images":false,"surfaces":[]}`},
		{"status detail", pb.StatusOf(&pb.StatusEvent{Status: "error", Code: "agent_crashed", Detail: "d", Title: "T", Images: true}), pb.KindSession,
			`{"status":"error","busy":false,"code":"agent_crashed","detail":"d","title":"T","queued":0,"images":true,"surfaces":[]}`},
		// Every session frame lists the surfaces, so that a client never
		// keeps an availability the session no longer has.
		{"status surfaces", pb.StatusOf(&pb.StatusEvent{Status: "ended", Code: "restart_exhausted", Surfaces: []*pb.SurfaceInfo{
			{Domain: "demo", Hosted: "agent", Commands: []string{"echo", "increment"}}, {Domain: "notes", Hosted: "native"}}}), pb.KindSession,
			`{"status":"ended","busy":false,"code":"restart_exhausted","queued":0,"images":false,"surfaces":[` +
				`{"domain":"demo","hosted":"agent","available":false,"commands":["echo","increment"]},{"domain":"notes","hosted":"native","available":false,"commands":[]}]}`},
		{"diagnostic", pb.DiagnosticOf("invalid_line", "bad"), pb.KindDiagnostic, `{"code":"invalid_line","message":"bad"}`},
		{"resync", pb.ResyncOf("outside"), pb.KindResync, `{"reason":"outside"}`},
		{"end", pb.EndOf("stopped"), pb.KindEnd, `{"reason":"stopped"}`},
		{"ui request", pb.UIRequestOf(&pb.UIRequestEvent{Id: "d1", Method: "confirm", Request: []byte(`{"id":"d1","method":"confirm","title":"Sure?"}`)}), pb.KindUIRequest,
			`{"id":"d1","method":"confirm","title":"Sure?"}`},
		{"ui resolved", pb.UIRequestOf(&pb.UIRequestEvent{Id: "d1", Method: "confirm", Resolved: true}), pb.KindUIRequest, `{"id":"d1","method":"confirm","resolved":true}`},
		{"user message", pb.ChatOf(&pb.ChatEvent_UserMessage{UserMessage: &pb.UserMessage{PromptId: 7, Text: "hi", Via: "acp", Queued: true, Images: 1}}), pb.KindChat,
			`{"type":"data-user-message","data":{"promptId":7,"text":"hi","via":"acp","queued":true,"images":1}}`},
		{"user message attachments", pb.ChatOf(&pb.ChatEvent_UserMessage{UserMessage: &pb.UserMessage{PromptId: 8, Text: "", Via: "browser", AttachmentIds: []string{"att_a", "att_b"}}}), pb.KindChat,
			`{"type":"data-user-message","data":{"promptId":8,"text":"","via":"browser","queued":false,"attachmentIds":["att_a","att_b"]}}`},
		{"artifact added", pb.ArtifactOf(pb.ArtifactAdded, &pb.Artifact{Id: "att_x", SessionId: "s1", MediaType: "image/png", Size: 48213,
			Sha256: "ab", Name: "cat \"1\".png", CreatedAtMs: 1750000000123, DerivedFrom: "att_w", Meta: []byte(`{"seed":7}`)}), pb.KindArtifact,
			`{"event":"added","artifact":{"id":"att_x","sessionId":"s1","mediaType":"image/png","size":48213,"sha256":"ab","name":"cat \"1\".png",` +
				`"createdAt":"2025-06-15T15:06:40.123Z","derivedFrom":"att_w","meta":{"seed":7}}}`},
		{"artifact deleted", pb.ArtifactOf(pb.ArtifactDeleted, &pb.Artifact{Id: "att_x", SessionId: "s1", MediaType: "text/plain", CreatedAtMs: 1750000000000}), pb.KindArtifact,
			`{"event":"deleted","artifact":{"id":"att_x","sessionId":"s1","mediaType":"text/plain","size":0,"sha256":"","createdAt":"2025-06-15T15:06:40Z"}}`},
		{"start", pb.ChatOf(&pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: 4, PromptIds: []uint64{7, 8}}}), pb.KindChat,
			`{"type":"start","messageId":"turn-4","messageMetadata":{"turnId":4,"promptIds":[7,8]}}`},
		{"start no prompts", pb.ChatOf(&pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: 5, MessageId: "m"}}), pb.KindChat,
			`{"type":"start","messageId":"m","messageMetadata":{"turnId":5,"promptIds":[]}}`},
		{"text delta", pb.ChatOf(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: "4-1-t0", Kind: pb.PartKind_PART_KIND_TEXT, Delta: "a\"b"}}), pb.KindChat,
			`{"type":"text-delta","id":"4-1-t0","delta":"a\"b"}`},
		{"reasoning start", pb.ChatOf(&pb.ChatEvent_PartStart{PartStart: &pb.PartStart{Id: "r", Kind: pb.PartKind_PART_KIND_REASONING}}), pb.KindChat,
			`{"type":"reasoning-start","id":"r"}`},
		{"text end", pb.ChatOf(&pb.ChatEvent_PartEnd{PartEnd: &pb.PartEnd{Id: "t", Kind: pb.PartKind_PART_KIND_TEXT}}), pb.KindChat, `{"type":"text-end","id":"t"}`},
		{"step", pb.ChatOf(&pb.ChatEvent_StepStart{StepStart: &pb.StepStart{}}), pb.KindChat, `{"type":"start-step"}`},
		{"step end", pb.ChatOf(&pb.ChatEvent_StepFinish{StepFinish: &pb.StepFinish{}}), pb.KindChat, `{"type":"finish-step"}`},
		{"tool input start", pb.ChatOf(&pb.ChatEvent_ToolInputStart{ToolInputStart: &pb.ToolInputStart{ToolCallId: "c1", ToolName: "bash"}}), pb.KindChat,
			`{"type":"tool-input-start","toolCallId":"c1","toolName":"bash"}`},
		{"tool input delta", pb.ChatOf(&pb.ChatEvent_ToolInputDelta{ToolInputDelta: &pb.ToolInputDelta{ToolCallId: "c1", Delta: `{"a":`}}), pb.KindChat,
			`{"type":"tool-input-delta","toolCallId":"c1","inputTextDelta":"{\"a\":"}`},
		{"tool input", pb.ChatOf(&pb.ChatEvent_ToolInput{ToolInput: &pb.ToolInputAvailable{ToolCallId: "c1", ToolName: "bash"}}), pb.KindChat,
			`{"type":"tool-input-available","toolCallId":"c1","toolName":"bash","input":{}}`},
		{"tool output", pb.ChatOf(&pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: "c1", Output: []byte(`{"x":1}`), Preliminary: true}}), pb.KindChat,
			`{"type":"tool-output-available","toolCallId":"c1","output":{"x":1},"preliminary":true}`},
		{"tool output empty", pb.ChatOf(&pb.ChatEvent_ToolOutput{ToolOutput: &pb.ToolOutput{ToolCallId: "c1"}}), pb.KindChat,
			`{"type":"tool-output-available","toolCallId":"c1","output":null}`},
		{"tool error", pb.ChatOf(&pb.ChatEvent_ToolError{ToolError: &pb.ToolError{ToolCallId: "c1", ErrorText: "no", ErrorCode: "tool_error"}}), pb.KindChat,
			`{"type":"tool-output-error","toolCallId":"c1","errorText":"no"}`},
		{"error", pb.ChatOf(&pb.ChatEvent_TurnError{TurnError: &pb.TurnError{ErrorText: "boom"}}), pb.KindChat, `{"type":"error","errorText":"boom"}`},
		{"abort", pb.ChatOf(&pb.ChatEvent_TurnAbort{TurnAbort: &pb.TurnAbort{}}), pb.KindChat, `{"type":"abort"}`},
		{"finish", pb.ChatOf(&pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: 4, PromptIds: []uint64{7}, StopReason: "end_turn"}}), pb.KindChat,
			`{"type":"finish","messageMetadata":{"turnId":4,"promptIds":[7],"stopReason":"end_turn"}}`},
		{"agent notice", pb.ChatOf(&pb.ChatEvent_AgentNotice{AgentNotice: &pb.AgentNotice{Line: []byte(`{"type":"auto_retry_start"}`)}}), pb.KindChat,
			`{"type":"data-agent-event","data":{"type":"auto_retry_start"},"transient":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k := pb.KindOf(tc.ev); k != tc.kind {
				t.Errorf("kind %q, want %q", k, tc.kind)
			}
			got := string(Data(tc.ev))
			if got != tc.want {
				t.Errorf("data\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not JSON: %s", got)
			}
		})
	}
}

// AppendString must agree with encoding/json on every string (decode of the
// output gives the input, with invalid UTF-8 as U+FFFD), without escaping
// HTML characters.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\"\\\n\r\t\x00\x1f", "\u2028\u2029", "\xff\xfe", "日本語", "a\x7fb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not a JSON string: %v", s, out, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if !utf8.ValidString(s) {
			// encoding/json replaces each invalid byte; so does AppendString.
			var b []rune
			for i := 0; i < len(s); {
				r, n := utf8.DecodeRuneInString(s[i:])
				b = append(b, r)
				i += n
			}
			want = string(b)
		}
		if back != want {
			t.Fatalf("round trip of %q gave %q, want %q", s, back, want)
		}
		if strings.ContainsAny(s, "<>&") && strings.Contains(string(out), `\u003c`) {
			t.Fatalf("HTML-escaped: %s", out)
		}
		if strings.ContainsRune(string(out), '\u2028') || strings.ContainsRune(string(out), '\u2029') {
			t.Fatalf("raw U+2028/U+2029 in %s", out)
		}
	})
}

func BenchmarkTextDelta(b *testing.B) {
	ev := pb.ChatOf(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: "12-1-t0", Kind: pb.PartKind_PART_KIND_TEXT, Delta: "Hello, world. "}})
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendData(buf[:0], ev)
	}
}
