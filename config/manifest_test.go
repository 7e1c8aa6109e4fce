package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// agentDir makes an agent directory holding manifest as agent.json.
func agentDir(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, ManifestFile, manifest)
	return dir
}

func TestLoadManifestErrors(t *testing.T) {
	cases := []struct{ name, json, want string }{
		{"missing name", `{"command":["x"]}`, "agent.json:1: name is missing"},
		{"empty name", `{"name":"","command":["x"]}`, "agent.json:1: name is missing"},
		{"bad name", "{\n  \"name\": \"Demo Agent\",\n  \"command\": [\"x\"]\n}", `agent.json:2: name "Demo Agent" is not valid (lowercase letters, digits, - and _, starting with a letter, at most 64)`},
		{"name starts with digit", `{"name":"1st","command":["x"]}`, `name "1st" is not valid`},
		{"unknown field", "{\n  \"name\": \"a\",\n  \"command\": [\"x\"],\n  \"workdir\": \"/tmp\"\n}",
			"agent.json:4: workdir: unknown field (known: args, command, cwd, description, env, go_build, images, name, panels, title)"},
		{"duplicate field", "{\"name\":\"a\",\n\"command\":[\"x\"],\n\"name\":\"b\"}", "agent.json:3: name: duplicate field (first at line 1)"},
		{"env number", "{\"name\":\"a\",\"command\":[\"x\"],\n\"env\":{\"PORT\":8080}}", `agent.json:2: env.PORT: must be a string, got a number (quote it: "8080")`},
		{"env bool", `{"name":"a","command":["x"],"env":{"DEBUG":true}}`, `env.DEBUG: must be a string, got true (quote it: "true")`},
		{"env object value", `{"name":"a","command":["x"],"env":{"X":{}}}`, "env.X: must be a string, got an object"},
		{"env list", `{"name":"a","command":["x"],"env":["A=1"]}`, `env: must be an object of strings ({"NAME": "value"}), got an array`},
		{"env bad key", `{"name":"a","command":["x"],"env":{"A-B":"1"}}`, `env: "A-B" is not a variable name`},
		{"command string", `{"name":"a","command":"pi --mode rpc"}`, `command: must be an array of strings (argv), not a string: write ["prog", "arg"]`},
		{"command number item", `{"name":"a","command":["x", 3]}`, "command[1]: must be a string, got a number"},
		{"command object", `{"name":"a","command":{}}`, "command: must be an array of strings (argv), got an object"},
		{"command missing", `{"name":"a"}`, "agent.json:1: command is empty"},
		{"command empty", `{"name":"a","command":[]}`, "command is empty"},
		{"args string", `{"name":"a","command":["x"],"args":"-v"}`, "args: must be an array of strings (argv), not a string"},
		{"title number", `{"name":"a","title":5,"command":["x"]}`, "title: must be a string, got a number"},
		{"images string", `{"name":"a","command":["x"],"images":"yes"}`, "images: must be true or false, got a string"},
		{"go_build wrong command", `{"name":"a","command":["other"],"go_build":"."}`, `command[0] "other" is not the built program`},
		{"cwd missing", `{"name":"a","command":["x"],"cwd":"nope"}`, "cwd: "},
		{"not an object", `["a"]`, "agent.json:1: must be a JSON object"},
		{"syntax error", "{\n\"name\": \"a\",\n\"command\": [\"x\",]\n}", "agent.json:3: invalid JSON: invalid character ']'"},
		{"truncated", "{\"name\": \"a\",\n", "agent.json:2: invalid JSON"},
		{"empty file", "", "agent.json:1: invalid JSON"},
		{"trailing data", `{"name":"a","command":["x"]} {}`, "agent.json:1: unexpected data after the manifest object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadManifest(agentDir(t, c.json))
			wantErr(t, err, c.want)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%T is not a *FieldError", err)
			}
		})
	}
}

func TestLoadManifestReportsEveryProblem(t *testing.T) {
	_, err := LoadManifest(agentDir(t, `{"title":1,"x":2,"env":{"A":3}}`))
	wantErr(t, err, "title: must be a string", "x: unknown field", "env.A: must be a string")
}

func TestLoadManifestDirErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadManifest(dir)
	wantErr(t, err, "agent directory "+dir+": no agent.json (an agent directory needs a manifest)")
	_, err = LoadManifest(filepath.Join(dir, "missing"))
	wantErr(t, err, "agent directory: stat "+filepath.Join(dir, "missing"))
	file := writeFile(t, dir, "f", "")
	_, err = LoadManifest(file)
	wantErr(t, err, "agent directory "+file+": not a directory")
}

