package turn

import (
	"encoding/json"
	"reflect"
	"testing"

	proc "github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func toolStart(id, name, args string) ev {
	e := ev{"type": "tool_execution_start", "toolCallId": id, "toolName": name}
	if args != "" {
		e["args"] = json.RawMessage(args)
	}
	return e
}

func toolUpdate(id, name, partial string) ev {
	return ev{"type": "tool_execution_update", "toolCallId": id, "toolName": name, "args": ev{}, "partialResult": json.RawMessage(partial)}
}

func toolEnd(id, name, result string, isError bool) ev {
	e := ev{"type": "tool_execution_end", "toolCallId": id, "toolName": name, "isError": isError}
	if result != "" {
		e["result"] = json.RawMessage(result)
	}
	return e
}

func TestToolCalls(t *testing.T) {
	begin := steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart()), forget())
	runScenarios(t, []scenario{{
		name: "a call with partial results",
		steps: steps(begin, pi(toolStart("c1", "bash", `{"command":"ls"}`),
			toolUpdate("c1", "bash", `{"content":[{"type":"text","text":"a"}]}`),
			toolUpdate("c1", "bash", `{"content":[{"type":"text","text":"a\nb"}]}`),
			toolEnd("c1", "bash", `{"content":[{"type":"text","text":"a\nb"}],"details":{}}`, false))),
		want: []string{
			`chat {"type":"tool-input-available","toolCallId":"c1","toolName":"bash","input":{"command":"ls"}}`,
			`chat {"type":"tool-output-available","toolCallId":"c1","output":{"content":[{"type":"text","text":"a"}]},"preliminary":true}`,
			`chat {"type":"tool-output-available","toolCallId":"c1","output":{"content":[{"type":"text","text":"a\nb"}]},"preliminary":true}`,
			`chat {"type":"tool-output-available","toolCallId":"c1","output":{"content":[{"type":"text","text":"a\nb"}],"details":{}}}`,
			`transcript tool c1 bash args={"command":"ls"} result={"content":[{"type":"text","text":"a\nb"}],"details":{}} error=false turn=1`,
		},
	}, {
		name: "failed calls carry their class",
		steps: steps(begin, pi(
			toolStart("e1", "read", `{"path":"x"}`),
			toolEnd("e1", "read", `{"content":[{"type":"text","text":"ENOENT: x"}],"details":{"code":"not_found"}}`, true),
			toolStart("e2", "bash", ""),
			toolEnd("e2", "bash", `{"content":[{"type":"text","text":"exit 1"}],"details":{"code":"Not A Code"}}`, true),
			toolStart("e3", "x", ""),
			toolEnd("e3", "x", `"Tool x not found"`, true),
			toolStart("e4", "y", ""),
			toolEnd("e4", "y", `{"content":[],"details":{"code":"denied"}}`, true),
			toolStart("e5", "z", ""),
			toolEnd("e5", "z", "", true))),
		want: []string{
			`chat {"type":"tool-input-available","toolCallId":"e1","toolName":"read","input":{"path":"x"}}`,
			`chat {"type":"tool-output-error","toolCallId":"e1","errorText":"ENOENT: x"} code=not_found`,
			`transcript tool e1 read args={"path":"x"} result={"content":[{"type":"text","text":"ENOENT: x"}],"details":{"code":"not_found"}} error=true turn=1`,
			`chat {"type":"tool-input-available","toolCallId":"e2","toolName":"bash","input":{}}`,
			`chat {"type":"tool-output-error","toolCallId":"e2","errorText":"exit 1"} code=tool_error`,
			`transcript tool e2 bash args= result={"content":[{"type":"text","text":"exit 1"}],"details":{"code":"Not A Code"}} error=true turn=1`,
			`chat {"type":"tool-input-available","toolCallId":"e3","toolName":"x","input":{}}`,
			`chat {"type":"tool-output-error","toolCallId":"e3","errorText":"Tool x not found"} code=tool_error`,
			`transcript tool e3 x args= result="Tool x not found" error=true turn=1`,
			`chat {"type":"tool-input-available","toolCallId":"e4","toolName":"y","input":{}}`,
			`chat {"type":"tool-output-error","toolCallId":"e4","errorText":"{\"content\":[],\"details\":{\"code\":\"denied\"}}"} code=denied`,
			`transcript tool e4 y args= result={"content":[],"details":{"code":"denied"}} error=true turn=1`,
			`chat {"type":"tool-input-available","toolCallId":"e5","toolName":"z","input":{}}`,
			`chat {"type":"tool-output-error","toolCallId":"e5","errorText":""} code=tool_error`,
			`transcript tool e5 z args= result= error=true turn=1`,
		},
	}, {
		name:  "a result-less success is null",
		steps: steps(begin, pi(toolEnd("c9", "noop", "", false))),
		want: []string{
			`chat {"type":"tool-output-available","toolCallId":"c9","output":null}`,
			`transcript tool c9 noop args= result= error=false turn=1`,
		},
	}, {
		name:  "tool events outside a turn still reach the clients",
		steps: steps(ready(), pi(toolStart("c1", "bash", `{}`), toolEnd("c1", "bash", `{"content":[]}`, false))),
		want: []string{
			`chat {"type":"tool-input-available","toolCallId":"c1","toolName":"bash","input":{}}`,
			`chat {"type":"tool-output-available","toolCallId":"c1","output":{"content":[]}}`,
			`transcript tool c1 bash args= result={"content":[]} error=false turn=0`,
		},
	}})
}

