package agentproc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// Framing of the agent protocol (docs/agent-protocol.md, "Framing"): one JSON object per line, split
// on '\n' only.

// DefaultMaxLine is the default hard cap on the length of one record, in bytes, not counting its
// '\n' and the '\r' before it.
const DefaultMaxLine = 16 << 20

// readChunk is the size of the Reader's buffer before a long record makes it grow. It is small
// because every idle session holds one; a busy agent's buffer grows (doubling) to fit its records
// and shrinks back when it drains (see fill).
const readChunk = 4 << 10

// maxEmptyReads is how many (0, nil) reads in a row count as a broken io.Reader, as in bufio.
const maxEmptyReads = 100

// Reader splits a byte stream into JSONL records.
//
// Records are split on '\n' only: '\r' inside a record and U+2028/U+2029 are ordinary bytes. One
// trailing '\r' is stripped. Blank records are skipped; a record is blank when it holds nothing but
// JSON whitespace (space, tab, '\r'), because such a record cannot be a JSON value and skipping it
// is what "empty lines are skipped" means for writers that pad their output.
//
// Memory is bounded: the buffer holds at most max(64 KiB, maxLine+2) bytes, however long a record
// is; a longer record is discarded as it streams by.
//
// The zero value is not usable; use NewReader. A Reader is not safe for concurrent use.
type Reader struct {
	rd      io.Reader
	maxLine int
	limit   int    // largest buffer: the longest record we keep, plus "\r\n"
	initial int    // first buffer size
	buf     []byte // buf[r:w] is read but not yet returned
	r, w    int
	scanned int      // bytes of buf[r:w] already searched for '\n' (no match)
	err     error    // sticky: io.EOF or a wrapped read error, returned once buf is drained
	empty   int      // (0, nil) reads in a row
	busy    bool     // the last read filled all the room there was: more is waiting
	head    Envelope // type and id of the long record skipLong is discarding
}

// busyChunk is the size a Reader grows to while reads keep filling it (a busy agent), so that one
// read syscall carries many records.
const busyChunk = 64 << 10

// NewReader returns a Reader of rd that keeps records up to maxLine bytes; maxLine <= 0 means
// DefaultMaxLine.
func NewReader(rd io.Reader, maxLine int) *Reader {
	return newReaderSize(rd, maxLine, readChunk)
}

// newReaderSize lets tests start with a tiny buffer so that growth and compaction are exercised
// with small inputs.
func newReaderSize(rd io.Reader, maxLine, initial int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	limit := max(maxLine+2, initial)
	return &Reader{rd: rd, maxLine: maxLine, limit: limit, initial: min(initial, limit)}
}

// Pending reports whether a complete record is already buffered, so that the
// next Next returns without reading. A caller that batches records flushes
// its batch when Pending is false, before Next blocks.
func (r *Reader) Pending() bool {
	if r.r+r.scanned >= r.w {
		return false
	}
	i := bytes.IndexByte(r.buf[r.r+r.scanned:r.w], '\n')
	if i < 0 {
		// Remember how far we looked, as Next does.
		r.scanned = r.w - r.r
		return false
	}
	return true
}

// LineTooLongError reports a record longer than the cap. The record was discarded up to its '\n';
// the Reader goes on with the next record.
//
// Type and ID are the record's "type" and "id" when they could be read from its first bytes (see
// LeadingEnvelope): an answer too long to keep still names the command it answers, so that the
// command fails at once instead of waiting for an answer that will not come.
type LineTooLongError struct {
	Len  int64  // bytes of the discarded record, without its '\n' and trailing '\r'
	Max  int    // the cap in force
	Type string // the record's "type", when it came before the cut; else ""
	ID   string // the record's string "id", when it came before the cut; else ""
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("agentproc: line of %d bytes exceeds the %d-byte limit; discarded", e.Len, e.Max)
}

