package config

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tinyModule writes a standalone main module into dir/name that prints
// its arguments, one per line.
func tinyModule(t *testing.T, dir, name, body string) string {
	t.Helper()
	pkg := filepath.Join(dir, name)
	writeFile(t, pkg, "go.mod", "module example.com/"+name+"\n\ngo 1.26\n")
	if body == "" {
		body = `package main

import (
	"fmt"
	"os"
)

func main() {
	for _, a := range os.Args[1:] {
		fmt.Println(a)
	}
}
`
	}
	writeFile(t, pkg, "main.go", body)
	return pkg
}

// runBinary runs argv with stdin closed and returns its stdout.
func runBinary(t *testing.T, argv []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return out.String()
}

func TestBuildExampleAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example agents with the go command")
	}
	var ms []Manifest
	for _, dir := range []string{"../examples/surface-demo-agent", "../examples/hello-agent"} {
		m, err := LoadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	binDir := filepath.Join(t.TempDir(), "bin")
	var logs bytes.Buffer
	if err := Build(t.Context(), ms, binDir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	specs, err := AgentSpecs(ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		name, ready string
	}{{"demo", "surface-demo"}, {"hello", "hello"}} {
		s := specs[i]
		if s.Name != want.name || !reflect.DeepEqual(s.Argv, []string{filepath.Join(binDir, want.name)}) || ms[i].Binary != s.Argv[0] {
			t.Fatalf("spec %+v", s)
		}
		// With stdin closed the agent announces itself and exits.
		first, _, _ := strings.Cut(runBinary(t, s.Argv), "\n")
		var ready struct {
			Type     string `json:"type"`
			Protocol string `json:"protocol"`
			Name     string `json:"name"`
			Surfaces []struct {
				Domain string `json:"domain"`
			} `json:"surfaces"`
		}
		if err := json.Unmarshal([]byte(first), &ready); err != nil || ready.Type != "agent_ready" || ready.Name != want.ready {
			t.Errorf("%s: first line %q (%v)", want.name, first, err)
		}
		if want.name == "demo" && (len(ready.Surfaces) != 1 || ready.Surfaces[0].Domain != "demo") {
			t.Errorf("demo agent surfaces %+v", ready.Surfaces)
		}
	}
	if n := strings.Count(logs.String(), `msg="agent built"`); n != 2 {
		t.Errorf("%d build log lines:\n%s", n, logs.String())
	}
}

func TestBuildCommandRule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	src := t.TempDir()
	pkg := tinyModule(t, src, "echoargs", "")
	ms := []Manifest{
		// No command: the binary alone.
		{Name: "plain", GoBuild: ".", Dir: pkg},
		// command[0] is the package's name.
		{Name: "by-base", GoBuild: ".", Dir: pkg, Command: []string{"echoargs", "one"}, Args: []string{"two"}},
		// command[0] is {{bin}}.
		{Name: "by-bin", GoBuild: ".", Dir: pkg, Command: []string{BinPlaceholder, "three"}},
		// A package below Dir, in a module of its own (Dir is in none).
		{Name: "from-parent", GoBuild: "./echoargs", Dir: src, Command: []string{"echoargs"}},
		// Not a Go agent: left alone.
		{Name: "not-go", Command: []string{"true"}},
	}
	for i := range ms {
		if ps := ms[i].finish(); len(ps) > 0 {
			t.Fatalf("%s: %v", ms[i].Name, ps)
		}
	}
	binDir := t.TempDir()
	if err := Build(t.Context(), ms, binDir, nil); err != nil {
		t.Fatal(err)
	}
	specs, err := AgentSpecs(ms)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"plain":       {filepath.Join(binDir, "plain")},
		"by-base":     {filepath.Join(binDir, "by-base"), "one", "two"},
		"by-bin":      {filepath.Join(binDir, "by-bin"), "three"},
		"from-parent": {filepath.Join(binDir, "from-parent")},
		"not-go":      {"true"},
	}
	for _, s := range specs {
		if !reflect.DeepEqual(s.Argv, want[s.Name]) {
			t.Errorf("%s: argv %q, want %q", s.Name, s.Argv, want[s.Name])
		}
	}
	if out := runBinary(t, specs[1].Argv); out != "one\ntwo\n" {
		t.Errorf("by-base printed %q", out)
	}
	// A second Build of the same manifests (a restart of the build step)
	// works and keeps the argv.
	if err := Build(t.Context(), ms, binDir, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := AgentSpecs(ms); !reflect.DeepEqual(again, specs) {
		t.Errorf("second build changed the specs:\n%+v\n%+v", again, specs)
	}
}

func TestBuildFailureReportsCompilerOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	src := t.TempDir()
	good := tinyModule(t, src, "good", "")
	bad := tinyModule(t, src, "broken", "package main\n\nfunc main() {\n\tundefinedThing()\n}\n")
	ms := []Manifest{
		{Name: "broken", GoBuild: ".", Dir: bad},
		{Name: "good", GoBuild: ".", Dir: good},
	}
	var logs bytes.Buffer
	err := Build(t.Context(), ms, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
	wantErr(t, err, `agent "broken": go build . (in `+bad+`): exit status 1`, "main.go:4:2: undefined: undefinedThing")
	if ms[0].Binary != "" || ms[1].Binary == "" {
		t.Errorf("the failing agent must stay unbuilt and the good one be built: %+v", ms)
	}
	if !strings.Contains(logs.String(), `msg="agent build failed" agent=broken`) {
		t.Errorf("log:\n%s", logs.String())
	}
}

