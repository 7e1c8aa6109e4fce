package agentproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// outcome is one result of Reader.Next: a record, or a dropped over-long record of tooLong bytes.
type outcome struct {
	rec     string
	tooLong int64
}

func (o outcome) String() string {
	if o.tooLong > 0 {
		return fmt.Sprintf("<too long: %d>", o.tooLong)
	}
	return fmt.Sprintf("%q", o.rec)
}

func rec(s string) outcome        { return outcome{rec: s} }
func tooLong(n int64) outcome     { return outcome{tooLong: n} }
func recs(ss ...string) []outcome { return mapSlice(ss, rec) }

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// readAll drains r, checking the invariants every caller relies on, and returns what it read and
// the final error.
func readAll(t testing.TB, r *Reader) ([]outcome, error) {
	t.Helper()
	var out []outcome
	for range 1 << 20 {
		line, err := r.Next()
		var tl *LineTooLongError
		switch {
		case errors.As(err, &tl):
			if tl.Max != r.maxLine {
				t.Fatalf("LineTooLongError.Max = %d, want %d", tl.Max, r.maxLine)
			}
			if tl.Len <= int64(r.maxLine) {
				t.Fatalf("LineTooLongError.Len = %d is within the cap %d", tl.Len, r.maxLine)
			}
			out = append(out, tooLong(tl.Len))
		case err != nil:
			return out, err
		default:
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("record %q contains a newline", line)
			}
			if len(line) > r.maxLine {
				t.Fatalf("record of %d bytes exceeds the cap %d", len(line), r.maxLine)
			}
			if isBlank(line) {
				t.Fatalf("blank record %q returned", line)
			}
			out = append(out, rec(string(line)))
		}
		if c := cap(r.buf); c > r.limit {
			t.Fatalf("buffer grew to %d bytes, limit %d", c, r.limit)
		}
	}
	t.Fatal("Reader did not reach the end")
	return nil, nil
}

