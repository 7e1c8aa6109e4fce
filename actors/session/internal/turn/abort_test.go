package turn

import "testing"

func TestAbort(t *testing.T) {
	partial := []any{ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart(), textDelta(0, "par")}
	aborted := assistant("aborted", "", "par")
	cancelled := `chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"cancelled"}}`
	runScenarios(t, []scenario{{
		name:  "nothing runs",
		steps: steps(ready(), abort()),
		want:  []string{`abort idle`},
	}, {
		name: "the agent ends the run it was told to abort",
		steps: steps(ready(), prompt("hi"), accepted(), pi(partial...), abort(), abort(),
			pi(ev{"type": "message_end", "message": aborted}, ev{"type": "turn_end"}, ev{"type": "agent_end", "messages": []any{aborted}})),
		want: lines(startedAt(1, 1, "hi", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"par"}`,
			`send {"id":"turn.abort.3","type":"abort"}`,
			`grace 1`,
			`abort busy`,
			`abort busy`, // told once
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "par" turn=1`,
			`chat {"type":"finish-step"}`,
			`status busy=false queued=0`,
			`chat {"type":"abort"}`,
			cancelled,
		}),
	}, {
		name:  "cancelled wins over a run that ends well",
		steps: steps(ready(), prompt("hi"), accepted(), pi(partial...), abort(), pi(run(assistant("stop", "", "done"))[3:]...)),
		only:  []string{`chat {"type":"abort"`, `chat {"type":"finish"`, `chat {"type":"error"`},
		want:  []string{`chat {"type":"abort"}`, cancelled},
	}, {
		name: "cancelled wins over a run that fails",
		steps: steps(ready(), prompt("hi"), accepted(), pi(partial...), abort(),
			pi(run(assistant("error", "Request was aborted", ""))[3:]...), state(false)),
		only: []string{`chat {"type":"abort"`, `chat {"type":"finish"`, `chat {"type":"error"`, `call`},
		want: []string{
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"abort"}`,
			cancelled,
		},
	}, {
		name: "an abort during a retry's wait ends the turn cancelled",
		steps: steps(ready(), prompt("hi"), accepted(), pi(run(assistant("error", "503 overloaded", ""))...),
			pi(ev{"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "503 overloaded"}),
			state(false), abort(),
			pi(ev{"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})),
		only: []string{`chat {"type":"abort"`, `chat {"type":"finish"`, `chat {"type":"error"`, `send`},
		want: []string{`send {"id":"turn.abort.4","type":"abort"}`, `chat {"type":"abort"}`, cancelled},
	}, {
		name: "an abort before the run began cancels the run too",
		steps: steps(ready(), prompt("hi"), abort(), accepted(), state(true),
			pi(ev{"type": "agent_start"}), pi(run(aborted)[1:]...)),
		only: []string{`send`, `call`, `chat {"type":"abort"`, `chat {"type":"finish"`},
		want: []string{
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
			`send {"id":"turn.abort.2","type":"abort"}`,
			`call {"id":"turn.settle.3","type":"get_state"}`,
			`send {"id":"turn.abort.4","type":"abort"}`,
			`chat {"type":"abort"}`,
			cancelled,
		},
	}, {
		name: "the grace ends a cancelled turn the agent does not end",
		steps: steps(ready(), prompt("hi"), accepted(), pi(partial...), abort(),
			graceExpired(7), // not this turn
			graceExpired(1),
			graceExpired(1), // ended already
			pi(run(aborted)[4:]...)),
		want: lines(startedAt(1, 1, "hi", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"par"}`,
			`send {"id":"turn.abort.3","type":"abort"}`,
			`grace 1`,
			`abort busy`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "par" turn=1`,
			`status busy=false queued=0`,
			`chat {"type":"abort"}`,
			cancelled,
			// The agent's late end of the run opens nothing.
		}),
	}, {
		name:  "the grace of a turn that was not aborted does nothing",
		steps: steps(ready(), prompt("hi"), graceExpired(1)),
		want:  startedAt(1, 1, "hi", 1),
	}, {
		name:  "the agent's refusal of an aborted prompt is an error",
		steps: steps(ready(), prompt("hi"), abort(), refusedBy("aborted before start")),
		only:  []string{`chat {"type":"abort"`, `chat {"type":"finish"`, `chat {"type":"error"`},
		want: []string{
			`chat {"type":"error","errorText":"aborted before start"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		},
	}, {
		name: "an abort withdraws the turn's dialogs",
		steps: steps(ready(), prompt("hi"), accepted(),
			pi(ev{"type": "extension_ui_request", "id": "d1", "method": "confirm", "title": "Run?"}), abort()),
		only: []string{`send`, `unstick`, `ui`, `grace`, `abort`},
		want: []string{
			`ui ui:d1 {"id":"d1","method":"confirm","title":"Run?"}`,
			`send {"type":"extension_ui_response","id":"d1","cancelled":true}`,
			`unstick ui:d1`,
			`ui - {"id":"d1","method":"confirm","resolved":true}`,
			`send {"id":"turn.abort.3","type":"abort"}`,
			`grace 1`,
			`abort busy`,
		},
	}})
}

func TestAgentLifecycle(t *testing.T) {
	partial := []any{ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart(), textDelta(0, "par")}
	runScenarios(t, []scenario{{
		name: "the agent exits mid-turn; the queue waits for the next agent",
		steps: steps(ready(), prompt("hi"), accepted(), pi(partial...), prompt("next"),
			pi(ev{"type": "extension_ui_request", "id": "d1", "method": "input", "title": "Name?"}),
			gone("exit code 1"), ready()),
		want: lines(startedAt(1, 1, "hi", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"par"}`,
			`record user "next" turn=0 prompt=2 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":2,"text":"next","via":"browser","queued":true}}`,
			`status busy=true queued=1`,
			`prompt 2 queued`,
			`ui ui:d1 {"id":"d1","method":"input","title":"Name?"}`,
			// Dialogs are withdrawn first (the session drops the answer: no agent).
			`send {"type":"extension_ui_response","id":"d1","cancelled":true}`,
			`unstick ui:d1`,
			`ui - {"id":"d1","method":"input","resolved":true}`,
			`chat {"type":"error","errorText":"The agent stopped during the turn (exit code 1)."}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "par" turn=1`,
			`status busy=false queued=1`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
			// The restarted agent answers the queue.
			`transcript user "next" turn=2 prompt=2 via=browser`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-2","messageMetadata":{"turnId":2,"promptIds":[2]}}`,
			`call {"id":"turn.prompt.3","type":"prompt","message":"next"}`,
		}),
	}, {
		// The user asked to stop, and it stopped: cancelled, as ACP requires
		// of session/cancel, not a failure.
		name:  "an agent that exits during an aborted turn ends it cancelled",
		steps: steps(ready(), prompt("hi"), accepted(), abort(), gone("signal killed")),
		only:  []string{`chat {"type":"abort"`, `chat {"type":"finish"`, `chat {"type":"error"`},
		want: []string{
			`chat {"type":"abort"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"cancelled"}}`,
		},
	}, {
		name:  "an agent that exits between turns changes nothing",
		steps: steps(ready(), gone("exit code 2"), prompt("hi")),
		want: []string{
			`record user "hi" turn=0 prompt=1 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"hi","via":"browser","queued":true}}`,
			`status busy=false queued=1`,
			`prompt 1 queued`,
		},
	}, {
		name: "the session closes mid-turn with a queue",
		steps: steps(ready(), pi(ev{"type": "extension_ui_request", "id": "d0", "method": "confirm"}),
			prompt("hi"), accepted(), pi(partial...), prompt("next"),
			pi(ev{"type": "extension_ui_request", "id": "d1", "method": "select", "options": []string{"a"}}),
			closeAs("the session ended"), stoppedAndGone()),
		want: lines([]string{`ui ui:d0 {"id":"d0","method":"confirm"}`}, startedAt(1, 1, "hi", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"par"}`,
			`record user "next" turn=0 prompt=2 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":2,"text":"next","via":"browser","queued":true}}`,
			`status busy=true queued=1`,
			`prompt 2 queued`,
			`ui ui:d1 {"id":"d1","method":"select","options":["a"]}`,
			// The running turn closes as cancelled, what it said is kept;
			// its dialog is withdrawn (the session drops the answer: the
			// agent is stopped).
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "par" turn=1`,
			`send {"type":"extension_ui_response","id":"d1","cancelled":true}`,
			`unstick ui:d1`,
			`ui - {"id":"d1","method":"select","resolved":true}`,
			`status busy=false queued=1`,
			`chat {"type":"abort"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"cancelled"}}`,
			// The queue is answered: not answered.
			`chat {"type":"start","messageId":"turn-2","messageMetadata":{"turnId":2,"promptIds":[2]}}`,
			`chat {"type":"error","errorText":"The message was not answered: the session ended."}`,
			`chat {"type":"finish","messageMetadata":{"turnId":2,"promptIds":[2],"stopReason":"cancelled"}}`,
			`status busy=false queued=0`,
			// The agent's exit, on purpose, withdraws the other dialogs and
			// ends nothing more.
			`send {"type":"extension_ui_response","id":"d0","cancelled":true}`,
			`unstick ui:d0`,
			`ui - {"id":"d0","method":"confirm","resolved":true}`,
		}),
	}, {
		name:  "closing an idle session with nothing queued says nothing",
		steps: steps(ready(), closeAs("the session was put to sleep (idle)")),
		want:  nil,
	}, {
		name:  "a prompt after close waits for a new agent",
		steps: steps(ready(), closeAs("the session ended"), prompt("hi")),
		only:  []string{"prompt", "call"},
		want:  []string{`prompt 1 queued`},
	}, {
		name: "dialogs outside a turn are withdrawn when the agent exits, not when a turn ends",
		steps: steps(ready(), pi(ev{"type": "extension_ui_request", "id": "d0", "method": "editor", "title": "Notes"}),
			prompt("hi"), refusedBy("no"), gone("exit code 1")),
		only: []string{`ui`, `unstick`, `send`, `chat {"type":"finish"`},
		want: []string{
			`ui ui:d0 {"id":"d0","method":"editor","title":"Notes"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
			`send {"type":"extension_ui_response","id":"d0","cancelled":true}`,
			`unstick ui:d0`,
			`ui - {"id":"d0","method":"editor","resolved":true}`,
		},
	}})
}

func TestAgentStoppedHoldsPrompts(t *testing.T) {
	m, r := newMachine(t, Config{})
	play(m, r, steps(ready(), func(m *Machine, r *recorder) { m.AgentStopped() }, prompt("hi")))
	check(t, r.lines, []string{
		`record user "hi" turn=0 prompt=1 via=browser`,
		`chat {"type":"data-user-message","data":{"promptId":1,"text":"hi","via":"browser","queued":true}}`,
		`status busy=false queued=1`,
		`prompt 1 queued`,
	})
	if m.Busy() || m.Queued() != 1 {
		t.Fatalf("busy %t queued %d", m.Busy(), m.Queued())
	}
}
