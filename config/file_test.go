package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
)

// writeFile writes content to dir/name, creating directories.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// parse decodes and validates YAML with base dir t.TempDir().
func parse(t *testing.T, src string) (*File, error) {
	t.Helper()
	return Parse([]byte(src), "surfaced.yaml", t.TempDir())
}

// wantErr asserts err's message contains every want.
func wantErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error:\n%v\nwant it to contain %q", err, w)
		}
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv(EnvDataDir, "")
	for _, src := range []string{"", "# nothing\n", "---\n"} {
		f, err := Parse([]byte(src), "x.yaml", "/somewhere")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		d := Default()
		if f.Addr != d.Addr || f.DataDir != "/home/someone/.local/share/surfaced" || f.Limits != d.Limits ||
			f.LogLevel != "info" || f.LogFormat != "text" || !f.ACP.Enabled || f.ACP.Path != "/acp" {
			t.Errorf("%q decoded to %+v", src, f)
		}
	}
}

func TestDefaultDataDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvDataDir: "/srv/s", "XDG_DATA_HOME": "/x", "HOME": "/h"}, "/srv/s"},
		{map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"}, "/x/surfaced"},
		{map[string]string{"XDG_DATA_HOME": "relative", "HOME": "/h"}, "/h/.local/share/surfaced"},
		{map[string]string{"HOME": "/h"}, "/h/.local/share/surfaced"},
	}
	for _, c := range cases {
		if got := DefaultDataDir(env(c.env)); got != c.want {
			t.Errorf("%v: %q, want %q", c.env, got, c.want)
		}
	}
}

func TestStrictDecoding(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"unknown top-level key", "addr: 127.0.0.1:1\nlisten: :80\n",
			"surfaced.yaml:2: listen: unknown key (known: access, acp, addr, agents, allowed_hostnames,"},
		{"misspelled key", "adr: 127.0.0.1:1\n", "surfaced.yaml:1: adr: unknown key (did you mean addr?)"},
		{"unknown nested key", "limits:\n  body_bytes: 1MiB\n  replay_byts: 3\n",
			"surfaced.yaml:3: limits.replay_byts: unknown key (did you mean replay_bytes?)"},
		{"unknown key in an agent", "agents:\n  - name: a\n    comand: [x]\n",
			"surfaced.yaml:3: agents[0].comand: unknown key (did you mean command?)"},
		{"unknown key in an agent, no suggestion", "agents:\n  - name: a\n    environment: {}\n",
			"surfaced.yaml:3: agents[0].environment: unknown key (known: args, command, cwd, description, dir, env, go_build, images, name, title)"},
		{"unknown key in acp.agent_info", "acp:\n  agent_info:\n    name: x\n    vers: 1\n",
			"surfaced.yaml:4: acp.agent_info.vers: unknown key (did you mean version?)"},
		{"replaced key", "acp:\n  max_buffered_messages: 1000\n",
			"surfaced.yaml:2: acp.max_buffered_messages: was replaced by acp.buffer_bytes and acp.buffer_age"},
		{"duplicate key", "addr: 127.0.0.1:1\ndev: true\naddr: 127.0.0.1:2\n",
			"surfaced.yaml:3: addr: duplicate key (first at line 1)"},
		{"wrong type bool", "dev: maybe\n", `surfaced.yaml:1: dev: expected true or false, got "maybe"`},
		{"wrong type int", "limits:\n  inbox_max: lots\n", `surfaced.yaml:2: limits.inbox_max: expected a whole number, got "lots"`},
		{"string given a list", "addr: [a, b]\n", "surfaced.yaml:1: addr: expected a string, got a list"},
		{"list given a string", "browser_origins: https://a.example\n",
			`surfaced.yaml:1: browser_origins: expected a list, got "https://a.example"`},
		{"section given a scalar", "limits: 5\n", `surfaced.yaml:1: limits: expected a mapping of limits, got "5"`},
		{"document not a mapping", "- a\n- b\n", "surfaced.yaml:1: expected a mapping of settings, got a list"},
		{"env given a list", "agents:\n  - name: a\n    command: [x]\n    env: [A=1]\n",
			"surfaced.yaml:4: agents[0].env: expected a mapping, got a list"},
		{"bad size", "limits:\n  replay_bytes: 4MB\n", `surfaced.yaml:2: limits.replay_bytes: "4MB" is not a size (use 4MiB)`},
		{"bad duration", "limits:\n  ws_ping: 25\n", `surfaced.yaml:2: limits.ws_ping: "25" is not a duration (use 25s)`},
		{"anchor on an unknown key", "base: &b {dev: true}\n", "surfaced.yaml:1: base: unknown key"},
		{"merge key use", "limits:\n  <<: {inbox_max: 3}\n", "surfaced.yaml:2: limits: merge keys (<<) are not supported"},
		{"two documents", "dev: true\n---\ndev: false\n", "surfaced.yaml:2: a second YAML document"},
		{"syntax error", "addr: [\n", "surfaced.yaml: yaml: line"},
		{"tab indentation", "limits:\n\tinbox_max: 3\n", "surfaced.yaml: yaml: line 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(t, c.src)
			wantErr(t, err, c.want)
		})
	}
}

