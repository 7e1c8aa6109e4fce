// Package plainjson is the daemon's one JSON encoder setting: encoding/json
// without its HTML escaping. encoding/json writes '<', '>' and '&' as
// six-byte \u escapes for the sake of HTML pages; nothing the daemon writes
// is embedded in one (API bodies, frames, ACP messages, agent lines, stored
// rows), so a text of '<' would only grow sixfold on its way. U+2028 and
// U+2029 are still escaped, as encoding/json always does, so the JSON stays
// safe inside a JavaScript line.
//
// Every JSON value the daemon writes goes through Marshal.
package plainjson

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping, also in what a value's
// own MarshalJSON wrote with json.Marshal (encoding/json keeps a
// marshaler's escapes; the ACP SDK's types are such values).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	b = b[:len(b)-1] // Encode ends the value with '\n'
	if bytes.Contains(b, []byte(`\u00`)) {
		b = unescapeHTML(b)
	}
	return b, nil
}

// unescapeHTML turns the escapes \u003c, \u003e and \u0026 in the strings
// of the valid JSON b back into '<', '>' and '&', in place. Other escapes
// stay as they are (an escaped backslash followed by "u003c" is text).
func unescapeHTML(b []byte) []byte {
	out := b[:0]
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !inString:
			if c == '"' {
				inString = true
			}
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(b):
			if r, ok := htmlEscape(b[i+1:]); ok {
				out = append(out, r)
				i += 5
				continue
			}
			// Any other escape is copied whole: its second byte is never
			// the end of the string.
			out = append(out, c, b[i+1])
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

// htmlEscape reads the escape after a backslash: u003c, u003e or u0026
// (either case) is the byte it stands for.
func htmlEscape(e []byte) (byte, bool) {
	if len(e) < 5 || e[0] != 'u' || e[1] != '0' || e[2] != '0' {
		return 0, false
	}
	switch [2]byte{e[3], e[4] | 0x20} { // a hex letter in either case
	case [2]byte{'3', 'c'}:
		return '<', true
	case [2]byte{'3', 'e'}:
		return '>', true
	case [2]byte{'2', '6'}:
		return '&', true
	}
	return 0, false
}
