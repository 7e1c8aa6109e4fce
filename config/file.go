// Package config is the surfaced daemon's configuration: the YAML file
// (surfaced.yaml), how command-line flags and the environment override it,
// the agent manifests (agent.json) of agent directories, and the one-time
// build of Go agents. docs/configuration.md documents every setting.
//
// The daemon's path through this package:
//
//	f, err := config.Resolve(configPath, flags, os.Getenv) // file, env, flags; validated
//	specs, err := f.AgentSpecs(ctx, binDir, logger)         // go_build agents are built here, once
//	rt, err := surfaced.New(surfaced.Config{Agents: specs, Limits: f.SessionLimits(), ...})
//
// Precedence, highest first: flag > environment (SURFACED_TOKEN,
// SURFACED_DATA_DIR) > file > default.
package config

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Default values of the settings.
const (
	DefaultAddr      = "127.0.0.1:7800"
	DefaultACPPath   = "/acp"
	DefaultMCPPath   = "/mcp"
	DefaultLogLevel  = "info"
	DefaultLogFormat = "text"
)

// File is the configuration file. The zero value is not useful: start from
// Default (or Load/Parse, which decode over Default), so that every setting
// the file leaves out keeps its default.
type File struct {
	// Addr is the HTTP listen address (host:port).
	Addr string `yaml:"addr"`
	// DataDir holds the SQLite store and the built Go agents.
	DataDir string `yaml:"data_dir"`
	// Store is empty for SQLite in DataDir, or a postgres:// (postgresql://)
	// URL for a PostgreSQL store. See StoreKind.
	Store string `yaml:"store"`
	// Token is the one bearer token; empty means a random per-launch token
	// (unless TokensFile or NoAuth).
	Token string `yaml:"token"`
	// TokensFile names a JSON file of {subject, sha256} tokens.
	TokensFile string `yaml:"tokens_file"`
	// NoAuth turns authentication off: everyone is one anonymous subject.
	NoAuth bool `yaml:"no_auth"`
	// Dev mounts the /debug endpoints.
	Dev bool `yaml:"dev"`
	// PprofAddr, when set, serves net/http/pprof there; loopback only.
	PprofAddr string `yaml:"pprof_addr"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// LogFormat is text or json.
	LogFormat string `yaml:"log_format"`
	// WebRoot, when set, is a directory of static files (a built web app,
	// its index.html at the top) served at /app/ beside the API, on the
	// daemon's own origin, so the app needs no CORS and signs in with the
	// start URL's cookie.
	WebRoot string `yaml:"web_root"`

	// AllowedHostnames are extra names the Host gate admits.
	AllowedHostnames []string `yaml:"allowed_hostnames"`
	// BrowserOrigins are origins (scheme://host[:port]) the Origin gate and
	// CORS admit besides the daemon's own.
	BrowserOrigins []string `yaml:"browser_origins"`
	// WorkspaceRoots, when set, bound the working directories of sessions.
	WorkspaceRoots []string `yaml:"workspace_roots"`

	// Agents are the hosted agents, in order.
	Agents []AgentEntry `yaml:"agents"`

	// OIDC is browser sign-in through an OpenID provider, beside token and
	// tokens_file (see docs/security.md); JWT the issuers whose JWTs are
	// bearer tokens; TrustedProxy an authenticating proxy in front.
	OIDC         OIDCSection         `yaml:"oidc"`
	JWT          []JWTIssuer         `yaml:"jwt"`
	TrustedProxy TrustedProxySection `yaml:"trusted_proxy"`
	// Access says which subjects or groups may use which agent; an agent
	// it does not name is open to every subject (absent: all are).
	Access map[string]AccessRule `yaml:"access"`

	Limits  LimitsSection  `yaml:"limits"`
	ACP     ACPSection     `yaml:"acp"`
	MCP     MCPSection     `yaml:"mcp"`
	Cluster ClusterSection `yaml:"cluster"`
	Tracing TracingSection `yaml:"tracing"`

	// source names the file in messages; baseDir is where its relative
	// paths resolve (empty: the process's working directory).
	source  string
	baseDir string
	// lines maps a setting's path (agents[1].command) to its line, so that
	// Validate can point into the file.
	lines map[string]int
}

// AgentEntry is one element of agents: either Dir alone (an agent directory
// holding agent.json) or an inline manifest. Relative paths resolve against
// the configuration file's directory, which is also the Dir of an inline
// agent (its go_build package and cwd are relative to it).
type AgentEntry struct {
	Dir string `yaml:"dir"`

	Name        string            `yaml:"name"`
	Title       string            `yaml:"title"`
	Description string            `yaml:"description"`
	Command     []string          `yaml:"command"`
	Args        []string          `yaml:"args"`
	Env         map[string]string `yaml:"env"`
	Cwd         string            `yaml:"cwd"`
	Images      bool              `yaml:"images"`
	GoBuild     string            `yaml:"go_build"`
}

// LimitsSection holds the limits and timings (file section limits). Sizes
// are bytes; durations are Go durations.
type LimitsSection struct {
	BodyBytes          Size     `yaml:"body_bytes"`           // request body (1MiB)
	PromptBodyBytes    Size     `yaml:"prompt_body_bytes"`    // prompt request with images (32MiB)
	SessionsPerSubject int      `yaml:"sessions_per_subject"` // live+stored sessions one subject may own (100)
	SessionsTotal      int      `yaml:"sessions_total"`       // sessions on this daemon (1000)
	CommandsPerSecond  int      `yaml:"commands_per_second"`  // per session; over it 429 (1000)
	ReplayFrames       int      `yaml:"replay_frames"`        // replay window, frames (4096)
	ReplayBytes        Size     `yaml:"replay_bytes"`         // replay window, bytes (4MiB)
	ClientQueueBytes   Size     `yaml:"client_queue_bytes"`   // a client this far behind is cut (1MiB)
	ClientQueueAge     Duration `yaml:"client_queue_age"`     // ... or this long behind (10s)
	MaxLine            Size     `yaml:"max_line"`             // agent stdout line cap (16MiB)
	ReadyTimeout       Duration `yaml:"ready_timeout"`        // agent readiness (30s)
	SettleWindow       Duration `yaml:"settle_window"`        // agent-hosted command answer (15s)
	RestartMax         int      `yaml:"restart_max"`          // restarts within RestartWindow (3); 0: never restart
	RestartWindow      Duration `yaml:"restart_window"`       // (60s)
	InboxMax           int      `yaml:"inbox_max"`            // queued prompts per session (100)
	IdleTimeout        Duration `yaml:"idle_timeout"`         // idle live session sleeps after this (0: never)
	SSEKeepalive       Duration `yaml:"sse_keepalive"`        // SSE comment interval (15s)
	WSPing             Duration `yaml:"ws_ping"`              // WebSocket ping interval (25s)

	// What one agent, or the clients of one session, may cost the daemon
	// (docs/configuration.md, "Limits on agents").
	PromptBytes          Size     `yaml:"prompt_bytes"`           // one prompt, text and images; over it 413 too_large (16MiB)
	InboxBytes           Size     `yaml:"inbox_bytes"`            // prompts queued while a turn runs, in bytes (32MiB)
	RequestTimeout       Duration `yaml:"request_timeout"`        // a request waits this long for its session; a command's deadline (30s)
	CommandQueue         int      `yaml:"command_queue"`          // commands waiting for one surface; over it 429 queue_full (64)
	CommandQueueBytes    Size     `yaml:"command_queue_bytes"`    // ... and bytes of their args (8MiB)
	AgentStdinBytes      Size     `yaml:"agent_stdin_bytes"`      // lines an agent has not read yet (64MiB)
	AgentWindowBytes     Size     `yaml:"agent_window_bytes"`     // agent output read and not yet handled; past it the daemon stops reading (4MiB)
	AgentFloodBurst      int      `yaml:"agent_flood_burst"`      // lines nobody asked for, at once ... (10000)
	AgentFloodRate       int      `yaml:"agent_flood_rate"`       // ... and per second after; past them the agent is stopped; 0: never (100)
	AgentLogLines        int      `yaml:"agent_log_lines"`        // stderr (and dropped) lines logged per interval, then a summary (100)
	AgentLogInterval     Duration `yaml:"agent_log_interval"`     // (10s)
	ArtifactBytes        Size     `yaml:"artifact_bytes"`         // one artifact (64MiB)
	SessionArtifactBytes Size     `yaml:"session_artifact_bytes"` // all of a session's artifacts (1GiB)
	ArtifactURLTTL       Duration `yaml:"artifact_url_ttl"`       // a signed artifact URL's lifetime (1h; at most 24h)
	EndedRetention       Duration `yaml:"ended_retention"`        // ended sessions are deleted after this (0: kept)

	// A surface remembers the results of the commands it applied, by
	// idempotency key, for this long, up to this many and this many bytes
	// per surface (10m, 256, 256KiB): a retry is answered with the result.
	IdempotencyWindow Duration `yaml:"idempotency_window"`
	IdempotencyKeys   int      `yaml:"idempotency_keys"`
	IdempotencyBytes  Size     `yaml:"idempotency_bytes"`
	// ReadTimeout bounds the arrival of a request's headers and body (60s).
	ReadTimeout Duration `yaml:"read_timeout"`
	// WSRequestsInFlight bounds the requests one WebSocket has waiting for
	// their replies (16).
	WSRequestsInFlight int `yaml:"ws_requests_in_flight"`
	// SSEStreamsPerSubject and WSConnectionsPerSubject bound what one
	// subject holds open at once (100 each).
	SSEStreamsPerSubject    int `yaml:"sse_streams_per_subject"`
	WSConnectionsPerSubject int `yaml:"ws_connections_per_subject"`
}

// ACPSection configures the ACP mount (file section acp).
type ACPSection struct {
	Enabled bool   `yaml:"enabled"` // (true)
	Path    string `yaml:"path"`    // ("/acp"; "/acp/" is served too)
	// AgentInfo replaces the default {surfaced, surfaced, <build version>}
	// whole; nil keeps the default.
	AgentInfo *AgentInfo `yaml:"agent_info"`
	// ToolCallPayloads false withholds tool inputs, outputs and error
	// messages from editors (true).
	ToolCallPayloads bool `yaml:"tool_call_payloads"`
	// BufferBytes and BufferAge bound each stream of an ACP connection: what
	// waits for its reader, or for a reader to come (4MiB, 1m). Past either
	// the connection is closed.
	BufferBytes Size     `yaml:"buffer_bytes"`
	BufferAge   Duration `yaml:"buffer_age"`
	// ConnectionsPerSubject bounds the ACP connections one subject holds
	// open (32); SessionsPerConnection the sessions one connection has
	// streams for (64).
	ConnectionsPerSubject int `yaml:"connections_per_subject"`
	SessionsPerConnection int `yaml:"sessions_per_connection"`
}

// TracingSection turns OpenTelemetry tracing on (file section tracing;
// docs/tracing.md). Where spans go is the standard OTEL_*
// environment's: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL
// (grpc or http/protobuf), their _TRACES_ forms, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES.
type TracingSection struct {
	Enabled bool `yaml:"enabled"` // (false)
	// SampleRatio is the share of new traces kept, 0 < r <= 1 (1); a request
	// that carries a traceparent follows its caller's decision.
	SampleRatio float64 `yaml:"sample_ratio"`
}

// MCPSection configures the MCP mount (file section mcp).
type MCPSection struct {
	Enabled bool   `yaml:"enabled"` // (true)
	Path    string `yaml:"path"`    // ("/mcp"; /mcp/sessions/{id} attaches to a session)
	// SessionsPerSubject bounds the stateful MCP sessions one subject holds
	// open (32); IdleTimeout closes one without a request or a stream for
	// that long (5m).
	SessionsPerSubject int      `yaml:"sessions_per_subject"`
	IdleTimeout        Duration `yaml:"idle_timeout"`
	// SubscriptionsPerSession bounds the resources one MCP session
	// subscribes to (64).
	SubscriptionsPerSession int `yaml:"subscriptions_per_session"`
	// TurnTimeout bounds how long the prompt tool waits for its turn (10m).
	TurnTimeout Duration `yaml:"turn_timeout"`
	// ArtifactInlineBytes bounds the artifacts resources/read returns as
	// bytes (1MiB); a larger one is read as its signed URL.
	ArtifactInlineBytes Size `yaml:"artifact_inline_bytes"`
}

// OIDCSection configures browser sign-in (file section oidc); an empty
// Issuer means none.
type OIDCSection struct {
	Issuer       string `yaml:"issuer"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"` // or client_secret_file, or SURFACED_OIDC_CLIENT_SECRET
	// ClientSecretFile holds the secret (its first line); relative to the
	// configuration file.
	ClientSecretFile string   `yaml:"client_secret_file"`
	RedirectURL      string   `yaml:"redirect_url"`
	Scopes           []string `yaml:"scopes"`        // ([openid, profile, email])
	SubjectClaim     string   `yaml:"subject_claim"` // (sub): the subject is "<issuer>#<value>"
	GroupsClaim      string   `yaml:"groups_claim"`  // (groups)
	SessionLifetime  Duration `yaml:"session_lifetime"`
	// RecheckInterval is how often a sign-in is checked at the provider
	// (5m): a person disabled there is signed out within it.
	RecheckInterval Duration `yaml:"recheck_interval"`
	JWKSMaxAge      Duration `yaml:"jwks_max_age"` // (24h)
	ClockSkew       Duration `yaml:"clock_skew"`   // on exp, nbf, iat (1m)
}

