package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/surfaced/surfaced/artifact"
)

// minMaxLine keeps max_line above what any real agent_ready or event line
// needs; a smaller cap would only produce confusing "line too long" ends.
const minMaxLine = 64 * KiB

// Validate checks every setting and reports every problem, one FieldError
// per problem (joined), each naming the setting and, for a loaded file, its
// line. It reads the agent directories' manifests, so a broken agent.json
// is reported here too.
func (f *File) Validate() error {
	v := &validation{f: f}
	v.server()
	v.auth()
	v.identity()
	v.gates()
	_, errs := f.manifests()
	v.errs = append(v.errs, errs...)
	v.limits()
	v.acp()
	v.mcp()
	v.cluster()
	v.tracing()
	return errors.Join(v.errs...)
}

type validation struct {
	f    *File
	errs []error
}

func (v *validation) add(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Source: v.f.source, Line: v.f.lineOf(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validation) server() {
	f := v.f
	if f.Addr == "" {
		v.add("addr", "is empty (default %s)", DefaultAddr)
	} else if err := checkHostPort(f.Addr); err != nil {
		v.add("addr", "%q %v (e.g. %s)", f.Addr, err, DefaultAddr)
	}
	switch {
	case f.DataDir == "":
		v.add("data_dir", "not set and there is no home directory: set data_dir, --data-dir or %s", EnvDataDir)
	case !filepath.IsAbs(f.DataDir):
		v.add("data_dir", "%q is not an absolute path", f.DataDir)
	}
	if _, err := ClassifyStore(f.Store); err != nil {
		v.add("store", "%v", err)
	}
	if f.WebRoot != "" {
		if fi, err := os.Stat(filepath.Join(f.WebRoot, "index.html")); err != nil || fi.IsDir() {
			v.add("web_root", "%q has no index.html (build the app first, e.g. make web)", f.WebRoot)
		}
	}
	if f.PprofAddr != "" {
		if err := checkHostPort(f.PprofAddr); err != nil {
			v.add("pprof_addr", "%q %v", f.PprofAddr, err)
		} else if !isLoopback(f.PprofAddr) {
			v.add("pprof_addr", "must be a loopback address (127.0.0.1:6060, [::1]:6060 or localhost:6060), got %q", f.PprofAddr)
		}
	}
	switch f.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		v.add("log_level", "%q is not a level (debug, info, warn or error)", f.LogLevel)
	}
	switch f.LogFormat {
	case "text", "json":
	default:
		v.add("log_format", "%q is not a format (text or json)", f.LogFormat)
	}
}

func (v *validation) auth() {
	f := v.f
	var set []string
	if f.Token != "" {
		set = append(set, "token")
	}
	if f.TokensFile != "" {
		set = append(set, "tokens_file")
	}
	if f.NoAuth {
		set = append(set, "no_auth")
	}
	if len(set) > 1 {
		v.add(set[1], "token, tokens_file and no_auth exclude each other; give one (given: %s)", strings.Join(set, ", "))
	}
	if strings.IndexFunc(f.Token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		v.add("token", "must not contain spaces or control characters")
	}
	if f.TokensFile != "" {
		if !filepath.IsAbs(f.TokensFile) {
			v.add("tokens_file", "%q is not an absolute path", f.TokensFile)
		} else if fi, err := os.Stat(f.TokensFile); err != nil {
			v.add("tokens_file", "%v", err)
		} else if !fi.Mode().IsRegular() {
			v.add("tokens_file", "%s is not a regular file", f.TokensFile)
		}
	}
}

func (v *validation) gates() {
	f := v.f
	for i, h := range f.AllowedHostnames {
		if msg := checkHostname(h); msg != "" {
			v.add(fmt.Sprintf("allowed_hostnames[%d]", i), "%q %s", h, msg)
		}
	}
	for i, o := range f.BrowserOrigins {
		if msg := checkOrigin(o); msg != "" {
			v.add(fmt.Sprintf("browser_origins[%d]", i), "%q %s", o, msg)
		}
	}
	for i, r := range f.WorkspaceRoots {
		if r == "" {
			v.add(fmt.Sprintf("workspace_roots[%d]", i), "is empty")
		} else if !filepath.IsAbs(r) {
			v.add(fmt.Sprintf("workspace_roots[%d]", i), "%q is not an absolute path", r)
		}
	}
}

