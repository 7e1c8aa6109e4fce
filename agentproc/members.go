package agentproc

// EachMember calls fn with each member of the JSON object that obj holds (JSON whitespace around it
// allowed), in order: key is the name between its quotes, raw
// (escaped reports a backslash in it); value is the member's value exactly as written, without the
// whitespace around it. It stops when fn returns false.
//
// It reports whether it read the whole object with fn never saying stop: false when obj is not an
// object or not valid JSON, or fn returned false. It allocates nothing on valid input, so a caller
// reads the members it needs from a line DecodeEnvelope accepted without decoding the line again;
// value slices share obj's memory.
func EachMember(obj []byte, fn func(key []byte, escaped bool, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return skipSpace(obj, i+1) == len(obj)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return false
		}
		j, escaped, err := scanString(obj, i)
		if err != nil {
			return false
		}
		key := obj[i+1 : j-1]
		i = skipSpace(obj, j)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = skipSpace(obj, i+1)
		j, err = scanValue(obj, i, 1)
		if err != nil {
			return false
		}
		if !fn(key, escaped, obj[i:j:j]) {
			return false
		}
		i = skipSpace(obj, j)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return skipSpace(obj, i+1) == len(obj)
		default:
			return false
		}
	}
}
