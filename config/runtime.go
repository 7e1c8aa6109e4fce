package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	surfaced "github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/internal/tracing"
)

// Environment variables the daemon reads.
const (
	EnvToken   = "SURFACED_TOKEN"
	EnvDataDir = "SURFACED_DATA_DIR"
)

// Manifests resolves the agents entries, in order: a dir entry reads its
// agent.json, an inline entry is a manifest whose directory is the file's.
// Each call reads the manifests afresh and returns a new slice (for
// Build). Names must be unique.
func (f *File) Manifests() ([]Manifest, error) {
	ms, errs := f.manifests()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ms, nil
}

func (f *File) manifests() ([]Manifest, []error) {
	var (
		ms     []Manifest
		errs   []error
		byName = map[string]int{}
	)
	base := f.baseDir
	if base == "" {
		base, _ = os.Getwd()
	}
	for i, a := range f.Agents {
		path := fmt.Sprintf("agents[%d]", i)
		fail := func(field, msg string, err error) {
			errs = append(errs, &FieldError{Source: f.source, Line: f.lineOf(joinPath(path, field)), Path: path, Msg: msg, Err: err})
		}
		var m Manifest
		if a.Dir != "" {
			if others := a.inlineKeys(); len(others) > 0 {
				fail("dir", fmt.Sprintf("dir cannot be combined with %s (those belong in the directory's %s)", strings.Join(others, ", "), ManifestFile), nil)
				continue
			}
			lm, err := LoadManifest(absPath(base, a.Dir))
			if err != nil {
				fail("dir", err.Error(), err)
				continue
			}
			m = lm
		} else {
			m = Manifest{Name: a.Name, Title: a.Title, Description: a.Description, Command: a.Command, Args: a.Args,
				Env: a.Env, Cwd: a.Cwd, Images: a.Images, GoBuild: a.GoBuild, Dir: base}
			ps := m.finish()
			for _, p := range ps {
				fail(p.field, p.msg, nil)
			}
			if len(ps) > 0 {
				continue
			}
		}
		if j, dup := byName[m.Name]; dup {
			fail("name", fmt.Sprintf("name %q is already used by agents[%d]", m.Name, j), nil)
			continue
		}
		byName[m.Name] = i
		ms = append(ms, m)
	}
	return ms, errs
}

// inlineKeys lists the inline fields set on an entry.
func (a AgentEntry) inlineKeys() []string {
	var out []string
	add := func(set bool, key string) {
		if set {
			out = append(out, key)
		}
	}
	add(a.Name != "", "name")
	add(a.Title != "", "title")
	add(a.Description != "", "description")
	add(len(a.Command) > 0, "command")
	add(len(a.Args) > 0, "args")
	add(len(a.Env) > 0, "env")
	add(a.Cwd != "", "cwd")
	add(a.Images, "images")
	add(a.GoBuild != "", "go_build")
	return out
}

// BinDir is where AgentSpecs builds Go agents: <data_dir>/bin.
func (f *File) BinDir() string { return filepath.Join(f.DataDir, "bin") }

// AgentSpecs resolves the agents (Manifests), builds the go_build ones
// into binDir (empty: BinDir) once, and returns what surfaced.Config.Agents
// takes.
func (f *File) AgentSpecs(ctx context.Context, binDir string, logger *slog.Logger) ([]surfaced.AgentSpec, error) {
	ms, err := f.Manifests()
	if err != nil {
		return nil, err
	}
	if binDir == "" {
		binDir = f.BinDir()
	}
	if err := Build(ctx, ms, binDir, logger); err != nil {
		return nil, err
	}
	return AgentSpecs(ms)
}

