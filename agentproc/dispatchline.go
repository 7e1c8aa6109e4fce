package agentproc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendSurfaceDispatch appends the line of m to dst, byte for byte what Marshal(m) writes, without
// its reflection: a command's dispatch is on every agent-hosted command's path. The args and the
// state are validated and compacted, as encoding/json does with a json.RawMessage. On error dst is returned unchanged.
func AppendSurfaceDispatch(dst []byte, m SurfaceDispatch) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, m.Type)
	dst = append(dst, `,"id":`...)
	dst = appendJSONString(dst, m.ID)
	dst = append(dst, `,"domain":`...)
	dst = appendJSONString(dst, m.Domain)
	dst = append(dst, `,"action":`...)
	dst = appendJSONString(dst, m.Action)
	dst = append(dst, `,"args":`...)
	var err error
	if dst, err = appendRaw(dst, m.Args); err != nil {
		return dst[:start], fmt.Errorf("agentproc: encode record: args: %w", err)
	}
	dst = append(dst, `,"state":`...)
	if dst, err = appendRaw(dst, m.State); err != nil {
		return dst[:start], fmt.Errorf("agentproc: encode record: state: %w", err)
	}
	dst = append(dst, `,"rev":`...)
	dst = strconv.AppendUint(dst, m.Rev, 10)
	if m.Deadline != nil {
		if y := m.Deadline.Year(); y < 0 || y > 9999 {
			// encoding/json refuses such a time; so does this.
			return dst[:start], fmt.Errorf("agentproc: encode record: deadline year %d outside [0,9999]", y)
		}
		dst = append(dst, `,"deadline":"`...)
		dst = m.Deadline.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return append(dst, '}'), nil
}

// appendRaw appends a json.RawMessage as encoding/json does: null when nil, else validated (an
// empty one is not JSON) and compacted, the whitespace between its tokens dropped. The codec's
// scanner validates it, by encoding/json's grammar and nesting limit, with no allocation.
func appendRaw(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	i := skipSpace(raw, 0)
	j, bad := scanValue(raw, i, 0)
	if bad != nil {
		return dst, bad
	}
	if k := skipSpace(raw, j); k != len(raw) {
		return dst, invalidAt(k, "data after the value")
	}
	start := i
	for k := i; k < j; {
		switch raw[k] {
		case ' ', '\t', '\r', '\n':
			dst = append(dst, raw[start:k]...)
			k++
			start = k
		case '"':
			k, _, _ = scanString(raw, k)
		default:
			k++
		}
	}
	return append(dst, raw[start:j]...), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json writes it without HTML
// escaping: '"', '\\' and control bytes escaped, bad UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
