package surface

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/surfaced/surfaced/agentproc"
)

// An agent's answer to a dispatch, read once.
//
// The reader already checked the line (agentproc.DecodeEnvelope validates all
// of it), so the answer is read in place, in one pass over the line and one
// over its small result object: no reflection, and the result's data and the
// new state share the line's memory instead of being copied out of it. What
// this reading accepts, it reads exactly as encoding/json does; a line it
// cannot vouch for that way (a member name in another case, escaped or not
// ASCII, which encoding/json would match case-insensitively; a repeated
// result member, which encoding/json may merge; a "type" or "id" that is not
// a string) is read by encoding/json instead, the reference reading, which
// also gives the error of a line that is not valid. FuzzParseDispatchResult
// holds the two readings equal.

// parseDispatchResult normalizes a surface_dispatch_result line. A state of
// JSON null counts as absent (unchanged).
func parseDispatchResult(line []byte) (Result, json.RawMessage) {
	var result, state []byte
	inPlace := agentproc.EachMember(line, func(key []byte, escaped bool, v []byte) bool {
		if escaped || !asciiName(key) {
			return false
		}
		switch string(key) {
		case "result":
			result = v
		case "state":
			state = v
		case "type", "id":
			return v[0] == '"'
		default:
			return !foldsTo(key, "result", "state", "type", "id")
		}
		return true
	})
	if !inPlace {
		return parseDispatchResultJSON(line)
	}
	if string(state) == "null" {
		state = nil
	}
	return NormalizeAgentResult(result), state
}

// NormalizeAgentResult turns the result object an agent sent into a Result:
// {ok:true,data?} or {ok:false,error:{code,message}}; anything else is
// dispatch_failed. Data shares raw's memory.
func NormalizeAgentResult(raw json.RawMessage) Result {
	if len(raw) == 0 {
		return invalidAgentResult()
	}
	if raw[0] != '{' {
		return normalizeAgentResultJSON(raw)
	}
	var okv, data, errv []byte
	var seen uint8
	inPlace := agentproc.EachMember(raw, func(key []byte, escaped bool, v []byte) bool {
		if escaped || !asciiName(key) {
			return false
		}
		var bit uint8
		switch string(key) {
		case "ok":
			okv, bit = v, 1
		case "data":
			data, bit = v, 2
		case "error":
			errv, bit = v, 4
		default:
			return !foldsTo(key, "ok", "data", "error")
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	if !inPlace {
		return normalizeAgentResultJSON(raw)
	}
	var code, message []byte
	if len(errv) > 0 && errv[0] == '{' {
		seen = 0
		inPlace = agentproc.EachMember(errv, func(key []byte, escaped bool, v []byte) bool {
			if escaped || !asciiName(key) {
				return false
			}
			var bit uint8
			switch string(key) {
			case "code":
				code, bit = v, 1
			case "message":
				message, bit = v, 2
			default:
				return !foldsTo(key, "code", "message")
			}
			if seen&bit != 0 {
				return false
			}
			seen |= bit
			return true
		})
		if !inPlace {
			return normalizeAgentResultJSON(raw)
		}
	}
	// What encoding/json refuses to put in {ok *bool; data; error *{code,
	// message *string}} makes the whole result invalid, whatever ok says.
	switch {
	case !isBool(okv) && !isNullOrAbsent(okv),
		len(errv) > 0 && errv[0] != '{' && !isNullOrAbsent(errv),
		len(code) > 0 && code[0] != '"' && !isNullOrAbsent(code),
		len(message) > 0 && message[0] != '"' && !isNullOrAbsent(message),
		isNullOrAbsent(okv):
		return invalidAgentResult()
	}
	if string(okv) == "true" {
		if string(data) == "null" {
			data = nil
		}
		return Result{OK: true, Data: data}
	}
	if len(code) == 0 || code[0] != '"' || len(code) == 2 {
		return Fail(agentproc.CodeDispatchFailed, "the agent reported a failure without an error code")
	}
	msg := ""
	if len(message) > 0 && message[0] == '"' {
		msg = jsonString(message)
	}
	return Fail(jsonString(code), msg)
}

func invalidAgentResult() Result {
	return Fail(agentproc.CodeDispatchFailed, "the agent answered without a valid result ({ok, data?} or {ok:false, error})")
}

func isBool(v []byte) bool { return string(v) == "true" || string(v) == "false" }

func isNullOrAbsent(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// asciiName reports whether a member name is plain ASCII, which encoding/json
// folds only by ASCII case (a non-ASCII name may fold to an ASCII one: the
// Kelvin sign to "k").
func asciiName(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldsTo reports whether key, not spelled as any of names, would still match
// one of them in encoding/json (which matches names case-insensitively).
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

// jsonString decodes a valid JSON string as encoding/json does (escapes,
// U+FFFD for bad UTF-8).
func jsonString(v []byte) string {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// parseDispatchResultJSON is the reference reading of a dispatch result line,
// by encoding/json.
func parseDispatchResultJSON(line []byte) (Result, json.RawMessage) {
	var msg agentproc.SurfaceDispatchResult
	if err := json.Unmarshal(line, &msg); err != nil {
		return Fail(agentproc.CodeDispatchFailed, "the agent's dispatch result is not valid: "+err.Error()), nil
	}
	var state json.RawMessage
	if len(msg.State) > 0 && string(msg.State) != "null" {
		state = msg.State
	}
	return normalizeAgentResultJSON(msg.Result), state
}

// normalizeAgentResultJSON is the reference reading of a result, by
// encoding/json.
func normalizeAgentResultJSON(raw json.RawMessage) Result {
	var r struct {
		OK    *bool           `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil || r.OK == nil {
		return invalidAgentResult()
	}
	if *r.OK {
		data := r.Data
		if string(data) == "null" {
			data = nil
		}
		return Result{OK: true, Data: data}
	}
	if r.Error == nil || r.Error.Code == nil || *r.Error.Code == "" {
		return Fail(agentproc.CodeDispatchFailed, "the agent reported a failure without an error code")
	}
	msg := ""
	if r.Error.Message != nil {
		msg = *r.Error.Message
	}
	return Fail(*r.Error.Code, msg)
}
