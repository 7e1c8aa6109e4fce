package codes_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// listed parses codes.go: each code's value and whether it has a doc
// comment.
func listed(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	byValue := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s is not a string literal", name.Name)
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				if !valid.MatchString(v) {
					t.Errorf("%s = %q is not snake_case", name.Name, v)
				}
				if vs.Doc == nil || !strings.HasPrefix(vs.Doc.Text(), name.Name) {
					t.Errorf("%s has no doc comment that starts with its name", name.Name)
				}
				if other, dup := byValue[v]; dup {
					t.Errorf("%s and %s are both %q", other, name.Name, v)
				}
				byValue[v] = name.Name
			}
		}
	}
	if len(byValue) < 50 {
		t.Fatalf("only %d codes parsed", len(byValue))
	}
	return byValue
}

// TestEveryCodeIsDocumented: a code a client can meet is described where
// clients read (docs/*.md), and every code of the HTTP API's status table
// is one of the list.
func TestEveryCodeIsDocumented(t *testing.T) {
	byValue := listed(t)
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	var all strings.Builder
	for _, p := range docs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	text := all.String()
	for v, name := range byValue {
		// `code`, `409 code`, "code"
		if !regexp.MustCompile("(`|`[0-9]{3} |\")" + v + "(`|\")").MatchString(text) {
			t.Errorf("%s (%q) appears in no docs/*.md", name, v)
		}
	}

	api, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| [0-9, ]+ \| (.*)\|$`)
	code := regexp.MustCompile("`([a-z][a-z0-9_]*)`")
	rows := row.FindAllStringSubmatch(string(api), -1)
	if len(rows) < 10 {
		t.Fatalf("the status table of docs/http-api.md has %d rows", len(rows))
	}
	for _, r := range rows {
		for _, m := range code.FindAllStringSubmatch(r[1], -1) {
			if _, ok := byValue[m[1]]; !ok {
				t.Errorf("docs/http-api.md's status table names %q, which package codes does not list", m[1])
			}
		}
	}
	if !strings.Contains(string(api), "codes/codes.go") {
		t.Error("docs/http-api.md does not point at codes/codes.go")
	}
}
