package plainjson

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// escaping is a value whose MarshalJSON escapes, as json.Marshal does.
type escaping string

func (e escaping) MarshalJSON() ([]byte, error) { return json.Marshal(string(e)) }

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{map[string]any{"text": "<b>a & b</b>\u2028", "raw": []byte("<")}, `{"raw":"PA==","text":"<b>a & b</b>\u2028"}`},
		// A marshaler's own escapes are undone too.
		{[]any{escaping("<b>&</b>"), json.RawMessage(`"\u003C\u003e\u0026"`)}, `["<b>&</b>","<>&"]`},
		// An escaped backslash before "u003c" is text, and stays.
		{`\u003c "<"`, `"\\u003c \"<\""`},
		{`\<`, `"\\<"`},
		// Other escapes stay as they are.
		{"\x00\u2029\t\"", `"\u0000\u2029\t\""`},
	} {
		b, err := Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("Marshal(%#v) = %s, want %s", c.v, b, c.want)
		}
		if !json.Valid(b) {
			t.Errorf("Marshal(%#v) = %s: not JSON", c.v, b)
		}
	}
}

// Every JSON value the daemon writes goes through this package: code that
// runs in the daemon (or in an agent built with agentkit) calls neither
// json.Marshal, json.MarshalIndent nor json.NewEncoder. Tests, the test
// harnesses and the examples (which people copy out of the module) may.
func TestNoOtherEncoder(t *testing.T) {
	root := testkit.RepoRoot()
	skipDirs := map[string]bool{
		"web": true, "tools": true, "examples": true, "testdata": true, "node_modules": true,
		"internal/plainjson": true, "internal/testkit": true, "internal/fakeagent": true,
		"internal/llmstub": true, "internal/pitest": true, "agentproc/agentkit/agentkittest": true,
		// Not the daemon: the benchmarks' baseline server, a build tool.
		"internal/plainserver": true, "deploy/tools": true,
	}
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDirs[rel] || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"encoding/json"` {
				pkg = "json"
				if imp.Name != nil {
					pkg = imp.Name.Name
				}
			}
		}
		if pkg == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg {
				switch sel.Sel.Name {
				case "Marshal", "MarshalIndent", "NewEncoder":
					found = append(found, fset.Position(sel.Pos()).String()[len(root)+1:]+": json."+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("JSON written with HTML escaping; use plainjson:\n%s", strings.Join(found, "\n"))
	}
}