// Enabled reports whether browser sign-in is configured.
func (o OIDCSection) Enabled() bool { return o.Issuer != "" }

// JWTIssuer is one issuer whose JWTs are bearer tokens (file section
// jwt, a list).
type JWTIssuer struct {
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// JWKSURL is the key set; empty reads it from the issuer's discovery
	// document.
	JWKSURL      string   `yaml:"jwks_url"`
	SubjectClaim string   `yaml:"subject_claim"` // (sub)
	GroupsClaim  string   `yaml:"groups_claim"`  // (groups)
	JWKSMaxAge   Duration `yaml:"jwks_max_age"`  // (24h)
	// ClockSkew is allowed on exp, nbf and iat; nil (absent) is 1m, as
	// the oidc section's default (a list entry has no defaults of its own).
	ClockSkew *Duration `yaml:"clock_skew"`
}

// TrustedProxySection configures an authenticating proxy in front (file
// section trusted_proxy); an empty Header means none.
type TrustedProxySection struct {
	Header       string   `yaml:"header"`
	GroupsHeader string   `yaml:"groups_header"`
	From         []string `yaml:"from"` // CIDRs or addresses of the proxy
}

// Enabled reports whether a trusted proxy is configured.
func (p TrustedProxySection) Enabled() bool { return p.Header != "" || len(p.From) > 0 }

