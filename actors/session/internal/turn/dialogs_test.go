package turn

import "testing"

func TestDialogs(t *testing.T) {
	sel := ev{"type": "extension_ui_request", "id": "d1", "method": "select", "title": "Pick", "options": []string{"a", "b"}, "timeout": 5000}
	runScenarios(t, []scenario{{
		name:  "a select answered with a value",
		steps: steps(pi(sel), answer("d1", "value", "b", false), answer("d1", "value", "b", false)),
		want: []string{
			// The browser gets the request as the agent sent it, without its type.
			`ui ui:d1 {"id":"d1","method":"select","options":["a","b"],"timeout":5000,"title":"Pick"}`,
			`send {"type":"extension_ui_response","id":"d1","value":"b"}`,
			`unstick ui:d1`,
			`ui - {"id":"d1","method":"select","resolved":true}`,
			`refused unknown_ui_request`, // answered already
		},
	}, {
		name: "confirmed, denied and cancelled",
		steps: steps(pi(ev{"type": "extension_ui_request", "id": "c1", "method": "confirm"},
			ev{"type": "extension_ui_request", "id": "c2", "method": "confirm"},
			ev{"type": "extension_ui_request", "id": "i1", "method": "input"}),
			answer("c1", "confirmed", "", true), answer("c2", "confirmed", "", false), answer("i1", "", "", false)),
		only: []string{"send"},
		want: []string{
			`send {"type":"extension_ui_response","id":"c1","confirmed":true}`,
			`send {"type":"extension_ui_response","id":"c2","confirmed":false}`,
			`send {"type":"extension_ui_response","id":"i1","cancelled":true}`,
		},
	}, {
		name: "a dialog asked again under its id replaces the first",
		steps: steps(pi(sel, ev{"type": "extension_ui_request", "id": "d1", "method": "input", "title": "Other"}),
			answer("d1", "value", "x", false)),
		want: []string{
			`ui ui:d1 {"id":"d1","method":"select","options":["a","b"],"timeout":5000,"title":"Pick"}`,
			`ui ui:d1 {"id":"d1","method":"input","title":"Other"}`,
			`send {"type":"extension_ui_response","id":"d1","value":"x"}`,
			`unstick ui:d1`,
			`ui - {"id":"d1","method":"input","resolved":true}`,
		},
	}, {
		name: "notices",
		steps: steps(pi(
			ev{"type": "extension_ui_request", "id": "n1", "method": "setStatus", "statusKey": "git", "statusText": "clean"},
			ev{"type": "extension_ui_request", "id": "n2", "method": "setWidget", "widgetKey": "todo", "widgetLines": []string{"a"}},
			ev{"type": "extension_ui_request", "id": "n3", "method": "setTitle", "title": "Refactor"},
			ev{"type": "extension_ui_request", "id": "n4", "method": "setTitle"},
			ev{"type": "extension_ui_request", "id": "n5", "method": "notify", "message": "hi", "notifyType": "info"},
			ev{"type": "extension_ui_request", "method": "set_editor_text", "text": "x"},
		), answer("n5", "", "", false)),
		want: []string{
			`ui uistatus:git {"id":"n1","method":"setStatus","statusKey":"git","statusText":"clean"}`,
			`ui uiwidget:todo {"id":"n2","method":"setWidget","widgetKey":"todo","widgetLines":["a"]}`,
			`ui uititle {"id":"n3","method":"setTitle","title":"Refactor"}`,
			`title Refactor`,
			`ui uititle {"id":"n4","method":"setTitle"}`,
			`ui - {"id":"n5","message":"hi","method":"notify","notifyType":"info"}`,
			`ui - {"method":"set_editor_text","text":"x"}`,
			`refused unknown_ui_request`, // a notice waits for no answer
		},
	}, {
		name: "invalid requests",
		steps: steps(pi(`{"type":"extension_ui_request","id":"x1"}`, `{"type":"extension_ui_request","method":"confirm"}`,
			`{"type":"extension_ui_request","method":7}`)),
		want: []string{
			`invalid extension_ui_request without a method`,
			`invalid a dialog without an id cannot be answered`,
			`invalid extension_ui_request without a method`,
		},
	}, {
		name: "a turn's dialogs are withdrawn when it ends, in the order they were asked",
		steps: steps(ready(), prompt("hi"), accepted(),
			pi(ev{"type": "extension_ui_request", "id": "z", "method": "confirm"}, ev{"type": "extension_ui_request", "id": "a", "method": "input"}),
			pi(run(assistant("stop", "", ""))...)),
		only: []string{"send", "unstick", "ui", `chat {"type":"finish"`, "status"},
		want: []string{
			`status busy=true queued=0`,
			`ui ui:z {"id":"z","method":"confirm"}`,
			`ui ui:a {"id":"a","method":"input"}`,
			`send {"type":"extension_ui_response","id":"z","cancelled":true}`,
			`unstick ui:z`,
			`ui - {"id":"z","method":"confirm","resolved":true}`,
			`send {"type":"extension_ui_response","id":"a","cancelled":true}`,
			`unstick ui:a`,
			`ui - {"id":"a","method":"input","resolved":true}`,
			`status busy=false queued=0`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}})
}