func (v *validation) limits() {
	l := v.f.Limits
	atLeast := func(key string, got, min int64) {
		if got < min {
			v.add("limits."+key, "must be at least %d, got %d", min, got)
		}
	}
	atLeastSize := func(key string, got, min Size) {
		if got < min {
			v.add("limits."+key, "must be at least %s, got %s", min, got)
		}
	}
	positive := func(key string, d Duration) {
		if d <= 0 {
			v.add("limits."+key, "must be longer than 0, got %s", d)
		}
	}
	atLeastSize("body_bytes", l.BodyBytes, 1*KiB)
	atLeastSize("prompt_body_bytes", l.PromptBodyBytes, 1*KiB)
	if l.PromptBodyBytes < l.BodyBytes {
		v.add("limits.prompt_body_bytes", "%s is smaller than body_bytes (%s); a prompt may carry images, so it gets at least as much", l.PromptBodyBytes, l.BodyBytes)
	}
	atLeast("sessions_per_subject", int64(l.SessionsPerSubject), 1)
	atLeast("sessions_total", int64(l.SessionsTotal), 1)
	atLeast("commands_per_second", int64(l.CommandsPerSecond), 1)
	atLeast("replay_frames", int64(l.ReplayFrames), 1)
	atLeastSize("replay_bytes", l.ReplayBytes, 1*KiB)
	atLeastSize("client_queue_bytes", l.ClientQueueBytes, 1*KiB)
	positive("client_queue_age", l.ClientQueueAge)
	atLeastSize("max_line", l.MaxLine, minMaxLine)
	positive("ready_timeout", l.ReadyTimeout)
	positive("settle_window", l.SettleWindow)
	atLeast("restart_max", int64(l.RestartMax), 0)
	positive("restart_window", l.RestartWindow)
	atLeast("inbox_max", int64(l.InboxMax), 1)
	if l.IdleTimeout < 0 {
		v.add("limits.idle_timeout", "must not be negative (0 means never), got %s", l.IdleTimeout)
	}
	positive("idempotency_window", l.IdempotencyWindow)
	atLeast("idempotency_keys", int64(l.IdempotencyKeys), 1)
	atLeastSize("idempotency_bytes", l.IdempotencyBytes, 1*KiB)
	positive("sse_keepalive", l.SSEKeepalive)
	positive("ws_ping", l.WSPing)

	atLeastSize("prompt_bytes", l.PromptBytes, 1*KiB)
	atLeastSize("agent_stdin_bytes", l.AgentStdinBytes, 64*KiB)
	if l.PromptBytes > l.AgentStdinBytes {
		v.add("limits.prompt_bytes", "%s is larger than agent_stdin_bytes (%s): a prompt that size could never be written to an agent", l.PromptBytes, l.AgentStdinBytes)
	}
	if l.InboxBytes < l.PromptBytes {
		v.add("limits.inbox_bytes", "%s is smaller than prompt_bytes (%s); the inbox must hold at least one prompt", l.InboxBytes, l.PromptBytes)
	}
	if l.RequestTimeout < Duration(time.Second) {
		v.add("limits.request_timeout", "must be at least 1s, got %s", l.RequestTimeout)
	}
	atLeast("command_queue", int64(l.CommandQueue), 1)
	if l.CommandQueueBytes < l.BodyBytes {
		v.add("limits.command_queue_bytes", "%s is smaller than body_bytes (%s); the queue must hold at least one command", l.CommandQueueBytes, l.BodyBytes)
	}
	atLeastSize("agent_window_bytes", l.AgentWindowBytes, 64*KiB)
	atLeast("agent_flood_burst", int64(l.AgentFloodBurst), 1)
	atLeast("agent_flood_rate", int64(l.AgentFloodRate), 0)
	atLeast("agent_log_lines", int64(l.AgentLogLines), 1)
	positive("agent_log_interval", l.AgentLogInterval)
	atLeastSize("artifact_bytes", l.ArtifactBytes, 1*KiB)
	atLeastSize("session_artifact_bytes", l.SessionArtifactBytes, 1*KiB)
	if l.SessionArtifactBytes < l.ArtifactBytes {
		v.add("limits.session_artifact_bytes", "%s is smaller than artifact_bytes (%s); a session holds at least one artifact", l.SessionArtifactBytes, l.ArtifactBytes)
	}
	positive("artifact_url_ttl", l.ArtifactURLTTL)
	if time.Duration(l.ArtifactURLTTL) > artifact.MaxURLTTL {
		v.add("limits.artifact_url_ttl", "must be at most %s, got %s", Duration(artifact.MaxURLTTL), l.ArtifactURLTTL)
	}
	if l.EndedRetention < 0 {
		v.add("limits.ended_retention", "must not be negative (0 keeps ended sessions), got %s", l.EndedRetention)
	} else if l.EndedRetention > 0 && time.Duration(l.EndedRetention) < time.Minute {
		v.add("limits.ended_retention", "must be at least 1m (or 0 to keep ended sessions), got %s", l.EndedRetention)
	}
	positive("read_timeout", l.ReadTimeout)
	atLeast("ws_requests_in_flight", int64(l.WSRequestsInFlight), 1)
	atLeast("sse_streams_per_subject", int64(l.SSEStreamsPerSubject), 1)
	atLeast("ws_connections_per_subject", int64(l.WSConnectionsPerSubject), 1)
}