// AccessRule names who may use one agent (file section access).
type AccessRule struct {
	Subjects []string `yaml:"subjects"`
	Groups   []string `yaml:"groups"`
}

// AgentInfo is what initialize reports as agentInfo.
type AgentInfo struct {
	Name    string `yaml:"name"`
	Title   string `yaml:"title"`
	Version string `yaml:"version"`
}

// ClusterSection configures clustering (file section cluster); an empty
// Provider means a single node.
type ClusterSection struct {
	Name          string   `yaml:"name"`           // cluster name ("surfaced")
	Provider      string   `yaml:"provider"`       // automanaged | etcd | k8s
	EtcdEndpoints []string `yaml:"etcd_endpoints"` // host:port or URLs (etcd only)
	AdvertiseAddr string   `yaml:"advertise_addr"` // host:port other nodes reach
	BindAddr      string   `yaml:"bind_addr"`      // host:port the cluster listens on (default 127.0.0.1:0)
	// AutomanagedPort is this node's automanaged health port, and
	// AutomanagedPeers every node's host:port of it (this one included):
	// automanaged polls a static list (development on one machine).
	AutomanagedPort  int      `yaml:"automanaged_port"`
	AutomanagedPeers []string `yaml:"automanaged_peers"`
	// LeaseTTL bounds how long a dead node's sessions stay fenced (6s).
	LeaseTTL Duration `yaml:"lease_ttl"`
}

