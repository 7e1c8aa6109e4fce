package mcpgw

import (
	"encoding/json"
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