func (v *validation) acp() {
	a := v.f.ACP
	p := a.Path
	switch {
	case p == "":
		v.add("acp.path", "is empty (default %s)", DefaultACPPath)
	default:
		v.mountPath("acp.path", p)
	}
	if a.BufferBytes < 1*KiB {
		v.add("acp.buffer_bytes", "must be at least %s, got %s", 1*KiB, a.BufferBytes)
	}
	if a.BufferAge <= 0 {
		v.add("acp.buffer_age", "must be longer than 0, got %s", a.BufferAge)
	}
	if a.ConnectionsPerSubject < 1 {
		v.add("acp.connections_per_subject", "must be at least 1, got %d", a.ConnectionsPerSubject)
	}
	if a.SessionsPerConnection < 1 {
		v.add("acp.sessions_per_connection", "must be at least 1, got %d", a.SessionsPerConnection)
	}
	if a.AgentInfo != nil {
		if a.AgentInfo.Name == "" {
			v.add("acp.agent_info.name", "is empty (agent_info replaces the default whole: give name and version)")
		}
		if a.AgentInfo.Version == "" {
			v.add("acp.agent_info.version", "is empty (agent_info replaces the default whole: give name and version)")
		}
	}
}

// mountPath checks the path of a mount (acp.path, mcp.path).
func (v *validation) mountPath(field, p string) {
	switch {
	case !strings.HasPrefix(p, "/"):
		v.add(field, "%q must start with /", p)
	case p == "/":
		v.add(field, "must not be / (the web UI lives there)")
	case strings.ContainsAny(p, "?#% ") || strings.Contains(p, "//") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		v.add(field, "%q is not a plain path", p)
	case strings.HasSuffix(p, "/"):
		v.add(field, "%q must not end with / (write %s; the path with a slash is served as well)", p, strings.TrimRight(p, "/"))
	case underPath(p, "/api") || underPath(p, "/debug"):
		v.add(field, "%q is inside the daemon's own routes (/api, /debug)", p)
	}
}

func (v *validation) mcp() {
	m := v.f.MCP
	switch {
	case m.Path == "":
		v.add("mcp.path", "is empty (default %s)", DefaultMCPPath)
	case v.f.ACP.Enabled && m.Enabled && (underPath(m.Path, v.f.ACP.Path) || underPath(v.f.ACP.Path, m.Path)):
		v.add("mcp.path", "%q overlaps acp.path %q", m.Path, v.f.ACP.Path)
	default:
		v.mountPath("mcp.path", m.Path)
	}
	if m.SessionsPerSubject < 1 {
		v.add("mcp.sessions_per_subject", "must be at least 1, got %d", m.SessionsPerSubject)
	}
	if m.IdleTimeout <= 0 {
		v.add("mcp.idle_timeout", "must be longer than 0, got %s", m.IdleTimeout)
	}
	if m.SubscriptionsPerSession < 1 {
		v.add("mcp.subscriptions_per_session", "must be at least 1, got %d", m.SubscriptionsPerSession)
	}
	if m.TurnTimeout <= 0 {
		v.add("mcp.turn_timeout", "must be longer than 0, got %s", m.TurnTimeout)
	}
	if m.ArtifactInlineBytes < 0 {
		v.add("mcp.artifact_inline_bytes", "must not be negative, got %s", m.ArtifactInlineBytes)
	}
}

func (v *validation) tracing() {
	if r := v.f.Tracing.SampleRatio; r < 0 || r > 1 || r != r {
		v.add("tracing.sample_ratio", "must be within 0 (the default, 1) and 1, got %v", r)
	}
}

