package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"go.yaml.in/yaml/v3"
)

// noEnv is an environment with nothing set, so that the defaults a fuzz
// input decodes over do not depend on the machine.
func noEnv(string) string { return "" }

// jsonLines is the number of lines of a JSON text (only \n ends a line).
func jsonLines(data []byte) int { return bytes.Count(data, []byte{'\n'}) + 1 }

// yamlLines is the number of lines of a YAML text as the parser counts
// them: \r\n, \r, \n, and the Unicode breaks NEL, LS and PS each end one,
// in UTF-8 or, after its byte order mark, UTF-16.
func yamlLines(data []byte) int {
	text := string(data)
	if len(data) >= 2 && (data[0] == 0xfe && data[1] == 0xff || data[0] == 0xff && data[1] == 0xfe) {
		units := make([]uint16, 0, len(data)/2)
		for i := 2; i+1 < len(data); i += 2 {
			if data[0] == 0xfe {
				units = append(units, uint16(data[i])<<8|uint16(data[i+1]))
			} else {
				units = append(units, uint16(data[i+1])<<8|uint16(data[i]))
			}
		}
		text = string(utf16.Decode(units))
	}
	s := strings.ReplaceAll(text, "\r\n", "\n")
	return 1 + strings.Count(s, "\n") + strings.Count(s, "\r") +
		strings.Count(s, "\u0085") + strings.Count(s, "\u2028") + strings.Count(s, "\u2029")
}

// checkErrors checks every error in err's tree (errors.Join and %w) that
// is not itself a wrapper: it names source, and a FieldError carries a
// message and a line inside data (lines of them; 0 when unknown).
func checkErrors(t *testing.T, data []byte, lines int, source string, err error) {
	t.Helper()
	var walk func(error)
	walk = func(e error) {
		if joined, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range joined.Unwrap() {
				walk(inner)
			}
			return
		}
		if !strings.HasPrefix(e.Error(), source) {
			t.Fatalf("%q: error %q does not name %s", data, e, source)
		}
		var fe *FieldError
		if errors.As(e, &fe) {
			if strings.TrimSpace(fe.Msg) == "" || fe.Line < 0 || fe.Line > lines {
				t.Fatalf("%q (%d lines): field error %+v", data, lines, fe)
			}
		}
	}
	walk(err)
}

// FuzzDecodeFile feeds the configuration file decoder arbitrary YAML. It
// never panics; every error names the file, the setting's line and what is
// wrong; a file it accepts can be validated, and written out again it
// decodes to the same settings.
func FuzzDecodeFile(f *testing.F) {
	full, err := os.ReadFile(filepath.Join("testdata", "full.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	for _, seed := range []string{
		"", "# nothing\n", "addr: 127.0.0.1:7800\n",
		"limits:\n  body_bytes: 4MiB\n  client_queue_age: 1m30s\n  idle_timeout: 0\n",
		"limits:\n  replay_bytes: 4MB\n", "limits:\n  body_bytes: 1.5KiB\n", "limits:\n  body_bytes: -1\n",
		"limits:\n  body_bytes: 0x10\n", "limits:\n  ready_timeout: 10\n", "limits:\n  restart_max: 99999999999999999999\n",
		"agents:\n  - dir: ./examples/hello-agent\n  - name: inline\n    command: [sh, -c, 'echo hi']\n    env: {A: b}\n",
		"agents: {}\n", "agents:\n  - [1, 2]\n", "acp:\n  agent_info: {name: x, title: y, version: z}\n",
		"cluster:\n  provider: etcd\n  etcd_endpoints: [127.0.0.1:2379]\n  lease_ttl: 6s\n",
		"addr: a\naddr: b\n", "adr: x\n", "<<: {addr: x}\n", "base: &b {addr: x}\nref: *b\n",
		"a: &a [*a]\n", "---\naddr: x\n---\naddr: y\n", "[1, 2]\n", "addr: [\n", "? [a]\n: b\n",
		"no_auth: yes\n", "\r0", "\xfe\xff (000000000000", "a: 1\r\nb: 2\u2028c: 3\n", // line breaks YAML counts and Go does not "dev: !!binary aGk=\n", "data_dir: ~/x\n", "workspace_roots: [rel, /abs/../x]\n",
	} {
		f.Add([]byte(seed))
	}
	const source = "fuzz.yaml"
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := decodeFile(data, source, base, noEnv)
		if err != nil {
			checkErrors(t, data, yamlLines(data), source, err)
			return
		}
		if err := file.Validate(); err != nil {
			checkErrors(t, data, yamlLines(data), source, err)
		}
		out, err := yaml.Marshal(file)
		if err != nil {
			t.Fatalf("%q: the decoded file does not encode: %v", data, err)
		}
		again, err := decodeFile(out, source, base, noEnv)
		if err != nil {
			t.Fatalf("%q: written out as\n%s\nit does not decode: %v", data, out, err)
		}
		if out2, _ := yaml.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("%q: written out as\n%s\nread back as\n%s", data, out, out2)
		}
	})
}

