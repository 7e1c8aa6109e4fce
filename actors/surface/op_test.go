package surface

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// goldenCase is one entry of testdata/surface-op.golden.json, shared with the browser client's
// test (gateway/internal/webui/testdata/surfaced_test.mjs) so both implementations are held to the same bytes.
type goldenCase struct {
	Name string `json:"name"`
	Op   struct {
		Title string `json:"title"`
		Tool  string `json:"tool"`
		// A JSON null value decodes to "", which RenderOp skips like the JS client skips null.
		Params [][2]string `json:"params"`
		Fence  string      `json:"fence"`
	} `json:"op"`
	Want string `json:"want"`
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/surface-op.golden.json")
	if err != nil {
		t.Fatalf("read golden file: %v", err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("decode golden file: %v", err)
	}
	if len(cases) < 10 {
		t.Fatalf("golden file has %d cases, want at least 10", len(cases))
	}
	return cases
}

func TestRenderOpGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range loadGolden(t) {
		if seen[c.Name] {
			t.Fatalf("duplicate golden case name %q", c.Name)
		}
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			got := RenderOp(Op{Title: c.Op.Title, Tool: c.Op.Tool, Fence: c.Op.Fence, Params: c.Op.Params})
			if got != c.Want {
				t.Errorf("RenderOp mismatch\n got: %q\nwant: %q", got, c.Want)
			}
		})
	}
}

func TestRenderOpSpecExample(t *testing.T) {
	// The example written in docs/agent-protocol.md, independent of the golden file.
	if got, want := RenderOp(Op{Title: "T", Tool: "x"}), "T\n\n```surface-op\ntool: x\n```"; got != want {
		t.Fatalf("RenderOp = %q, want %q", got, want)
	}
}

func TestRenderOpStructure(t *testing.T) {
	// Every non-empty param appears as exactly one "k: v" line between the tool line and the
	// closing fence, in order; empty ones leave no trace.
	params := [][2]string{{"a", "1"}, {"b", ""}, {"c", "3"}, {"d", ""}, {"e", "5"}}
	got := RenderOp(Op{Title: "title", Tool: "tool", Fence: "f", Params: params})
	head, body, ok := strings.Cut(got, "\n\n```f\n")
	if !ok || head != "title" {
		t.Fatalf("header not found in %q", got)
	}
	if !strings.HasSuffix(body, "\n```") {
		t.Fatalf("no closing fence (or a trailing newline) in %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n```"), "\n")
	want := []string{"tool: tool", "a: 1", "c: 3", "e: 5"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("lines = %q, want %q", lines, want)
	}
}

func TestRenderOpDoesNotMutateParams(t *testing.T) {
	params := [][2]string{{"k", "v"}, {"e", ""}}
	RenderOp(Op{Params: params})
	if params[0] != [2]string{"k", "v"} || params[1] != [2]string{"e", ""} || len(params) != 2 {
		t.Fatalf("params changed: %q", params)
	}
}

var benchOp = Op{
	Title:  "🎨 生成 · 日落",
	Tool:   "image_edit",
	Fence:  "canvas-op",
	Params: [][2]string{{"prompt", "日落海面, warm light"}, {"size", "1024x1024"}, {"seed", ""}, {"model", "m-1"}},
}

// renderOpNaive is the obvious implementation, kept as the baseline the benchmark compares with.
func renderOpNaive(op Op) string {
	fence := op.Fence
	if fence == "" {
		fence = DefaultFence
	}
	lines := []string{"tool: " + op.Tool}
	for _, p := range op.Params {
		if p[1] != "" {
			lines = append(lines, fmt.Sprintf("%s: %s", p[0], p[1]))
		}
	}
	return fmt.Sprintf("%s\n\n```%s\n%s\n```", op.Title, fence, strings.Join(lines, "\n"))
}

func TestRenderOpNaiveAgrees(t *testing.T) {
	for _, c := range loadGolden(t) {
		op := Op{Title: c.Op.Title, Tool: c.Op.Tool, Fence: c.Op.Fence, Params: c.Op.Params}
		if RenderOp(op) != renderOpNaive(op) {
			t.Fatalf("%s: baseline and RenderOp differ", c.Name)
		}
	}
}

func BenchmarkRenderOp(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = RenderOp(benchOp)
	}
}

func BenchmarkRenderOpNaiveBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = renderOpNaive(benchOp)
	}
}