func TestDecodeReportsEveryError(t *testing.T) {
	_, err := parse(t, "dev: 3\nlog_levl: info\nlimits:\n  ws_ping: 1\n")
	wantErr(t, err, "surfaced.yaml:1: dev:", "surfaced.yaml:2: log_levl:", "surfaced.yaml:4: limits.ws_ping:")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Line != 1 || fe.Path != "dev" {
		t.Errorf("first FieldError = %+v", fe)
	}
}

func TestAliasesAndNulls(t *testing.T) {
	f, err := parse(t, `
origins: &o [https://a.example]
`)
	if err == nil {
		t.Fatalf("an unknown key holding an anchor must still be refused: %+v", f)
	}
	f, err = parse(t, `
browser_origins: &o [https://a.example]
allowed_hostnames: [a.example]
limits:
  inbox_max: ~
acp:
  agent_info:
`)
	if err != nil {
		t.Fatal(err)
	}
	if f.Limits.InboxMax != 100 || f.ACP.AgentInfo != nil || len(f.BrowserOrigins) != 1 {
		t.Errorf("nulls must keep defaults: %+v", f)
	}
}

func TestValuesDecoded(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, dir, "tokens.json", `{"tokens":[]}`)
	src := `
addr: 0.0.0.0:9000
data_dir: /var/lib/surfaced
store: postgresql://u:p@db/surfaced
tokens_file: tokens.json
dev: true
pprof_addr: localhost:6060
log_level: debug
log_format: json
allowed_hostnames: [surfaced.example.com]
browser_origins: [https://app.example.com]
workspace_roots: [/srv/work]
limits:
  body_bytes: 2MiB
  prompt_body_bytes: 64MiB
  sessions_per_subject: 7
  sessions_total: 70
  commands_per_second: 50
  replay_frames: 100
  replay_bytes: 512KiB
  client_queue_bytes: 2097152
  client_queue_age: 3s
  max_line: 1MiB
  ready_timeout: 5s
  settle_window: 2s
  restart_max: 0
  restart_window: 1m
  inbox_max: 5
  idle_timeout: 10m
  sse_keepalive: 5s
  ws_ping: 7s
  read_timeout: 9s
  ws_requests_in_flight: 3
  sse_streams_per_subject: 4
  ws_connections_per_subject: 5
acp:
  enabled: false
  path: /editor
  agent_info: {name: acme, version: 2.0.0}
  tool_call_payloads: false
  buffer_bytes: 64KiB
  buffer_age: 30s
  connections_per_subject: 6
  sessions_per_connection: 7
cluster:
  name: prod
  provider: etcd
  etcd_endpoints: [10.0.0.1:2379, https://etcd.internal:2379]
  advertise_addr: 10.0.0.2:7900
  bind_addr: 0.0.0.0:7900
`
	f, err := Parse([]byte(src), "s.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Addr != "0.0.0.0:9000" || f.DataDir != "/var/lib/surfaced" || f.StoreKind() != StorePostgres ||
		f.TokensFile != tok || !f.Dev || f.PprofAddr != "localhost:6060" || f.SlogLevel().String() != "DEBUG" ||
		f.LogFormat != "json" || f.AllowedHostnames[0] != "surfaced.example.com" ||
		f.BrowserOrigins[0] != "https://app.example.com" || f.WorkspaceRoots[0] != "/srv/work" {
		t.Errorf("top level: %+v", f)
	}
	sl := f.SessionLimits()
	if sl.ReplayFrames != 100 || sl.ReplayBytes != 512<<10 || sl.MaxLine != 1<<20 || sl.ReadyTimeout != 5*time.Second ||
		sl.SettleWindow != 2*time.Second || sl.RestartMax != -1 || sl.RestartWindow != time.Minute ||
		sl.CommandsPerSecond != 50 || sl.InboxMax != 5 || sl.IdleTimeout != 10*time.Minute {
		t.Errorf("session limits: %+v", sl)
	}
	gl := f.GatewayLimits()
	if gl != (GatewayLimits{BodyBytes: 2 << 20, PromptBodyBytes: 64 << 20,
		ClientQueueBytes: 2 << 20, ClientQueueAge: 3 * time.Second, SSEKeepalive: 5 * time.Second, WSPing: 7 * time.Second,
		RequestTimeout: 30 * time.Second, ReadTimeout: 9 * time.Second, WSInflight: 3, SSEPerSubject: 4, WSPerSubject: 5}) {
		t.Errorf("gateway limits: %+v", gl)
	}
	if q := f.Quotas(); q != (surfaced.Quotas{SessionsPerSubject: 7, SessionsTotal: 70}) {
		t.Errorf("quotas: %+v", q)
	}
	acp := f.ACPSettings()
	if acp != (ACPSettings{Enabled: false, Path: "/editor", AgentInfo: AgentInfo{Name: "acme", Version: "2.0.0"},
		ToolCallPayloads: false, BufferBytes: 64 << 10, BufferAge: 30 * time.Second, ConnectionsPerSubject: 6, SessionsPerConnection: 7}) {
		t.Errorf("acp: %+v", acp)
	}
	if !f.Cluster.Enabled() || f.Cluster.Name != "prod" || len(f.Cluster.EtcdEndpoints) != 2 || f.Cluster.BindAddr != "0.0.0.0:7900" {
		t.Errorf("cluster: %+v", f.Cluster)
	}
}

