package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	surfaced "github.com/surfaced/surfaced"
)

// ManifestFile is the name of an agent directory's manifest.
const ManifestFile = "agent.json"

// Placeholders in a manifest's command, args and env values.
const (
	// BinPlaceholder, as command[0] of a go_build agent, stands for the
	// built binary.
	BinPlaceholder = "{{bin}}"
	// DirPlaceholder anywhere in command, args or an env value stands for
	// the agent directory (absolute), e.g. ["node", "{{dir}}/agent.js"].
	DirPlaceholder = "{{dir}}"
)

// Manifest describes one agent: an agent directory's agent.json, or an
// inline entry of the configuration file.
//
// The program is Command followed by Args. A bare command[0] ("pi") is
// looked up in PATH when a session starts; a relative path with a slash
// ("./run.sh") is relative to the agent directory.
//
// With GoBuild set, the agent is a Go package built once when the daemon
// starts (see Build), and the rule for command is: command[0] names the
// built program, either as the package's base name (what go build would
// call it: "hello-agent" for the directory examples/hello-agent) or as
// {{bin}}, and Build replaces it with the binary's path; the rest of
// command are arguments. An empty command means the binary alone.
type Manifest struct {
	Name        string            `json:"name"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Command     []string          `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Cwd is the default working directory of sessions; relative to Dir in
	// the manifest, absolute once loaded.
	Cwd string `json:"cwd,omitempty"`
	// Images: prompts may carry images.
	Images bool `json:"images,omitempty"`
	// GoBuild is the Go package to build: a directory relative to Dir
	// (".", "./cmd/agent") or an import path.
	GoBuild string `json:"go_build,omitempty"`
	// Panels maps a surface domain to the ES module the web UI mounts for
	// it: a path inside the agent directory's ui/ folder ("ui/demo.js").
	// Naming any panel makes the daemon serve ui/ at /agents/{name}/ui/.
	Panels map[string]string `json:"panels,omitempty"`

	// Dir is the agent directory (absolute): go build runs there, and cwd,
	// command paths and {{dir}} are relative to it. For an inline agent it
	// is the configuration file's directory.
	Dir string `json:"-"`
	// Binary is the program Build produced; empty until then.
	Binary string `json:"-"`
}

