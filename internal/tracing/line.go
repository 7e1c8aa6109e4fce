package tracing

// WithTraceparent returns a JSON object line with a "traceparent" member
// first (line as it is for "" or a line that is not an object). The daemon
// writes every line to an agent as one object that begins with '{'.
func WithTraceparent(line []byte, traceparent string) []byte {
	if traceparent == "" || len(line) < 2 || line[0] != '{' {
		return line
	}
	rest := line[1:]
	i := 0
	for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
		i++
	}
	empty := i < len(rest) && rest[i] == '}'
	out := make([]byte, 0, len(line)+len(traceparent)+17)
	out = append(out, `{"traceparent":"`...)
	out = append(out, traceparent...)
	out = append(out, '"')
	if !empty {
		out = append(out, ',')
	}
	return append(out, rest...)
}