func equalOutcomes(a, b []outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// splitReader returns data in the given chunks, one per Read.
type splitReader struct{ chunks [][]byte }

func (s *splitReader) Read(p []byte) (int, error) {
	for len(s.chunks) > 0 && len(s.chunks[0]) == 0 {
		s.chunks = s.chunks[1:]
	}
	if len(s.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	return n, nil
}

func TestReaderFraming(t *testing.T) {
	long := strings.Repeat("x", 1000)
	cases := []struct {
		name string
		in   string
		max  int
		want []outcome
	}{
		{"empty stream", "", 0, nil},
		{"multi-record chunk", "{\"type\":\"a\"}\n{\"type\":\"b\"}\n{\"type\":\"c\"}\n", 0,
			recs(`{"type":"a"}`, `{"type":"b"}`, `{"type":"c"}`)},
		{"CRLF", "{\"type\":\"a\"}\r\n{\"type\":\"b\"}\r\n", 0, recs(`{"type":"a"}`, `{"type":"b"}`)},
		{"only one trailing CR is stripped", "a\r\r\n", 0, recs("a\r")},
		{"lone CR inside is not a separator", "a\rb\n{\"type\":\"x\r\"}\n", 0, recs("a\rb", "{\"type\":\"x\r\"}")},
		{"U+2028 and U+2029 are not separators", "{\"t\":\"a\u2028b\u2029c\"}\n\u2028\n", 0,
			recs("{\"t\":\"a\u2028b\u2029c\"}", "\u2028")},
		{"blank lines skipped", "\n\n{\"type\":\"a\"}\n\n\n{\"type\":\"b\"}\n\n", 0, recs(`{"type":"a"}`, `{"type":"b"}`)},
		{"whitespace-only lines are blank", " \n\t\n \t \r\n\r\n\r\r\n{\"type\":\"a\"}\n", 0, recs(`{"type":"a"}`)},
		{"other whitespace is content", "\v\n\u00a0\n", 0, recs("\v", "\u00a0")},
		{"unterminated tail at EOF", "{\"type\":\"a\"}\n{\"type\":\"b\"}", 0, recs(`{"type":"a"}`, `{"type":"b"}`)},
		{"unterminated tail loses its CR", "a\nb\r", 0, recs("a", "b")},
		{"blank tail", "a\n \t", 0, recs("a")},
		{"exactly max", "12345678\n", 8, recs("12345678")},
		{"exactly max with CRLF", "12345678\r\n", 8, recs("12345678")},
		{"exactly max as tail", "12345678", 8, recs("12345678")},
		{"exactly max as tail with CR", "12345678\r", 8, recs("12345678")},
		{"max+1", "123456789\nok\n", 8, []outcome{tooLong(9), rec("ok")}},
		{"max+1 with CRLF", "123456789\r\nok\n", 8, []outcome{tooLong(9), rec("ok")}},
		{"max+1 as tail", "ok\n123456789", 8, []outcome{rec("ok"), tooLong(9)}},
		{"max+1 as tail with CR", "ok\n123456789\r", 8, []outcome{rec("ok"), tooLong(9)}},
		{"huge line between good lines", "a\n" + long + "\nb\nc\n", 16, []outcome{rec("a"), tooLong(1000), rec("b"), rec("c")}},
		{"huge line with CRLF", long + "\r\nb\n", 16, []outcome{tooLong(1000), rec("b")}},
		{"huge lines in a row", long + "\n" + long + long + "\n\nb", 16, []outcome{tooLong(1000), tooLong(2000), rec("b")}},
		{"huge tail", "a\n" + long, 16, []outcome{rec("a"), tooLong(1000)}},
		{"huge whitespace line is too long, not blank", strings.Repeat(" ", 40) + "\nb\n", 16, []outcome{tooLong(40), rec("b")}},
		{"CR inside huge line counts", long + "\r" + long + "\n", 16, []outcome{tooLong(2001)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = DefaultMaxLine
			}
			check := func(how string, r *Reader) {
				t.Helper()
				got, err := readAll(t, r)
				if err != io.EOF {
					t.Fatalf("%s: final error %v, want io.EOF", how, err)
				}
				if !equalOutcomes(got, tc.want) {
					t.Fatalf("%s:\n got %v\nwant %v", how, got, tc.want)
				}
				if _, err := r.Next(); err != io.EOF {
					t.Fatalf("%s: Next after the end = %v, want io.EOF again", how, err)
				}
			}
			check("one read", NewReader(strings.NewReader(tc.in), tc.max))
			check("one byte per read", NewReader(iotest.OneByteReader(strings.NewReader(tc.in)), tc.max))
			check("data with the final read", NewReader(iotest.DataErrReader(strings.NewReader(tc.in)), tc.max))
			check("tiny growing buffer", newReaderSize(strings.NewReader(tc.in), max, 1))
			// Every split of the stream into two reads, and into three around each byte.
			for k := 0; k <= len(tc.in); k++ {
				in := []byte(tc.in)
				check(fmt.Sprintf("split at %d", k), NewReader(&splitReader{chunks: [][]byte{in[:k], in[k:]}}, tc.max))
				if k < len(in) {
					check(fmt.Sprintf("byte %d alone", k),
						newReaderSize(&splitReader{chunks: [][]byte{in[:k], in[k : k+1], in[k+1:]}}, max, 4))
				}
			}
		})
	}
}

func TestReaderDefaultMax(t *testing.T) {
	for _, m := range []int{0, -1} {
		if r := NewReader(strings.NewReader(""), m); r.maxLine != DefaultMaxLine {
			t.Errorf("NewReader(_, %d).maxLine = %d, want DefaultMaxLine", m, r.maxLine)
		}
	}
}

// zeroReader streams n bytes of 'x' without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	for i := range p {
		p[i] = 'x'
	}
	z.n -= int64(len(p))
	return len(p), nil
}