// Next returns the next non-blank record without its '\n' and one trailing '\r'.
// The slice is valid until the next call. An unterminated tail at EOF is returned as a last record.
// A record longer than maxLine is skipped up to its '\n' and Next returns *LineTooLongError (the
// reader stays usable: the caller just calls Next again). At the end: io.EOF. Other read errors are
// wrapped, returned after every record read before them, and returned again by later calls.
func (r *Reader) Next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.r+r.scanned:r.w], '\n'); i >= 0 {
			end := r.r + r.scanned + i
			line := r.buf[r.r:end]
			r.r, r.scanned = end+1, 0
			if rec, ok, err := r.record(line); ok {
				return rec, err
			}
			continue
		}
		r.scanned = r.w - r.r
		if r.scanned >= r.maxLine+2 {
			// Even if the record ends in "\r\n" right after this, it is longer than maxLine.
			return nil, r.skipLong()
		}
		if r.err != nil {
			if r.w > r.r {
				line := r.buf[r.r:r.w]
				r.r, r.scanned = r.w, 0
				if rec, ok, err := r.record(line); ok {
					return rec, err
				}
			}
			return nil, r.err
		}
		r.fill()
	}
}

// record applies the per-record rules to a line cut out of the buffer: strip one '\r', check the
// cap, skip blanks. ok is false for a blank record.
func (r *Reader) record(line []byte) (rec []byte, ok bool, err error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > r.maxLine {
		env := LeadingEnvelope(line[:r.maxLine])
		return nil, true, &LineTooLongError{Len: int64(len(line)), Max: r.maxLine, Type: env.Type, ID: env.ID}
	}
	if isBlank(line) {
		return nil, false, nil
	}
	return line, true, nil
}

