package acpgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/plainjson"
	"github.com/surfaced/surfaced/store"
)

// JSON-RPC error codes the gateway answers with (ACP v1 $defs/ErrorCode).
const (
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeNotFound       = -32002
)

// msgKind is what a JSON-RPC message is.
type msgKind int

const (
	kindRequest msgKind = iota + 1
	kindNotification
	kindResponse
)

// rpcMessage is one decoded JSON-RPC 2.0 message. Presence matters (an id of
// null is an id; a missing one is a notification), so it is decoded from a
// map of raw members rather than into a struct with omitempty fields.
type rpcMessage struct {
	kind   msgKind
	id     json.RawMessage // requests and responses
	method string
	params json.RawMessage // may be nil
	result json.RawMessage // responses
	err    *acp.RequestError
}

// errBatch is returned by parseMessage for a JSON array.
var errBatch = errors.New("JSON-RPC batches are not supported")

// parseMessage decodes one POST body. Its errors are sentences for a 400
// answer (errBatch for a 501).
func parseMessage(body []byte) (*rpcMessage, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return nil, errors.New("the body is not valid JSON")
		}
		return nil, errBatch
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		if !json.Valid(body) {
			return nil, errors.New("the body is not valid JSON")
		}
		return nil, errors.New("the body is not a JSON-RPC message (a JSON object)")
	}
	var version string
	if v, ok := raw["jsonrpc"]; !ok || json.Unmarshal(v, &version) != nil || version != "2.0" {
		return nil, errors.New(`the message must carry "jsonrpc": "2.0"`)
	}
	m := &rpcMessage{}
	id, hasID := raw["id"]
	if hasID {
		if err := checkID(id); err != nil {
			return nil, err
		}
		m.id = id
	}
	if rawMethod, ok := raw["method"]; ok {
		if err := json.Unmarshal(rawMethod, &m.method); err != nil || m.method == "" {
			return nil, errors.New(`"method" must be a non-empty string`)
		}
		if p, ok := raw["params"]; ok && !bytes.Equal(bytes.TrimSpace(p), []byte("null")) {
			t := bytes.TrimSpace(p)
			if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
				return nil, errors.New(`"params" must be an object or an array`)
			}
			m.params = p
		}
		if hasID {
			m.kind = kindRequest
		} else {
			m.kind = kindNotification
		}
		return m, nil
	}
	if !hasID {
		return nil, errors.New(`the message has neither "method" nor "id"`)
	}
	res, hasResult := raw["result"]
	rawErr, hasErr := raw["error"]
	switch {
	case hasResult == hasErr:
		return nil, errors.New(`a response must carry exactly one of "result" and "error"`)
	case hasErr:
		// Pointers: a missing or null code or message is refused, not read
		// as 0 or "" (and "error": null with them).
		var e struct {
			Code    *int    `json:"code"`
			Message *string `json:"message"`
			Data    any     `json:"data"`
		}
		if err := json.Unmarshal(rawErr, &e); err != nil || e.Code == nil || e.Message == nil {
			return nil, errors.New(`"error" must be {code, message, data?}`)
		}
		m.err = &acp.RequestError{Code: *e.Code, Message: *e.Message, Data: e.Data}
	default:
		m.result = res
	}
	m.kind = kindResponse
	return m, nil
}

// checkID accepts the JSON-RPC id forms: a string, a number or null.
func checkID(id json.RawMessage) error {
	t := bytes.TrimSpace(id)
	if len(t) == 0 {
		return errors.New(`"id" is empty`)
	}
	switch t[0] {
	case '"':
		var s string
		if json.Unmarshal(t, &s) != nil {
			return errors.New(`"id" is not a valid string`)
		}
		if len(s) > maxIDLen {
			return fmt.Errorf(`"id" is longer than %d characters`, maxIDLen)
		}
	case 'n':
		if !bytes.Equal(t, []byte("null")) {
			return errors.New(`"id" must be a string, a number or null`)
		}
	default:
		var n json.Number
		if json.Unmarshal(t, &n) != nil {
			return errors.New(`"id" must be a string, a number or null`)
		}
		if len(t) > 64 {
			return errors.New(`"id" is too long a number`)
		}
	}
	return nil
}

// maxIDLen bounds a string request id (the TypeScript SDK's default).
const maxIDLen = 1024

// idKey is a map key for a JSON-RPC id: the same id spelled the same way
// maps to the same key; strings and numbers never collide.
func idKey(id json.RawMessage) string {
	t := bytes.TrimSpace(id)
	if len(t) == 0 {
		return ""
	}
	switch t[0] {
	case '"':
		var s string
		_ = json.Unmarshal(t, &s)
		return "s:" + s
	case 'n':
		return "null"
	default:
		if f, err := strconv.ParseFloat(string(t), 64); err == nil && f == float64(int64(f)) {
			return "n:" + strconv.FormatInt(int64(f), 10)
		}
		return "n:" + string(t)
	}
}

