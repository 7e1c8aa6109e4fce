package agentproc

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// AppendSurfaceDispatch writes exactly what Marshal writes, and fails where it fails.
func FuzzAppendSurfaceDispatch(f *testing.F) {
	f.Add("demo#1", "demo", "increment", []byte(`{}`), []byte(`{"count":0,"log":[]}`), uint64(0), int64(1_780_000_000_123), true)
	f.Add("a\"b\\c\n\r\t\b\f\x01\x1f<>&", "d\u2028\u2029é", "\xff\xc3x", []byte(" { \"a\" : [ 1 , \"<&>\u2028\" ] }\r\n"), []byte(``), uint64(1<<63), int64(0), true)
	f.Add("", "", "", []byte(`{"a":`), []byte(`null`), uint64(7), int64(-62_200_000_000_000), true)
	f.Add("x", "y", "z", []byte(`1`), []byte(`[1,}`), uint64(7), int64(0), false)
	f.Add("x", "y", "z", []byte(`"s"`), []byte("\t1.5e3 "), uint64(7), int64(253_402_300_800_000), true)
	f.Fuzz(func(t *testing.T, id, domain, action string, args, state []byte, rev uint64, deadlineMs int64, hasDeadline bool) {
		m := SurfaceDispatch{Type: TypeSurfaceDispatch, ID: id, Domain: domain, Action: action, Args: args, State: state, Rev: rev}
		if hasDeadline {
			at := time.UnixMilli(deadlineMs).UTC()
			m.Deadline = &at
		}
		want, wantErr := Marshal(m)
		prefix := []byte("prefix")
		got, gotErr := AppendSurfaceDispatch(bytes.Clone(prefix), m)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("errors differ: Marshal %v, AppendSurfaceDispatch %v", wantErr, gotErr)
		}
		if wantErr != nil {
			if string(got) != "prefix" {
				t.Fatalf("on error dst changed: %q", got)
			}
			return
		}
		if !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("lines differ:\nMarshal               %s\nAppendSurfaceDispatch %s", want, got[len(prefix):])
		}
		if !json.Valid(want) {
			t.Fatalf("not JSON: %s", want)
		}
	})
}

func BenchmarkSurfaceDispatchLine(b *testing.B) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	m := SurfaceDispatch{Type: TypeSurfaceDispatch, ID: "demo#12", Domain: "demo", Action: "increment",
		Args: json.RawMessage(`{}`), State: json.RawMessage(`{"count":12,"log":["a","b","c"]}`), Rev: 12, Deadline: &at}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = AppendSurfaceDispatch(make([]byte, 0, 256), m)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = Marshal(m)
		}
	})
}

// Nesting: as deep as encoding/json allows, and no deeper.
func TestAppendSurfaceDispatchDepth(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		state := bytes.Repeat([]byte("["), depth)
		state = append(state, bytes.Repeat([]byte("]"), depth)...)
		m := SurfaceDispatch{Type: TypeSurfaceDispatch, ID: "x", Args: json.RawMessage(`{}`), State: state}
		want, wantErr := Marshal(m)
		got, gotErr := AppendSurfaceDispatch(nil, m)
		if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(got, want) {
			t.Errorf("depth %d: Marshal error %v, AppendSurfaceDispatch error %v (equal lines %v)", depth, wantErr, gotErr, bytes.Equal(got, want))
		}
	}
}
