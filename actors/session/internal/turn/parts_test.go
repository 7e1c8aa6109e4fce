package turn

import "testing"

func TestParts(t *testing.T) {
	begin := steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart()), forget())
	chat := []string{"chat", "transcript"}
	runScenarios(t, []scenario{{
		name: "thinking and text parts have their own ids",
		steps: steps(begin, pi(thinking("start", 0, ""), thinking("delta", 0, "hmm"), textStart(1), textDelta(1, "an"), textDelta(1, "swer"),
			thinking("end", 0, ""), textEnd(1)),
			pi(run(ev{"role": "assistant", "stopReason": "stop", "content": []ev{{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "answer"}}})[3:]...)),
		only: chat,
		want: []string{
			`chat {"type":"reasoning-start","id":"1-1-r0"}`,
			`chat {"type":"reasoning-delta","id":"1-1-r0","delta":"hmm"}`,
			`chat {"type":"text-start","id":"1-1-t1"}`,
			`chat {"type":"text-delta","id":"1-1-t1","delta":"an"}`,
			`chat {"type":"text-delta","id":"1-1-t1","delta":"swer"}`,
			`chat {"type":"reasoning-end","id":"1-1-r0"}`,
			`chat {"type":"text-end","id":"1-1-t1"}`,
			`transcript thinking "hmm" turn=1`,
			`transcript assistant "answer" turn=1`,
			`chat {"type":"finish-step"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}, {
		name: "parts the agent did not close close at message_end, in the order they opened",
		steps: steps(begin, pi(textDelta(1, "b"), thinking("delta", 0, "a"),
			ev{"type": "message_end", "message": ev{"role": "assistant", "stopReason": "stop", "content": "final text"}})),
		only: chat,
		want: []string{
			`chat {"type":"text-start","id":"1-1-t1"}`,
			`chat {"type":"text-delta","id":"1-1-t1","delta":"b"}`,
			`chat {"type":"reasoning-start","id":"1-1-r0"}`,
			`chat {"type":"reasoning-delta","id":"1-1-r0","delta":"a"}`,
			`chat {"type":"text-end","id":"1-1-t1"}`,
			`chat {"type":"reasoning-end","id":"1-1-r0"}`,
			// The final message is the transcript's truth, not the deltas.
			`transcript assistant "final text" turn=1`,
		},
	}, {
		name:  "parts close at turn_end without message_end",
		steps: steps(begin, pi(textDelta(0, "x"), ev{"type": "turn_end"})),
		only:  chat,
		want: []string{
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"x"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`chat {"type":"finish-step"}`,
		},
	}, {
		name: "each assistant message of a turn numbers its parts; tool results are not assistant messages",
		steps: steps(begin, pi(textDelta(0, "let me look"),
			ev{"type": "message_end", "message": assistant("toolUse", "", "let me look")},
			ev{"type": "message_start", "message": ev{"role": "toolResult", "toolCallId": "c1"}},
			ev{"type": "message_end", "message": ev{"role": "toolResult", "toolCallId": "c1", "content": []ev{{"type": "text", "text": "files"}}}},
			messageStart(), textDelta(0, "done"))),
		only: chat,
		want: []string{
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"let me look"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "let me look" turn=1`,
			`chat {"type":"text-start","id":"1-2-t0"}`,
			`chat {"type":"text-delta","id":"1-2-t0","delta":"done"}`,
		},
	}, {
		name:  "an ended part that gets more text starts again",
		steps: steps(begin, pi(textStart(0), textStart(0), textDelta(0, "a"), textEnd(0), textEnd(0), textDelta(0, "b"))),
		only:  chat,
		want: []string{
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"a"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"b"}`,
		},
	}, {
		name:  "deltas outside a turn are dropped",
		steps: steps(ready(), pi(textDelta(0, "stray"), thinking("delta", 0, "stray"))),
		want:  nil,
	}, {
		name:  "what a turn said is kept when it ends without message_end",
		steps: steps(begin, pi(thinking("delta", 0, "hm"), textDelta(1, "partial")), refusedBy("late refusal")),
		only:  chat,
		want: []string{
			`chat {"type":"reasoning-start","id":"1-1-r0"}`,
			`chat {"type":"reasoning-delta","id":"1-1-r0","delta":"hm"}`,
			`chat {"type":"text-start","id":"1-1-t1"}`,
			`chat {"type":"text-delta","id":"1-1-t1","delta":"partial"}`,
			`chat {"type":"reasoning-end","id":"1-1-r0"}`,
			`chat {"type":"text-end","id":"1-1-t1"}`,
			`transcript thinking "hm" turn=1`,
			`transcript assistant "partial" turn=1`,
			`chat {"type":"error","errorText":"late refusal"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		},
	}})
}