// SessionLimits are the per-session limits for surfaced.Config.Limits.
// Settings the file does not have (restart backoff, abort grace, ...) stay
// zero, which the runtime reads as its default. restart_max 0 ("never
// restart") becomes the runtime's negative RestartMax.
func (f *File) SessionLimits() surfaced.Limits {
	l := f.Limits
	restartMax := l.RestartMax
	if restartMax == 0 {
		restartMax = -1
	}
	floodRate := l.AgentFloodRate
	if floodRate == 0 {
		floodRate = -1 // never stop an agent for it
	}
	return surfaced.Limits{
		ReplayFrames:      l.ReplayFrames,
		ReplayBytes:       int(l.ReplayBytes),
		MaxLine:           int(l.MaxLine),
		ReadyTimeout:      time.Duration(l.ReadyTimeout),
		SettleWindow:      time.Duration(l.SettleWindow),
		RestartMax:        restartMax,
		RestartWindow:     time.Duration(l.RestartWindow),
		CommandsPerSecond: l.CommandsPerSecond,
		InboxMax:          l.InboxMax,
		IdleTimeout:       time.Duration(l.IdleTimeout),
		PromptBytes:       int(l.PromptBytes),
		InboxBytes:        int(l.InboxBytes),
		CommandQueue:      l.CommandQueue,
		CommandQueueBytes: int(l.CommandQueueBytes),
		StdinBytes:        int(l.AgentStdinBytes),
		AgentWindowBytes:  int(l.AgentWindowBytes),
		FloodBurst:        l.AgentFloodBurst,
		FloodRate:         floodRate,
		AgentLogLines:     l.AgentLogLines,
		AgentLogInterval:  time.Duration(l.AgentLogInterval),
		Idempotency: surfaced.IdempotencyLimits{Window: time.Duration(l.IdempotencyWindow), Keys: l.IdempotencyKeys,
			Bytes: int(l.IdempotencyBytes)},
	}
}

// ArtifactLimits are the artifact limits for surfaced.Config.Artifacts.
func (f *File) ArtifactLimits() artifact.Limits {
	l := f.Limits
	return artifact.Limits{MaxBytes: int64(l.ArtifactBytes), SessionBytes: int64(l.SessionArtifactBytes), URLTTL: time.Duration(l.ArtifactURLTTL)}
}

// EndedRetention is how long ended sessions are kept, for
// surfaced.Config.EndedRetention (0: for ever).
func (f *File) EndedRetention() time.Duration { return time.Duration(f.Limits.EndedRetention) }

// Quotas are the session quotas for surfaced.Config.Quotas: the runtime
// enforces them on every session created, over HTTP or ACP.
func (f *File) Quotas() surfaced.Quotas {
	return surfaced.Quotas{SessionsPerSubject: f.Limits.SessionsPerSubject, SessionsTotal: f.Limits.SessionsTotal}
}

// GatewayLimits are the HTTP gateway's limits.
type GatewayLimits struct {
	BodyBytes        int64         // request body
	PromptBodyBytes  int64         // prompt request body (images)
	ClientQueueBytes int           // a client this far behind is cut (slow_consumer)
	ClientQueueAge   time.Duration // ... or this long behind
	SSEKeepalive     time.Duration // SSE keepalive comment interval
	WSPing           time.Duration // WebSocket ping interval (two missed pongs close)
	RequestTimeout   time.Duration // a request waits this long for its session
	ReadTimeout      time.Duration // a request's headers and body must arrive within this
	WSInflight       int           // requests one WebSocket may have in flight
	SSEPerSubject    int           // event streams one subject may hold open
	WSPerSubject     int           // WebSockets one subject may hold open
}

// GatewayLimits returns the gateway's limits.
func (f *File) GatewayLimits() GatewayLimits {
	l := f.Limits
	return GatewayLimits{
		BodyBytes:        int64(l.BodyBytes),
		PromptBodyBytes:  int64(l.PromptBodyBytes),
		ClientQueueBytes: int(l.ClientQueueBytes),
		ClientQueueAge:   time.Duration(l.ClientQueueAge),
		SSEKeepalive:     time.Duration(l.SSEKeepalive),
		WSPing:           time.Duration(l.WSPing),
		RequestTimeout:   time.Duration(l.RequestTimeout),
		ReadTimeout:      time.Duration(l.ReadTimeout),
		WSInflight:       l.WSRequestsInFlight,
		SSEPerSubject:    l.SSEStreamsPerSubject,
		WSPerSubject:     l.WSConnectionsPerSubject,
	}
}

// ACPSettings are the ACP mount's settings, resolved.
type ACPSettings struct {
	Enabled          bool
	Path             string // e.g. /acp; Path+"/" is served too
	AgentInfo        AgentInfo
	ToolCallPayloads bool
	BufferBytes      int
	BufferAge        time.Duration
	// ConnectionsPerSubject and SessionsPerConnection are the caps.
	ConnectionsPerSubject int
	SessionsPerConnection int
}

// DefaultAgentInfo is agentInfo when the file has none.
func DefaultAgentInfo() AgentInfo {
	return AgentInfo{Name: "surfaced", Title: "surfaced", Version: surfaced.Version}
}

