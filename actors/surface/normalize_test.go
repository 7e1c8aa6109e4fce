package surface

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// The result normalization of docs/agent-protocol.md ("Surface domains"), for agent-hosted
// results (as an agent sends them) and native handlers (as Go returns them).
func TestNormalizeAgentResult(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		data string
		code string
	}{
		{`{"ok":true}`, true, "", ""},
		{`{"ok":true,"data":{"count":1}}`, true, `{"count":1}`, ""},
		{`{"ok":true,"data":null}`, true, "", ""},
		{`{"ok":true,"data":0}`, true, `0`, ""},
		{`{"ok":false,"error":{"code":"edit_failed","message":"no"}}`, false, "", "edit_failed"},
		{`{"ok":false,"error":{"code":"x"}}`, false, "", "x"},
		{`{"ok":false}`, false, "", "dispatch_failed"},
		{`{"ok":false,"error":{"message":"m"}}`, false, "", "dispatch_failed"},
		{`{"ok":false,"error":{"code":""}}`, false, "", "dispatch_failed"},
		{`{"ok":false,"error":{"code":3}}`, false, "", "dispatch_failed"},
		{`{"data":1}`, false, "", "dispatch_failed"},
		{`{"ok":"yes"}`, false, "", "dispatch_failed"},
		{`[]`, false, "", "dispatch_failed"},
		{`"ok"`, false, "", "dispatch_failed"},
		{``, false, "", "dispatch_failed"},
	} {
		r := NormalizeAgentResult(json.RawMessage(tc.in))
		code := ""
		if r.Err != nil {
			code = r.Err.Code
		}
		if r.OK != tc.ok || string(r.Data) != tc.data || code != tc.code {
			t.Errorf("%s: got ok=%v data=%s code=%s", tc.in, r.OK, r.Data, code)
		}
	}
}

func TestNativeNormalization(t *testing.T) {
	type S struct{ N int }
	d := Define("d", S{}, map[string]Command[S]{
		"value": func(*Ctx[S], json.RawMessage) (any, error) { return map[string]int{"a": 1}, nil },
		"nil":   func(*Ctx[S], json.RawMessage) (any, error) { return nil, nil },
		"coded": func(*Ctx[S], json.RawMessage) (any, error) { return nil, Errorf("edit_failed", "bad %d", 1) },
		"wrapped": func(*Ctx[S], json.RawMessage) (any, error) {
			return nil, fmt.Errorf("ctx: %w", &Error{"deep", "inner"})
		},
		"plain":   func(*Ctx[S], json.RawMessage) (any, error) { return nil, errors.New("boom") },
		"badjson": func(*Ctx[S], json.RawMessage) (any, error) { return make(chan int), nil },
		"typed": Typed(func(_ *Ctx[S], a struct {
			X int `json:"x"`
		}) (any, error) {
			return a.X, nil
		}),
	})
	in, err := d.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		action, args string
		ok           bool
		data, code   string
	}{
		{"value", "", true, `{"a":1}`, ""},
		{"nil", "", true, "", ""},
		{"coded", "", false, "", "edit_failed"},
		{"wrapped", "", false, "", "deep"},
		{"plain", "", false, "", "dispatch_failed"},
		{"badjson", "", false, "", "dispatch_failed"},
		{"typed", `{"x":2}`, true, `2`, ""},
		{"typed", `{"x":"2"}`, false, "", "invalid_args"},
		{"typed", `{"y":1}`, false, "", "invalid_args"},
		{"typed", `null`, true, `0`, ""},
		{"missing", "", false, "", "unknown_action"},
		{"toString", "", false, "", "unknown_action"},
	} {
		r, _ := in.Dispatch(tc.action, json.RawMessage(tc.args))
		code := ""
		if r.Err != nil {
			code = r.Err.Code
		}
		if r.OK != tc.ok || string(r.Data) != tc.data || code != tc.code {
			t.Errorf("%s(%s): got ok=%v data=%s code=%s", tc.action, tc.args, r.OK, r.Data, code)
		}
	}
}
