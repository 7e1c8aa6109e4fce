package agui

import "testing"

// Strings are escaped as JSON.stringify escapes them, so that the stream's
// bytes are what @ag-ui/encoder would write for the same event.
func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         `"plain"`,
		`a "quote" \ b`: `"a \"quote\" \\ b"`,
		"\b\f\n\r\t":    `"\b\f\n\r\t"`,
		"\x00\x01\x1f":  `"\u0000\u0001\u001f"`,
		"é 漢 🙂 <&>":     `"é 漢 🙂 <&>"`,
		"\u2028\u2029":  "\"\u2028\u2029\"",
		"bad \xff byte": "\"bad \ufffd byte\"",
	} {
		if got := string(appendString(nil, in)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", in, got, want)
		}
	}
}
