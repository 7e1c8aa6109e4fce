package turn

import (
	"strings"
	"testing"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func lost(id, why string) step {
	return func(m *Machine, r *recorder) { m.Lost(promptID(m, id), why) }
}

func lostBarrier(why string) step {
	return func(m *Machine, r *recorder) { m.Lost(settleID(m, ""), why) }
}

func TestPromptBounds(t *testing.T) {
	runScenarios(t, []scenario{{
		name: "a prompt over PromptBytes is refused, images counted",
		cfg:  Config{PromptBytes: 10, Images: func() bool { return true }},
		steps: steps(prompt(strings.Repeat("<", 11)), prompt(strings.Repeat("<", 10)),
			promptFull(Prompt{Text: "abc", Images: []*pb.Image{{MimeType: "image/png", Data: "AAAA"}}})),
		only: []string{"prompt", "refused"},
		want: []string{`refused too_large`, `prompt 1 queued`, `refused too_large`},
	}, {
		name:  "the inbox is bounded in bytes",
		cfg:   Config{PromptBytes: 10, InboxBytes: 25},
		steps: steps(prompt("0123456789"), prompt("0123456789"), prompt("012345"), prompt("01234"), prompt("0")),
		only:  []string{"prompt", "refused"},
		want:  []string{`prompt 1 queued`, `prompt 2 queued`, `refused inbox_full`, `prompt 3 queued`, `refused inbox_full`},
	}, {
		name: "one prompt command carries at most PromptBytes: the rest waits for the next turn",
		cfg:  Config{PromptBytes: 10},
		steps: steps(prompt("aaaa"), prompt("bbbb"), prompt("cc"), prompt("dddd"), forget(), ready(),
			accepted(), pi(run(assistant("stop", "", "ok"))...)),
		only: []string{"call", "status", `chat {"type":"start"`},
		want: []string{
			`status busy=true queued=1`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1,2,3]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"aaaa\n\nbbbb\n\ncc"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`status busy=false queued=1`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-2","messageMetadata":{"turnId":2,"promptIds":[4]}}`,
			`call {"id":"turn.prompt.3","type":"prompt","message":"dddd"}`,
		},
	}})
}

// A command the agent will not answer although it runs (not written, or
// its answer too long to keep) ends the turn with an error at once.
func TestLostCommands(t *testing.T) {
	finishErr := `chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`
	runScenarios(t, []scenario{{
		name:  "the prompt was not written",
		steps: steps(ready(), prompt("hi"), lost("", "stdin queue full"), prompt("next")),
		only:  []string{`chat {"type":"error"`, `chat {"type":"finish"`, `status`, `call`},
		want: []string{
			`status busy=true queued=0`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
			`status busy=false queued=0`,
			`chat {"type":"error","errorText":"The prompt did not reach the agent: stdin queue full."}`,
			finishErr,
			`status busy=true queued=0`,
			`call {"id":"turn.prompt.2","type":"prompt","message":"next"}`,
		},
	}, {
		name:  "the barrier's answer was too long",
		steps: steps(ready(), prompt("hi"), accepted(), lostBarrier("the answer was over the line limit")),
		only:  []string{`chat {"type":"error"`, `chat {"type":"finish"`},
		want:  []string{`chat {"type":"error","errorText":"The agent's state could not be read: the answer was over the line limit."}`, finishErr},
	}, {
		name: "an id of no running command changes nothing",
		steps: steps(ready(), prompt("hi"), forget(), lost("turn.prompt.9", "x"), lost("turn.settle.1", "x"),
			func(m *Machine, r *recorder) { m.Lost("", "x") }, accepted()),
		only: []string{`chat {"type":"error"`, `chat {"type":"finish"`},
		want: []string{},
	}})
}