// Cluster providers.
const (
	ProviderAutomanaged = "automanaged"
	ProviderEtcd        = "etcd"
	// ProviderKubernetes is the library's Kubernetes provider, in binaries
	// built with -tags k8s.
	ProviderKubernetes = "k8s"
)

// Enabled reports whether a cluster is configured.
func (c ClusterSection) Enabled() bool { return c.Provider != "" }

// DefaultLimits returns the limits section with every default.
func DefaultLimits() LimitsSection {
	return LimitsSection{
		BodyBytes:          1 * MiB,
		PromptBodyBytes:    32 * MiB,
		SessionsPerSubject: 100,
		SessionsTotal:      1000,
		CommandsPerSecond:  1000,
		ReplayFrames:       4096,
		ReplayBytes:        4 * MiB,
		ClientQueueBytes:   1 * MiB,
		ClientQueueAge:     Duration(10 * time.Second),
		MaxLine:            16 * MiB,
		ReadyTimeout:       Duration(30 * time.Second),
		SettleWindow:       Duration(15 * time.Second),
		RestartMax:         3,
		RestartWindow:      Duration(60 * time.Second),
		InboxMax:           100,
		IdleTimeout:        0,
		IdempotencyWindow:  Duration(10 * time.Minute),
		IdempotencyKeys:    256,
		IdempotencyBytes:   256 * KiB,
		SSEKeepalive:       Duration(15 * time.Second),
		WSPing:             Duration(25 * time.Second),
		PromptBytes:        16 * MiB,
		InboxBytes:         32 * MiB,
		RequestTimeout:     Duration(30 * time.Second),
		CommandQueue:       64,
		CommandQueueBytes:  8 * MiB,
		AgentStdinBytes:    64 * MiB,
		AgentWindowBytes:   4 * MiB,
		AgentFloodBurst:    10000,
		AgentFloodRate:     100,
		AgentLogLines:      100,
		AgentLogInterval:   Duration(10 * time.Second),

		ArtifactBytes:        64 * MiB,
		SessionArtifactBytes: 1 * GiB,
		ArtifactURLTTL:       Duration(time.Hour),
		EndedRetention:       0,
		ReadTimeout:          Duration(60 * time.Second),
		WSRequestsInFlight:   16,

		SSEStreamsPerSubject:    100,
		WSConnectionsPerSubject: 100,
	}
}

