package turn

import (
	"bytes"
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	proc "github.com/surfaced/surfaced/agentproc"
)

// The hot path: pi writes one message_update per token, and every one
// repeats the whole message so far twice ("message" and the event's
// "partial"). encoding/json would walk all of it twice more (validation,
// then decoding) to find the few bytes of the event that matter. scanUpdate
// reads those bytes and skips the rest in one pass, 8 bytes at a time
// inside strings, allocating nothing but the delta.
//
// It relies on what the agent codec guarantees of every line that reaches
// the session: it is valid JSON (agentproc.DecodeEnvelope accepted it). It
// reads only what it is sure of and reports !ok for anything else (an
// event with an error or a tool call, escaped or case-folded member names,
// a value of an unexpected kind, ...): the caller then decodes the line with
// encoding/json, whose answer is the reference (FuzzScanUpdate checks they
// agree).

// Member names scanUpdate knows, for the case-insensitive matching of
// encoding/json (a member it would match under another spelling sends the
// line to the decoder).
var (
	nameEvent        = []byte("assistantMessageEvent")
	nameType         = []byte("type")
	nameContentIndex = []byte("contentIndex")
	nameDelta        = []byte("delta")
	nameReason       = []byte("reason")
	nameError        = []byte("error")
	nameToolCall     = []byte("toolCall")
)

// scanUpdate reads the assistantMessageEvent of a message_update line into
// e (which it zeroes first). present is false when the line has no event
// (or a null one); ok is false when the line needs encoding/json.
func scanUpdate(line []byte, e *assistantEvent) (present, ok bool) {
	*e = assistantEvent{}
	s := scanner{b: line}
	s.space()
	if !s.at('{') {
		return false, false
	}
	s.i++
	seen := false
	for first := true; ; first = false {
		s.space()
		if s.at('}') && first {
			s.i++
			break
		}
		key, ok := s.key()
		if !ok {
			return false, false
		}
		switch {
		case bytes.Equal(key, nameEvent):
			if seen {
				return false, false // encoding/json merges repeats; leave it to it
			}
			seen = true
			switch {
			case s.at('{'):
				if !s.event(e) {
					return false, false
				}
				present = true
			case s.literal("null"):
				*e, present = assistantEvent{}, false
			default:
				return false, false
			}
		case bytes.EqualFold(key, nameEvent):
			return false, false
		default:
			if !s.skip() {
				return false, false
			}
		}
		s.space()
		switch {
		case s.at(','):
			s.i++
		case s.at('}'):
			s.i++
			s.space()
			return present, s.i == len(s.b)
		default:
			return false, false
		}
	}
	s.space()
	return false, s.i == len(s.b)
}

// event reads the event object at s.i.
func (s *scanner) event(e *assistantEvent) bool {
	s.i++ // {
	for first := true; ; first = false {
		s.space()
		if s.at('}') && first {
			s.i++
			return true
		}
		key, ok := s.key()
		if !ok {
			return false
		}
		switch {
		case bytes.Equal(key, nameType):
			raw, esc, ok := s.str()
			if !ok {
				return false
			}
			if t, known := eventType(raw); known && !esc {
				e.Type = t
			} else if e.Type, ok = decodeString(raw, esc); !ok {
				return false
			}
		case bytes.Equal(key, nameDelta):
			if e.Delta, ok = s.text(); !ok {
				return false
			}
		case bytes.Equal(key, nameReason):
			if e.Reason, ok = s.text(); !ok {
				return false
			}
		case bytes.Equal(key, nameContentIndex):
			if e.ContentIndex, ok = s.int(); !ok {
				return false
			}
		case bytes.EqualFold(key, nameType), bytes.EqualFold(key, nameDelta), bytes.EqualFold(key, nameReason),
			bytes.EqualFold(key, nameContentIndex), bytes.EqualFold(key, nameError), bytes.EqualFold(key, nameToolCall):
			return false // error and toolCall (rare events), or a spelling only encoding/json resolves
		default:
			if !s.skip() {
				return false
			}
		}
		s.space()
		switch {
		case s.at(','):
			s.i++
		case s.at('}'):
			s.i++
			return true
		default:
			return false
		}
	}
}

