package surface

import (
	"encoding/json"
	"testing"

	"github.com/surfaced/surfaced/agentproc"
)

// TestArgsSchemas: declared schemas compile (an object schema, or it is
// refused and its action takes anything), and Check refuses args that do
// not fit with invalid_args, absent args being {}.
func TestArgsSchemas(t *testing.T) {
	s, bad := CompileSchemas(map[string][]byte{
		"rotate": []byte(`{"type":"object","properties":{"degrees":{"type":"number","minimum":-360,"maximum":360}},"required":["degrees"],"additionalProperties":false}`),
		"scalar": []byte(`{"type":"number"}`),
		"broken": []byte(`{"type":`),
	})
	if len(bad) != 2 || bad["scalar"] == nil || bad["broken"] == nil {
		t.Fatalf("refused schemas: %v", bad)
	}
	for _, c := range []struct {
		action, args string
		ok           bool
	}{
		{"rotate", `{"degrees":90}`, true},
		{"rotate", `{"degrees":"ninety"}`, false},
		{"rotate", `{"degrees":720}`, false},
		{"rotate", `{}`, false},
		{"rotate", ``, false},
		{"rotate", `null`, false},
		{"rotate", `{"degrees":90,"extra":1}`, false},
		{"rotate", `[1]`, false},
		{"rotate", `{not json`, false},
		{"scalar", `"anything"`, true},
		{"undeclared", `{"x":1}`, true},
	} {
		e := s.Check("img", c.action, json.RawMessage(c.args))
		if (e == nil) != c.ok {
			t.Errorf("%s %s: %v, want ok=%v", c.action, c.args, e, c.ok)
		}
		if e != nil && e.Code != agentproc.CodeInvalidArgs {
			t.Errorf("%s %s: code %s", c.action, c.args, e.Code)
		}
	}
	var none ArgsSchemas
	if e := none.Check("img", "rotate", json.RawMessage(`{"degrees":"x"}`)); e != nil {
		t.Errorf("no schemas: %v", e)
	}
}