// isBlank reports whether b holds only JSON whitespace ('\n' cannot occur in a record).
func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// fill reads once into the free end of the buffer, making room first by compacting or growing.
func (r *Reader) fill() {
	if r.r == r.w && len(r.buf) > max(16*r.initial, busyChunk) {
		// Drained after a burst of long records: give the big buffer back.
		r.buf, r.r, r.w = nil, 0, 0
	}
	if r.buf == nil {
		r.buf = make([]byte, r.initial)
	}
	if r.busy && len(r.buf) < busyChunk && len(r.buf) < r.limit {
		nb := make([]byte, min(2*len(r.buf), busyChunk, r.limit))
		r.w = copy(nb, r.buf[r.r:r.w])
		r.r = 0
		r.buf = nb
	}
	if r.r > 0 {
		// Slide the unfinished record to the front, as bufio does: it is copied at most once per
		// record, since r stays 0 while the record grows.
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	if r.w == len(r.buf) {
		// Full of one unfinished record shorter than the cap: grow, never past limit.
		size := min(max(2*len(r.buf), r.initial), r.limit)
		nb := make([]byte, size)
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	n, err := r.rd.Read(r.buf[r.w:])
	r.busy = n > 0 && n == len(r.buf)-r.w
	if n < 0 || n > len(r.buf)-r.w {
		r.err = fmt.Errorf("agentproc: read: invalid count %d from io.Reader", n)
		return
	}
	r.w += n
	switch {
	case err == io.EOF:
		r.err = io.EOF
	case err != nil:
		r.err = fmt.Errorf("agentproc: read: %w", err)
	case n == 0:
		if r.empty++; r.empty >= maxEmptyReads {
			r.err = io.ErrNoProgress
		}
	default:
		r.empty = 0
	}
}

// skipLong discards the record that fills buf[r:w] up to and including its '\n', reusing the
// buffer as a window so that memory stays bounded however long the record is.
func (r *Reader) skipLong() error {
	n := int64(r.w - r.r)
	last := r.buf[r.w-1]
	// The record's first maxLine bytes are still here: read its type and id before they go.
	r.head = LeadingEnvelope(r.buf[r.r : r.r+r.maxLine])
	r.r, r.w, r.scanned = 0, 0, 0
	for r.err == nil {
		r.fill()
		if i := bytes.IndexByte(r.buf[:r.w], '\n'); i >= 0 {
			n += int64(i)
			if i > 0 {
				last = r.buf[i-1]
			}
			r.r = i + 1
			return r.tooLong(n, last)
		}
		n += int64(r.w)
		if r.w > 0 {
			last = r.buf[r.w-1]
		}
		r.w = 0
	}
	// The stream ended inside the record: it is discarded all the same; the next call returns r.err.
	return r.tooLong(n, last)
}

func (r *Reader) tooLong(n int64, last byte) error {
	if last == '\r' {
		n--
	}
	head := r.head
	r.head = Envelope{}
	return &LineTooLongError{Len: n, Max: r.maxLine, Type: head.Type, ID: head.ID}
}

// Envelope is the part of a record every consumer needs to route it: its type and, when the record
// has a string "id", the id.
type Envelope struct {
	Type string
	ID   string
}

// Codes of InvalidLineError (and of Diagnostic).
const (
	CodeInvalidJSON = "invalid_json"
	CodeNotAnObject = "not_an_object"
	CodeMissingType = "missing_type"
)

// InvalidLineError says why a record is not a protocol line.
type InvalidLineError struct {
	Code   string // CodeInvalidJSON, CodeNotAnObject or CodeMissingType
	Reason string // for people: what is wrong and where
}

func (e *InvalidLineError) Error() string {
	return "agentproc: invalid line (" + e.Code + "): " + e.Reason
}

// DecodeEnvelope checks that line is a JSON object with a string "type" (and reads "id" when it is a
// string) without decoding the rest: fast path. Returns *InvalidLineError{Code, Reason} with Code one of
// "invalid_json", "not_an_object", "missing_type".
//
// The whole line is validated as JSON (the grammar and nesting limit of encoding/json), so a line
// that passes decodes with encoding/json. Member names are matched exactly ("Type" is not "type");
// when a name repeats, the last member wins, as in encoding/json. An empty "type" counts as missing.
// It allocates nothing for a protocol type without an id.
func DecodeEnvelope(line []byte) (Envelope, error) {
	i := skipSpace(line, 0)
	if i == len(line) {
		return Envelope{}, &InvalidLineError{Code: CodeInvalidJSON, Reason: "empty line"}
	}
	if line[i] != '{' {
		if json.Valid(line) {
			return Envelope{}, &InvalidLineError{Code: CodeNotAnObject, Reason: "the line is JSON but not an object"}
		}
		return Envelope{}, syntaxError(line, i)
	}
	typ, id, i, bad := scanTopObject(line, i)
	if bad != nil {
		return Envelope{}, bad
	}
	if i = skipSpace(line, i); i != len(line) {
		return Envelope{}, invalidAt(i, "data after the top-level object")
	}
	if !typ.set || typ.kind != '"' {
		return Envelope{}, &InvalidLineError{Code: CodeMissingType, Reason: typ.missingReason()}
	}
	env := Envelope{Type: typ.text(line, true)}
	if env.Type == "" {
		return Envelope{}, &InvalidLineError{Code: CodeMissingType, Reason: `"type" is empty`}
	}
	if id.set && id.kind == '"' {
		env.ID = id.text(line, false)
	}
	return env, nil
}

// LeadingEnvelope reads the "type" and "id" of a record from its first bytes, for a record too long
// to keep: b is the start of the record, cut anywhere. It reads the top-level members in order and
// stops at the first one that does not end within b (or at anything that is not JSON); "type" and
// "id" count when their string values were read whole before that point. Whatever cannot be read
// is left empty. So an agent whose answer may be long puts "type" and "id" first, as every line
// the daemon writes does: the command it answers then fails at once with line_too_long.
func LeadingEnvelope(b []byte) Envelope {
	var env Envelope
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return env
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		j, kEsc, err := scanString(b, i)
		if err != nil {
			return env
		}
		name := keyName(b[i+1:j-1], kEsc)
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return env
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return env
		}
		v := member{set: true, kind: b[i]}
		if v.kind == '"' {
			j, v.escaped, err = scanString(b, i)
			v.start, v.end = i+1, j-1
		} else {
			j, err = scanValue(b, i, 1)
		}
		if err != nil {
			return env
		}
		switch {
		case name == "type" && v.kind == '"':
			env.Type = v.text(b, true)
		case name == "type":
			env.Type = ""
		case name == "id" && v.kind == '"':
			env.ID = v.text(b, false)
		case name == "id":
			env.ID = ""
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ',' {
			return env
		}
		i = skipSpace(b, i+1)
	}
	return env
}

// member is where the value of "type" or "id" sits in the line.
type member struct {
	set        bool
	kind       byte // first byte of the value: '"', '{', '[', 't', 'f', 'n' or a digit/'-'
	start, end int  // the string's contents, between the quotes
	escaped    bool // contents hold a backslash escape
}

func (m member) missingReason() string {
	if !m.set {
		return `no "type" member`
	}
	return `"type" is not a string`
}

// text returns the string value; intern maps the protocol's types to shared strings so that the
// hot path does not allocate.
func (m member) text(line []byte, intern bool) string {
	raw := line[m.start:m.end]
	if intern && !m.escaped {
		if s, ok := internType(raw); ok {
			return s
		}
	}
	if m.escaped || !utf8.Valid(raw) {
		// Decode like encoding/json would (escapes, U+FFFD for bad UTF-8); validated already.
		var s string
		if err := json.Unmarshal(line[m.start-1:m.end+1], &s); err == nil {
			return s
		}
	}
	return string(raw)
}

// internType returns the shared string of a protocol line type. A switch is several times faster
// than a map lookup here, and this runs for every line.
func internType(raw []byte) (string, bool) {
	switch string(raw) {
	case TypeAgentReady:
		return TypeAgentReady, true
	case TypeSurfaceCommand:
		return TypeSurfaceCommand, true
	case TypeSurfaceGet:
		return TypeSurfaceGet, true
	case TypeStateSet:
		return TypeStateSet, true
	case TypeStateDelete:
		return TypeStateDelete, true
	case TypeSurfaceDispatchResult:
		return TypeSurfaceDispatchResult, true
	case TypeSurfaceDispatch:
		return TypeSurfaceDispatch, true
	case TypeSurfaceCommandResult:
		return TypeSurfaceCommandResult, true
	case TypeSurfaceGetResult:
		return TypeSurfaceGetResult, true
	case TypeStateChanged:
		return TypeStateChanged, true
	case TypeSurfaceRegisterResult:
		return TypeSurfaceRegisterResult, true
	case CmdPrompt:
		return CmdPrompt, true
	case CmdAbort:
		return CmdAbort, true
	case CmdGetState:
		return CmdGetState, true
	case CmdGetMessages:
		return CmdGetMessages, true
	case CmdGetCommands:
		return CmdGetCommands, true
	case TypeExtensionUIResponse:
		return TypeExtensionUIResponse, true
	case TypeResponse:
		return TypeResponse, true
	case TypeExtensionUIRequest:
		return TypeExtensionUIRequest, true
	case EventAgentStart:
		return EventAgentStart, true
	case EventAgentEnd:
		return EventAgentEnd, true
	case EventTurnStart:
		return EventTurnStart, true
	case EventTurnEnd:
		return EventTurnEnd, true
	case EventMessageStart:
		return EventMessageStart, true
	case EventMessageUpdate:
		return EventMessageUpdate, true
	case EventMessageEnd:
		return EventMessageEnd, true
	case EventToolExecutionStart:
		return EventToolExecutionStart, true
	case EventToolExecutionUpdate:
		return EventToolExecutionUpdate, true
	case EventToolExecutionEnd:
		return EventToolExecutionEnd, true
	case EventQueueUpdate:
		return EventQueueUpdate, true
	case EventCompactionStart:
		return EventCompactionStart, true
	case EventCompactionEnd:
		return EventCompactionEnd, true
	case EventAutoCompactionStart:
		return EventAutoCompactionStart, true
	case EventAutoCompactionEnd:
		return EventAutoCompactionEnd, true
	case EventAutoRetryStart:
		return EventAutoRetryStart, true
	case EventAutoRetryEnd:
		return EventAutoRetryEnd, true
	case EventExtensionError:
		return EventExtensionError, true
	case EventSessionInfoChanged:
		return EventSessionInfoChanged, true
	case EventThinkingLevelChanged:
		return EventThinkingLevelChanged, true
	}
	return "", false
}

// maxDepth is encoding/json's nesting limit, so that DecodeEnvelope and json.Valid agree.
const maxDepth = 10000

// The scanner below validates JSON by the grammar of RFC 8259 as encoding/json reads it. Each
// function takes the line and the index where its token starts and returns the index after it;
// it allocates nothing unless the line is invalid.

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

func invalidAt(i int, what string) *InvalidLineError {
	return &InvalidLineError{Code: CodeInvalidJSON, Reason: what + " at offset " + strconv.Itoa(i)}
}

// syntaxError describes b[i], which the grammar does not allow there.
func syntaxError(b []byte, i int) *InvalidLineError {
	if i >= len(b) {
		return &InvalidLineError{Code: CodeInvalidJSON, Reason: "unexpected end of JSON input"}
	}
	return invalidAt(i, "invalid character "+strconv.QuoteRune(rune(b[i])))
}

// scanTopObject scans the object at b[i] (a '{') and returns its "type" and "id" members.
func scanTopObject(b []byte, i int) (typ, id member, end int, err *InvalidLineError) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return typ, id, i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return typ, id, i, syntaxError(b, i)
		}
		j, kEsc, err := scanString(b, i)
		if err != nil {
			return typ, id, j, err
		}
		key := b[i+1 : j-1]
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return typ, id, i, syntaxError(b, i)
		}
		i = skipSpace(b, i+1)
		v := member{set: true}
		if i < len(b) {
			v.kind = b[i]
		}
		if v.kind == '"' {
			j, v.escaped, err = scanString(b, i)
			v.start, v.end = i+1, j-1
		} else {
			j, err = scanValue(b, i, 1)
		}
		if err != nil {
			return typ, id, j, err
		}
		switch keyName(key, kEsc) {
		case "type":
			typ = v
		case "id":
			id = v
		}
		i = skipSpace(b, j)
		if i >= len(b) {
			return typ, id, i, syntaxError(b, i)
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return typ, id, i + 1, nil
		default:
			return typ, id, i, syntaxError(b, i)
		}
	}
}