// A record far over the cap streams by in a bounded buffer, and the records after it survive.
func TestReaderHugeLineBoundedMemory(t *testing.T) {
	const max = 1 << 20
	const huge = 40 << 20
	in := io.MultiReader(
		strings.NewReader("{\"type\":\"before\"}\n"),
		&zeroReader{n: huge},
		strings.NewReader("\r\n{\"type\":\"after\"}\n"+strings.Repeat("y", max)+"\n"),
	)
	r := NewReader(in, max)
	got, err := readAll(t, r)
	if err != io.EOF {
		t.Fatalf("final error %v", err)
	}
	want := []outcome{rec(`{"type":"before"}`), tooLong(huge), rec(`{"type":"after"}`), rec(strings.Repeat("y", max))}
	if !equalOutcomes(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if c := cap(r.buf); c > max+2 {
		t.Fatalf("buffer is %d bytes, want at most maxLine+2 = %d", c, max+2)
	}
}

func TestReaderLineTooLongError(t *testing.T) {
	r := NewReader(strings.NewReader(strings.Repeat("z", 100)+"\n"), 10)
	_, err := r.Next()
	var tl *LineTooLongError
	if !errors.As(err, &tl) || tl.Len != 100 || tl.Max != 10 {
		t.Fatalf("err = %#v, want LineTooLongError{100, 10}", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "100") || !strings.Contains(msg, "10-byte") {
		t.Fatalf("message %q does not give the sizes", msg)
	}
}

// errAfterReader returns its data, then err.
type errAfterReader struct {
	data []byte
	err  error
}

func (e *errAfterReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(&errAfterReader{data: []byte("{\"type\":\"a\"}\n{\"type\":\"b\"}"), err: boom}, 0)
	got, err := readAll(t, r)
	if !errors.Is(err, boom) || err == boom {
		t.Fatalf("final error %v, want boom wrapped", err)
	}
	if want := recs(`{"type":"a"}`, `{"type":"b"}`); !equalOutcomes(got, want) {
		t.Fatalf("got %v, want %v (records before the error, tail included)", got, want)
	}
	if _, err2 := r.Next(); !errors.Is(err2, boom) {
		t.Fatalf("the error is not sticky: %v", err2)
	}
}

type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	if _, err := NewReader(stuckReader{}, 0).Next(); err != io.ErrNoProgress {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	deep := func(n int) string {
		return `{"type":"a","d":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	cases := []struct {
		line string
		want Envelope
		code string
	}{
		{line: `{"type":"agent_ready"}`, want: Envelope{Type: "agent_ready"}},
		{line: `{"type":"response","id":"42","command":"prompt","success":true}`, want: Envelope{Type: "response", ID: "42"}},
		{line: `  {"id":"x", "type" : "custom_thing" } `, want: Envelope{Type: "custom_thing", ID: "x"}},
		{line: "{\"type\":\"message_update\",\"t\":\"a\u2028b\"}", want: Envelope{Type: "message_update"}},
		{line: `{"type":"a","id":7}`, want: Envelope{Type: "a"}},
		{line: `{"type":"a","id":null}`, want: Envelope{Type: "a"}},
		{line: `{"type":"agent\u005fready"}`, want: Envelope{Type: "agent_ready"}},
		{line: `{"typ\u0065":"a","\u0069d":"i"}`, want: Envelope{Type: "a", ID: "i"}},
		{line: `{"type":"a\"b\\c\/\n\u00e9\ud83d\ude00"}`, want: Envelope{Type: "a\"b\\c/\né😀"}},
		{line: `{"type":"a","type":"b"}`, want: Envelope{Type: "b"}},
		{line: `{"id":"1","id":"2","type":"a"}`, want: Envelope{Type: "a", ID: "2"}},
		{line: `{"type":"a","x":{"type":"b","id":"c"},"y":[{"id":"d"}]}`, want: Envelope{Type: "a"}},
		{line: `{"type":"a","n":[0,-0,1.5,-2e10,3E+2,4e-3,true,false,null,"",{}]}`, want: Envelope{Type: "a"}},
		{line: "{\"type\":\"a\xff\"}", want: Envelope{Type: "a\ufffd"}},
		{line: deep(maxDepth), want: Envelope{Type: "a"}},

		{line: `[1,2]`, code: CodeNotAnObject},
		{line: `"str"`, code: CodeNotAnObject},
		{line: ` 42 `, code: CodeNotAnObject},
		{line: `null`, code: CodeNotAnObject},

		{line: `{}`, code: CodeMissingType},
		{line: `{"x":{"type":"a"}}`, code: CodeMissingType},
		{line: `{"type":1}`, code: CodeMissingType},
		{line: `{"type":null}`, code: CodeMissingType},
		{line: `{"type":["a"]}`, code: CodeMissingType},
		{line: `{"type":""}`, code: CodeMissingType},
		{line: `{"Type":"a"}`, code: CodeMissingType},
		{line: `{"type":"a","type":1}`, code: CodeMissingType},

		{line: ``, code: CodeInvalidJSON},
		{line: `  `, code: CodeInvalidJSON},
		{line: `not json`, code: CodeInvalidJSON},
		{line: `[1,2`, code: CodeInvalidJSON},
		{line: `{`, code: CodeInvalidJSON},
		{line: `{"type":"a"`, code: CodeInvalidJSON},
		{line: `{"type":"a",}`, code: CodeInvalidJSON},
		{line: `{"type":'a'}`, code: CodeInvalidJSON},
		{line: `{type:"a"}`, code: CodeInvalidJSON},
		{line: `{"type" "a"}`, code: CodeInvalidJSON},
		{line: `{"type":"a"} x`, code: CodeInvalidJSON},
		{line: `{"type":"a"}{"type":"b"}`, code: CodeInvalidJSON},
		{line: "{\"type\":\"a\x01\"}", code: CodeInvalidJSON},
		{line: `{"type":"\q"}`, code: CodeInvalidJSON},
		{line: `{"type":"\u12"}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":01}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":1.}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":-}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":1e}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":+1}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":tru}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":[1,]}`, code: CodeInvalidJSON},
		{line: `{"type":"a","n":{"k"}}`, code: CodeInvalidJSON},
		{line: deep(maxDepth + 1), code: CodeInvalidJSON},
	}
	for _, tc := range cases {
		name := tc.line
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			env, err := DecodeEnvelope([]byte(tc.line))
			if tc.code == "" {
				if err != nil || env != tc.want {
					t.Fatalf("got %+v, %v; want %+v", env, err, tc.want)
				}
			} else {
				var il *InvalidLineError
				if !errors.As(err, &il) || il.Code != tc.code || il.Reason == "" {
					t.Fatalf("got %+v, %#v; want InvalidLineError with code %s", env, err, tc.code)
				}
			}
			checkAgainstEncodingJSON(t, []byte(tc.line), env, err)
		})
	}
}

