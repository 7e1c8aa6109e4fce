package agentproc

import (
	"strings"
	"testing"
)

func TestEachMember(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // key=value|…, escaped keys marked with !
		ok   bool
	}{
		{`{}`, ``, true},
		{` { } `, ``, true},
		{`{"a":1}`, `a=1|`, true},
		{" {\"a\" : {\"b\":[1,2]} ,\t\"c\":\"x\\\"y\" }\r ", `a={"b":[1,2]}|c="x\"y"|`, true},
		{`{"a":1,"a":null}`, `a=1|a=null|`, true},
		{`{"\u0061":true}`, `\u0061!=true|`, true},
		{`[]`, ``, false},
		{`"a"`, ``, false},
		{``, ``, false},
		{`{"a":1`, `a=1|`, false},
		{`{"a":1}x`, `a=1|`, false},
		{`{"a":1}}`, `a=1|`, false},
		{`{"a":}`, ``, false},
		{`{"a" 1}`, ``, false},
		{`{a:1}`, ``, false},
		{`{"a":1,}`, `a=1|`, false},
		{`{"a":[1,}`, ``, false},
	} {
		var got strings.Builder
		ok := EachMember([]byte(tc.in), func(key []byte, escaped bool, value []byte) bool {
			got.Write(key)
			if escaped {
				got.WriteByte('!')
			}
			got.WriteByte('=')
			got.Write(value)
			got.WriteByte('|')
			return true
		})
		if ok != tc.ok || got.String() != tc.want {
			t.Errorf("%q: got %v %q, want %v %q", tc.in, ok, got.String(), tc.ok, tc.want)
		}
	}
	// fn stops the walk.
	n := 0
	if EachMember([]byte(`{"a":1,"b":2,"c":3}`), func([]byte, bool, []byte) bool { n++; return n < 2 }) || n != 2 {
		t.Errorf("stop: ok after %d members", n)
	}
	// A value cannot be grown into the bytes after it.
	line := []byte(`{"a":[1],"b":2}`)
	EachMember(line, func(key []byte, _ bool, v []byte) bool {
		if string(key) == "a" {
			_ = append(v, 'x')
		}
		return true
	})
	if string(line) != `{"a":[1],"b":2}` {
		t.Errorf("append through a value changed the line: %s", line)
	}
}

func BenchmarkEachMember(b *testing.B) {
	line := []byte(`{"type":"surface_dispatch_result","id":"demo#12","result":{"ok":true,"data":{"count":12}},"state":{"count":12,"log":["a","b","c"]}}`)
	b.ReportAllocs()
	for b.Loop() {
		EachMember(line, func([]byte, bool, []byte) bool { return true })
	}
}
