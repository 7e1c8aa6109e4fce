package surface

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Lines the in-place reading must read as encoding/json does, including every
// case it hands to encoding/json.
var dispatchResultSeeds = []string{
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true},"state":{"count":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"data":{"count":1}},"state":{"items":["milk"]}}`,
	`{"type":"surface_dispatch_result","id":"d#2","result":{"ok":false,"error":{"code":"invalid_args","message":"add needs {\"text\": \"...\"}"}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true},"state":null}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"data":null}}`,
	`{"type":"surface_dispatch_result","id":"d#1","state":{"a":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":null,"state":{"a":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":[],"state":{"a":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":"ok"}`,
	` {"id":"d#1" , "result" : { "ok" : true , "data" : [ 1 , 2 ] } , "state" : { "x" : "\r" } ,"type":"surface_dispatch_result"} `,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true},"result":{"ok":false,"error":{"code":"x"}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true},"state":{"a":1},"state":{"b":2}}`,
	`{"type":"surface_dispatch_result","id":"d#1","Result":{"ok":true}}`,
	`{"type":"surface_dispatch_result","id":"d#1","RESULT":{"ok":true},"result":{"ok":false}}`,
	`{"type":"surface_dispatch_result","id":"d#1","STATE":{"a":1},"result":{"ok":true}}`,
	`{"type":"surface_dispatch_result","id":"d#1","resul\u0074":{"ok":true}}`,
	"{\"type\":\"surface_dispatch_result\",\"id\":\"d#1\",\"r\u00e9sult\":{\"ok\":true}}",
	`{"type":"surface_dispatch_result","id":"d#1","Type":1,"result":{"ok":true}}`,
	`{"type":"surface_dispatch_result","id":7,"id":"d#1","result":{"ok":true}}`,
	`{"type":"surface_dispatch_result","id":null,"id":"d#1","result":{"ok":true}}`,
	`{"type":"surface_dispatch_result","id":"d#1","other":{"result":1},"result":{"ok":true}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"OK":false}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"ok":false}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"ok":null}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"Ok":true}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"o\u006b":true}}`,
	"{\"type\":\"surface_dispatch_result\",\"id\":\"d#1\",\"result\":{\"o\u212a\":true}}",
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"a"},"error":{"message":"m"}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"a","code":"b"}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"a","code":null}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"CODE":"a"}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"a","Message":"m"}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"\u00e9\n","message":"a\"b\u2028"}}}`,
	"{\"type\":\"surface_dispatch_result\",\"id\":\"d#1\",\"result\":{\"ok\":false,\"error\":{\"code\":\"a\xff\",\"message\":\"\xc3\"}}}",
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":""}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":3}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":null}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"a","message":null}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":{"code":"a","message":5}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":"boom"}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false,"error":null}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":false}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"error":"boom"}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"error":{"code":1}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":"yes"}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":null,"data":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"data":1}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"data":"s","extra":{"ok":false}}}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true}} `,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true}`,
	`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true}}}`,
	`[1]`,
	``,
}

// The in-place reading of a dispatch result agrees with encoding/json's on
// every line: the result, the error's code and message, and the state. (The
// reader hands over only lines agentproc.DecodeEnvelope accepts; any other
// must agree too, by going to encoding/json.)
func FuzzParseDispatchResult(f *testing.F) {
	for _, s := range dispatchResultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, gotState := parseDispatchResult(line)
		want, wantState := parseDispatchResultJSON(line)
		if describe(got, gotState) != describe(want, wantState) {
			t.Fatalf("%q:\n in place   %s\n encoding/json %s", line, describe(got, gotState), describe(want, wantState))
		}
	})
}

func describe(r Result, state json.RawMessage) string {
	s := fmt.Sprintf("ok=%v data=%q(nil=%v) state=%q(nil=%v)", r.OK, r.Data, r.Data == nil, state, state == nil)
	if r.Err != nil {
		s += fmt.Sprintf(" err=%q/%q", r.Err.Code, r.Err.Message)
	}
	return s
}

// The result and the state of a plain answer are read in place: they share
// the line's memory, and reading allocates nothing but the error strings.
func TestParseDispatchResultInPlace(t *testing.T) {
	line := []byte(`{"type":"surface_dispatch_result","id":"d#1","result":{"ok":true,"data":{"n":1}},"state":{"n":1}}`)
	var res Result
	var state json.RawMessage
	allocs := testing.AllocsPerRun(100, func() { res, state = parseDispatchResult(line) })
	if string(res.Data) != `{"n":1}` || string(state) != `{"n":1}` || !res.OK {
		t.Fatalf("got %s", describe(res, state))
	}
	if allocs != 0 {
		t.Errorf("%v allocations reading a plain answer, want 0", allocs)
	}
	if cap(res.Data) != len(res.Data) || cap(state) != len(state) {
		t.Errorf("a value can be appended to over the rest of the line")
	}
}

func BenchmarkParseDispatchResult(b *testing.B) {
	line := []byte(`{"type":"surface_dispatch_result","id":"demo#12","result":{"ok":true,"data":{"count":12}},"state":{"count":12,"log":["a","b","c"]}}`)
	b.Run("in-place", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseDispatchResult(line)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parseDispatchResultJSON(line)
		}
	})
}
