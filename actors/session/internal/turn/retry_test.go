package turn

import "testing"

// Runs that fail and what pi does next: a retry, an overflow compaction,
// nothing (in the order pi 0.73 writes its events: what follows agent_end
// comes before the barrier's answer).
func TestRetries(t *testing.T) {
	overflow := assistant("error", "context_length_exceeded: prompt is too long", "")
	failed := assistant("error", "503 overloaded", "")
	ok := assistant("stop", "", "after compaction")
	compactionStart := ev{"type": "compaction_start", "reason": "overflow"}
	retryStart := func(n int) ev {
		return ev{"type": "auto_retry_start", "attempt": n, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "503 overloaded"}
	}
	// begin: the prompt answered, its run started, the first barrier answered.
	begin := steps(ready(), prompt("go"), accepted(), pi(ev{"type": "agent_start"}), state(true))
	outcome := []string{`chat {"type":"error"`, `chat {"type":"finish"`, `chat {"type":"data-agent-event"`}
	runScenarios(t, []scenario{{
		name: "an overflow compaction that retries",
		steps: steps(begin, pi(run(overflow)[1:]...), pi(compactionStart), state(false),
			pi(ev{"type": "compaction_end", "reason": "overflow", "result": ev{"summary": "s"}, "aborted": false, "willRetry": true}),
			pi(run(ok, "after ", "compaction")...)),
		only: []string{"chat", "call"},
		want: []string{
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"go","via":"browser","queued":false}}`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"go"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"finish-step"}`,
			`call {"id":"turn.settle.3","type":"get_state"}`,
			`chat {"type":"data-agent-event","data":{"reason":"overflow","type":"compaction_start"},"transient":true}`,
			`chat {"type":"data-agent-event","data":{"aborted":false,"reason":"overflow","result":{"summary":"s"},"type":"compaction_end","willRetry":true},"transient":true}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-2-t0"}`,
			`chat {"type":"text-delta","id":"1-2-t0","delta":"after "}`,
			`chat {"type":"text-delta","id":"1-2-t0","delta":"compaction"}`,
			`chat {"type":"text-end","id":"1-2-t0"}`,
			`chat {"type":"finish-step"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}, {
		name: "an overflow compaction that fails: one error, the compaction's",
		steps: steps(begin, pi(run(overflow)[1:]...), pi(compactionStart), state(false),
			pi(ev{"type": "compaction_end", "reason": "overflow", "aborted": false, "willRetry": false, "errorMessage": "Context overflow recovery failed: quota"})),
		only: outcome,
		want: []string{
			`chat {"type":"data-agent-event","data":{"reason":"overflow","type":"compaction_start"},"transient":true}`,
			`chat {"type":"data-agent-event","data":{"aborted":false,"errorMessage":"Context overflow recovery failed: quota","reason":"overflow","type":"compaction_end","willRetry":false},"transient":true}`,
			`chat {"type":"error","errorText":"The model request failed: Context overflow recovery failed: quota"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		},
	}, {
		name: "an overflow compaction that fails without a message, the barrier answering late",
		steps: steps(begin, pi(run(overflow)[1:]...), pi(ev{"type": "auto_compaction_start", "reason": "overflow"}),
			pi(ev{"type": "auto_compaction_end", "reason": "overflow", "willRetry": false}), state(false)),
		only: []string{`chat {"type":"error"`, `chat {"type":"finish"`},
		want: []string{
			`chat {"type":"error","errorText":"The model request failed: context_length_exceeded: prompt is too long"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		},
	}, {
		name: "a compaction that does not follow a failed run keeps nothing open",
		steps: steps(begin, pi(ev{"type": "compaction_start", "reason": "manual"}, ev{"type": "compaction_end", "reason": "manual", "willRetry": false}),
			pi(run(assistant("stop", "", "x"))[1:]...), pi(ev{"type": "auto_compaction_start", "reason": "threshold"})),
		only: outcome,
		want: []string{
			`chat {"type":"data-agent-event","data":{"reason":"manual","type":"compaction_start"},"transient":true}`,
			`chat {"type":"data-agent-event","data":{"reason":"manual","type":"compaction_end","willRetry":false},"transient":true}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
			`chat {"type":"data-agent-event","data":{"reason":"threshold","type":"auto_compaction_start"},"transient":true}`,
		},
	}, {
		name: "willRetry on agent_end keeps the turn (a newer pi)",
		steps: steps(begin, pi(concat(run(failed)[1:5], []any{ev{"type": "agent_end", "messages": []any{failed}, "willRetry": true}})...),
			pi(run(assistant("stop", "", "ok"), "ok")...)),
		only: []string{`chat {"type":"error"`, `chat {"type":"finish"`, `chat {"type":"text-delta"`, `call`},
		want: []string{
			`call {"id":"turn.prompt.1","type":"prompt","message":"go"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"text-delta","id":"1-2-t0","delta":"ok"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}, {
		name: "a retry that succeeds",
		steps: steps(begin, pi(run(failed)[1:]...), pi(retryStart(1)), state(false),
			pi(concat(run(assistant("stop", "", "ok"), "ok")[:6], []any{ev{"type": "auto_retry_end", "success": true, "attempt": 1}}, run(ok)[5:])...)),
		only: outcome,
		want: []string{
			`chat {"type":"data-agent-event","data":{"attempt":1,"delayMs":2000,"errorMessage":"503 overloaded","maxAttempts":3,"type":"auto_retry_start"},"transient":true}`,
			`chat {"type":"data-agent-event","data":{"attempt":1,"success":true,"type":"auto_retry_end"},"transient":true}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}, {
		name: "retries that run out",
		steps: steps(begin, pi(run(failed)[1:]...), pi(retryStart(1)), state(false),
			pi(run(failed)...), pi(retryStart(2)), state(false),
			pi(run(failed)...), pi(ev{"type": "auto_retry_end", "success": false, "attempt": 2, "finalError": "503 overloaded"}), state(false)),
		only: []string{`chat {"type":"error"`, `chat {"type":"finish"`},
		want: []string{
			`chat {"type":"error","errorText":"The model request failed: 503 overloaded (after 2 retries)"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		},
	}, {
		name: "a retry that fails for good without auto_retry_end",
		steps: steps(begin, pi(run(failed)[1:]...), pi(retryStart(1)), state(false),
			pi(run(assistant("error", "400 bad request", ""))...), state(false)),
		only: []string{`chat {"type":"error"`},
		want: []string{`chat {"type":"error","errorText":"The model request failed: 400 bad request (after 1 retry)"}`},
	}, {
		name:  "a cancelled wait for a retry without a final error",
		steps: steps(begin, pi(run(failed)[1:]...), pi(retryStart(1)), state(false), pi(ev{"type": "auto_retry_end", "success": false, "attempt": 1})),
		only:  []string{`chat {"type":"error"`},
		want:  []string{`chat {"type":"error","errorText":"The model request failed: 503 overloaded (after 1 retry)"}`},
	}, {
		name: "retry events outside a turn are notices only",
		steps: steps(ready(), pi(ev{"type": "auto_retry_start", "attempt": 1}), pi(run(failed)...), stateUnknown(), forget(),
			pi(ev{"type": "auto_retry_end", "success": false, "attempt": 1})),
		want: []string{`chat {"type":"data-agent-event","data":{"attempt":1,"success":false,"type":"auto_retry_end"},"transient":true}`},
	}})
}
