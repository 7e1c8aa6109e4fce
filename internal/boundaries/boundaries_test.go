package boundaries_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Packages are named by their directory in the module ("." is the root);
// "x/..." is x and every package below it.

// core is what the daemon is, whatever a client speaks.
var core = []string{
	".", "actors/...", "agentproc/...", "artifact", "codes", "config", "identity",
	"internal/clock", "internal/delivery", "internal/lograte", "internal/plainjson", "internal/tracing", "membership", "metrics",
	"proto/...", "store/...",
}

// transports are the packages that speak to clients, by transport. A new
// transport is added here (the test fails until it is, once it imports
// internal/delivery).
var transports = map[string][]string{
	"the browser's (HTTP API, SSE, WebSocket)": {"gateway/...", "internal/wire"},
	"ACP":   {"acpgw/..."},
	"MCP":   {"mcpgw/..."},
	"AG-UI": {"agui"},
}

// actorsAndDelivery may import only these packages of the module.
var actorsAndDelivery = struct{ from, allowed []string }{
	from: []string{"actors/...", "internal/delivery"},
	allowed: []string{
		"actors/...", "agentproc", "artifact", "codes", "identity", "internal/clock",
		// tracing: the actor middleware and the agent round trip are seams
		// of the daemon's traces; the package imports only proto/... of
		// the module.
		"internal/lograte", "internal/plainjson", "internal/tracing", "metrics", "proto/...", "store",
	},
}

// leaves import nothing of the module: every transport and the core import
// them.
var leaves = []string{"codes", "identity", "internal/plainjson"}

func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, pkg) })
}

// edge is one import of the module's own packages, with the file that
// makes it.
type edge struct{ from, to, file string }

// imports reads the module-internal imports of every production file
// (tests and the testdata, web and hidden trees left out).
func imports(t *testing.T, root string) []edge {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := ""
	for line := range strings.Lines(string(gomod)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			module = strings.TrimSpace(m)
			break
		}
	}
	if module == "" {
		t.Fatal("go.mod names no module")
	}
	var edges []edge
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || name == "web" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (tools/)
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, cg := range f.Comments {
			if cg.Pos() < f.Package && strings.Contains(cg.Text(), "go:build ignore") {
				return nil
			}
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			switch {
			case p == module:
				edges = append(edges, edge{pkg, ".", filepath.ToSlash(filepath.Join(rel, name))})
			case strings.HasPrefix(p, module+"/"):
				edges = append(edges, edge{pkg, strings.TrimPrefix(p, module+"/"), filepath.ToSlash(filepath.Join(rel, name))})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(edges) < 100 {
		t.Fatalf("only %d imports found under %s", len(edges), root)
	}
	return edges
}

// crossings are the boundaries edges cross, one sentence each.
func crossings(edges []edge) []string {
	transportOf := func(pkg string) string {
		for name, pats := range transports {
			if matchAny(pats, pkg) {
				return name
			}
		}
		return ""
	}
	seen := map[string]bool{}
	var out []string
	say := func(e edge, why string) {
		s := fmt.Sprintf("%s imports %s (%s): %s", e.from, e.to, e.file, why)
		if !seen[e.from+" "+e.to+" "+why] {
			seen[e.from+" "+e.to+" "+why] = true
			out = append(out, s)
		}
	}
	for _, e := range edges {
		from, to := transportOf(e.from), transportOf(e.to)
		if matchAny(actorsAndDelivery.from, e.from) && !matchAny(actorsAndDelivery.allowed, e.to) {
			say(e, "the actors and the delivery path import only "+strings.Join(actorsAndDelivery.allowed, ", ")+
				" (a transport's package, the browser's rendering among them, stays with its transport)")
		}
		if matchAny(core, e.from) && to != "" {
			say(e, "the core imports no transport ("+to+")")
		}
		if from != "" && to != "" && from != to {
			say(e, "a transport ("+from+") imports no other transport ("+to+"); what both need belongs to the core (identity, codes, internal/delivery)")
		}
		if from != "" && match("agentproc/...", e.to) {
			say(e, "a transport does not speak the agent protocol; the codes it answers with are package codes'")
		}
		if e.to == "internal/delivery" && from == "" && !matchAny(core, e.from) {
			say(e, "a package that delivers to clients is a transport: list it in transports")
		}
		if matchAny(leaves, e.from) {
			say(e, e.from+" imports nothing of the module (every transport and the core import it)")
		}
	}
	sort.Strings(out)
	return out
}

func TestNoBoundaryIsCrossed(t *testing.T) {
	for _, c := range crossings(imports(t, "../..")) {
		t.Error(c)
	}
}

// TestTheRulesBite feeds the rules the crossings this test was written
// against, so a rule that stopped matching is noticed.
func TestTheRulesBite(t *testing.T) {
	bad := []edge{
		{"acpgw", "gateway/guard", "acpgw/transport.go"},
		{"internal/delivery", "gateway/guard", "internal/delivery/writer.go"},
		{"actors/session", "internal/wire", "actors/session/lifecycle.go"},
		{"actors/session/internal/turn", "internal/wire", "actors/session/internal/turn/machine.go"},
		{"gateway", "agentproc", "gateway/data.go"},
		{"newproto", "internal/delivery", "newproto/stream.go"},
		{"gateway", "agui", "gateway/agui.go"},
		{"identity", "gateway/guard", "identity/identity.go"},
		{"store", "acpgw", "store/store.go"},
	}
	got := crossings(bad)
	for _, e := range bad {
		if !slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, e.from+" imports "+e.to+" ") }) {
			t.Errorf("%s → %s crosses no rule; got %q", e.from, e.to, got)
		}
	}
	good := []edge{
		{"acpgw", "identity", "acpgw/transport.go"},
		{"gateway", "codes", "gateway/errors.go"},
		{"gateway", "internal/wire", "gateway/sse.go"},
		{"gateway/debug", "gateway/guard", "gateway/debug/debug.go"},
		{"actors/session", "proto/surfaced/v1", "actors/session/lifecycle.go"},
		{"cmd/surfaced", "acpgw", "cmd/surfaced/acp.go"},
		{"cmd/surfaced", "agui", "cmd/surfaced/daemon.go"},
		{"agui", "internal/delivery", "agui/server.go"},
	}
	if got := crossings(good); len(got) != 0 {
		t.Errorf("allowed imports refused: %q", got)
	}
}