func TestLoadManifestResolves(t *testing.T) {
	dir := agentDir(t, `{
  "name": "node-agent",
  "title": "Node agent",
  "description": "d",
  "command": ["node", "{{dir}}/agent.js"],
  "args": ["--rpc"],
  "env": {"B": "2", "A": "{{dir}}/data", "EMPTY": ""},
  "cwd": "work",
  "images": true
}`)
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Dir != dir || m.Cwd != filepath.Join(dir, "work") || !m.Images {
		t.Errorf("manifest %+v", m)
	}
	s, err := m.Spec()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"node", dir + "/agent.js", "--rpc"}
	if !reflect.DeepEqual(s.Argv, want) || s.Name != "node-agent" || s.Title != "Node agent" || s.Description != "d" ||
		s.Cwd != filepath.Join(dir, "work") || !s.Images {
		t.Errorf("spec %+v", s)
	}
	if want := []string{"A=" + dir + "/data", "B=2", "EMPTY="}; !reflect.DeepEqual(s.Env, want) {
		t.Errorf("env %q, want %q (sorted KEY=VALUE)", s.Env, want)
	}
}

func TestExamplePanels(t *testing.T) {
	m, err := LoadManifest("../examples/surface-demo-agent")
	if err != nil {
		t.Fatal(err)
	}
	if ui, panels := m.UI(); panels["demo"] != "demo.js" || filepath.Base(ui) != "ui" {
		t.Errorf("the demo agent ships its panel: %q %v", ui, panels)
	}
}

func TestLoadManifestPanels(t *testing.T) {
	dir := agentDir(t, `{"name":"a","command":["x"],"panels":{"demo":"ui/demo.js","board.v2":"ui/lib/board.mjs"}}`)
	writeFile(t, dir, "ui/demo.js", "export function mount() {}")
	writeFile(t, dir, "ui/lib/board.mjs", "export function mount() {}")
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	ui, panels := m.UI()
	if ui != filepath.Join(dir, "ui") || !reflect.DeepEqual(panels, map[string]string{"demo": "demo.js", "board.v2": "lib/board.mjs"}) {
		t.Errorf("UI() = %q %v", ui, panels)
	}
	none, _ := LoadManifest(agentDir(t, `{"name":"a","command":["x"]}`))
	if ui, panels := none.UI(); ui != "" || panels != nil {
		t.Errorf("without panels nothing is served: %q %v", ui, panels)
	}
}

func TestLoadManifestPanelErrors(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "evil.js", "export function mount() {}")
	cases := []struct{ name, panels, want string }{
		{"not an object", `"ui/demo.js"`, `panels: must be an object of domain to module ({"demo": "ui/demo.js"}), got a string`},
		{"number", `{"demo":3}`, `panels.demo: must be a string (a path such as "ui/demo.js"), got a number`},
		{"bad domain", `{"de mo":"ui/demo.js"}`, `panels: "de mo" is not a domain name`},
		{"outside ui", `{"demo":"demo.js"}`, `panels.demo: "demo.js" must be a path inside ui/`},
		{"dot dot", `{"demo":"ui/../agent.json"}`, `panels.demo: "ui/../agent.json" must be a path inside ui/`},
		{"absolute", `{"demo":"/etc/passwd.js"}`, `must be a path inside ui/`},
		{"backslash", `{"demo":"ui\\demo.js"}`, `must be a path inside ui/`},
		{"double slash", `{"demo":"ui//demo.js"}`, `must be a path inside ui/`},
		{"hidden", `{"demo":"ui/.secret/demo.js"}`, `has a hidden segment`},
		{"not js", `{"demo":"ui/demo.css"}`, `panels.demo: "ui/demo.css" must be a JavaScript module (.js or .mjs)`},
		{"missing file", `{"demo":"ui/nope.js"}`, `panels.demo: stat`},
		{"directory", `{"demo":"ui/dir.js"}`, `panels.demo: ui/dir.js is not a regular file`},
		{"symlink out", `{"demo":"ui/evil.js"}`, `panels.demo: statat evil.js: path escapes from parent`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := agentDir(t, `{"name":"a","command":["x"],`+"\n"+`"panels":`+c.panels+`}`)
			writeFile(t, dir, "ui/demo.js", "")
			if err := os.Mkdir(filepath.Join(dir, "ui", "dir.js"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "evil.js"), filepath.Join(dir, "ui", "evil.js")); err != nil {
				t.Fatal(err)
			}
			_, err := LoadManifest(dir)
			wantErr(t, err, "agent.json:2: panels", c.want)
		})
	}
	t.Run("no ui folder", func(t *testing.T) {
		_, err := LoadManifest(agentDir(t, `{"name":"a","command":["x"],"panels":{"demo":"ui/demo.js"}}`))
		wantErr(t, err, "panels: the agent directory has no ui/ folder")
	})
}