// eventType returns the shared string of a known event type (no
// allocation on the hot path).
func eventType(raw []byte) (string, bool) {
	switch string(raw) {
	case proc.AMETextDelta:
		return proc.AMETextDelta, true
	case proc.AMEThinkingDelta:
		return proc.AMEThinkingDelta, true
	case proc.AMEToolcallDelta:
		return proc.AMEToolcallDelta, true
	case proc.AMETextStart:
		return proc.AMETextStart, true
	case proc.AMETextEnd:
		return proc.AMETextEnd, true
	case proc.AMEThinkingStart:
		return proc.AMEThinkingStart, true
	case proc.AMEThinkingEnd:
		return proc.AMEThinkingEnd, true
	case proc.AMEToolcallStart:
		return proc.AMEToolcallStart, true
	case proc.AMEToolcallEnd:
		return proc.AMEToolcallEnd, true
	case proc.AMEStart:
		return proc.AMEStart, true
	case proc.AMEDone:
		return proc.AMEDone, true
	case proc.AMEError:
		return proc.AMEError, true
	}
	return "", false
}

// scanner walks a line of valid JSON.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) at(c byte) bool { return s.i < len(s.b) && s.b[s.i] == c }

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// key reads a member name and its colon; a name with escapes is not read.
func (s *scanner) key() ([]byte, bool) {
	raw, esc, ok := s.str()
	if !ok || esc {
		return nil, false
	}
	s.space()
	if !s.at(':') {
		return nil, false
	}
	s.i++
	s.space()
	return raw, true
}

// str reads the string at s.i: its raw contents and whether they hold
// escapes.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	if !s.at('"') {
		return nil, false, false
	}
	start := s.i + 1
	i := start
	b := s.b
	for {
		for i+8 <= len(b) && !quoteOrBackslash(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			return nil, false, false
		}
		if b[i] == '"' {
			s.i = i + 1
			return b[start:i], escaped, true
		}
		escaped = true
		i += 2 // a backslash and the byte it escapes (\uXXXX's digits are plain)
	}
}

// quoteOrBackslash reports whether any of the 8 bytes in x is '"' or '\\'.
func quoteOrBackslash(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ (lo * '"')
	bs := x ^ (lo * '\\')
	return ((q-lo)&^q|(bs-lo)&^bs)&hi != 0
}

// text reads a string value as encoding/json decodes it.
func (s *scanner) text() (string, bool) {
	raw, esc, ok := s.str()
	if !ok {
		return "", false
	}
	return decodeString(raw, esc)
}

// decodeString is the value of a string's raw contents.
func decodeString(raw []byte, escaped bool) (string, bool) {
	if !escaped && utf8.Valid(raw) {
		return string(raw), true
	}
	return unquote(raw)
}

// int reads an integer value (what encoding/json puts in an int without
// complaint: no fraction, no exponent, in range).
func (s *scanner) int() (int, bool) {
	b, i := s.b, s.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	n := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i-start >= 18 {
			return 0, false // may overflow: the decoder knows
		}
		n = n*10 + int(b[i]-'0')
		i++
	}
	if i == start || (i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
		return 0, false
	}
	s.i = i
	if neg {
		n = -n
	}
	return n, true
}

// skip steps over any value.
func (s *scanner) skip() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		_, _, ok := s.str()
		return ok
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, _, ok := s.str(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	default: // a number or a literal
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return s.i > start
			}
			s.i++
		}
		return s.i > start
	}
}

// unquote decodes the contents of a JSON string as encoding/json does:
// escapes, surrogate pairs, and U+FFFD for invalid UTF-8 or a lone
// surrogate.
func unquote(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw)+utf8.UTFMax)
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 >= len(raw) {
				return "", false
			}
			switch raw[i+1] {
			case '"', '\\', '/', '\'':
				out = append(out, raw[i+1])
				i += 2
			case 'b':
				out = append(out, '\b')
				i += 2
			case 'f':
				out = append(out, '\f')
				i += 2
			case 'n':
				out = append(out, '\n')
				i += 2
			case 'r':
				out = append(out, '\r')
				i += 2
			case 't':
				out = append(out, '\t')
				i += 2
			case 'u':
				r, ok := hex4(raw, i+2)
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok := rune(0), false
					if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2, ok = hex4(raw, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != unicode.ReplacementChar {
						r = dec
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, unicode.ReplacementChar)
			} else {
				out = append(out, raw[i:i+size]...)
			}
			i += size
		}
	}
	return string(out), true
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