// checkAgainstEncodingJSON checks DecodeEnvelope's verdict against encoding/json, the decoder the
// rest of the daemon uses on the same line.
func checkAgainstEncodingJSON(t testing.TB, line []byte, env Envelope, err error) {
	t.Helper()
	valid := json.Valid(line)
	var il *InvalidLineError
	if err != nil && !errors.As(err, &il) {
		t.Fatalf("error %T is not *InvalidLineError", err)
	}
	if (il != nil && il.Code == CodeInvalidJSON) == valid {
		t.Fatalf("DecodeEnvelope(%q) = %v but json.Valid = %v", line, err, valid)
	}
	if !valid {
		return
	}
	var m map[string]json.RawMessage
	if trimmed := bytes.TrimLeft(line, " \t\r\n"); trimmed[0] != '{' || json.Unmarshal(line, &m) != nil {
		if il == nil || il.Code != CodeNotAnObject {
			t.Fatalf("DecodeEnvelope(%q) = %v, %v; want not_an_object", line, env, err)
		}
		return
	}
	var typ, id string
	typOK := json.Unmarshal(m["type"], &typ) == nil && len(m["type"]) > 0 && m["type"][0] == '"' && typ != ""
	if !typOK {
		if il == nil || il.Code != CodeMissingType {
			t.Fatalf("DecodeEnvelope(%q) = %v, %v; want missing_type", line, env, err)
		}
		return
	}
	if raw := m["id"]; len(raw) > 0 && raw[0] == '"' {
		json.Unmarshal(raw, &id)
	}
	if err != nil || env.Type != typ || env.ID != id {
		t.Fatalf("DecodeEnvelope(%q) = %+v, %v; encoding/json says type %q id %q", line, env, err, typ, id)
	}
}

