package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, decodes and validates a configuration file. Settings it
// leaves out keep their defaults; relative paths in it resolve against its
// directory. Unknown keys, duplicate keys and values of the wrong type are
// errors naming the key and its line.
func Load(path string) (*File, error) {
	data, base, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, base)
}

// Parse is Load for bytes: source names them in messages and baseDir is
// where their relative paths resolve.
func Parse(data []byte, source, baseDir string) (*File, error) {
	f, err := decodeFile(data, source, baseDir, os.Getenv)
	if err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// readFile reads a configuration file and returns its directory.
func readFile(path string) (data []byte, dir string, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	return data, filepath.Dir(abs), nil
}

// decodeFile decodes data over the defaults and resolves its paths.
func decodeFile(data []byte, source, baseDir string, getenv func(string) string) (*File, error) {
	f := defaultFile(getenv)
	f.source, f.baseDir = source, baseDir
	if err := decodeYAML(data, f); err != nil {
		return nil, err
	}
	f.resolvePaths()
	return f, nil
}

// decodeYAML decodes data over f. yaml.v3's own strict mode names Go types
// in its messages and stops at custom unmarshalers without a line, so the
// document is walked here instead: every message carries the line and the
// setting's path.
func decodeYAML(data []byte, f *File) error {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: every default
		}
		return fmt.Errorf("%s: %w", f.source, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return &FieldError{Source: f.source, Line: extra.Line, Msg: "a second YAML document (---); the configuration is one document"}
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", f.source, err)
	}
	d := &decoder{source: f.source, lines: map[string]int{}}
	if len(root.Content) == 1 {
		d.value(root.Content[0], reflect.ValueOf(f).Elem(), "")
	}
	f.lines = d.lines
	return errors.Join(d.errs...)
}

type decoder struct {
	source string
	lines  map[string]int
	errs   []error
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Source: d.source, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// value decodes n into v. A null leaves v as it was (its default).
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if _, ok := d.lines[path]; !ok && path != "" {
		d.lines[path] = n.Line // a mapping key already gave its own line
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, v.Elem(), path)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		d.leaf(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", nodeKindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping, got %s", nodeKindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if !d.key(k, path, seen) {
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			d.lines[path+"."+k.Value] = k.Line
			d.value(val, e, path+"."+k.Value)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	default:
		d.leaf(n, v, path)
	}
}

// key checks a mapping key: a scalar, not a merge key, not seen before.
func (d *decoder) key(k *yaml.Node, path string, seen map[string]int) bool {
	if k.Kind != yaml.ScalarNode {
		d.fail(k, path, "a key must be a plain name, got %s", nodeKindName(k))
		return false
	}
	if k.ShortTag() == "!!merge" {
		d.fail(k, path, "merge keys (<<) are not supported; write the settings out")
		return false
	}
	if first, dup := seen[k.Value]; dup {
		d.fail(k, joinPath(path, k.Value), "duplicate key (first at line %d)", first)
		return false
	}
	seen[k.Value] = k.Line
	return true
}

// mapping decodes a mapping into a struct whose fields carry yaml tags.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		what := "settings"
		if path != "" {
			what = path
		}
		d.fail(n, path, "expected a mapping of %s, got %s", what, nodeKindName(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k, path, seen) {
			continue
		}
		idx, ok := fields[k.Value]
		if !ok {
			if now, replaced := replacedKeys[joinPath(path, k.Value)]; replaced {
				d.fail(k, joinPath(path, k.Value), "was replaced by %s", now)
				continue
			}
			d.fail(k, joinPath(path, k.Value), "unknown key%s", suggestKey(k.Value, fields))
			continue
		}
		d.lines[joinPath(path, k.Value)] = k.Line
		d.value(val, v.Field(idx), joinPath(path, k.Value))
	}
}

// leaf decodes a scalar (or a type with its own UnmarshalYAML).
func (d *decoder) leaf(n *yaml.Node, v reflect.Value, path string) {
	err := n.Decode(v.Addr().Interface())
	if err == nil {
		return
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		d.fail(n, path, "%s", err.Error())
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		d.fail(n, path, "expected true or false, got %s", nodeKindName(n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		d.fail(n, path, "expected a whole number, got %s", nodeKindName(n))
	case reflect.String:
		d.fail(n, path, "expected a string, got %s", nodeKindName(n))
	default:
		d.fail(n, path, "unexpected %s", nodeKindName(n))
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// replacedKeys are settings that gave way to others: a file that still
// has one is told what took its place.
var replacedKeys = map[string]string{
	"acp.max_buffered_messages": "acp.buffer_bytes and acp.buffer_age (each ACP stream is bounded in bytes and in age)",
}

// yamlFields maps the yaml names of t's fields to their indexes.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = i
	}
	return out
}

// suggestKey says which known key an unknown one probably meant, or lists
// the known keys.
func suggestKey(key string, fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	best, bestDist := "", 3
	lower := strings.ToLower(key)
	for _, n := range names {
		if dist := editDistance(lower, n); dist < bestDist {
			best, bestDist = n, dist
		}
	}
	if best == "" && len(lower) >= 3 {
		for _, n := range names { // an abbreviation: vers for version
			if strings.HasPrefix(n, lower) {
				best = n
				break
			}
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// resolvePaths makes the file's paths absolute against its directory.
func (f *File) resolvePaths() {
	f.DataDir = absPath(f.baseDir, f.DataDir)
	f.TokensFile = absPath(f.baseDir, f.TokensFile)
	f.OIDC.ClientSecretFile = absPath(f.baseDir, f.OIDC.ClientSecretFile)
	f.WebRoot = absPath(f.baseDir, f.WebRoot)
	for i, r := range f.WorkspaceRoots {
		f.WorkspaceRoots[i] = absPath(f.baseDir, r)
	}
	for i := range f.Agents {
		f.Agents[i].Dir = absPath(f.baseDir, f.Agents[i].Dir)
	}
}

// FieldError is one problem with one setting. Validate and Load return
// them (joined with errors.Join when there are several).
type FieldError struct {
	Source string // the file, when the setting came from one
	Line   int    // 1-based; 0 when unknown
	Path   string // the setting: limits.replay_bytes, agents[1], env.PORT
	Msg    string
	Err    error // the underlying error, if any
}

func (e *FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.Source != "" && e.Line > 0:
		b.WriteString(e.Source + ":" + strconv.Itoa(e.Line) + ": ")
	case e.Source != "":
		b.WriteString(e.Source + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// lineOf finds the line of path or of its nearest enclosing setting.
func (f *File) lineOf(path string) int {
	for path != "" {
		if l, ok := f.lines[path]; ok {
			return l
		}
		cut := strings.LastIndexAny(path, ".[")
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return 0
}