// ACPSettings returns the ACP settings with agent_info resolved.
func (f *File) ACPSettings() ACPSettings {
	info := DefaultAgentInfo()
	if f.ACP.AgentInfo != nil {
		info = *f.ACP.AgentInfo
	}
	return ACPSettings{
		Enabled:          f.ACP.Enabled,
		Path:             f.ACP.Path,
		AgentInfo:        info,
		ToolCallPayloads: f.ACP.ToolCallPayloads,
		BufferBytes:      int(f.ACP.BufferBytes),
		BufferAge:        time.Duration(f.ACP.BufferAge),

		ConnectionsPerSubject: f.ACP.ConnectionsPerSubject,
		SessionsPerConnection: f.ACP.SessionsPerConnection,
	}
}

// StoreKind is the kind of store a store setting selects.
type StoreKind string

// Store kinds.
const (
	StoreSQLite   StoreKind = "sqlite"   // empty setting: SQLite in the data directory
	StorePostgres StoreKind = "postgres" // a postgres:// or postgresql:// URL
)

// ClassifyStore tells which store a store setting selects. Its messages
// never repeat the setting, which may hold a password.
func ClassifyStore(s string) (StoreKind, error) {
	if s == "" {
		return StoreSQLite, nil
	}
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return "", errors.New("is not a URL: leave it empty for SQLite in data_dir, or give postgres://user:password@host:5432/db")
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
	default:
		return "", fmt.Errorf("scheme %q is not supported: leave it empty for SQLite in data_dir, or give a postgres:// URL", scheme)
	}
	if _, err := url.Parse(s); err != nil {
		return "", errors.New("is not a valid PostgreSQL URL (postgres://user:password@host:5432/db?sslmode=disable)")
	}
	return StorePostgres, nil
}

// StoreKind is the kind of store the file selects (Validate has checked
// the setting).
func (f *File) StoreKind() StoreKind {
	k, err := ClassifyStore(f.Store)
	if err != nil {
		return ""
	}
	return k
}

// SlogLevel is log_level as a slog.Level.
func (f *File) SlogLevel() slog.Level {
	switch f.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// NewLogger makes the daemon's logger: log_format and log_level, writing
// to w.
// A record logged with a context that holds a span (tracing on) carries
// its trace_id and span_id.
func (f *File) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: f.SlogLevel()}
	if f.LogFormat == "json" {
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
}

// Flags are the daemon's command-line settings; nil means "not given". An
// empty Token or TokensFile counts as not given.
type Flags struct {
	Addr       *string // --addr
	DataDir    *string // --data-dir
	Store      *string // --store
	Token      *string // --token
	TokensFile *string // --tokens-file
	NoAuth     *bool   // --no-auth
	Dev        *bool   // --dev
	PprofAddr  *string // --pprof-addr
	LogLevel   *string // --log-level
	LogFormat  *string // --log-format
	WebRoot    *string // --web-root

	OIDCIssuer           *string   // --oidc-issuer
	OIDCClientID         *string   // --oidc-client-id
	OIDCClientSecretFile *string   // --oidc-client-secret-file
	OIDCRedirectURL      *string   // --oidc-redirect-url
	TrustedProxyHeader   *string   // --trusted-proxy-header
	TrustedProxyFrom     *[]string // --trusted-proxy-from

	ClusterName      *string   // --cluster-name
	ClusterProvider  *string   // --cluster-provider
	EtcdEndpoints    *[]string // --etcd-endpoints
	AdvertiseAddr    *string   // --advertise-addr
	ClusterBind      *string   // --cluster-bind
	AutomanagedPort  *int      // --automanaged-port
	AutomanagedPeers *[]string // --automanaged-peers
}

// ApplyEnv applies the environment over the file: SURFACED_DATA_DIR sets
// data_dir, and SURFACED_TOKEN sets token. Authentication (token,
// tokens_file, no_auth) is one setting: the highest layer that says
// anything about it decides it whole, so SURFACED_TOKEN replaces a file's
// tokens_file or no_auth rather than mixing with them. Relative paths are
// relative to the working directory.
func (f *File) ApplyEnv(getenv func(string) string) {
	if d := getenv(EnvDataDir); d != "" {
		f.DataDir = absPath("", d)
	}
	if t := getenv(EnvToken); t != "" {
		f.Token, f.TokensFile, f.NoAuth = t, "", false
	}
	if s := getenv(EnvOIDCClientSecret); s != "" {
		f.OIDC.ClientSecret, f.OIDC.ClientSecretFile = s, ""
	}
}