// The fast path allocates nothing for a known type without an id, and only the id otherwise.
func TestDecodeEnvelopeAllocs(t *testing.T) {
	line := []byte(sampleEvent)
	if n := testing.AllocsPerRun(100, func() { DecodeEnvelope(line) }); n != 0 {
		t.Errorf("DecodeEnvelope(known type) allocates %v times, want 0", n)
	}
	withID := []byte(`{"type":"response","id":"abc-123","command":"prompt","success":true}`)
	if n := testing.AllocsPerRun(100, func() { DecodeEnvelope(withID) }); n != 1 {
		t.Errorf("DecodeEnvelope(with id) allocates %v times, want 1", n)
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range []string{
		sampleEvent, `{"type":"a","id":"b"}`, `[1]`, `{"type":1}`, `{"typ\u0065":"x"}`, `{"a":[{"b":null}]}`,
		`{"type":"a","n":-1.5e+3}`, "{\"type\":\"\xff\"}", `{"type":"a"} `, `{"type":"a",}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		env, err := DecodeEnvelope(line)
		checkAgainstEncodingJSON(t, line, env, err)
	})
}

type weird struct{}

func (weird) MarshalJSON() ([]byte, error) { return []byte("{\n\"type\" :\n\"w\"\n}"), nil }

func TestAppendRecord(t *testing.T) {
	dst := []byte("prefix\n")
	out, err := AppendRecord(dst, SimpleCommand{ID: "1", Type: CmdAbort})
	if err != nil {
		t.Fatal(err)
	}
	if want := "prefix\n{\"id\":\"1\",\"type\":\"abort\"}\n"; string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	// Newlines in values are escaped and raw JSON is compacted: still one line.
	for _, v := range []any{
		PromptCommand{Type: CmdPrompt, Message: "line 1\nline 2\r\n\u2028"},
		StateSet{Type: TypeStateSet, Key: "k", Value: json.RawMessage("{\n  \"a\": [1,\n 2]\n}")},
		weird{},
	} {
		out, err := AppendRecord(nil, v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if bytes.IndexByte(out[:len(out)-1], '\n') >= 0 || out[len(out)-1] != '\n' {
			t.Fatalf("%T: %q is not one line", v, out)
		}
		recs, err := readAll(t, NewReader(bytes.NewReader(out), 0))
		if err != io.EOF || len(recs) != 1 {
			t.Fatalf("%T: read back %v, %v", v, recs, err)
		}
		if _, err := DecodeEnvelope([]byte(recs[0].rec)); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
	}
	// A value encoding/json cannot encode: an error, and dst untouched.
	out, err = AppendRecord(dst, map[string]any{"c": make(chan int)})
	if err == nil || string(out) != string(dst) {
		t.Fatalf("got %q, %v; want an error and dst unchanged", out, err)
	}
}

// modelRecords is the framing rule written the obvious way, over the whole input at once.
func modelRecords(data []byte, max int) []outcome {
	var out []outcome
	segs := bytes.Split(data, []byte{'\n'})
	for i, s := range segs {
		if i == len(segs)-1 && len(s) == 0 {
			break // data ended with '\n' (or was empty): no tail
		}
		s = bytes.TrimSuffix(s, []byte{'\r'})
		switch {
		case len(s) > max:
			out = append(out, tooLong(int64(len(s))))
		case len(bytes.Trim(s, " \t\r")) == 0:
		default:
			out = append(out, rec(string(s)))
		}
	}
	return out
}

// chunkReader serves data in chunk sizes drawn from a seeded generator, with some empty reads.
type chunkReader struct {
	data  []byte
	state uint64
	max   int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.state = c.state*6364136223846793005 + 1442695040888963407 // LCG: deterministic per seed
	n := int(c.state>>33) % (c.max + 1)
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// FuzzReader checks Reader against modelRecords for any stream, any cap and any chunking: it never
// panics, records never hold '\n', every byte of the input ends up in exactly the record (or the
// dropped record of the same length) the model says, and the buffer stays within its limit.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"type\":\"a\"}\n{\"type\":\"b\"}\r\n\n  \n{\"type\":\"c\""), uint8(16), uint64(1), uint8(3))
	f.Add([]byte("12345678\n123456789\r\nx\r\r\n\u2028\n"), uint8(8), uint64(7), uint8(1))
	f.Add([]byte(strings.Repeat("long line ", 50)+"\nok\n"), uint8(20), uint64(42), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint8, seed uint64, initial uint8) {
		max := int(maxLine) + 1
		cr := &chunkReader{data: data, state: seed, max: 1 + int(seed%uint64(2*max+8))}
		r := newReaderSize(cr, max, 1+int(initial)%64)
		got, err := readAll(t, r)
		if err != io.EOF {
			t.Fatalf("final error %v", err)
		}
		if want := modelRecords(data, max); !equalOutcomes(got, want) {
			t.Fatalf("max %d:\n got %v\nwant %v", max, got, want)
		}
	})
}

// sampleEvent is a realistic pi streaming event of about 120 bytes.
const sampleEvent = `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"The quick brown fox jumps "}}`

func BenchmarkDecodeEnvelope(b *testing.B) {
	line := []byte(sampleEvent)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeEnvelope(line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEnvelopeStdlib is the baseline: the same check done with encoding/json.
func BenchmarkDecodeEnvelopeStdlib(b *testing.B) {
	line := []byte(sampleEvent)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var env struct {
			Type *string `json:"type"`
			ID   any     `json:"id"`
		}
		if err := json.Unmarshal(line, &env); err != nil || env.Type == nil {
			b.Fatal(err)
		}
	}
}

// An answer too long to keep still names what it answers: the type and id before the cut.
func TestReaderLineTooLongNamesItsID(t *testing.T) {
	big := strings.Repeat("a", 300)
	cases := []struct {
		name, line, typ, id string
	}{
		{"id first", `{"type":"response","id":"turn.prompt.1","data":"` + big + `"}`, TypeResponse, "turn.prompt.1"},
		{"id after a small member", `{"type":"surface_dispatch_result","ok":true,"id":"demo#3","state":{"x":"` + big + `"}}`, TypeSurfaceDispatchResult, "demo#3"},
		{"id after the cut", `{"type":"response","data":"` + big + `","id":"late"}`, TypeResponse, ""},
		{"id not a string", `{"type":"response","id":7,"data":"` + big + `"}`, TypeResponse, ""},
		{"escaped key and value", `{"typ\u0065":"response","id":"a\"b","data":"` + big + `"}`, TypeResponse, `a"b`},
		{"not an object", `["` + big + `"]`, "", ""},
		{"garbage", `{"type":"response","id":"x" nope ` + big, TypeResponse, "x"},
	}
	for _, c := range cases {
		for _, mode := range []string{"buffered", "streamed"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				var r *Reader
				data := c.line + "\n" + `{"type":"after"}` + "\n"
				if mode == "buffered" {
					// The whole line fits in the buffer: record() cuts it.
					r = newReaderSize(strings.NewReader(data), 100, 4096)
				} else {
					// One byte at a time: skipLong discards it as it streams by.
					r = newReaderSize(iotest.OneByteReader(strings.NewReader(data)), 100, 16)
				}
				_, err := r.Next()
				var tl *LineTooLongError
				if !errors.As(err, &tl) {
					t.Fatalf("err = %v, want a LineTooLongError", err)
				}
				if tl.Type != c.typ || tl.ID != c.id || tl.Len != int64(len(c.line)) {
					t.Fatalf("type %q id %q len %d, want %q %q %d", tl.Type, tl.ID, tl.Len, c.typ, c.id, len(c.line))
				}
				if line, err := r.Next(); err != nil || string(line) != `{"type":"after"}` {
					t.Fatalf("next record %q, %v", line, err)
				}
			})
		}
	}
}

