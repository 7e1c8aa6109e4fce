package webui

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

func TestFSServesTheUIFiles(t *testing.T) {
	ui := FS()
	for _, name := range []string{"index.html", "surfaced.js", "app.js", "style.css"} {
		b, err := fs.ReadFile(ui, name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", name)
		}
	}
	if _, err := fs.Stat(ui, "static"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("FS must be rooted inside static/, Stat(static) = %v", err)
	}
	index, _ := fs.ReadFile(ui, "index.html")
	for _, ref := range []string{`src="surfaced.js"`, `src="app.js"`, `href="style.css"`} {
		if !bytes.Contains(index, []byte(ref)) {
			t.Errorf("index.html does not reference %s", ref)
		}
	}
	// surfaced.js must load before app.js, which uses window.Surfaced at once.
	if bytes.Index(index, []byte(`src="surfaced.js"`)) > bytes.Index(index, []byte(`src="app.js"`)) {
		t.Errorf("index.html loads app.js before surfaced.js")
	}
}

func TestUIHasNoExternalResources(t *testing.T) {
	// The UI must work offline and behind the daemon's origin gate: no CDN, no remote fonts.
	err := fs.WalkDir(FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS(), name)
		if err != nil {
			return err
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "@import"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The UI holds no agent's knowledge: a domain's panel comes from its agent
// (docs/panels.md), so no file of the UI names the demo agent's domain or its
// controls.
func TestUIHoldsNoAgentKnowledge(t *testing.T) {
	for _, name := range []string{"app.js", "index.html", "style.css"} {
		data, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"demo", "increment", "count: "} {
			if bytes.Contains(bytes.ToLower(data), []byte(banned)) {
				t.Errorf("%s mentions %q", name, banned)
			}
		}
	}
}

func runNode(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testkit.Node(t), args...)
	golden, err := filepath.Abs(filepath.Join("..", "..", "..", "actors", "surface", "testdata", "surface-op.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "SURFACED_GOLDEN="+golden, "NODE_OPTIONS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestSurfacedJS(t *testing.T) {
	out := runNode(t, "--test", "--test-reporter=tap", filepath.Join("testdata", "surfaced_test.mjs"))
	if !strings.Contains(out, "# fail 0") || strings.Contains(out, "# pass 0\n") {
		t.Fatalf("unexpected node test summary:\n%s", out)
	}
	t.Log(out[strings.LastIndex(out, "# tests"):])
}

func TestUIScriptsParse(t *testing.T) {
	for _, name := range []string{"app.js", "surfaced.js"} {
		runNode(t, "--check", filepath.Join("static", name))
	}
}

// webDir is the npm workspace (web/) with its toolchain installed.
func webDir(t *testing.T) string {
	t.Helper()
	return testkit.NPM(t, "web", "esbuild")
}

// static/surfaced.js is the build of web/client/src, not a second copy.
func TestSurfacedJSIsTheBuildOfTheClientPackage(t *testing.T) {
	web := webDir(t)
	runNode(t, filepath.Join(web, "scripts", "build.mjs"), "--check")
}

// The npm packages' own tests: the client's bridge, artifacts and token
// stream, and the React hooks and chat transport in happy-dom.
func TestWebPackages(t *testing.T) {
	web := webDir(t)
	runNode(t, filepath.Join(web, "scripts", "build.mjs"), "--packages")
	files, err := filepath.Glob(filepath.Join(web, "*", "test", "*.test.mjs"))
	if err != nil || len(files) < 2 {
		t.Fatalf("the packages' tests are missing: %v %v", files, err)
	}
	out := runNode(t, append([]string{"--test", "--test-reporter=tap"}, files...)...)
	if !strings.Contains(out, "# fail 0") || strings.Contains(out, "# pass 0\n") {
		t.Fatalf("unexpected node test summary:\n%s", out)
	}
	t.Log(out[strings.LastIndex(out, "# tests"):])
}