func underPath(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

func (v *validation) cluster() {
	c := v.f.Cluster
	if c.Provider == "" {
		if c.Name != "" || len(c.EtcdEndpoints) > 0 || c.AdvertiseAddr != "" || c.BindAddr != "" ||
			c.AutomanagedPort != 0 || len(c.AutomanagedPeers) > 0 {
			v.add("cluster.provider", "is required when cluster is configured (%s, %s or %s)", ProviderAutomanaged, ProviderEtcd, ProviderKubernetes)
		}
		return
	}
	switch c.Provider {
	case ProviderAutomanaged:
		if len(c.EtcdEndpoints) > 0 {
			v.add("cluster.etcd_endpoints", "only with provider %s", ProviderEtcd)
		}
		if c.AutomanagedPort <= 0 || c.AutomanagedPort > 65535 {
			v.add("cluster.automanaged_port", "provider automanaged needs this node's health port (1-65535)")
		}
		if len(c.AutomanagedPeers) == 0 {
			v.add("cluster.automanaged_peers", "provider automanaged needs every node's host:port of its health port")
		}
		for i, e := range c.AutomanagedPeers {
			if err := checkHostPort(e); err != nil {
				v.add(fmt.Sprintf("cluster.automanaged_peers[%d]", i), "%q %v", e, err)
			}
		}
	case ProviderEtcd:
		if len(c.EtcdEndpoints) == 0 {
			v.add("cluster.etcd_endpoints", "provider etcd needs at least one endpoint (host:port)")
		}
		for i, e := range c.EtcdEndpoints {
			if !validEndpoint(e) {
				v.add(fmt.Sprintf("cluster.etcd_endpoints[%d]", i), "%q is not host:port or an http(s) URL", e)
			}
		}
	case ProviderKubernetes:
		if len(c.EtcdEndpoints) > 0 {
			v.add("cluster.etcd_endpoints", "only with provider %s", ProviderEtcd)
		}
		if c.AutomanagedPort != 0 || len(c.AutomanagedPeers) > 0 {
			v.add("cluster.automanaged_port", "only with provider %s", ProviderAutomanaged)
		}
		// The provider publishes the cluster port in the pod's labels: it
		// must be fixed.
		if _, port, err := net.SplitHostPort(c.BindAddr); err != nil || port == "0" || port == "" {
			v.add("cluster.bind_addr", "provider k8s needs a fixed port (e.g. 0.0.0.0:7900)")
		}
	default:
		v.add("cluster.provider", "%q is not a provider (%s, %s or %s)", c.Provider, ProviderAutomanaged, ProviderEtcd, ProviderKubernetes)
	}
	if c.Name != "" && !nameRe.MatchString(c.Name) {
		v.add("cluster.name", "%q is not valid (lowercase letters, digits, - and _, starting with a letter)", c.Name)
	}
	if c.AdvertiseAddr != "" {
		if err := checkHostPort(c.AdvertiseAddr); err != nil {
			v.add("cluster.advertise_addr", "%q %v", c.AdvertiseAddr, err)
		}
	}
	if c.BindAddr != "" {
		if err := checkHostPort(c.BindAddr); err != nil {
			v.add("cluster.bind_addr", "%q %v", c.BindAddr, err)
		}
	}
	if kind, err := ClassifyStore(v.f.Store); err == nil && kind != StorePostgres {
		v.add("cluster", "the nodes of a cluster share one store: set store to a postgres:// URL")
	}
}

// checkHostPort checks a listen or dial address host:port (the host may be
// empty, meaning every interface).
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("is not host:port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("has no valid port (0-65535)")
	}
	if strings.ContainsAny(host, "/ ") {
		return errors.New("has an invalid host")
	}
	return nil
}

// isLoopback reports whether addr's host is a loopback IP or localhost.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHostname returns what is wrong with an allowed_hostnames entry.
func checkHostname(h string) string {
	switch {
	case h == "":
		return "is empty"
	case strings.Contains(h, "*"):
		return "has a wildcard; list each name"
	case strings.Contains(h, "://") || strings.Contains(h, "/"):
		return "is not a hostname (no scheme or path: example.com)"
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		if net.ParseIP(h[1:len(h)-1]) != nil {
			return ""
		}
		return "is not an IPv6 address"
	}
	if net.ParseIP(h) != nil {
		return ""
	}
	if strings.Contains(h, ":") {
		return "has a port; give the name only (the port is the daemon's)"
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Sprintf("is not a hostname (%q)", r)
		}
	}
	return ""
}

// checkOrigin returns what is wrong with a browser_origins entry. Origins
// are compared exactly, so the entry must be written the way a browser
// sends it: lowercase scheme and host, no default port, no path.
func checkOrigin(o string) string {
	if o == "*" || strings.Contains(o, "*") {
		return "has a wildcard; list each origin"
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "is not an origin (scheme://host[:port], e.g. https://app.example.com)"
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "is not an origin: only scheme://host[:port], no path, query or user"
	}
	if u.Path == "/" {
		return fmt.Sprintf("ends with /; browsers send %s", strings.TrimSuffix(o, "/"))
	}
	if want := strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host); want != o {
		return fmt.Sprintf("is not how a browser writes it: use %s", want)
	}
	if (u.Scheme == "http" && u.Port() == "80") || (u.Scheme == "https" && u.Port() == "443") {
		return fmt.Sprintf("has the default port; browsers send %s://%s", u.Scheme, u.Hostname())
	}
	return ""
}

func validEndpoint(e string) bool {
	if strings.HasPrefix(e, "http://") || strings.HasPrefix(e, "https://") {
		u, err := url.Parse(e)
		return err == nil && u.Host != ""
	}
	return checkHostPort(e) == nil
}