func TestBuildErrors(t *testing.T) {
	t.Run("duplicate names", func(t *testing.T) {
		err := Build(t.Context(), []Manifest{{Name: "a", GoBuild: "."}, {Name: "a", GoBuild: "."}}, t.TempDir(), nil)
		wantErr(t, err, `build: two go_build agents are named "a" (their binaries would collide)`)
	})
	t.Run("wrong command", func(t *testing.T) {
		err := Build(t.Context(), []Manifest{{Name: "a", GoBuild: ".", Dir: t.TempDir(), Command: []string{"node"}}}, t.TempDir(), nil)
		wantErr(t, err, `agent "a": command[0] "node" is not the built program`)
	})
	t.Run("no dir", func(t *testing.T) {
		err := Build(t.Context(), []Manifest{{Name: "a", GoBuild: "."}}, t.TempDir(), nil)
		wantErr(t, err, `agent "a": go_build needs the agent directory (Manifest.Dir)`)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := Build(ctx, []Manifest{{Name: "a", GoBuild: ".", Dir: t.TempDir()}}, t.TempDir(), nil)
		wantErr(t, err, `agent "a": build: context canceled`)
	})
	t.Run("no go command", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		err := Build(t.Context(), []Manifest{{Name: "a", GoBuild: ".", Dir: t.TempDir()}}, t.TempDir(), nil)
		wantErr(t, err, "build: go_build agents need the go command in PATH")
	})
	t.Run("nothing to build", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir()) // no go needed
		ms := []Manifest{{Name: "a", Command: []string{"x"}}}
		if err := Build(t.Context(), ms, filepath.Join(t.TempDir(), "never"), nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFileAgentSpecsBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	root := t.TempDir()
	tinyModule(t, root, "tool", "")
	writeFile(t, root, "surfaced.yaml", "data_dir: data\nagents:\n  - name: tool\n    go_build: ./tool\n    command: [\"{{bin}}\", hi]\n")
	f, err := Load(filepath.Join(root, "surfaced.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := f.AgentSpecs(t.Context(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "data", "bin", "tool")
	if !reflect.DeepEqual(specs[0].Argv, []string{bin, "hi"}) {
		t.Fatalf("argv %q", specs[0].Argv)
	}
	if out := runBinary(t, specs[0].Argv); out != "hi\n" {
		t.Errorf("printed %q", out)
	}
}

// Build always runs go build and lets the build cache decide. These
// measure that choice against the alternative, a modification-time check
// of the agent's own files (which would miss changed dependencies):
//
//	go test ./config -run '^$' -bench Build -benchtime 5x
func BenchmarkBuildUpToDate(b *testing.B) {
	ms := benchManifests(b, "../examples/hello-agent")
	binDir := b.TempDir()
	if err := Build(b.Context(), ms, binDir, nil); err != nil { // warm the cache and the binary
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := Build(b.Context(), ms, binDir, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildRelink builds into a fresh directory every time: compiled
// packages come from the cache but the binary is linked again (the first
// start with a new data directory).
func BenchmarkBuildRelink(b *testing.B) {
	ms := benchManifests(b, "../examples/hello-agent")
	if err := Build(b.Context(), ms, b.TempDir(), nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		fresh := benchManifests(b, "../examples/hello-agent")
		if err := Build(b.Context(), fresh, b.TempDir(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildTwoSequential and BenchmarkBuildTwoParallel: both example
// agents, up to date, one go build at a time versus two.
func BenchmarkBuildTwoSequential(b *testing.B) { benchBuildTwo(b, 1) }
func BenchmarkBuildTwoParallel(b *testing.B)   { benchBuildTwo(b, 2) }

func benchBuildTwo(b *testing.B, parallel int) {
	ms := benchManifests(b, "../examples/hello-agent", "../examples/surface-demo-agent")
	binDir := b.TempDir()
	if err := build(b.Context(), ms, binDir, nil, parallel); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := build(b.Context(), ms, binDir, nil, parallel); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStalenessCheck is the cost of the alternative: compare the
// binary's modification time with every .go file of the package and the
// module's go.mod and go.sum.
func BenchmarkStalenessCheck(b *testing.B) {
	ms := benchManifests(b, "../examples/hello-agent")
	binDir := b.TempDir()
	if err := Build(b.Context(), ms, binDir, nil); err != nil {
		b.Fatal(err)
	}
	bin, _ := os.Stat(ms[0].Binary)
	b.ResetTimer()
	for b.Loop() {
		stale := false
		_ = filepath.WalkDir(ms[0].Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			if fi, err := d.Info(); err == nil && fi.ModTime().After(bin.ModTime()) {
				stale = true
			}
			return nil
		})
		for _, f := range []string{"../go.mod", "../go.sum"} {
			if fi, err := os.Stat(filepath.Join(ms[0].Dir, "..", f)); err == nil && fi.ModTime().After(bin.ModTime()) {
				stale = true
			}
		}
		_ = stale
	}
}

func benchManifests(b *testing.B, dirs ...string) []Manifest {
	b.Helper()
	var ms []Manifest
	for _, d := range dirs {
		m, err := LoadManifest(d)
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}
