package mcpgw

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// The hottest request of the mount is a tools/call of run_command: what an
// MCP client sends for every surface command. Through the SDK's transport it
// costs more than the command itself (the SDK decodes the request several
// times, each through a fresh 32 KiB buffer, and, for a stateless request,
// builds a session and a connection with their goroutines), so the mount
// serves that one request itself, ahead of the SDK, in both protocols (a
// stateless 2026-07-28 request, or one of a stateful session the client
// opened with initialize), and gives the SDK everything else. It is served as the SDK would
// serve it — the same checks, the same tool code (runCommand, as the SDK's
// middleware calls it), the same answer on the wire — and only when the
// request is one the SDK would accept as it is: any request it does not
// recognize in full, however small the difference (a progress token, a
// header parameter, an id the SDK would reject, trailing bytes), goes to
// the SDK unchanged, which answers it or refuses it as it always does.

// fastCall is a tools/call of run_command, as the mount serves it itself.
type fastCall struct {
	id   json.RawMessage // the JSON-RPC id, as the client wrote it
	args json.RawMessage // the tool's arguments
}

// fastMetaKeys are the _meta keys a request the mount serves itself may
// carry (SEP-2575's request triple and the log level); any other key (a
// progress token, a task) sends it to the SDK.
var fastMetaKeys = map[string]func(json.RawMessage) bool{
	mcp.MetaKeyProtocolVersion:           func(v json.RawMessage) bool { return string(v) == `"`+statelessVersion+`"` },
	mcp.MetaKeyClientCapabilities:        isObject,
	"io.modelcontextprotocol/clientInfo": isObject,
	"io.modelcontextprotocol/logLevel":   isString,
}

// integerID is a JSON-RPC id the SDK reads as an integer (it refuses
// fractions and exponents); a string id is the other kind.
var integerID = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)

// statefulVersions are the versions of the stateful protocol whose
// tools/call the mount serves itself (both refuse batches, so one request
// is all a body holds).
var statefulVersions = map[string]bool{"2025-11-25": true, "2025-06-18": true}

// parseFastCall reads a request the mount may serve itself: the headers of
// a tools/call of run_command — a 2026-07-28 stateless one (stateless), or
// one of a stateful session's (the session is the caller's concern) — and
// a body that is one JSON-RPC request with nothing the SDK would read
// differently. ok is false for every other request.
func parseFastCall(h http.Header, body []byte, stateless bool) (c fastCall, ok bool) {
	if stateless {
		if h.Get("Mcp-Protocol-Version") != statelessVersion || h.Get("Mcp-Method") != "tools/call" ||
			h.Get("Mcp-Name") != runCommandTool.Name || h.Get("Mcp-Session-Id") != "" {
			return c, false
		}
	} else if !statefulVersions[h.Get("Mcp-Protocol-Version")] || h.Get("Mcp-Session-Id") == "" ||
		(h.Get("Mcp-Method") != "" && h.Get("Mcp-Method") != "tools/call") ||
		(h.Get("Mcp-Name") != "" && h.Get("Mcp-Name") != runCommandTool.Name) {
		return c, false
	}
	for k := range h {
		if strings.HasPrefix(k, "Mcp-Param-") {
			return c, false
		}
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return c, false
	}
	if !acceptsBoth(h.Values("Accept")) {
		return c, false
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  *struct {
			Name      string                     `json:"name"`
			Arguments json.RawMessage            `json:"arguments"`
			Meta      map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return c, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, false // trailing bytes, or a second value
	}
	if req.JSONRPC != "2.0" || req.Method != "tools/call" || req.Params == nil || req.Params.Name != runCommandTool.Name {
		return c, false
	}
	if !integerID.Match(req.ID) && !isString(req.ID) {
		return c, false
	}
	if !stateless {
		if len(req.Params.Meta) > 0 {
			return c, false // a progress token, or the new protocol's triple
		}
	} else if len(req.Params.Meta) == 0 {
		return c, false
	}
	for _, key := range []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities} {
		if !stateless {
			break
		}
		if _, ok := req.Params.Meta[key]; !ok {
			return c, false
		}
	}
	for k, v := range req.Params.Meta {
		valid, known := fastMetaKeys[k]
		if !known || !valid(v) {
			return c, false
		}
	}
	args := bytes.TrimSpace(req.Params.Arguments)
	if len(args) > 0 && !isObject(args) {
		return c, false // arguments that are not an object are the SDK's to answer
	}
	return fastCall{id: req.ID, args: args}, true
}

// serveFast serves r itself when it is a request parseFastCall takes, and
// reports whether it did. Otherwise r's body is put back as it came, for
// the SDK. A stateful request has been admitted to its session already
// (bindings.serve): a session the caller opened, on this path, that the
// SDK initialized.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, stateless bool) bool {
	if r.Method != http.MethodPost {
		return false
	}
	if stateless && (r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != runCommandTool.Name) {
		return false // the common refusals cost no read
	}
	if !stateless && (!statefulVersions[r.Header.Get("Mcp-Protocol-Version")] || r.ContentLength > s.opts.BodyBytes) {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.BodyBytes+1))
	if err != nil || int64(len(body)) > s.opts.BodyBytes {
		// Over the bound (or cut short): the SDK says so in its words.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return false
	}
	// A stateful request names its method only in its body: a scan for the
	// tool's name spares the other requests (a prompt of megabytes) a
	// decode before the SDK's own.
	c, ok := fastCall{}, stateless || bytes.Contains(body, runCommandName)
	if ok {
		c, ok = parseFastCall(r.Header, body, stateless)
	}
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	res := s.runCommand(r.Context(), c.args)
	if stateless {
		// The new protocol names the server in every result.
		res.Meta = mcp.Meta{mcp.MetaKeyServerInfo: s.impl}
	}
	out, err := plainjson.Marshal(fastResponse{JSONRPC: "2.0", ID: c.id, Result: res})
	if err != nil {
		// A result that does not encode is the SDK's error too.
		s.log.Error("a run_command result does not encode", "err", err)
		out, _ = plainjson.Marshal(fastResponse{JSONRPC: "2.0", ID: c.id,
			Error: &fastError{Code: -32603, Message: "the result could not be encoded"}})
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, len(out)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, out...)
	buf = append(buf, "\n\n"...)
	_, _ = w.Write(buf)
	return true
}

var runCommandName = []byte(`"` + runCommandTool.Name + `"`)

type fastResponse struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      json.RawMessage     `json:"id"`
	Result  *mcp.CallToolResult `json:"result,omitempty"`
	Error   *fastError          `json:"error,omitempty"`
}

type fastError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// acceptsBoth: an Accept that names application/json and
// text/event-stream, as the SDK requires of a stateless POST.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for raw := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(raw, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{' && json.Valid(v)
}

func isString(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '"' && json.Valid(v)
}