func TestDefaultAccessors(t *testing.T) {
	f := Default()
	sl := f.SessionLimits()
	if sl.RestartMax != 3 || sl.ReplayFrames != 4096 || sl.ReplayBytes != 4<<20 || sl.MaxLine != 16<<20 ||
		sl.IdleTimeout != 0 || sl.InboxMax != 100 || sl.CommandsPerSecond != 1000 {
		t.Errorf("session limits: %+v", sl)
	}
	if sl.PromptBytes != 16<<20 || sl.InboxBytes != 32<<20 || sl.CommandQueue != 64 || sl.CommandQueueBytes != 8<<20 ||
		sl.StdinBytes != 64<<20 || sl.AgentWindowBytes != 4<<20 || sl.FloodBurst != 10000 || sl.FloodRate != 100 ||
		sl.AgentLogLines != 100 || sl.AgentLogInterval != 10*time.Second {
		t.Errorf("agent limits: %+v", sl)
	}
	if gl := f.GatewayLimits(); gl.RequestTimeout != 30*time.Second {
		t.Errorf("request timeout %s", gl.RequestTimeout)
	}
	f.Limits.AgentFloodRate = 0
	if sl := f.SessionLimits(); sl.FloodRate >= 0 {
		t.Errorf("agent_flood_rate 0 (never stop) became %d", sl.FloodRate)
	}
	gl := f.GatewayLimits()
	if gl.BodyBytes != 1<<20 || gl.PromptBodyBytes != 32<<20 || gl.SSEKeepalive != 15*time.Second || gl.WSPing != 25*time.Second ||
		gl.ClientQueueAge != 10*time.Second || gl.ReadTimeout != time.Minute || gl.WSInflight != 16 || gl.SSEPerSubject != 100 || gl.WSPerSubject != 100 {
		t.Errorf("gateway limits: %+v", gl)
	}
	if q := f.Quotas(); q.SessionsPerSubject != 100 || q.SessionsTotal != 1000 {
		t.Errorf("quotas: %+v", q)
	}
	if a := f.ACPSettings(); a.AgentInfo != DefaultAgentInfo() || !a.Enabled || !a.ToolCallPayloads || a.BufferBytes != 4<<20 || a.BufferAge != time.Minute ||
		a.ConnectionsPerSubject != 32 || a.SessionsPerConnection != 64 {
		t.Errorf("acp: %+v", a)
	}
	if f.StoreKind() != StoreSQLite || f.Cluster.Enabled() {
		t.Errorf("store %q, cluster %v", f.StoreKind(), f.Cluster.Enabled())
	}
}