// Default returns the configuration with every default: the daemon as it
// runs with no file and no flags (and no agent). DataDir comes from
// SURFACED_DATA_DIR, else $XDG_DATA_HOME/surfaced, else
// ~/.local/share/surfaced.
func Default() *File { return defaultFile(os.Getenv) }

func defaultFile(getenv func(string) string) *File {
	return &File{
		Addr:      DefaultAddr,
		DataDir:   DefaultDataDir(getenv),
		LogLevel:  DefaultLogLevel,
		LogFormat: DefaultLogFormat,
		Limits:    DefaultLimits(),
		ACP: ACPSection{
			Enabled:          true,
			Path:             DefaultACPPath,
			ToolCallPayloads: true,
			BufferBytes:      4 * MiB,
			BufferAge:        Duration(time.Minute),

			ConnectionsPerSubject: 32,
			SessionsPerConnection: 64,
		},
		OIDC: OIDCSection{
			Scopes:          []string{"openid", "profile", "email"},
			SubjectClaim:    "sub",
			GroupsClaim:     "groups",
			SessionLifetime: Duration(12 * time.Hour),
			RecheckInterval: Duration(5 * time.Minute),
			JWKSMaxAge:      Duration(24 * time.Hour),
			ClockSkew:       Duration(time.Minute),
		},
		MCP: MCPSection{
			Enabled:                 true,
			Path:                    DefaultMCPPath,
			SessionsPerSubject:      32,
			IdleTimeout:             Duration(5 * time.Minute),
			SubscriptionsPerSession: 64,
			TurnTimeout:             Duration(10 * time.Minute),
			ArtifactInlineBytes:     1 * MiB,
		},
	}
}

// DefaultDataDir is the data directory when none is configured:
// $SURFACED_DATA_DIR, else $XDG_DATA_HOME/surfaced (when absolute, as the
// XDG spec requires), else ~/.local/share/surfaced; empty when there is no
// home directory either.
func DefaultDataDir(getenv func(string) string) string {
	if d := getenv(EnvDataDir); d != "" {
		if abs, err := filepath.Abs(expandHome(d)); err == nil {
			return abs
		}
	}
	if x := getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "surfaced")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "share", "surfaced")
}

// expandHome turns a leading ~ or ~/ into the home directory.
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	return filepath.Join(home, p[1:])
}

// absPath makes p absolute: ~ expands to the home directory and a relative
// path joins base (the process's working directory when base is empty).
func absPath(base, p string) string {
	if p == "" {
		return ""
	}
	p = expandHome(p)
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if base == "" {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return filepath.Join(base, p)
}