var (
	nameRe   = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	domainRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const maxNameLen = 64

// manifestFields are the keys agent.json may have.
var manifestFields = []string{"name", "title", "description", "command", "args", "env", "cwd", "images", "go_build", "panels"}

// LoadManifest reads dir/agent.json. The manifest is strict: unknown
// fields, duplicate fields and values of the wrong type are errors naming
// the field and its line. The result is resolved: Dir and Cwd are
// absolute and {{dir}} is expanded.
func LoadManifest(dir string) (Manifest, error) {
	abs, err := filepath.Abs(expandHome(dir))
	if err != nil {
		return Manifest{}, fmt.Errorf("agent directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return Manifest{}, fmt.Errorf("agent directory: %w", err)
	}
	if !fi.IsDir() {
		return Manifest{}, fmt.Errorf("agent directory %s: not a directory", abs)
	}
	file := filepath.Join(abs, ManifestFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("agent directory %s: no %s (an agent directory needs a manifest)", abs, ManifestFile)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("agent manifest: %w", err)
	}
	m, lines, err := parseManifest(data, file)
	if err != nil {
		return Manifest{}, err
	}
	m.Dir = abs
	var errs []error
	for _, p := range m.finish() {
		line, ok := lines[p.field]
		if !ok {
			line = lines[""]
		}
		errs = append(errs, &FieldError{Source: file, Line: line, Msg: p.msg})
	}
	if len(errs) > 0 {
		return Manifest{}, errors.Join(errs...)
	}
	return m, nil
}

// parseManifest decodes agent.json strictly, remembering each field's line.
func parseManifest(data []byte, source string) (Manifest, map[string]int, error) {
	var m Manifest
	lines := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &FieldError{Source: source, Line: lineAt(data, int(se.Offset)), Msg: "invalid JSON: " + se.Error(), Err: err}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &FieldError{Source: source, Line: lineAt(data, len(data)), Msg: "invalid JSON: unexpected end", Err: err}
		}
		return &FieldError{Source: source, Msg: "invalid JSON: " + err.Error(), Err: err}
	}
	tok, err := dec.Token()
	if err != nil {
		return m, nil, syntax(err)
	}
	if tok != json.Delim('{') {
		return m, nil, &FieldError{Source: source, Line: lineAt(data, int(dec.InputOffset())), Msg: "must be a JSON object"}
	}
	// A missing field is reported at the object's opening brace.
	lines[""] = lineAt(data, int(dec.InputOffset()))
	var errs []error
	fail := func(line int, path, format string, args ...any) {
		errs = append(errs, &FieldError{Source: source, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return m, nil, syntax(err)
		}
		key := tok.(string) // inside an object the decoder yields string keys only
		line := lineAt(data, int(dec.InputOffset()))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return m, nil, syntax(err)
		}
		if first, dup := lines[key]; dup {
			fail(line, key, "duplicate field (first at line %d)", first)
			continue
		}
		lines[key] = line
		switch key {
		case "name":
			m.Name = jsonString(raw, key, line, fail)
		case "title":
			m.Title = jsonString(raw, key, line, fail)
		case "description":
			m.Description = jsonString(raw, key, line, fail)
		case "cwd":
			m.Cwd = jsonString(raw, key, line, fail)
		case "go_build":
			m.GoBuild = jsonString(raw, key, line, fail)
		case "command":
			m.Command = jsonStrings(raw, key, line, fail)
		case "args":
			m.Args = jsonStrings(raw, key, line, fail)
		case "env":
			m.Env = jsonEnv(raw, key, line, fail)
		case "panels":
			m.Panels = jsonPanels(raw, key, line, fail)
		case "images":
			switch jsonKind(raw) {
			case "true", "false", "null":
				m.Images = jsonKind(raw) == "true"
			default:
				fail(line, key, "must be true or false, got %s", jsonKind(raw))
			}
		default:
			known := append([]string(nil), manifestFields...)
			slices.Sort(known)
			fail(line, key, "unknown field (known: %s)", strings.Join(known, ", "))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return m, nil, syntax(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return m, nil, &FieldError{Source: source, Line: lineAt(data, int(dec.InputOffset())), Msg: "unexpected data after the manifest object"}
	}
	return m, lines, errors.Join(errs...)
}

type failFunc func(line int, path, format string, args ...any)

func jsonString(raw json.RawMessage, key string, line int, fail failFunc) string {
	var s string
	switch jsonKind(raw) {
	case "null":
	case "a string":
		_ = json.Unmarshal(raw, &s) // well-formed: the decoder produced it
	default:
		fail(line, key, "must be a string, got %s", jsonKind(raw))
	}
	return s
}

func jsonStrings(raw json.RawMessage, key string, line int, fail failFunc) []string {
	switch jsonKind(raw) {
	case "null":
		return nil
	case "an array":
	case "a string":
		fail(line, key, "must be an array of strings (argv), not a string: write [\"prog\", \"arg\"]")
		return nil
	default:
		fail(line, key, "must be an array of strings (argv), got %s", jsonKind(raw))
		return nil
	}
	var items []json.RawMessage
	_ = json.Unmarshal(raw, &items)
	out := make([]string, 0, len(items))
	for i, it := range items {
		if jsonKind(it) != "a string" {
			fail(line, fmt.Sprintf("%s[%d]", key, i), "must be a string, got %s", jsonKind(it))
			continue
		}
		var s string
		_ = json.Unmarshal(it, &s)
		out = append(out, s)
	}
	return out
}

func jsonEnv(raw json.RawMessage, key string, line int, fail failFunc) map[string]string {
	switch jsonKind(raw) {
	case "null":
		return nil
	case "an object":
	default:
		fail(line, key, "must be an object of strings ({\"NAME\": \"value\"}), got %s", jsonKind(raw))
		return nil
	}
	var items map[string]json.RawMessage
	_ = json.Unmarshal(raw, &items)
	out := make(map[string]string, len(items))
	for _, k := range slices.Sorted(maps.Keys(items)) {
		v := items[k]
		if jsonKind(v) != "a string" {
			hint := ""
			if kind := jsonKind(v); kind == "a number" || kind == "true" || kind == "false" {
				hint = fmt.Sprintf(" (quote it: \"%s\")", bytes.TrimSpace(v))
			}
			fail(line, key+"."+k, "must be a string, got %s%s", jsonKind(v), hint)
			continue
		}
		var s string
		_ = json.Unmarshal(v, &s)
		out[k] = s
	}
	return out
}

func jsonPanels(raw json.RawMessage, key string, line int, fail failFunc) map[string]string {
	switch jsonKind(raw) {
	case "null":
		return nil
	case "an object":
	default:
		fail(line, key, "must be an object of domain to module ({\"demo\": \"ui/demo.js\"}), got %s", jsonKind(raw))
		return nil
	}
	var items map[string]json.RawMessage
	_ = json.Unmarshal(raw, &items)
	out := make(map[string]string, len(items))
	for _, k := range slices.Sorted(maps.Keys(items)) {
		if jsonKind(items[k]) != "a string" {
			fail(line, key+"."+k, "must be a string (a path such as \"ui/%s.js\"), got %s", k, jsonKind(items[k]))
			continue
		}
		var s string
		_ = json.Unmarshal(items[k], &s)
		out[k] = s
	}
	return out
}

// jsonKind names the kind of a well-formed JSON value.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		return "null"
	}
	return "a number"
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

type problem struct {
	field string // the manifest field it concerns (for its line); may be empty
	msg   string
}

// finish resolves m against m.Dir (cwd, {{dir}}, relative command paths)
// and reports what is wrong with it.
func (m *Manifest) finish() []problem {
	var ps []problem
	add := func(field, format string, args ...any) {
		ps = append(ps, problem{field, fmt.Sprintf(format, args...)})
	}
	switch {
	case m.Name == "":
		add("name", "name is missing")
	case len(m.Name) > maxNameLen || !nameRe.MatchString(m.Name):
		add("name", "name %q is not valid (lowercase letters, digits, - and _, starting with a letter, at most %d)", m.Name, maxNameLen)
	}
	for i, a := range m.Command {
		if strings.ContainsRune(a, 0) {
			add("command", "command[%d] contains a NUL byte", i)
		}
	}
	for i, a := range m.Args {
		if strings.ContainsRune(a, 0) {
			add("args", "args[%d] contains a NUL byte", i)
		}
	}
	if m.GoBuild == "" {
		switch {
		case len(m.Command) == 0:
			add("command", "command is empty")
		case m.Command[0] == "":
			add("command", "command[0] is empty")
		case m.Command[0] == BinPlaceholder:
			add("command", "command[0] is %s but go_build is not set", BinPlaceholder)
		}
	} else {
		ps = append(ps, m.checkGoBuild()...)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		if !envKeyRe.MatchString(k) {
			add("env", "env: %q is not a variable name (letters, digits and _, not starting with a digit)", k)
		}
		if strings.ContainsRune(m.Env[k], 0) {
			add("env", "env.%s contains a NUL byte", k)
		}
	}
	ps = append(ps, m.checkPanels()...)
	if len(ps) > 0 {
		return ps
	}

	expand := func(s string) string { return strings.ReplaceAll(s, DirPlaceholder, m.Dir) }
	m.Command = slices.Clone(m.Command)
	for i := range m.Command {
		m.Command[i] = expand(m.Command[i])
	}
	m.Args = slices.Clone(m.Args)
	for i := range m.Args {
		m.Args[i] = expand(m.Args[i])
	}
	if m.Env != nil {
		env := make(map[string]string, len(m.Env))
		for k, v := range m.Env {
			env[k] = expand(v)
		}
		m.Env = env
	}
	// A relative path with a slash means a program shipped with the agent;
	// sessions run in their own working directory, so pin it now.
	if m.GoBuild == "" && strings.ContainsRune(m.Command[0], '/') && !filepath.IsAbs(m.Command[0]) {
		m.Command[0] = filepath.Join(m.Dir, m.Command[0])
	}
	if m.Cwd != "" {
		m.Cwd = absPath(m.Dir, expand(m.Cwd))
		if fi, err := os.Stat(m.Cwd); err != nil || !fi.IsDir() {
			add("cwd", "cwd: %s is not a directory", m.Cwd)
		}
	}
	return ps
}

// UIFolder is the folder of an agent directory that holds its web UI
// files; the daemon serves it at /agents/{name}/ui/.
const UIFolder = "ui"

// checkPanels: every panel is a .js or .mjs file inside ui/, named by a
// clean relative path that stays there (no "..", no hidden segment, no
// symbolic link out of ui/).
func (m *Manifest) checkPanels() []problem {
	var ps []problem
	if len(m.Panels) == 0 {
		return nil
	}
	add := func(format string, args ...any) {
		ps = append(ps, problem{"panels", fmt.Sprintf(format, args...)})
	}
	var root *os.Root
	if m.Dir != "" {
		r, err := os.OpenRoot(filepath.Join(m.Dir, UIFolder))
		if err != nil {
			add("panels: the agent directory has no %s/ folder: %v", UIFolder, err)
			return ps
		}
		defer r.Close()
		root = r
	}
	for _, domain := range slices.Sorted(maps.Keys(m.Panels)) {
		p := m.Panels[domain]
		rel, ok := strings.CutPrefix(p, UIFolder+"/")
		switch {
		case !domainRe.MatchString(domain):
			add("panels: %q is not a domain name (letters, digits, '.', '_' and '-', at most 64)", domain)
		case !ok || !fs.ValidPath(rel) || strings.ContainsRune(rel, '\\'):
			add("panels.%s: %q must be a path inside %s/ such as \"%s/%s.js\" (forward slashes, no \"..\")", domain, p, UIFolder, UIFolder, domain)
		case hasHiddenSegment(rel):
			add("panels.%s: %q has a hidden segment (a name starting with \".\"), which the daemon does not serve", domain, p)
		case path.Ext(rel) != ".js" && path.Ext(rel) != ".mjs":
			add("panels.%s: %q must be a JavaScript module (.js or .mjs)", domain, p)
		case root != nil:
			fi, err := root.Stat(rel)
			switch {
			case err != nil:
				add("panels.%s: %v", domain, err)
			case !fi.Mode().IsRegular():
				add("panels.%s: %s is not a regular file", domain, p)
			}
		}
	}
	return ps
}

func hasHiddenSegment(rel string) bool {
	for seg := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// UI is what the agent ships for the web UI: the folder the daemon serves
// at /agents/{name}/ui/ (absolute) and each domain's panel module as a path
// inside it ("demo.js"). Both are empty when the manifest names no panels.
func (m *Manifest) UI() (dir string, panels map[string]string) {
	if len(m.Panels) == 0 || m.Dir == "" {
		return "", nil
	}
	panels = make(map[string]string, len(m.Panels))
	for d, p := range m.Panels {
		panels[d] = strings.TrimPrefix(p, UIFolder+"/")
	}
	return filepath.Join(m.Dir, UIFolder), panels
}

// isLocalPackage reports whether a go_build value is a directory path
// rather than an import path.
func isLocalPackage(pkg string) bool {
	return pkg == "." || pkg == ".." || strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../") || filepath.IsAbs(pkg)
}

// packageBase is the name go build gives the binary of pkg.
func (m *Manifest) packageBase() string {
	if isLocalPackage(m.GoBuild) {
		return filepath.Base(absPath(m.Dir, m.GoBuild))
	}
	return path.Base(m.GoBuild)
}

func (m *Manifest) checkGoBuild() []problem {
	var ps []problem
	if strings.Contains(m.GoBuild, "...") {
		return []problem{{"go_build", fmt.Sprintf("go_build: %q is a pattern; name one main package", m.GoBuild)}}
	}
	if isLocalPackage(m.GoBuild) {
		dir := absPath(m.Dir, m.GoBuild)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			ps = append(ps, problem{"go_build", fmt.Sprintf("go_build: %s is not a directory", dir)})
		}
	}
	if len(m.Command) > 0 && m.Command[0] != BinPlaceholder && m.Command[0] != m.packageBase() {
		ps = append(ps, problem{"command", fmt.Sprintf(
			"command[0] %q is not the built program: with go_build, command[0] is %q (the package's name) or %s, or command is left out",
			m.Command[0], m.packageBase(), BinPlaceholder)})
	}
	return ps
}

// Argv is the command line of the agent: Command then Args. It fails for a
// go_build agent that has not been built.
func (m *Manifest) Argv() ([]string, error) {
	if m.GoBuild != "" && m.Binary == "" {
		return nil, fmt.Errorf("agent %q: go_build is set but the agent was not built (config.Build)", m.Name)
	}
	argv := make([]string, 0, len(m.Command)+len(m.Args))
	argv = append(argv, m.Command...)
	return append(argv, m.Args...), nil
}

// Spec is the runtime's view of the agent: argv, env as KEY=VALUE (sorted
// by key), absolute cwd. Title defaults to the name.
func (m *Manifest) Spec() (surfaced.AgentSpec, error) {
	argv, err := m.Argv()
	if err != nil {
		return surfaced.AgentSpec{}, err
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		env = append(env, k+"="+m.Env[k])
	}
	title := m.Title
	if title == "" {
		title = m.Name
	}
	return surfaced.AgentSpec{
		Name:        m.Name,
		Title:       title,
		Description: m.Description,
		Argv:        argv,
		Env:         env,
		Cwd:         m.Cwd,
		Images:      m.Images,
	}, nil
}

// AgentSpecs turns manifests into the runtime's agent specs. Every go_build
// agent must have been built.
func AgentSpecs(ms []Manifest) ([]surfaced.AgentSpec, error) {
	out := make([]surfaced.AgentSpec, 0, len(ms))
	var errs []error
	for i := range ms {
		s, err := ms[i].Spec()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ManifestForRun is the agent of `surfaced run ARGS`: a single argument
// that is a directory is an agent directory (its agent.json, or, without
// one, a Go main package built with go_build "."); anything else is a
// command line, named after its program ("pi --mode rpc" is the agent
// "pi"). A relative program path is pinned to the current directory.
func ManifestForRun(args []string) (Manifest, error) {
	if len(args) == 0 {
		return Manifest{}, errors.New("no agent: give an agent directory or a command")
	}
	if len(args) == 1 {
		if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
			return manifestForDir(args[0])
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return Manifest{}, fmt.Errorf("run: %w", err)
	}
	m := Manifest{Name: nameFor(filepath.Base(args[0])), Command: slices.Clone(args), Dir: wd}
	if ps := m.finish(); len(ps) > 0 {
		return Manifest{}, fmt.Errorf("run: %s", ps[0].msg)
	}
	return m, nil
}

func manifestForDir(dir string) (Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return LoadManifest(dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("run: %w", err)
	}
	goFiles, _ := filepath.Glob(filepath.Join(abs, "*.go"))
	if len(goFiles) == 0 {
		return Manifest{}, fmt.Errorf("run: %s has no %s and no Go files", abs, ManifestFile)
	}
	m := Manifest{Name: nameFor(filepath.Base(abs)), GoBuild: ".", Dir: abs}
	if ps := m.finish(); len(ps) > 0 {
		return Manifest{}, fmt.Errorf("run: %s", ps[0].msg)
	}
	return m, nil
}

// nameFor derives a valid agent name from a program or directory name.
func nameFor(base string) string {
	base = strings.TrimSuffix(base, filepath.Ext(base))
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.TrimLeft(b.String(), "0123456789_-")
	if name == "" {
		return "agent"
	}
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
	}
	return name
}
