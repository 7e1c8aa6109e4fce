package agui

import (
	"encoding/json"
	"testing"
)

// Each dialog is an interrupt whose responseSchema is the body POST
// …/ui-response takes without its id: {"confirmed": bool} for confirm,
// {"value": "…"} for input and editor (any text) and select (an option).
func TestInterruptOfEachDialog(t *testing.T) {
	for _, c := range []struct {
		in   Interrupt
		want string
	}{
		{Interrupt{ID: "c", Method: "confirm", Title: "Delete it?", Message: "It cannot be undone."},
			`{"id":"c","reason":"confirm","message":"Delete it?\n\nIt cannot be undone.",` +
				`"responseSchema":{"type":"object","properties":{"confirmed":{"type":"boolean"}},"required":["confirmed"],"additionalProperties":false},` +
				`"metadata":{"surfaced":{"method":"confirm","title":"Delete it?","message":"It cannot be undone."}}}`},
		{Interrupt{ID: "i", Method: "input", Title: "Your name"},
			`{"id":"i","reason":"input","message":"Your name",` +
				`"responseSchema":{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false},` +
				`"metadata":{"surfaced":{"method":"input","title":"Your name"}}}`},
		{Interrupt{ID: "e", Method: "editor"},
			`{"id":"e","reason":"editor",` +
				`"responseSchema":{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false},` +
				`"metadata":{"surfaced":{"method":"editor"}}}`},
		{Interrupt{ID: "s", Method: "select", Title: "Pick", Options: []string{"a", "b"}},
			`{"id":"s","reason":"select","message":"Pick",` +
				`"responseSchema":{"type":"object","properties":{"value":{"type":"string","enum":["a","b"]}},"required":["value"],"additionalProperties":false},` +
				`"metadata":{"surfaced":{"method":"select","title":"Pick","options":["a","b"]}}}`},
	} {
		got := appendInterrupt(nil, c.in)
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in.Method, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", c.in.Method, got)
		}
		if !IsDialog(c.in.Method) {
			t.Errorf("%s is not a dialog", c.in.Method)
		}
	}
	for _, m := range []string{"notify", "setStatus", "setWidget", ""} {
		if IsDialog(m) {
			t.Errorf("%q is a dialog", m)
		}
	}
}