// piToolLine is a message_update of pi's for a tool call being written: the
// partial message in "message" and again in the event's "partial", as pi
// sends them (with the provider's scratch fields).
func piToolLine(typ string, index int, delta string, blocks ...ev) ev {
	msg := ev{"role": "assistant", "content": blocks, "api": "openai-completions", "provider": "p", "model": "m",
		"usage": ev{"input": 0, "output": 0}, "stopReason": "stop", "timestamp": 1}
	e := ev{"type": typ, "contentIndex": index, "partial": msg}
	if typ == "toolcall_delta" {
		e["delta"] = delta
	}
	if typ == "toolcall_end" {
		b := blocks[index]
		e["toolCall"] = ev{"type": "toolCall", "id": b["id"], "name": b["name"], "arguments": b["arguments"]}
	}
	return ev{"type": "message_update", "assistantMessageEvent": e, "message": msg}
}

func call(id, name, partialArgs string) ev {
	return ev{"type": "toolCall", "id": id, "name": name, "arguments": ev{}, "partialArgs": partialArgs}
}

// agentkitToolLine is the same event as agentkit writes it (no partial in
// the event; the message so far in "message").
func agentkitToolLine(typ string, index int, delta string, blocks ...proc.ContentBlock) []byte {
	content, _ := json.Marshal(blocks)
	e := &proc.AssistantMessageEvent{Type: typ, ContentIndex: index, Delta: delta}
	if typ == proc.AMEToolcallEnd {
		e.ToolCall, _ = json.Marshal(blocks[index])
	}
	b, err := json.Marshal(proc.Event{Type: proc.EventMessageUpdate, Message: &proc.AgentMessage{Role: "assistant", Content: content}, AssistantMessageEvent: e})
	if err != nil {
		panic(err)
	}
	return b
}

