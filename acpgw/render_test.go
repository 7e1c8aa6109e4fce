package acpgw

import (
	"encoding/json"
	"reflect"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// textChunk writes what encoding the SDK's types writes: the same bytes,
// but for invalid UTF-8, where both write U+FFFD (escaped or not).
func TestTextChunkMatchesTheSDK(t *testing.T) {
	for _, text := range []string{"", "echo: hello", "quote \" backslash \\ newline \n tab \t", "<b>&amp;</b>", "ünïcödé ✓ \u2028", "bad \xff utf-8"} {
		for kind, u := range map[string]acp.SessionUpdate{
			"agent_message_chunk": acp.UpdateAgentMessageText(text),
			"agent_thought_chunk": acp.UpdateAgentThoughtText(text),
			"user_message_chunk":  acp.UpdateUserMessageText(text),
		} {
			want := encodeNotification("session/update", acp.SessionNotification{SessionId: "s-\"1\"", Update: u})
			got := textChunk("s-\"1\"", kind, text)
			if string(got) == string(want) {
				continue
			}
			var g, w any
			if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) || text != "bad \xff utf-8" {
				t.Errorf("%s %q:\n got %s\nwant %s", kind, text, got, want)
			}
		}
	}
}

func BenchmarkTextChunk(b *testing.B) {
	b.Run("sdk", func(b *testing.B) {
		for range b.N {
			encodeNotification("session/update", acp.SessionNotification{SessionId: "abcdefghijklmnopqrstuvwxyz", Update: acp.UpdateAgentMessageText("echo: ")})
		}
	})
	b.Run("textChunk", func(b *testing.B) {
		for range b.N {
			textChunk("abcdefghijklmnopqrstuvwxyz", "agent_message_chunk", "echo: ")
		}
	})
}
