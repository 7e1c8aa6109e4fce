package mcpgw

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/actors/surface"
)

// FuzzResourceURI: any string parses to a resource of one session, or is
// refused; what parses names itself again.
func FuzzResourceURI(f *testing.F) {
	for _, s := range []string{"surfaced://sessions/abc/surfaces/demo", "surfaced://sessions/abc/transcript",
		"surfaced://sessions/abc/artifacts/att_x", "surfaced://sessions//surfaces/x", "surfaced://sessions/a/b/c/d", "file:///etc/passwd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		ref, ok := parseURI(uri)
		if !ok {
			return
		}
		var again string
		switch ref.kind {
		case resourceKindState:
			again = surfaceURI(ref.session, ref.name)
		case "transcript":
			again = transcriptURI(ref.session)
		case "artifacts":
			again = artifactURI(ref.session, ref.name)
		default:
			t.Fatalf("%q: kind %q", uri, ref.kind)
		}
		if again != uri || strings.Contains(ref.session, "/") || strings.Contains(ref.name, "/") {
			t.Fatalf("%q parsed to %+v (%q)", uri, ref, again)
		}
	})
}

// FuzzMountPath: any path is the mount, a session below it, or refused.
func FuzzMountPath(f *testing.F) {
	s := &Server{path: "/mcp"}
	for _, p := range []string{"/mcp", "/mcp/", "/mcp/sessions/abc", "/mcp/sessions/abc/", "/mcp/sessions/a/b", "/mcpx", "/mcp/sessions/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		id, ok := s.attachedOf(path)
		if ok && (strings.Contains(id, "/") || (id == "" && path != "/mcp" && path != "/mcp/")) {
			t.Fatalf("%q: %q", path, id)
		}
	})
}

// FuzzCommandArgs: any args either fit a declared schema or are refused
// with invalid_args, never a panic.
func FuzzCommandArgs(f *testing.F) {
	sch, bad := surface.CompileSchemas(map[string][]byte{"rotate": []byte(`{"type":"object","properties":{"degrees":{"type":"number","minimum":-360,"maximum":360}},"required":["degrees"],"additionalProperties":false}`)})
	if bad != nil {
		f.Fatal(bad)
	}
	for _, a := range []string{`{"degrees":90}`, `{}`, `null`, `[]`, `{"degrees":"x"}`, `{`} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, args string) {
		e := sch.Check("canvas", "rotate", json.RawMessage(args))
		if e != nil && e.Code != "invalid_args" {
			t.Fatalf("%q: %v", args, e)
		}
	})
}

// FuzzParseFastCall: whatever the body, a request the mount serves itself
// is one JSON-RPC call of run_command with an id the SDK reads (an integer
// or a string) and arguments that are absent or an object; parsing it again
// gives the same.
func FuzzParseFastCall(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"sessionId":"s"},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"run_command",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"run_command",` + meta + `}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command",` + meta + `}}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":[1],` + meta + `}} {}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{}}}`), false)
	headers := func(stateless bool) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		if stateless {
			h.Set("Mcp-Protocol-Version", statelessVersion)
			h.Set("Mcp-Method", "tools/call")
			h.Set("Mcp-Name", "run_command")
		} else {
			h.Set("Mcp-Protocol-Version", "2025-11-25")
			h.Set("Mcp-Session-Id", "S")
		}
		return h
	}
	f.Fuzz(func(t *testing.T, body []byte, stateless bool) {
		h := headers(stateless)
		c, ok := parseFastCall(h, body, stateless)
		if !ok {
			return
		}
		if !json.Valid(body) || !json.Valid(c.id) || (len(c.args) > 0 && !json.Valid(c.args)) {
			t.Fatalf("%q taken: id %q args %q", body, c.id, c.args)
		}
		var id any
		_ = json.Unmarshal(c.id, &id)
		switch v := id.(type) {
		case string:
		case float64:
			if v != float64(int64(v)) {
				t.Fatalf("%q taken with id %q", body, c.id)
			}
		default:
			t.Fatalf("%q taken with id %q", body, c.id)
		}
		if len(c.args) > 0 && c.args[0] != '{' {
			t.Fatalf("%q taken with arguments %q", body, c.args)
		}
		if again, ok := parseFastCall(h, body, stateless); !ok || string(again.id) != string(c.id) || string(again.args) != string(c.args) {
			t.Fatalf("%q parsed twice differently", body)
		}
	})
}

// TestParseFastCallHeaders: only the headers of a stateless tools/call of
// run_command, with an Accept and a Content-Type the SDK takes, let the
// mount serve a request itself.
func TestParseFastCallHeaders(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	base := func() http.Header {
		h := http.Header{}
		h.Set("Mcp-Protocol-Version", statelessVersion)
		h.Set("Mcp-Method", "tools/call")
		h.Set("Mcp-Name", "run_command")
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Accept", "text/event-stream, application/json;q=0.9")
		return h
	}
	if _, ok := parseFastCall(base(), body, true); !ok {
		t.Fatal("the plain request was not taken")
	}
	for name, change := range map[string]func(http.Header){
		"an older version":   func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-11-25") },
		"another method":     func(h http.Header) { h.Set("Mcp-Method", "tools/list") },
		"another tool":       func(h http.Header) { h.Set("Mcp-Name", "prompt") },
		"a session":          func(h http.Header) { h.Set("Mcp-Session-Id", "abc") },
		"a header parameter": func(h http.Header) { h.Set("Mcp-Param-Region", "eu") },
		"text/plain":         func(h http.Header) { h.Set("Content-Type", "text/plain") },
		"no event stream":    func(h http.Header) { h.Set("Accept", "application/json") },
	} {
		h := base()
		change(h)
		if _, ok := parseFastCall(h, body, true); ok {
			t.Errorf("%s: taken", name)
		}
	}
}