// keyName returns "type" or "id" when the (validated) key is one of them, else "". Escaped keys are
// decoded so that "typ\u0065" counts, as it does for encoding/json.
func keyName(key []byte, escaped bool) string {
	if escaped {
		var k string
		if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) != nil {
			return ""
		}
		key = []byte(k)
	}
	switch string(key) {
	case "type":
		return "type"
	case "id":
		return "id"
	}
	return ""
}

// scanValue scans any JSON value at b[i]; depth is the nesting depth of the enclosing container.
func scanValue(b []byte, i, depth int) (int, *InvalidLineError) {
	if i >= len(b) {
		return i, syntaxError(b, i)
	}
	switch c := b[i]; c {
	case '"':
		j, _, err := scanString(b, i)
		return j, err
	case '{', '[':
		if depth+1 > maxDepth {
			return i, invalidAt(i, "nesting deeper than "+strconv.Itoa(maxDepth))
		}
		if c == '{' {
			return scanObject(b, i, depth+1)
		}
		return scanArray(b, i, depth+1)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || isDigit(c) {
			return scanNumber(b, i)
		}
		return i, syntaxError(b, i)
	}
}

func scanObject(b []byte, i, depth int) (int, *InvalidLineError) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, syntaxError(b, i)
		}
		j, _, err := scanString(b, i)
		if err != nil {
			return j, err
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return i, syntaxError(b, i)
		}
		if i, err = scanValue(b, skipSpace(b, i+1), depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, syntaxError(b, i)
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, syntaxError(b, i)
		}
	}
}