// Runs that fail: a message cut short (no text_end) still closes its part;
// the failing message's error is the turn's one error.
func TestFailedRuns(t *testing.T) {
	errorsOnly := []string{`chat {"type":"error"`, `chat {"type":"finish"`, `chat {"type":"text-`, `call`}
	finishErr := `chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`
	runScenarios(t, []scenario{{
		name:  "a cut message",
		steps: steps(ready(), prompt("cut"), accepted(), state(true), pi(run(assistant("error", "terminated", "par"), "par")...), state(false)),
		only:  errorsOnly,
		want: []string{
			`call {"id":"turn.prompt.1","type":"prompt","message":"cut"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"par"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			// The failed run is settled: does a retry follow?
			`call {"id":"turn.settle.3","type":"get_state"}`,
			`chat {"type":"error","errorText":"The model request failed: terminated"}`,
			finishErr,
		},
	}, {
		name: "the error event of the stream when agent_end says nothing",
		steps: steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, messageStart(),
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "error", "reason": "error", "error": ev{"role": "assistant", "errorMessage": "  socket hang up "}}},
			ev{"type": "agent_end"}), stateUnknown()),
		only: errorsOnly,
		want: []string{
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`call {"id":"turn.settle.3","type":"get_state"}`,
			`chat {"type":"error","errorText":"The model request failed: socket hang up"}`,
			finishErr,
		},
	}, {
		name: "a stream aborted by the agent itself answers cancelled",
		steps: steps(ready(), prompt("hi"), accepted(), pi(ev{"type": "agent_start"}, messageStart(),
			ev{"type": "message_update", "assistantMessageEvent": ev{"type": "error", "reason": "aborted"}}, ev{"type": "agent_end"})),
		only: []string{`chat {"type":"finish"`, `chat {"type":"abort"`},
		want: []string{`chat {"type":"abort"}`, `chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"cancelled"}}`},
	}, {
		name:  "an error without a message",
		steps: steps(ready(), prompt("hi"), accepted(), pi(run(assistant("error", "", ""))...), state(false)),
		only:  []string{`chat {"type":"error"`},
		want:  []string{`chat {"type":"error","errorText":"The model request failed: the model failed without saying why"}`},
	}, {
		name:  "the barrier says a run is streaming: wait for its end",
		steps: steps(ready(), prompt("hi"), accepted(), pi(run(assistant("error", "503", ""))...), state(true), pi(run(assistant("stop", "", "ok"), "ok")...)),
		only:  []string{`chat {"type":"error"`, `chat {"type":"finish"`},
		want:  []string{`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`},
	}, {
		name:  "a barrier the agent could not answer (it exited) waits for the exit",
		steps: steps(ready(), prompt("hi"), accepted(), pi(run(assistant("error", "503", ""))...), reply("turn.settle.3", "", true), gone("exit code 1")),
		only:  []string{`chat {"type":"error"`, `chat {"type":"finish"`},
		want: []string{
			`chat {"type":"error","errorText":"The agent stopped during the turn (exit code 1)."}`,
			finishErr,
		},
	}})
}
