package agentproc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAssistantMessageEventKeepsContentIndexZero(t *testing.T) {
	tests := []struct {
		ev   AssistantMessageEvent
		want string
	}{
		{AssistantMessageEvent{Type: AMETextDelta, Delta: "hi"}, `{"type":"text_delta","delta":"hi","contentIndex":0}`},
		{AssistantMessageEvent{Type: AMEThinkingStart}, `{"type":"thinking_start","contentIndex":0}`},
		{AssistantMessageEvent{Type: AMEToolcallEnd, ContentIndex: 2, ToolCall: json.RawMessage(`{"id":"c"}`)}, `{"type":"toolcall_end","toolCall":{"id":"c"},"contentIndex":2}`},
		// start, done and error carry no contentIndex in pi.
		{AssistantMessageEvent{Type: AMEStart}, `{"type":"start"}`},
		{AssistantMessageEvent{Type: AMEDone, Reason: "stop"}, `{"type":"done","reason":"stop"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("%s: got %s, want %s", tt.ev.Type, b, tt.want)
		}
		var back AssistantMessageEvent
		if err := json.Unmarshal(b, &back); err != nil || back.Type != tt.ev.Type || back.ContentIndex != tt.ev.ContentIndex {
			t.Errorf("%s: round trip gave %+v, %v", tt.ev.Type, back, err)
		}
	}
	// Inside an event, through the pointer field, too.
	b, _ := json.Marshal(Event{Type: EventMessageUpdate, AssistantMessageEvent: &AssistantMessageEvent{Type: AMETextStart}})
	if !strings.Contains(string(b), `"contentIndex":0`) {
		t.Errorf("message_update lost contentIndex 0: %s", b)
	}
}

// TestDecodePiLines decodes lines as pi 0.73.1 writes them (shortened).
func TestDecodePiLines(t *testing.T) {
	var ev Event
	line := `{"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","contentIndex":0,"delta":"hmm ","partial":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm ","thinkingSignature":"reasoning_content"}],"api":"openai-completions","provider":"stub","model":"stub-model","stopReason":"stop","timestamp":1}},"message":{"role":"assistant","content":[],"stopReason":"stop"}}`
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.AssistantMessageEvent.Type != AMEThinkingDelta || ev.AssistantMessageEvent.Delta != "hmm " || len(ev.AssistantMessageEvent.Partial) == 0 {
		t.Errorf("message_update decoded as %+v", ev.AssistantMessageEvent)
	}
	line = `{"type":"tool_execution_update","toolCallId":"call_1","toolName":"bash","args":{"command":"ls"},"partialResult":{"content":[{"type":"text","text":"a\n"}],"details":{}}}`
	ev = Event{}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	var tr ToolResult
	if err := json.Unmarshal(ev.PartialResult, &tr); err != nil || len(tr.Content) != 1 || tr.Content[0].Text != "a\n" {
		t.Errorf("partialResult decoded as %+v (%v)", tr, err)
	}
	line = `{"type":"auto_retry_end","success":false,"attempt":1,"finalError":"500 down"}`
	ev = Event{}
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Success || ev.Attempt != 1 || ev.FinalError != "500 down" {
		t.Errorf("auto_retry_end decoded as %+v (%v)", ev, err)
	}
	var st SessionState
	data := `{"model":{"id":"m","name":"M","api":"openai-completions","provider":"stub","baseUrl":"http://127.0.0.1:1/v1","reasoning":false,"input":["text","image"],"contextWindow":128000,"maxTokens":4096},"thinkingLevel":"off","isStreaming":true,"isCompacting":false,"sessionId":"s","messageCount":2,"pendingMessageCount":0}`
	if err := json.Unmarshal([]byte(data), &st); err != nil || !st.IsStreaming || !st.Model.AcceptsImages() {
		t.Errorf("get_state decoded as %+v (%v)", st, err)
	}
	st.Model.Input = []string{"text"}
	if st.Model.AcceptsImages() || (*Model)(nil).AcceptsImages() {
		t.Error("a text-only model (or none) accepts images")
	}
}