func TestRelativePaths(t *testing.T) {
	root := t.TempDir()
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeFile(t, root, "conf/tokens.json", `{"tokens":[]}`)
	writeFile(t, root, "conf/agents/a/agent.json", `{"name":"a","command":["./run.sh","{{dir}}/x"],"cwd":"work","env":{"D":"{{dir}}"}}`)
	if err := os.MkdirAll(filepath.Join(root, "conf/agents/a/work"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, root, "conf/surfaced.yaml", `
data_dir: data
tokens_file: tokens.json
workspace_roots: [ws, ~/src, /abs]
agents:
  - dir: agents/a
  - name: b
    command: [bin/b]
    cwd: .
  - name: c
    command: [sh, -c, "exit 0"]
`)
	t.Chdir(root)
	f, err := Load("conf/surfaced.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Dir(cfg)
	if f.DataDir != filepath.Join(conf, "data") || f.TokensFile != filepath.Join(conf, "tokens.json") {
		t.Errorf("data_dir %q, tokens_file %q", f.DataDir, f.TokensFile)
	}
	if want := []string{filepath.Join(conf, "ws"), filepath.Join(home, "src"), "/abs"}; !reflect.DeepEqual(f.WorkspaceRoots, want) {
		t.Errorf("workspace_roots %q, want %q", f.WorkspaceRoots, want)
	}
	specs, err := f.AgentSpecs(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	adir := filepath.Join(conf, "agents/a")
	want := []struct {
		argv []string
		cwd  string
		env  []string
	}{
		{[]string{filepath.Join(adir, "run.sh"), adir + "/x"}, filepath.Join(adir, "work"), []string{"D=" + adir}},
		{[]string{filepath.Join(conf, "bin/b")}, conf, nil},
		{[]string{"sh", "-c", "exit 0"}, "", nil}, // a bare program: PATH at spawn time; no cwd: the daemon's
	}
	for i, w := range want {
		s := specs[i]
		if !reflect.DeepEqual(s.Argv, w.argv) || s.Cwd != w.cwd || !reflect.DeepEqual(s.Env, w.env) {
			t.Errorf("agent %d: argv %q cwd %q env %q; want %q %q %q", i, s.Argv, s.Cwd, s.Env, w.argv, w.cwd, w.env)
		}
	}
}

func TestValidationMessages(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "agents/good/agent.json", `{"name":"good","command":["x"]}`)
	writeFile(t, dir, "agents/bad/agent.json", `{"name":"Bad","command":["x"]}`)
	writeFile(t, dir, "notadir", "")
	if err := os.MkdirAll(filepath.Join(dir, "agents/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "gopkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	inline := func(a AgentEntry) func(*File) { return func(f *File) { f.Agents = []AgentEntry{a} } }
	cases := []struct {
		name string
		mut  func(*File)
		want string
	}{
		{"addr empty", func(f *File) { f.Addr = "" }, "addr: is empty (default 127.0.0.1:7800)"},
		{"addr no port", func(f *File) { f.Addr = "localhost" }, `addr: "localhost" is not host:port (e.g. 127.0.0.1:7800)`},
		{"addr bad port", func(f *File) { f.Addr = "localhost:http2" }, `addr: "localhost:http2" has no valid port (0-65535)`},
		{"data_dir empty", func(f *File) { f.DataDir = "" }, "data_dir: not set and there is no home directory: set data_dir, --data-dir or SURFACED_DATA_DIR"},
		{"data_dir relative", func(f *File) { f.DataDir = "data" }, `data_dir: "data" is not an absolute path`},
		{"store scheme", func(f *File) { f.Store = "mysql://u:secret@h/db" }, `store: scheme "mysql" is not supported: leave it empty for SQLite in data_dir, or give a postgres:// URL`},
		{"store not url", func(f *File) { f.Store = "host=db password=secret" }, "store: is not a URL: leave it empty for SQLite"},
		{"store bad url", func(f *File) { f.Store = "postgres://u:secret@h:port/db" }, "store: is not a valid PostgreSQL URL"},
		{"pprof not loopback", func(f *File) { f.PprofAddr = ":6060" }, `pprof_addr: must be a loopback address (127.0.0.1:6060, [::1]:6060 or localhost:6060), got ":6060"`},
		{"pprof public", func(f *File) { f.PprofAddr = "10.1.2.3:6060" }, "pprof_addr: must be a loopback address"},
		{"pprof bad", func(f *File) { f.PprofAddr = "6060" }, `pprof_addr: "6060" is not host:port`},
		{"log level", func(f *File) { f.LogLevel = "verbose" }, `log_level: "verbose" is not a level (debug, info, warn or error)`},
		{"log format", func(f *File) { f.LogFormat = "xml" }, `log_format: "xml" is not a format (text or json)`},
		{"token and no_auth", func(f *File) { f.Token, f.NoAuth = "t", true }, "no_auth: token, tokens_file and no_auth exclude each other; give one (given: token, no_auth)"},
		{"token and tokens_file", func(f *File) { f.Token, f.TokensFile = "t", filepath.Join(dir, "notadir") }, "tokens_file: token, tokens_file and no_auth exclude each other"},
		{"token with space", func(f *File) { f.Token = "a b" }, "token: must not contain spaces or control characters"},
		{"tokens_file missing", func(f *File) { f.TokensFile = filepath.Join(dir, "nope.json") }, "tokens_file: stat " + filepath.Join(dir, "nope.json") + ": no such file or directory"},
		{"tokens_file relative", func(f *File) { f.TokensFile = "t.json" }, `tokens_file: "t.json" is not an absolute path`},
		{"tokens_file dir", func(f *File) { f.TokensFile = dir }, "tokens_file: " + dir + " is not a regular file"},
		{"hostname empty", func(f *File) { f.AllowedHostnames = []string{""} }, `allowed_hostnames[0]: "" is empty`},
		{"hostname wildcard", func(f *File) { f.AllowedHostnames = []string{"*.example.com"} }, `allowed_hostnames[0]: "*.example.com" has a wildcard; list each name`},
		{"hostname url", func(f *File) { f.AllowedHostnames = []string{"a", "https://x.example"} }, `allowed_hostnames[1]: "https://x.example" is not a hostname (no scheme or path: example.com)`},
		{"hostname port", func(f *File) { f.AllowedHostnames = []string{"x.example:8080"} }, `allowed_hostnames[0]: "x.example:8080" has a port; give the name only`},
		{"hostname char", func(f *File) { f.AllowedHostnames = []string{"x_y.example"} }, `allowed_hostnames[0]: "x_y.example" is not a hostname ('_')`},
		{"hostname bad ipv6", func(f *File) { f.AllowedHostnames = []string{"[zz]"} }, `allowed_hostnames[0]: "[zz]" is not an IPv6 address`},
		{"origin wildcard", func(f *File) { f.BrowserOrigins = []string{"*"} }, `browser_origins[0]: "*" has a wildcard; list each origin`},
		{"origin no scheme", func(f *File) { f.BrowserOrigins = []string{"app.example.com"} }, `browser_origins[0]: "app.example.com" is not an origin (scheme://host[:port], e.g. https://app.example.com)`},
		{"origin path", func(f *File) { f.BrowserOrigins = []string{"https://a.example/app"} }, `browser_origins[0]: "https://a.example/app" is not an origin: only scheme://host[:port], no path, query or user`},
		{"origin slash", func(f *File) { f.BrowserOrigins = []string{"https://a.example/"} }, `browser_origins[0]: "https://a.example/" ends with /; browsers send https://a.example`},
		{"origin case", func(f *File) { f.BrowserOrigins = []string{"https://App.Example"} }, `browser_origins[0]: "https://App.Example" is not how a browser writes it: use https://app.example`},
		{"origin default port", func(f *File) { f.BrowserOrigins = []string{"https://a.example:443"} }, `browser_origins[0]: "https://a.example:443" has the default port; browsers send https://a.example`},
		{"workspace root empty", func(f *File) { f.WorkspaceRoots = []string{""} }, "workspace_roots[0]: is empty"},
		{"workspace root relative", func(f *File) { f.WorkspaceRoots = []string{"src"} }, `workspace_roots[0]: "src" is not an absolute path`},

		{"agent command empty", func(f *File) { f.Agents = []AgentEntry{{Name: "a", Command: []string{"x"}}, {Name: "b"}} }, "agents[1]: command is empty"},
		{"agent command[0] empty", inline(AgentEntry{Name: "a", Command: []string{""}}), "agents[0]: command[0] is empty"},
		{"agent name missing", inline(AgentEntry{Command: []string{"x"}}), "agents[0]: name is missing"},
		{"agent name bad", inline(AgentEntry{Name: "My Agent", Command: []string{"x"}}), `agents[0]: name "My Agent" is not valid (lowercase letters, digits, - and _, starting with a letter, at most 64)`},
		{"agent name long", inline(AgentEntry{Name: strings.Repeat("a", 65), Command: []string{"x"}}), "is not valid"},
		{"agent name dup", func(f *File) {
			f.Agents = []AgentEntry{{Dir: filepath.Join(dir, "agents/good")}, {Name: "good", Command: []string{"y"}}}
		}, `agents[1]: name "good" is already used by agents[0]`},
		{"agent dir and inline", inline(AgentEntry{Dir: filepath.Join(dir, "agents/good"), Name: "x", Env: map[string]string{"A": "b"}}),
			"agents[0]: dir cannot be combined with name, env (those belong in the directory's agent.json)"},
		{"agent dir missing", inline(AgentEntry{Dir: filepath.Join(dir, "agents/none")}), "agents[0]: agent directory: stat " + filepath.Join(dir, "agents/none")},
		{"agent dir is a file", inline(AgentEntry{Dir: filepath.Join(dir, "notadir")}), "agents[0]: agent directory " + filepath.Join(dir, "notadir") + ": not a directory"},
		{"agent dir without manifest", inline(AgentEntry{Dir: filepath.Join(dir, "agents/empty")}),
			"agents[0]: agent directory " + filepath.Join(dir, "agents/empty") + ": no agent.json (an agent directory needs a manifest)"},
		{"agent dir bad manifest", inline(AgentEntry{Dir: filepath.Join(dir, "agents/bad")}),
			"agents[0]: " + filepath.Join(dir, "agents/bad/agent.json") + `:1: name "Bad" is not valid`},
		{"bin without go_build", inline(AgentEntry{Name: "a", Command: []string{"{{bin}}"}}), "agents[0]: command[0] is {{bin}} but go_build is not set"},
		{"go_build wrong command", inline(AgentEntry{Name: "a", GoBuild: "./gopkg", Command: []string{"node", "x.js"}}),
			`agents[0]: command[0] "node" is not the built program: with go_build, command[0] is "gopkg" (the package's name) or {{bin}}, or command is left out`},
		{"go_build pattern", inline(AgentEntry{Name: "a", GoBuild: "./..."}), `agents[0]: go_build: "./..." is a pattern; name one main package`},
		{"go_build missing dir", inline(AgentEntry{Name: "a", GoBuild: "./nope"}), "agents[0]: go_build: " + filepath.Join(dir, "nope") + " is not a directory"},
		{"env key", inline(AgentEntry{Name: "a", Command: []string{"x"}, Env: map[string]string{"1X": "y", "A=B": "c"}}),
			`agents[0]: env: "1X" is not a variable name`},
		{"env NUL", inline(AgentEntry{Name: "a", Command: []string{"x"}, Env: map[string]string{"A": "b\x00"}}), "agents[0]: env.A contains a NUL byte"},
		{"command NUL", inline(AgentEntry{Name: "a", Command: []string{"x", "y\x00"}}), "agents[0]: command[1] contains a NUL byte"},
		{"args NUL", inline(AgentEntry{Name: "a", Command: []string{"x"}, Args: []string{"\x00"}}), "agents[0]: args[0] contains a NUL byte"},
		{"cwd missing", inline(AgentEntry{Name: "a", Command: []string{"x"}, Cwd: "nope"}), "agents[0]: cwd: " + filepath.Join(dir, "nope") + " is not a directory"},

		{"body_bytes", func(f *File) { f.Limits.BodyBytes = 10 }, "limits.body_bytes: must be at least 1KiB, got 10"},
		{"prompt_body_bytes small", func(f *File) { f.Limits.PromptBodyBytes = 512 * KiB },
			"limits.prompt_body_bytes: 512KiB is smaller than body_bytes (1MiB)"},
		{"prompt_body_bytes zero", func(f *File) { f.Limits.PromptBodyBytes = 0 }, "limits.prompt_body_bytes: must be at least 1KiB, got 0"},
		{"sessions_per_subject", func(f *File) { f.Limits.SessionsPerSubject = 0 }, "limits.sessions_per_subject: must be at least 1, got 0"},
		{"sessions_total", func(f *File) { f.Limits.SessionsTotal = -1 }, "limits.sessions_total: must be at least 1, got -1"},
		{"commands_per_second", func(f *File) { f.Limits.CommandsPerSecond = 0 }, "limits.commands_per_second: must be at least 1, got 0"},
		{"replay_frames", func(f *File) { f.Limits.ReplayFrames = 0 }, "limits.replay_frames: must be at least 1, got 0"},
		{"replay_bytes", func(f *File) { f.Limits.ReplayBytes = 0 }, "limits.replay_bytes: must be at least 1KiB, got 0"},
		{"client_queue_bytes", func(f *File) { f.Limits.ClientQueueBytes = 100 }, "limits.client_queue_bytes: must be at least 1KiB, got 100"},
		{"client_queue_age", func(f *File) { f.Limits.ClientQueueAge = 0 }, "limits.client_queue_age: must be longer than 0, got 0s"},
		{"max_line", func(f *File) { f.Limits.MaxLine = 4 * KiB }, "limits.max_line: must be at least 64KiB, got 4KiB"},
		{"ready_timeout", func(f *File) { f.Limits.ReadyTimeout = Duration(-time.Second) }, "limits.ready_timeout: must be longer than 0, got -1s"},
		{"settle_window", func(f *File) { f.Limits.SettleWindow = 0 }, "limits.settle_window: must be longer than 0"},
		{"restart_max", func(f *File) { f.Limits.RestartMax = -1 }, "limits.restart_max: must be at least 0, got -1"},
		{"restart_window", func(f *File) { f.Limits.RestartWindow = 0 }, "limits.restart_window: must be longer than 0"},
		{"inbox_max", func(f *File) { f.Limits.InboxMax = 0 }, "limits.inbox_max: must be at least 1, got 0"},
		{"idle_timeout", func(f *File) { f.Limits.IdleTimeout = Duration(-time.Minute) }, "limits.idle_timeout: must not be negative (0 means never), got -1m0s"},
		{"sse_keepalive", func(f *File) { f.Limits.SSEKeepalive = 0 }, "limits.sse_keepalive: must be longer than 0"},
		{"ws_ping", func(f *File) { f.Limits.WSPing = 0 }, "limits.ws_ping: must be longer than 0"},
		{"prompt_bytes", func(f *File) { f.Limits.PromptBytes = 10 }, "limits.prompt_bytes: must be at least 1KiB, got 10"},
		{"prompt_bytes over stdin", func(f *File) { f.Limits.PromptBytes = 128 * MiB; f.Limits.InboxBytes = 128 * MiB },
			"limits.prompt_bytes: 128MiB is larger than agent_stdin_bytes (64MiB)"},
		{"agent_stdin_bytes", func(f *File) { f.Limits.AgentStdinBytes = KiB }, "limits.agent_stdin_bytes: must be at least 64KiB"},
		{"inbox_bytes", func(f *File) { f.Limits.InboxBytes = MiB }, "limits.inbox_bytes: 1MiB is smaller than prompt_bytes (16MiB)"},
		{"request_timeout", func(f *File) { f.Limits.RequestTimeout = Duration(time.Millisecond) }, "limits.request_timeout: must be at least 1s, got 1ms"},
		{"command_queue", func(f *File) { f.Limits.CommandQueue = 0 }, "limits.command_queue: must be at least 1, got 0"},
		{"command_queue_bytes", func(f *File) { f.Limits.CommandQueueBytes = 4 * KiB },
			"limits.command_queue_bytes: 4KiB is smaller than body_bytes (1MiB)"},
		{"agent_window_bytes", func(f *File) { f.Limits.AgentWindowBytes = KiB }, "limits.agent_window_bytes: must be at least 64KiB, got 1KiB"},
		{"agent_flood_burst", func(f *File) { f.Limits.AgentFloodBurst = 0 }, "limits.agent_flood_burst: must be at least 1, got 0"},
		{"agent_flood_rate", func(f *File) { f.Limits.AgentFloodRate = -1 }, "limits.agent_flood_rate: must be at least 0, got -1"},
		{"agent_log_lines", func(f *File) { f.Limits.AgentLogLines = 0 }, "limits.agent_log_lines: must be at least 1, got 0"},
		{"agent_log_interval", func(f *File) { f.Limits.AgentLogInterval = 0 }, "limits.agent_log_interval: must be longer than 0"},

		{"acp path empty", func(f *File) { f.ACP.Path = "" }, "acp.path: is empty (default /acp)"},
		{"acp path relative", func(f *File) { f.ACP.Path = "acp" }, `acp.path: "acp" must start with /`},
		{"acp path root", func(f *File) { f.ACP.Path = "/" }, "acp.path: must not be / (the web UI lives there)"},
		{"acp path slash", func(f *File) { f.ACP.Path = "/acp/" }, `acp.path: "/acp/" must not end with / (write /acp; the path with a slash is served as well)`},
		{"acp path query", func(f *File) { f.ACP.Path = "/acp?x=1" }, `acp.path: "/acp?x=1" is not a plain path`},
		{"acp path dots", func(f *File) { f.ACP.Path = "/x/../api" }, `acp.path: "/x/../api" is not a plain path`},
		{"acp path api", func(f *File) { f.ACP.Path = "/api/acp" }, `acp.path: "/api/acp" is inside the daemon's own routes (/api, /debug)`},
		{"acp buffer_bytes", func(f *File) { f.ACP.BufferBytes = 100 }, "acp.buffer_bytes: must be at least 1KiB, got 100"},
		{"acp buffer_age", func(f *File) { f.ACP.BufferAge = 0 }, "acp.buffer_age: must be longer than 0, got 0s"},
		{"acp connections_per_subject", func(f *File) { f.ACP.ConnectionsPerSubject = 0 }, "acp.connections_per_subject: must be at least 1, got 0"},
		{"acp sessions_per_connection", func(f *File) { f.ACP.SessionsPerConnection = 0 }, "acp.sessions_per_connection: must be at least 1, got 0"},
		{"read_timeout", func(f *File) { f.Limits.ReadTimeout = 0 }, "limits.read_timeout: must be longer than 0, got 0s"},
		{"sse_streams_per_subject", func(f *File) { f.Limits.SSEStreamsPerSubject = 0 }, "limits.sse_streams_per_subject: must be at least 1, got 0"},
		{"acp agent_info name", func(f *File) { f.ACP.AgentInfo = &AgentInfo{Version: "1"} }, "acp.agent_info.name: is empty (agent_info replaces the default whole: give name and version)"},
		{"acp agent_info version", func(f *File) { f.ACP.AgentInfo = &AgentInfo{Name: "x"} }, "acp.agent_info.version: is empty"},

		{"cluster without provider", func(f *File) { f.Cluster.Name = "x" }, "cluster.provider: is required when cluster is configured (automanaged, etcd or k8s)"},
		{"cluster bad provider", func(f *File) { f.Cluster.Provider = "consul"; f.Store = "postgres://h/db" }, `cluster.provider: "consul" is not a provider (automanaged, etcd or k8s)`},
		{"cluster etcd no endpoints", func(f *File) { f.Cluster.Provider = "etcd"; f.Store = "postgres://h/db" }, "cluster.etcd_endpoints: provider etcd needs at least one endpoint (host:port)"},
		{"cluster etcd bad endpoint", func(f *File) {
			f.Cluster = ClusterSection{Provider: "etcd", EtcdEndpoints: []string{"etcd"}}
			f.Store = "postgres://h/db"
		}, `cluster.etcd_endpoints[0]: "etcd" is not host:port or an http(s) URL`},
		{"cluster automanaged endpoints", func(f *File) {
			f.Cluster = ClusterSection{Provider: "automanaged", EtcdEndpoints: []string{"h:1"}}
			f.Store = "postgres://h/db"
		}, "cluster.etcd_endpoints: only with provider etcd"},
		{"cluster name", func(f *File) {
			f.Cluster = ClusterSection{Provider: "automanaged", Name: "Prod"}
			f.Store = "postgres://h/db"
		}, `cluster.name: "Prod" is not valid`},
		{"cluster advertise", func(f *File) {
			f.Cluster = ClusterSection{Provider: "automanaged", AdvertiseAddr: "node1"}
			f.Store = "postgres://h/db"
		}, `cluster.advertise_addr: "node1" is not host:port`},
		{"cluster bind", func(f *File) {
			f.Cluster = ClusterSection{Provider: "automanaged", BindAddr: "x:y"}
			f.Store = "postgres://h/db"
		}, `cluster.bind_addr: "x:y" has no valid port`},
		{"cluster k8s needs a fixed port", func(f *File) {
			f.Cluster = ClusterSection{Provider: "k8s", BindAddr: "0.0.0.0:0"}
			f.Store = "postgres://h/db"
		}, "cluster.bind_addr: provider k8s needs a fixed port (e.g. 0.0.0.0:7900)"},
		{"cluster needs postgres", func(f *File) { f.Cluster.Provider = "automanaged" }, "cluster: the nodes of a cluster share one store: set store to a postgres:// URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Default()
			f.DataDir = dir
			f.baseDir = dir
			c.mut(f)
			err := f.Validate()
			wantErr(t, err, c.want)
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("a message repeats the password: %v", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("%T is not a *FieldError", err)
			}
		})
	}
}

func TestValidateAcceptsGoodValues(t *testing.T) {
	f := Default()
	f.DataDir = t.TempDir()
	f.Addr = ":0"
	f.PprofAddr = "[::1]:6060"
	f.AllowedHostnames = []string{"surfaced.example.com", "10.0.0.1", "[::1]", "UPPER.example"}
	f.BrowserOrigins = []string{"http://localhost:5173", "https://a.example", "vscode-webview://abc", "http://[::1]:8080"}
	f.Store = "postgres://u:p@db:5432/s?sslmode=disable"
	f.Cluster = ClusterSection{Provider: "etcd", EtcdEndpoints: []string{"h:2379", "https://e:2379"}, AdvertiseAddr: "10.0.0.1:7900", BindAddr: ":7900"}
	f.ACP.AgentInfo = &AgentInfo{Name: "x", Version: "1"}
	f.Limits.RestartMax = 0
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidationLinesPointIntoTheFile(t *testing.T) {
	_, err := parse(t, "addr: 127.0.0.1:7800\nagents:\n  - name: a\n    command: [x]\n  - name: b\n    title: B\nlimits:\n  inbox_max: 0\npprof_addr: 0.0.0.0:6060\n"+
		"cluster:\n  provider: automanaged\nacp:\n  agent_info:\n    name: x\n")
	wantErr(t, err,
		"surfaced.yaml:5: agents[1]: command is empty",
		"surfaced.yaml:8: limits.inbox_max: must be at least 1, got 0",
		"surfaced.yaml:9: pprof_addr: must be a loopback address",
		"surfaced.yaml:10: cluster: the nodes of a cluster share one store",
		"surfaced.yaml:13: acp.agent_info.version: is empty") // a missing key: its section's line
}

func TestFullExample(t *testing.T) {
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The example is written for the root of a checkout, where the
	// example agents live.
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, "testdata/full.yaml", root)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := f.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if want := []string{"demo", "hello", "pi"}; !reflect.DeepEqual(names, want) {
		t.Errorf("agents %q, want %q", names, want)
	}
	// Every default it states is the default.
	d := Default()
	if f.Limits != d.Limits || f.Addr != d.Addr || f.LogLevel != d.LogLevel || f.LogFormat != d.LogFormat ||
		f.ACPSettings() != d.ACPSettings() || f.Store != d.Store || f.NoAuth || f.Dev || f.PprofAddr != "" {
		t.Errorf("the example's values differ from Default():\n%+v\n%+v", f, d)
	}
	// It mentions every setting (commented out or not).
	for _, key := range allKeys(reflect.TypeFor[File](), "") {
		last := key[strings.LastIndex(key, ".")+1:]
		if !regexp.MustCompile(`(?m)^[ #-]*`+regexp.QuoteMeta(last)+`:`).Match(data) &&
			!strings.Contains(string(data), "{"+last+":") && !strings.Contains(string(data), " "+last+":") {
			t.Errorf("testdata/full.yaml does not mention %s", key)
		}
	}
	// docs/configuration.md shows the same file.
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(data)+"```\n") {
		t.Error("docs/configuration.md does not contain config/testdata/full.yaml verbatim in a ```yaml block")
	}
}

// allKeys lists the yaml keys of t, nested with dots.
func allKeys(t reflect.Type, prefix string) []string {
	var out []string
	for name, i := range yamlFields(t) {
		key := joinPath(prefix, name)
		out = append(out, key)
		ft := t.Field(i).Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, allKeys(ft, key)...)
		}
	}
	return out
}
