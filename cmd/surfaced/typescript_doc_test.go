package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// TestAgentsTypeScriptDocHoldsTheExamples: the complete agents printed in
// docs/agents-typescript.md are the ones the tests run.
func TestAgentsTypeScriptDocHoldsTheExamples(t *testing.T) {
	root := testkit.RepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "agents-typescript.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct{ file, lang string }{
		{"examples/node-agent/agent.mjs", "js"},
		{"examples/pi-surface-demo/index.ts", "ts"},
	} {
		src, err := os.ReadFile(filepath.Join(root, ex.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```"+ex.lang+"\n"+string(src)+"```\n") {
			t.Errorf("docs/agents-typescript.md does not hold %s as it is, in a %s block: copy it over", ex.file, ex.lang)
		}
	}
}