func TestLeadingEnvelopeOfAWholeLine(t *testing.T) {
	env := LeadingEnvelope([]byte(`{"id":"one","type":"response","id":"two"}`))
	if env.Type != TypeResponse || env.ID != "two" {
		t.Fatalf("%+v: the last of repeated members wins, as in encoding/json", env)
	}
}

// Records go to the agent without HTML escaping: '<' stays one byte.
func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	b, err := Marshal(PromptCommand{Type: CmdPrompt, ID: "p", Message: "<a href='x'>&</a>\u2028"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"p","type":"prompt","message":"<a href='x'>&</a>\u2028"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	rec, err := AppendRecord(nil, json.RawMessage(`{"type":"x","s":"<>"}`))
	if err != nil || string(rec) != "{\"type\":\"x\",\"s\":\"<>\"}\n" {
		t.Fatalf("AppendRecord = %q, %v", rec, err)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Fatal("a func marshaled")
	}
}

// FuzzLeadingEnvelope checks LeadingEnvelope, which reads a too-long line's first bytes: it never
// panics; on a whole valid line it agrees with DecodeEnvelope (and so with encoding/json); and cut
// anywhere, a line whose "type" and "id" appear once gives either nothing or their true values,
// never a wrong id (a wrong id would fail another command).
func FuzzLeadingEnvelope(f *testing.F) {
	for _, s := range []string{
		sampleEvent, `{"type":"response","id":"p.1","data":"xxxxxxxx"}`, `{"id":"a","type":"b","id":"c"}`,
		`{"type":"x","id":7}`, `{"typ\u0065":"response","id":"a\"b"}`, `{ "type" : "a" , "id" : "b" }`,
		`{"a":{"id":"inner"},"type":"t","id":"outer"}`, `["type","id"]`, `{"type":"a","id":"b" nope`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		lead := LeadingEnvelope(line)
		env, err := DecodeEnvelope(line)
		if err != nil {
			return
		}
		if lead != env {
			t.Fatalf("whole line %q: LeadingEnvelope %+v, DecodeEnvelope %+v", line, lead, env)
		}
		if bytes.IndexByte(line, '\\') >= 0 || bytes.Count(line, []byte(`"type"`)) > 1 || bytes.Count(line, []byte(`"id"`)) > 1 {
			return // a member may repeat: a prefix may hold an earlier value
		}
		for k := range len(line) {
			p := LeadingEnvelope(line[:k])
			if (p.Type != "" && p.Type != env.Type) || (p.ID != "" && p.ID != env.ID) {
				t.Fatalf("%q cut at %d: %+v, the whole line says %+v", line, k, p, env)
			}
		}
	})
}