// wire is the envelope of every message the gateway writes.
type wire struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id,omitempty"`
	Method  string            `json:"method,omitempty"`
	Params  any               `json:"params,omitempty"`
	Result  any               `json:"result,omitempty"`
	Error   *acp.RequestError `json:"error,omitempty"`
}

// encodeResponse builds a response; err wins over result.
func encodeResponse(id json.RawMessage, result any, rerr *acp.RequestError) []byte {
	w := wire{JSONRPC: "2.0", ID: id}
	if len(w.ID) == 0 {
		w.ID = json.RawMessage("null")
	}
	if rerr != nil {
		w.Error = rerr
	} else {
		if result == nil {
			result = struct{}{}
		}
		w.Result = result
	}
	return mustJSON(w)
}

// encodeNotification builds a notification.
func encodeNotification(method string, params any) []byte {
	return mustJSON(wire{JSONRPC: "2.0", Method: method, Params: params})
}

// encodeRequest builds a request of the gateway to the client.
func encodeRequest(id json.RawMessage, method string, params any) []byte {
	return mustJSON(wire{JSONRPC: "2.0", ID: id, Method: method, Params: params})
}

func mustJSON(v any) []byte {
	b, err := plainjson.Marshal(v)
	if err != nil {
		// Only values built by this package reach here; a failure is a bug.
		panic("acpgw: message not marshalable: " + err.Error())
	}
	return b
}

// Error constructors. The messages are what an editor shows.

func errInvalidParams(field, format string, args ...any) *acp.RequestError {
	msg := fmt.Sprintf(format, args...)
	data := map[string]any{"message": msg}
	if field != "" {
		data["field"] = field
	}
	return &acp.RequestError{Code: codeInvalidParams, Message: "Invalid params: " + msg, Data: data}
}

func errMethodNotFound(method string) *acp.RequestError {
	return &acp.RequestError{Code: codeMethodNotFound, Message: "Method not found", Data: map[string]any{"method": method}}
}

// errNoSuchSession is the one answer for a session that is missing, someone
// else's or another agent's.
func errNoSuchSession() *acp.RequestError {
	return &acp.RequestError{Code: codeNotFound, Message: "No such session."}
}

// errTooManySessions answers session/new past a quota of the runtime.
func errTooManySessions(q *surfaced.QuotaError) *acp.RequestError {
	msg := fmt.Sprintf("Too many sessions: you already have %d open; delete one first.", q.Count)
	if q.Scope == surfaced.QuotaTotal {
		msg = fmt.Sprintf("Too many sessions: this daemon already runs %d.", q.Count)
		if q.Count == 0 {
			msg = "Too many sessions: the node that serves this session runs as many as it may; try again later."
		}
	}
	return &acp.RequestError{Code: codeInternal, Message: msg, Data: map[string]string{"code": codes.TooManySessions}}
}

// errStore answers a change the store could not take (store_unavailable:
// not made, try again) or did not confirm (outcome_unknown: it may have
// been made): -32603 with the code, and a retry hint for the first.
func errStore(code string) *acp.RequestError {
	if code == codes.OutcomeUnknown {
		return &acp.RequestError{Code: codeInternal, Message: "The store did not answer in time: the change may or may not have been made.",
			Data: map[string]any{"code": code}}
	}
	return &acp.RequestError{Code: codeInternal, Message: "The session store cannot be written right now; nothing was changed. Try again.",
		Data: map[string]any{"code": codes.StoreUnavailable, "retryAfter": 1}}
}

// storeErrCode is the store code an error carries, or "".
func storeErrCode(err error) string {
	switch {
	case errors.Is(err, store.ErrOutcomeUnknown):
		return codes.OutcomeUnknown
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, session.ErrStoreUnavailable):
		return codes.StoreUnavailable
	}
	return ""
}

// errTooManySessionsOnConnection answers a session method on a connection
// that has as many sessions as it may.
func errTooManySessionsOnConnection(limit int) *acp.RequestError {
	return &acp.RequestError{Code: codeInternal,
		Message: fmt.Sprintf("Too many sessions on this connection: it has %d (the limit); close one (session/close) or open another connection.", limit),
		Data:    map[string]string{"code": codes.TooManySessionsOnConnection}}
}

// errTooManyConnections answers initialize for a subject that has as many
// connections open as it may.
func errTooManyConnections(limit int) *acp.RequestError {
	return &acp.RequestError{Code: codeInternal,
		Message: fmt.Sprintf("Too many connections: you already have %d open (the limit); close one (DELETE) or let an unused one expire.", limit),
		Data:    map[string]string{"code": codes.TooManyConnections}}
}

// errInternal never carries the failure's text: that is logged.
func errInternal(code string) *acp.RequestError {
	e := &acp.RequestError{Code: codeInternal, Message: "Internal error"}
	if code != "" {
		e.Data = map[string]string{"code": code}
	}
	return e
}