func TestLoadManifestRelativeProgram(t *testing.T) {
	dir := agentDir(t, `{"name":"sh","command":["./bin/run.sh","x"]}`)
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Command[0] != filepath.Join(dir, "bin/run.sh") || m.Command[1] != "x" || m.Cwd != "" {
		t.Errorf("command %q cwd %q", m.Command, m.Cwd)
	}
	s, _ := m.Spec()
	if s.Title != "sh" {
		t.Errorf("title defaults to the name, got %q", s.Title)
	}
}

func TestExampleManifests(t *testing.T) {
	for _, c := range []struct{ dir, name, base string }{
		{"../examples/surface-demo-agent", "demo", "surface-demo-agent"},
		{"../examples/hello-agent", "hello", "hello-agent"},
	} {
		m, err := LoadManifest(c.dir)
		if err != nil {
			t.Fatalf("%s: %v", c.dir, err)
		}
		if m.Name != c.name || m.GoBuild != "." || m.packageBase() != c.base || m.Title == "" || m.Description == "" {
			t.Errorf("%s: %+v", c.dir, m)
		}
		if _, err := m.Spec(); err == nil || !strings.Contains(err.Error(), "go_build is set but the agent was not built") {
			t.Errorf("%s: an unbuilt go_build agent must not yield a spec: %v", c.dir, err)
		}
	}
}

func TestManifestForRun(t *testing.T) {
	t.Run("command", func(t *testing.T) {
		m, err := ManifestForRun([]string{"pi", "--mode", "rpc"})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.Spec()
		if s.Name != "pi" || !reflect.DeepEqual(s.Argv, []string{"pi", "--mode", "rpc"}) || s.Cwd != "" {
			t.Errorf("spec %+v", s)
		}
	})
	t.Run("relative program", func(t *testing.T) {
		wd := t.TempDir()
		t.Chdir(wd)
		m, err := ManifestForRun([]string{"./My Agent.py", "x"})
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != "my-agent" || m.Command[0] != filepath.Join(wd, "My Agent.py") {
			t.Errorf("manifest %+v", m)
		}
	})
	t.Run("agent directory", func(t *testing.T) {
		m, err := ManifestForRun([]string{"../examples/surface-demo-agent"})
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != "demo" || m.GoBuild != "." {
			t.Errorf("manifest %+v", m)
		}
	})
	t.Run("go package without manifest", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "Cool_Agent")
		writeFile(t, dir, "main.go", "package main\nfunc main() {}\n")
		m, err := ManifestForRun([]string{dir})
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != "cool_agent" || m.GoBuild != "." || m.Dir != dir || len(m.Command) != 0 {
			t.Errorf("manifest %+v", m)
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		dir := t.TempDir()
		_, err := ManifestForRun([]string{dir})
		wantErr(t, err, "run: "+dir+" has no agent.json and no Go files")
	})
	t.Run("nothing", func(t *testing.T) {
		_, err := ManifestForRun(nil)
		wantErr(t, err, "no agent: give an agent directory or a command")
	})
	t.Run("empty program", func(t *testing.T) {
		_, err := ManifestForRun([]string{"", "x"})
		wantErr(t, err, "run: command[0] is empty")
	})
}

func TestNameFor(t *testing.T) {
	for in, want := range map[string]string{
		"pi": "pi", "hello-agent": "hello-agent", "Agent.py": "agent", "2fast": "fast", "---": "agent",
		"my agent": "my-agent", strings.Repeat("x", 80): strings.Repeat("x", 64),
	} {
		if got := nameFor(in); got != want {
			t.Errorf("nameFor(%q) = %q, want %q", in, got, want)
		}
		if !nameRe.MatchString(nameFor(in)) {
			t.Errorf("nameFor(%q) = %q is not a valid name", in, nameFor(in))
		}
	}
}

func TestAgentSpecsNeedsBuild(t *testing.T) {
	ms := []Manifest{{Name: "a", Command: []string{"x"}}, {Name: "b", GoBuild: ".", Dir: "/x"}}
	_, err := AgentSpecs(ms)
	wantErr(t, err, `agent "b": go_build is set but the agent was not built (config.Build)`)
	ms[1].Binary, ms[1].Command = "/bin/b", []string{"/bin/b"}
	specs, err := AgentSpecs(ms)
	if err != nil || len(specs) != 2 || specs[1].Argv[0] != "/bin/b" {
		t.Errorf("specs %+v, %v", specs, err)
	}
}