func scanArray(b []byte, i, depth int) (int, *InvalidLineError) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err *InvalidLineError
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, syntaxError(b, i)
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, syntaxError(b, i)
		}
	}
}

// scanString scans the string at b[i] (a '"') and returns the index after its closing quote. Like
// encoding/json it accepts invalid UTF-8 and rejects control characters and bad escapes.
func scanString(b []byte, i int) (end int, escaped bool, err *InvalidLineError) {
	i++
	for {
		// Strings are most of a line: skip 8 ordinary bytes at a time, then byte by byte.
		for i+8 <= len(b) && !hasStringSpecial(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			return i, escaped, syntaxError(b, i)
		}
		switch b[i] {
		case '"':
			return i + 1, escaped, nil
		case '\\':
			escaped = true
			i++
			if i >= len(b) {
				return i, escaped, syntaxError(b, i)
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for range 4 {
					if i >= len(b) || !isHex(b[i]) {
						return i, escaped, syntaxError(b, i)
					}
					i++
				}
			default:
				return i, escaped, invalidAt(i, "invalid escape")
			}
		default:
			return i, escaped, invalidAt(i, "control character in string")
		}
	}
}

// hasStringSpecial reports whether any of the 8 bytes in x is a control character, '"' or '\\'
// (the classic "has zero byte" / "has less than" bit tricks; exact, not approximate).
func hasStringSpecial(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	less := (x - lo*0x20) & ^x & hi
	q := x ^ (lo * '"')
	bs := x ^ (lo * '\\')
	return less|((q-lo)&^q&hi)|((bs-lo)&^bs&hi) != 0
}

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, *InvalidLineError) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && isDigit(b[i]):
		i = scanDigits(b, i)
	default:
		return i, syntaxError(b, i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, syntaxError(b, i)
		}
		i = scanDigits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, syntaxError(b, i)
		}
		i = scanDigits(b, i)
	}
	return i, nil
}

func scanDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func scanLiteral(b []byte, i int, lit string) (int, *InvalidLineError) {
	for j := 0; j < len(lit); j++ {
		if i >= len(b) || b[i] != lit[j] {
			return i, syntaxError(b, i)
		}
		i++
	}
	return i, nil
}

// ErrNewlineInRecord is returned for a record that holds a raw '\n', which would split it in two.
var ErrNewlineInRecord = errors.New("agentproc: record contains a newline")

// AppendRecord appends v as one JSONL record to dst: its JSON (as Marshal writes it) and a '\n'.
// JSON from encoding/json never holds a raw newline (strings escape it, json.RawMessage and
// MarshalJSON output are compacted), but a record that does is rejected with ErrNewlineInRecord
// rather than written as two lines. On error dst is returned unchanged.
func AppendRecord(dst []byte, v any) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return dst, err
	}
	if bytes.IndexByte(b, '\n') >= 0 {
		return dst, ErrNewlineInRecord
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

// Marshal is the JSON of one record, as the daemon writes records to an agent: encoding/json's,
// without its HTML escaping. json.Marshal writes '<', '>' and '&' as six-byte \u escapes for the
// sake of HTML pages, which a pipe does not need: a prompt of '<' would grow sixfold on its way to
// the agent. (U+2028 and U+2029 are still escaped, as encoding/json always does.)
func Marshal(v any) ([]byte, error) {
	b, err := plainjson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("agentproc: encode record: %w", err)
	}
	return b, nil
}