// ApplyFlags applies the flags over the file and environment (flags win).
// Like ApplyEnv, any one of --token, --tokens-file, --no-auth decides
// authentication whole; giving two of them is an error. Relative paths are
// relative to the working directory.
func (f *File) ApplyFlags(fl Flags) error {
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&f.Addr, fl.Addr)
	set(&f.Store, fl.Store)
	set(&f.Cluster.Name, fl.ClusterName)
	set(&f.Cluster.Provider, fl.ClusterProvider)
	set(&f.Cluster.AdvertiseAddr, fl.AdvertiseAddr)
	set(&f.Cluster.BindAddr, fl.ClusterBind)
	if fl.EtcdEndpoints != nil {
		f.Cluster.EtcdEndpoints = *fl.EtcdEndpoints
	}
	if fl.AutomanagedPort != nil {
		f.Cluster.AutomanagedPort = *fl.AutomanagedPort
	}
	if fl.AutomanagedPeers != nil {
		f.Cluster.AutomanagedPeers = *fl.AutomanagedPeers
	}
	set(&f.OIDC.Issuer, fl.OIDCIssuer)
	set(&f.OIDC.ClientID, fl.OIDCClientID)
	set(&f.OIDC.RedirectURL, fl.OIDCRedirectURL)
	if fl.OIDCClientSecretFile != nil {
		f.OIDC.ClientSecret, f.OIDC.ClientSecretFile = "", absPath("", *fl.OIDCClientSecretFile)
	}
	set(&f.TrustedProxy.Header, fl.TrustedProxyHeader)
	if fl.TrustedProxyFrom != nil {
		f.TrustedProxy.From = *fl.TrustedProxyFrom
	}
	set(&f.PprofAddr, fl.PprofAddr)
	set(&f.LogLevel, fl.LogLevel)
	set(&f.LogFormat, fl.LogFormat)
	if fl.DataDir != nil {
		f.DataDir = absPath("", *fl.DataDir)
	}
	if fl.WebRoot != nil {
		f.WebRoot = absPath("", *fl.WebRoot)
	}
	if fl.Dev != nil {
		f.Dev = *fl.Dev
	}
	var auth []string
	if fl.Token != nil && *fl.Token != "" {
		auth = append(auth, "--token")
	}
	if fl.TokensFile != nil && *fl.TokensFile != "" {
		auth = append(auth, "--tokens-file")
	}
	if fl.NoAuth != nil && *fl.NoAuth {
		auth = append(auth, "--no-auth")
	}
	switch {
	case len(auth) > 1:
		return fmt.Errorf("%s exclude each other; give one", strings.Join(auth, " and "))
	case len(auth) == 0:
		if fl.NoAuth != nil {
			f.NoAuth = false // an explicit --no-auth=false
		}
	case auth[0] == "--token":
		f.Token, f.TokensFile, f.NoAuth = *fl.Token, "", false
	case auth[0] == "--tokens-file":
		f.Token, f.TokensFile, f.NoAuth = "", absPath("", *fl.TokensFile), false
	default:
		f.Token, f.TokensFile, f.NoAuth = "", "", true
	}
	return nil
}

// Resolve is the daemon's configuration: the file at path (none when path
// is empty: every default), then the environment, then the flags, then
// Validate. Precedence: flag > environment > file > default.
func Resolve(path string, fl Flags, getenv func(string) string) (*File, error) {
	f := defaultFile(getenv)
	if path != "" {
		// The file is not validated alone: a flag may fix what it lacks
		// (--tokens-file for a missing one, say). Validate below sees the
		// merged result.
		data, base, err := readFile(path)
		if err != nil {
			return nil, err
		}
		if f, err = decodeFile(data, path, base, getenv); err != nil {
			return nil, err
		}
	}
	f.ApplyEnv(getenv)
	if err := f.ApplyFlags(fl); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// MCPSettings are the MCP mount's settings, resolved.
type MCPSettings struct {
	Enabled                 bool
	Path                    string // e.g. /mcp; Path+"/sessions/{id}" attaches to a session
	SessionsPerSubject      int
	IdleTimeout             time.Duration
	SubscriptionsPerSession int
	TurnTimeout             time.Duration
	ArtifactInlineBytes     int64
}

// MCPSettings returns the MCP settings.
func (f *File) MCPSettings() MCPSettings {
	m := f.MCP
	return MCPSettings{Enabled: m.Enabled, Path: m.Path, SessionsPerSubject: m.SessionsPerSubject, IdleTimeout: time.Duration(m.IdleTimeout),
		SubscriptionsPerSession: m.SubscriptionsPerSession, TurnTimeout: time.Duration(m.TurnTimeout), ArtifactInlineBytes: int64(m.ArtifactInlineBytes)}
}
