package turn

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	proc "github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// countOut is an Out that only counts what it is given.
type countOut struct{ chunks, other int }

func (c *countOut) Emit(ev *pb.Event, sticky string) {
	if ev.GetChat() != nil {
		c.chunks++
	} else {
		c.other++
	}
}
func (c *countOut) Unstick(string)             { c.other++ }
func (c *countOut) Send(Command)               { c.other++ }
func (c *countOut) Transcript([]store.Entry)   { c.other++ }
func (c *countOut) Record(uint64, store.Entry) { c.other++ }
func (c *countOut) Status()                    { c.other++ }
func (c *countOut) Title(string)               { c.other++ }
func (c *countOut) AbortGrace(uint64)          { c.other++ }
func (c *countOut) Model(*proc.Model)          { c.other++ }

// deltaLine is a text_delta message_update as pi writes it: the message so
// far (soFar bytes of text) in "message" and again in the event's "partial".
// With agentkit's shape (kit) the partial is not repeated.
func deltaLine(soFar int, kit bool) []byte {
	msg := ev{"role": "assistant", "content": []ev{{"type": "text", "text": strings.Repeat("lorem ipsum ", soFar/12)}},
		"api": "openai-completions", "provider": "p", "model": "m", "usage": ev{"input": 10, "output": 20}, "stopReason": "stop", "timestamp": 1}
	e := ev{"type": "text_delta", "contentIndex": 0, "delta": " token"}
	if !kit {
		e["partial"] = msg
	}
	b, err := json.Marshal(ev{"type": "message_update", "assistantMessageEvent": e, "message": msg})
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkTextDelta is the hot path: one text delta line in, one chunk out.
func BenchmarkTextDelta(b *testing.B) {
	for _, c := range []struct {
		name  string
		soFar int
		kit   bool
	}{{"agentkit-100B", 100, true}, {"pi-100B", 100, false}, {"pi-2048B", 2048, false}, {"pi-16384B", 16384, false}} {
		b.Run(c.name, func(b *testing.B) {
			out := &countOut{}
			m := New(Config{Out: out})
			m.AgentReady()
			id, err := m.Prompt(Prompt{Text: "hi"})
			if err != nil {
				b.Fatal(err)
			}
			m.Recorded(id)
			if err := m.AgentLine(proc.EventAgentStart, []byte(`{"type":"agent_start"}`)); err != nil {
				b.Fatal(err)
			}
			if err := m.AgentLine(proc.EventMessageStart, []byte(`{"type":"message_start","message":{"role":"assistant","content":[]}}`)); err != nil {
				b.Fatal(err)
			}
			line := deltaLine(c.soFar, c.kit)
			b.SetBytes(int64(len(line)))
			before := out.chunks
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := m.AgentLine(proc.EventMessageUpdate, line); err != nil {
					b.Fatal(err)
				}
				if m.cur.text.Len() > 1<<20 { // keep the transcript buffer from growing without bound
					m.cur.text.Reset()
				}
			}
			b.StopTimer()
			if out.chunks-before < b.N {
				b.Fatalf("%d chunks for %d lines", out.chunks-before, b.N)
			}
		})
	}
}

// BenchmarkDecodeUpdate reads a text_delta line's event: scanUpdate against
// its same-run baseline, encoding/json into the same narrow struct (what
// the session did before).
func BenchmarkDecodeUpdate(b *testing.B) {
	for _, size := range []int{100, 2048, 16384} {
		line := deltaLine(size, false)
		b.Run("scan/pi-"+strconv.Itoa(size)+"B", func(b *testing.B) {
			var e assistantEvent
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if present, ok := scanUpdate(line, &e); !present || !ok {
					b.Fatal("not scanned")
				}
			}
		})
		b.Run("encoding-json/pi-"+strconv.Itoa(size)+"B", func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				var u messageUpdateLine
				if err := json.Unmarshal(line, &u); err != nil || u.Event == nil {
					b.Fatal(err)
				}
			}
		})
	}
}