func TestToolInputStreaming(t *testing.T) {
	begin := steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart()), forget())
	text := ev{"type": "text", "text": "Let me look."}
	runScenarios(t, []scenario{{
		name: "pi streams a call: start, deltas, then the input at execution",
		steps: steps(begin, pi(
			textDelta(0, "Let me look."),
			piToolLine("toolcall_start", 1, "", text, call("call_1", "bash", "")),
			piToolLine("toolcall_delta", 1, "", text, call("call_1", "bash", "")), // openai's first chunk: no arguments yet
			piToolLine("toolcall_delta", 1, `{"command":`, text, call("call_1", "bash", `{"command":`)),
			piToolLine("toolcall_delta", 1, ` "ls -la"}`, text, call("call_1", "bash", `{"command": "ls -la"}`)),
			piToolLine("toolcall_end", 1, "", text, ev{"type": "toolCall", "id": "call_1", "name": "bash", "arguments": ev{"command": "ls -la"}}),
			ev{"type": "message_end", "message": ev{"role": "assistant", "stopReason": "toolUse", "content": []ev{text,
				{"type": "toolCall", "id": "call_1", "name": "bash", "arguments": ev{"command": "ls -la"}}}}},
			toolStart("call_1", "bash", `{"command":"ls -la"}`))),
		only: []string{"chat"},
		want: []string{
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"Let me look."}`,
			`chat {"type":"tool-input-start","toolCallId":"call_1","toolName":"bash"}`,
			`chat {"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":"{\"command\":"}`,
			`chat {"type":"tool-input-delta","toolCallId":"call_1","inputTextDelta":" \"ls -la\"}"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`chat {"type":"tool-input-available","toolCallId":"call_1","toolName":"bash","input":{"command":"ls -la"}}`,
		},
	}, {
		name: "agentkit streams a call",
		steps: steps(begin, pi(
			agentkitToolLine("toolcall_start", 0, "", proc.ContentBlock{Type: "toolCall", ID: "call-1", Name: "counter_add"}),
			agentkitToolLine("toolcall_delta", 0, `{"n":`, proc.ContentBlock{Type: "toolCall", ID: "call-1", Name: "counter_add", Arguments: json.RawMessage(`"{\"n\":"`)}),
			agentkitToolLine("toolcall_delta", 0, `2}`, proc.ContentBlock{Type: "toolCall", ID: "call-1", Name: "counter_add", Arguments: json.RawMessage(`{"n":2}`)}),
			agentkitToolLine("toolcall_end", 0, "", proc.ContentBlock{Type: "toolCall", ID: "call-1", Name: "counter_add", Arguments: json.RawMessage(`{"n":2}`)}),
			toolStart("call-1", "counter_add", `{"n":2}`))),
		want: []string{
			`chat {"type":"tool-input-start","toolCallId":"call-1","toolName":"counter_add"}`,
			`chat {"type":"tool-input-delta","toolCallId":"call-1","inputTextDelta":"{\"n\":"}`,
			`chat {"type":"tool-input-delta","toolCallId":"call-1","inputTextDelta":"2}"}`,
			`chat {"type":"tool-input-available","toolCallId":"call-1","toolName":"counter_add","input":{"n":2}}`,
		},
	}, {
		name: "a call whose id and name come late starts when they do, its early deltas first",
		steps: steps(begin, pi(
			piToolLine("toolcall_start", 0, "", call("", "", "")),
			piToolLine("toolcall_delta", 0, `{"a"`, call("", "", `{"a"`)),
			piToolLine("toolcall_delta", 0, `:1`, call("c7", "", `{"a":1`)),
			piToolLine("toolcall_delta", 0, `}`, call("c7", "calc", `{"a":1}`)),
			piToolLine("toolcall_delta", 0, ``, call("c7", "calc", `{"a":1}`)))),
		want: []string{
			`chat {"type":"tool-input-start","toolCallId":"c7","toolName":"calc"}`,
			`chat {"type":"tool-input-delta","toolCallId":"c7","inputTextDelta":"{\"a\""}`,
			`chat {"type":"tool-input-delta","toolCallId":"c7","inputTextDelta":":1"}`,
			`chat {"type":"tool-input-delta","toolCallId":"c7","inputTextDelta":"}"}`,
		},
	}, {
		name: "a call named only by toolcall_end",
		steps: steps(begin, pi(
			piToolLine("toolcall_delta", 0, `{}`, call("", "", `{}`)), // no start seen
			piToolLine("toolcall_end", 0, "", ev{"type": "toolCall", "id": "c8", "name": "noop", "arguments": ev{}}))),
		want: []string{
			`chat {"type":"tool-input-start","toolCallId":"c8","toolName":"noop"}`,
			`chat {"type":"tool-input-delta","toolCallId":"c8","inputTextDelta":"{}"}`,
		},
	}, {
		name: "a call never named streams nothing; its execution still shows",
		steps: steps(begin, pi(
			piToolLine("toolcall_start", 0, "", call("", "", "")),
			piToolLine("toolcall_delta", 0, `{}`, call("", "", `{}`)),
			piToolLine("toolcall_end", 0, "", ev{"type": "toolCall", "id": "", "name": "", "arguments": ev{}}),
			toolStart("c9", "noop", `{}`))),
		want: []string{`chat {"type":"tool-input-available","toolCallId":"c9","toolName":"noop","input":{}}`},
	}, {
		name:  "an agent that does not stream calls: the input at execution only",
		steps: steps(begin, pi(toolStart("c1", "bash", `{"command":"ls"}`))),
		want:  []string{`chat {"type":"tool-input-available","toolCallId":"c1","toolName":"bash","input":{"command":"ls"}}`},
	}, {
		name: "parallel calls stream interleaved, each under its own id",
		steps: steps(begin, pi(
			piToolLine("toolcall_start", 0, "", call("a", "read", "")),
			piToolLine("toolcall_start", 1, "", call("a", "read", ""), call("b", "grep", "")),
			piToolLine("toolcall_delta", 0, `{"path":"x"}`, call("a", "read", `{"path":"x"}`), call("b", "grep", "")),
			piToolLine("toolcall_delta", 1, `{"q":"y"}`, call("a", "read", `{"path":"x"}`), call("b", "grep", `{"q":"y"}`)))),
		want: []string{
			`chat {"type":"tool-input-start","toolCallId":"a","toolName":"read"}`,
			`chat {"type":"tool-input-start","toolCallId":"b","toolName":"grep"}`,
			`chat {"type":"tool-input-delta","toolCallId":"a","inputTextDelta":"{\"path\":\"x\"}"}`,
			`chat {"type":"tool-input-delta","toolCallId":"b","inputTextDelta":"{\"q\":\"y\"}"}`,
		},
	}, {
		name: "the next message's calls are new calls at the same index",
		steps: steps(begin, pi(
			piToolLine("toolcall_start", 0, "", call("a", "read", "")),
			ev{"type": "message_end", "message": assistant("toolUse", "", "")},
			messageStart(),
			piToolLine("toolcall_delta", 0, `{}`, call("b", "read", `{}`)))),
		want: []string{
			`chat {"type":"tool-input-start","toolCallId":"a","toolName":"read"}`,
			`chat {"type":"tool-input-start","toolCallId":"b","toolName":"read"}`,
			`chat {"type":"tool-input-delta","toolCallId":"b","inputTextDelta":"{}"}`,
		},
	}, {
		name: "a block at the index that is not a tool call names nothing",
		steps: steps(begin, pi(
			piToolLine("toolcall_start", 0, "", ev{"type": "text", "id": "x", "name": "y"}),
			piToolLine("toolcall_start", 5, "", call("a", "read", "")))),
		want: nil,
	}, {
		name:  "tool input outside a turn is dropped",
		steps: steps(ready(), pi(piToolLine("toolcall_start", 0, "", call("a", "read", "")), piToolLine("toolcall_delta", 0, "{}", call("a", "read", "{}")))),
		want:  nil,
	}})
}