// FuzzParseManifest feeds the agent.json decoder arbitrary bytes. It never
// panics; every error names the file and a line inside it; a manifest it
// accepts can be checked (finish), and written out again as JSON it
// decodes to the same manifest.
func FuzzParseManifest(f *testing.F) {
	for _, seed := range []string{
		`{"name":"demo","title":"Surface demo","command":["surface-demo-agent"],"go_build":"."}`,
		`{"name":"pi","command":["pi","--mode","rpc"],"env":{"PI_OFFLINE":"1"},"images":true,"cwd":"{{dir}}"}`,
		"{\n  \"name\": \"x\",\n  \"name\": \"y\"\n}", `{"name":1}`, `{"command":"sh"}`, `{"command":[1]}`,
		`{"env":{"A":1}}`, `{"env":[]}`, `{"images":"yes"}`, `{"nope":true}`, `{"go_build":"./..."}`,
		`{"name":"a","command":["{{bin}}"]}`, `{"name":"a","command":["./run.sh"],"args":["\u0000"]}`,
		`[]`, `null`, `{`, `{"name":"a"} {}`, `{"name":"a"}}`, "{\"name\":\"\xff\"}", ``,
	} {
		f.Add([]byte(seed))
	}
	const source = "agent.json"
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := parseManifest(data, source)
		if err != nil {
			checkErrors(t, data, jsonLines(data), source, err)
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%q: the manifest does not encode: %v", data, err)
		}
		again, _, err := parseManifest(out, source)
		if err != nil {
			t.Fatalf("%q: written out as %s it does not decode: %v", data, out, err)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("%q: written out as %s, read back as %s", data, out, out2)
		}
		m.Dir = dir
		for _, p := range m.finish() {
			if strings.TrimSpace(p.msg) == "" {
				t.Fatalf("%q: a problem without a message: %+v", data, p)
			}
		}
	})
}

// FuzzParseSize: a size it accepts is not negative and reads back from its
// String form as the same size.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "1048576", "4MiB", "512 KiB", " 1gib ", "3KiB", "1536", "1.5KiB", "4MB", "9223372036854775807",
		"9223372036854775808", "8388608TiB", "8388607TiB", "", "KiB", "1e3", "00012", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), "size") && !strings.Contains(err.Error(), "too large") {
				t.Fatalf("ParseSize(%q): unclear error %q", s, err)
			}
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
		back, err := ParseSize(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d, written %q, read back as %d, %v", s, v, v.String(), back, err)
		}
		// The YAML form is the same text.
		var n yaml.Node
		if err := yaml.Unmarshal([]byte("v: "+v.String()), &n); err != nil {
			t.Fatalf("%q as YAML: %v", v.String(), err)
		}
		var y Size
		if err := n.Content[0].Content[1].Decode(&y); err != nil || y != v {
			t.Fatalf("%q from YAML = %d, %v; want %d", v.String(), y, err, v)
		}
	})
}

// FuzzParseDuration: a duration it accepts reads back from its String form
// as the same duration.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "10s", "1m30s", "250ms", " 1h ", "-1s", "10", "1.5", "1e3", "5m0.5s", "", "h", "9223372036854775807ns", "2562047h47m16.854775807s", "2562048h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), "duration") {
				t.Fatalf("ParseDuration(%q): unclear error %q", s, err)
			}
			return
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v, written %q, read back as %v, %v", s, d, d.String(), back, err)
		}
	})
}
