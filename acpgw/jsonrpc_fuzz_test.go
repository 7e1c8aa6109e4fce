package acpgw

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseMessage feeds parseMessage arbitrary POST bodies. It must never
// panic; what it accepts is one well-formed JSON-RPC message of the kind it
// says, whose id the routing tables key the same way after the gateway's
// own encoders have written it out again; what it refuses gets a sentence
// for the 400 answer (errBatch, for a 501, only for a JSON array).
func FuzzParseMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":"a-1","method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x","params":null}`,
		`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"no","data":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":1.0e2,"result":null}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
		` {"jsonrpc":"2.0","id":-0,"method":"m","params":[1,2]} `,
		`{"jsonrpc":"1.0","id":1,"method":"m"}`,
		`{"jsonrpc":"2.0","id":{},"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":3,"error":null}`,
		`{"jsonrpc":"2.0","id":3,"error":{}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":null,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"Code":-1,"MESSAGE":"case"}}`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":"text"}`,
		`{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":""}`,
		`null`, `"str"`, `[`, ``, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseMessage(body)
		if err != nil {
			checkRefusal(t, body, m, err)
			return
		}
		checkMessage(t, body, m)
		if m.err != nil {
			checkErrorMember(t, body)
		}

		// The gateway's encoders write the message out again; it parses
		// back as the same message with the same routing key.
		var again []byte
		switch m.kind {
		case kindRequest:
			again = encodeRequest(m.id, m.method, paramsOf(m))
		case kindNotification:
			again = encodeNotification(m.method, paramsOf(m))
		case kindResponse:
			var result any
			if m.err == nil {
				result = m.result
			}
			again = encodeResponse(m.id, result, m.err)
		}
		m2, err := parseMessage(again)
		if err != nil {
			t.Fatalf("%s\nre-encoded as %s: %v", body, again, err)
		}
		checkMessage(t, again, m2)
		if m2.kind != m.kind || m2.method != m.method || idKey(m2.id) != idKey(m.id) || (m2.err == nil) != (m.err == nil) {
			t.Fatalf("%s\nre-encoded as %s parses as kind %d method %q id %q, not kind %d method %q id %q",
				body, again, m2.kind, m2.method, idKey(m2.id), m.kind, m.method, idKey(m.id))
		}
		if m.err != nil && (m2.err.Code != m.err.Code || m2.err.Message != m.err.Message) {
			t.Fatalf("%s\nre-encoded as %s: error %+v became %+v", body, again, m.err, m2.err)
		}
	})
}

// paramsOf is m's params as the encoders take them: absent stays absent.
func paramsOf(m *rpcMessage) any {
	if m.params == nil {
		return nil
	}
	return m.params
}

func checkRefusal(t *testing.T, body []byte, m *rpcMessage, err error) {
	t.Helper()
	if m != nil {
		t.Fatalf("%q: a message (%+v) and an error (%v)", body, m, err)
	}
	msg := err.Error()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("%q: an empty refusal", body)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	isArray := len(trimmed) > 0 && trimmed[0] == '[' && json.Valid(trimmed)
	if (err == errBatch) != isArray {
		t.Fatalf("%q: refused with %q; a batch answer is for a JSON array, and only for one", body, msg)
	}
}

func checkMessage(t *testing.T, body []byte, m *rpcMessage) {
	t.Helper()
	if m == nil {
		t.Fatalf("%q: no message and no error", body)
	}
	if !json.Valid(body) {
		t.Fatalf("%q: accepted, but it is not valid JSON", body)
	}
	switch m.kind {
	case kindRequest, kindNotification:
		if m.method == "" {
			t.Fatalf("%q: a %d without a method", body, m.kind)
		}
		if (m.kind == kindRequest) != (m.id != nil) {
			t.Fatalf("%q: kind %d with id %q", body, m.kind, m.id)
		}
		if m.result != nil || m.err != nil {
			t.Fatalf("%q: a request carries a result or an error", body)
		}
		if m.params != nil {
			p := bytes.TrimSpace(m.params)
			if len(p) == 0 || (p[0] != '{' && p[0] != '[') || !json.Valid(p) {
				t.Fatalf("%q: params %q are not an object or an array", body, m.params)
			}
		}
	case kindResponse:
		if m.id == nil || m.method != "" || m.params != nil {
			t.Fatalf("%q: a response with id %q method %q params %q", body, m.id, m.method, m.params)
		}
		if (m.result != nil) == (m.err != nil) {
			t.Fatalf("%q: a response with result %q and error %v", body, m.result, m.err)
		}
	default:
		t.Fatalf("%q: kind %d", body, m.kind)
	}
	if m.id != nil {
		if err := checkID(m.id); err != nil {
			t.Fatalf("%q: accepted id %q fails checkID: %v", body, m.id, err)
		}
		if k := idKey(m.id); k == "" || !(k == "null" || strings.HasPrefix(k, "s:") || strings.HasPrefix(k, "n:")) {
			t.Fatalf("%q: id %q keys as %q", body, m.id, k)
		}
	}
}

// checkErrorMember checks that the body of an accepted error response
// carries what JSON-RPC 2.0 requires of its "error": an object with an
// integer code and a string message. Member names match as encoding/json
// matches them everywhere in the daemon: exactly, or else ignoring case.
func checkErrorMember(t *testing.T, body []byte) {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if json.Unmarshal(members["error"], &e) != nil || e == nil {
		t.Fatalf("%q: an error response whose error is not an object", body)
	}
	hasCode, hasMessage := false, false
	for k, v := range e {
		switch {
		case strings.EqualFold(k, "code"):
			if code, ok := v.(float64); ok && code == float64(int64(code)) {
				hasCode = true
			}
		case strings.EqualFold(k, "message"):
			if _, ok := v.(string); ok {
				hasMessage = true
			}
		}
	}
	if !hasCode || !hasMessage {
		t.Fatalf("%q: an error response without an integer code and a string message", body)
	}
}