// The joined deltas of a call parse to the input its execution shows, for
// pi's and agentkit's lines alike, whatever the chunking.
func TestToolInputDeltasJoinToTheInput(t *testing.T) {
	input := `{"path":"src/main.go","edits":[{"old":"a\"b","new":"ü\n"}],"n":1.5}`
	for _, size := range []int{1, 3, 7, len([]rune(input))} {
		for _, kit := range []bool{false, true} {
			m, r := newMachine(t, Config{})
			play(m, r, steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, messageStart())))
			var lines []any
			if kit {
				lines = append(lines, agentkitToolLine("toolcall_start", 0, "", proc.ContentBlock{Type: "toolCall", ID: "c", Name: "edit"}))
			} else {
				lines = append(lines, piToolLine("toolcall_start", 0, "", call("c", "edit", "")))
			}
			runes := []rune(input) // a delta is text: it never splits a character
			for i := 0; i < len(runes); i += size {
				d := string(runes[i:min(i+size, len(runes))])
				so := string(runes[:min(i+size, len(runes))])
				if kit {
					lines = append(lines, agentkitToolLine("toolcall_delta", 0, d, proc.ContentBlock{Type: "toolCall", ID: "c", Name: "edit"}))
				} else {
					lines = append(lines, piToolLine("toolcall_delta", 0, d, call("c", "edit", so)))
				}
			}
			lines = append(lines, toolStart("c", "edit", input))
			r.lines = nil
			var joined string
			var got json.RawMessage
			rec := &captureOut{recorder: r, chunk: func(c pb.ChatChunk) {
				switch v := c.(type) {
				case *pb.ChatEvent_ToolInputDelta:
					joined += v.ToolInputDelta.GetDelta()
				case *pb.ChatEvent_ToolInput:
					got = v.ToolInput.GetInput()
				}
			}}
			m.out = rec
			play(m, r, steps(pi(lines...)))
			var a, b any
			if err := json.Unmarshal([]byte(joined), &a); err != nil {
				t.Fatalf("size %d kit %t: joined deltas %q do not parse: %v", size, kit, joined, err)
			}
			if err := json.Unmarshal(got, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("size %d kit %t: joined deltas %s, input %s", size, kit, joined, got)
			}
		}
	}
}

// captureOut sees every chat chunk before the recorder writes it down.
type captureOut struct {
	*recorder
	chunk func(pb.ChatChunk)
}

func (c *captureOut) Emit(ev *pb.Event, sticky string) {
	if ch := ev.GetChat(); ch != nil {
		c.chunk(ch.GetChunk())
	}
	c.recorder.Emit(ev, sticky)
}
