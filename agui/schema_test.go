package agui

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// schemaCorpus are inputs on both sides of @ag-ui/core's RunAgentInputSchema.
var schemaCorpus = []string{
	`{"threadId":"t","runId":"r","messages":[]}`,
	`{"threadId":"t","runId":"r","messages":[],"state":null}`,
	`{"threadId":"t","runId":"r","messages":[],"state":{"entries":{}},"tools":[],"context":[],"forwardedProps":{"a":1},"extra":true}`,
	`{"threadId":"t","runId":"r","protocolVersion":"1.0","parentRunId":"p","messages":[
		{"id":"1","role":"developer","content":"be brief","name":"ops"},
		{"id":"2","role":"system","content":"sys"},
		{"id":"3","role":"user","content":[{"type":"text","text":"hi","id":"p1","metadata":{"x":1}},
			{"type":"image","source":{"type":"url","value":"https://x/y.png"}},
			{"type":"document","source":{"type":"data","value":"aGk=","mimeType":"text/plain"},"metadata":{"filename":"a.txt"}},
			{"type":"audio","source":{"type":"file","value":"att_x","provider":"surfaced"}}]},
		{"id":"4","role":"assistant","content":"ok","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"id":"5","role":"tool","content":"done","toolCallId":"c","error":"no"},
		{"id":"6","role":"activity","activityType":"progress","content":{"step":1}},
		{"id":"7","role":"reasoning","content":"hmm"}],
	  "tools":[{"name":"t","description":"d","parameters":{"type":"object"}}],
	  "context":[{"description":"d","value":"v"}],
	  "resume":[{"interruptId":"i","status":"resolved","payload":{"value":"x"},"metadata":{"k":"v"}},{"interruptId":"j","status":"cancelled"}]}`,
	`{"runId":"r","messages":[]}`,
	`{"threadId":"t","runId":7,"messages":[]}`,
	`{"threadId":"t","runId":"r"}`,
	`{"threadId":"t","runId":"r","messages":{}}`,
	`{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"robot","content":"x"}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user"}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":5}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"text"}]}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"image","source":{"type":"data","value":"aGk="}}]}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"image","source":{"type":"ftp","value":"x"}}]}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"text","text":"x","metadata":null}]}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"x","metadata":null}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"x","subagentRunId":null}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"assistant","toolCalls":[{"id":"c","type":"other","function":{"name":"f","arguments":"{}"}}]}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"tool","content":"x"}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"activity","activityType":"a","content":[1]}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"reasoning"}]}`,
	`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"developer","content":"x","name":null}]}`,
	`{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"t"}]}`,
	`{"threadId":"t","runId":"r","messages":[],"tools":null}`,
	`{"threadId":"t","runId":"r","messages":[],"context":[{"description":"d","value":3}]}`,
	`{"threadId":"t","runId":"r","messages":[],"forwardedProps":null}`,
	`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"maybe"}]}`,
	`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"resolved","payload":null}]}`,
	`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"resolved","metadata":[]}]}`,
	`{"threadId":"t","runId":"r","messages":[],"protocolVersion":1}`,
	`{"threadId":"t","runId":"r","messages":[],"parentRunId":null}`,
}

// Decode refuses exactly what @ag-ui/core's own schema refuses, and names
// the field the schema names (or one below it).
func TestDecodeAgreesWithTheSchema(t *testing.T) {
	dir := testkit.NodeFixture(t, "ag-ui", "@ag-ui/core")
	var inputs []json.RawMessage
	for _, s := range schemaCorpus {
		inputs = append(inputs, json.RawMessage(s))
	}
	file := filepath.Join(t.TempDir(), "inputs.json")
	data, _ := json.Marshal(inputs)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "scenarios.mjs", "schema", file)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v %s", err, out)
	}
	var res struct {
		Verdicts []struct {
			OK   bool   `json:"ok"`
			Path string `json:"path"`
		} `json:"verdicts"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Verdicts) != len(schemaCorpus) {
		t.Fatalf("verdicts %s: %v", out, err)
	}
	for i, in := range schemaCorpus {
		v := res.Verdicts[i]
		_, err := Decode([]byte(in))
		var fe *FieldError
		switch {
		case v.OK && err != nil:
			t.Errorf("input %d: the schema takes it, Decode refuses it: %v\n%s", i, err, in)
		case !v.OK && err == nil:
			t.Errorf("input %d: the schema refuses it at %q, Decode takes it\n%s", i, v.Path, in)
		case !v.OK && !errors.As(err, &fe):
			t.Errorf("input %d: %v is not a FieldError", i, err)
		case !v.OK:
			want := jsPath(v.Path)
			if fe.Field != want && !strings.HasPrefix(fe.Field, want+".") && !strings.HasPrefix(fe.Field, want+"[") {
				t.Errorf("input %d: Decode names %q, the schema %q\n%s", i, fe.Field, want, in)
			}
		}
	}
}

// jsPath writes zod's path (messages.0.content) as Decode names fields
// (messages[0].content).
func jsPath(p string) string {
	var b strings.Builder
	for i, seg := range strings.Split(p, ".") {
		if _, err := strconv.Atoi(seg); err == nil && i > 0 {
			b.WriteString("[" + seg + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
