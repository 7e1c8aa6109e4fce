package mcpgw

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/store"
)

// Defaults of Options.
const (
	DefaultPath               = "/mcp"
	DefaultIdleTimeout        = 5 * time.Minute
	DefaultSessionsPerSubject = 32
	DefaultBodyBytes          = 4 << 20
	DefaultRequestTimeout     = 30 * time.Second
	DefaultTurnTimeout        = 10 * time.Minute
	DefaultArtifactInline     = 1 << 20
	DefaultSubscriptions      = 64
)

// statelessVersion is the first protocol version without initialize: its
// requests carry their version (Mcp-Protocol-Version and _meta) and go to
// the SDK's stateless handler.
const statelessVersion = "2026-07-28"

// Options configure a Server. Only Runtime is required; the zero value of
// every other field takes its default.
type Options struct {
	Runtime *surfaced.Runtime
	Logger  *slog.Logger
	// Path is where the mount is served ("/mcp"); Path+"/sessions/{id}"
	// attaches a client to one session.
	Path string
	// Name and Version are the serverInfo (surfaced, the build version).
	Name, Version string
	// IdleTimeout closes a stateful MCP session that has had no request and
	// no open stream for this long (5 min): its client is gone.
	IdleTimeout time.Duration
	// SessionsPerSubject bounds the stateful MCP sessions one subject holds
	// open (32): past it initialize is answered 429.
	SessionsPerSubject int
	// SubscriptionsPerSession bounds the resources one MCP session (or one
	// subscriptions/listen request) subscribes to (64).
	SubscriptionsPerSession int
	// BodyBytes bounds a POST body (4 MiB): 413 past it.
	BodyBytes int64
	// RequestTimeout bounds a request to a session (30 s).
	RequestTimeout time.Duration
	// TurnTimeout bounds how long the prompt tool waits for its turn to
	// end (10 min); past it the tool answers with what streamed so far.
	TurnTimeout time.Duration
	// ArtifactInline bounds the artifacts resources/read returns as bytes
	// (1 MiB); a larger one is read as its signed URL.
	ArtifactInline int64
	// Revoker, when set, ends the requests and streams of a revoked token.
	Revoker identity.Revoker
	// Clock runs the idle reaper (nil: the wall clock).
	Clock clock.Clock
}

// Server is the MCP mount. Its Handler expects to run behind the guard (Host
// and Origin gates, authentication), which puts the caller's identity in the
// request context.
type Server struct {
	rt        *surfaced.Runtime
	log       *slog.Logger
	opts      Options
	path      string
	mcp       *mcp.Server
	impl      *mcp.Implementation // serverInfo, in every stateless result's _meta
	stateful  http.Handler
	stateless http.Handler
	bindings  *bindings
	subs      *subscriptions
}

// New builds the mount and starts its idle reaper (stopped by Close).
func New(o Options) *Server {
	if o.Runtime == nil {
		panic("mcpgw: Options.Runtime is required")
	}
	if o.Logger == nil {
		o.Logger = o.Runtime.Logger()
	}
	if o.Name == "" {
		o.Name, o.Version = "surfaced", surfaced.Version
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.SessionsPerSubject <= 0 {
		o.SessionsPerSubject = DefaultSessionsPerSubject
	}
	if o.SubscriptionsPerSession <= 0 {
		o.SubscriptionsPerSession = DefaultSubscriptions
	}
	if o.BodyBytes <= 0 {
		o.BodyBytes = DefaultBodyBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = DefaultTurnTimeout
	}
	if o.ArtifactInline <= 0 {
		o.ArtifactInline = DefaultArtifactInline
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	s := &Server{rt: o.Runtime, log: o.Logger.With("component", "mcp"), opts: o}
	s.path = strings.TrimSuffix(o.Path, "/")
	if s.path == "" {
		s.path = DefaultPath
	}
	s.subs = newSubscriptions(s)
	s.impl = &mcp.Implementation{Name: o.Name, Title: "surfaced", Version: o.Version}
	s.mcp = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Instructions: instructions,
		// The SDK's own log is about its transport; ours says what happened
		// to a session.
		Logger:             slog.New(slog.DiscardHandler),
		Capabilities:       &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Resources: &mcp.ResourceCapabilities{}},
		SubscribeHandler:   s.subs.subscribe,
		UnsubscribeHandler: s.subs.unsubscribe,
	})
	s.addTools()
	s.addResources()
	s.mcp.AddReceivingMiddleware(s.toolsMiddleware)
	get := func(*http.Request) *mcp.Server { return s.mcp }
	sdkLog := slog.New(slog.DiscardHandler)
	// Progress and notifications need SSE answers: JSONResponse stays off.
	// The guard is the Host and Origin gate; the SDK's own localhost check
	// would refuse the names allowed_hostnames admits.
	s.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger: sdkLog, MaxRequestBodyBytes: o.BodyBytes, DisableLocalhostProtection: true,
	})
	s.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: sdkLog, MaxRequestBodyBytes: o.BodyBytes, DisableLocalhostProtection: true,
		// A client that goes away ends its request: a prompt's turn is then
		// aborted, as a cancel would.
		PropagateRequestCancellation: true,
	})
	s.bindings = newBindings(s)
	return s
}

const instructions = `surfaced hosts AI-agent sessions whose "surfaces" (a counter, a canvas, a report) live beside the chat in a browser. ` +
	`list_sessions and create_session find or open a session; prompt talks to its agent; run_command runs a surface command ` +
	`(the same the browser's buttons run: its result and the new rev); read_snapshot reads a surface. ` +
	`Snapshots and the transcript are resources (surfaced://sessions/{sessionId}/surfaces/{domain}, ` +
	`surfaced://sessions/{sessionId}/transcript): subscribe to hear of every new rev. ` +
	`Connect to /mcp/sessions/{sessionId} to get that session's commands as tools of their own (demo_increment, canvas_rotate).`

// Path is the mount path.
func (s *Server) Path() string { return s.path }

// Handler serves the mount (Path and everything below it).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Close closes every MCP session and stops the reaper and the watches.
func (s *Server) Close() {
	s.bindings.close()
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	s.subs.close()
}

// callerKey carries who calls, and through which path, in the request
// context: the SDK keeps a stateful session's values from its initialize
// request, and a stateless request's own.
type callerKey struct{}

type callerInfo struct {
	id identity.Identity
	// attached is the session the client is attached to (its path), "" on
	// the mount itself.
	attached string
	// base is the daemon's URL as the client reached it (signed URLs).
	base string
}

func callerOf(ctx context.Context) (callerInfo, bool) {
	c, ok := ctx.Value(callerKey{}).(callerInfo)
	return c, ok
}

// attachedOf parses the path below the mount: "" or "/" is the mount,
// "/sessions/{id}" attaches to a session.
func (s *Server) attachedOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, s.path)
	if !ok {
		return "", false
	}
	switch rest {
	case "", "/":
		return "", true
	}
	id, ok := strings.CutPrefix(rest, "/sessions/")
	id = strings.TrimSuffix(id, "/")
	if !ok || strings.Contains(id, "/") || store.CheckSessionID(id) != nil {
		return "", false
	}
	return id, true
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	attached, ok := s.attachedOf(r.URL.Path)
	if !ok {
		textError(w, http.StatusNotFound, "Not Found: the MCP endpoint is "+s.path+" (or "+s.path+"/sessions/{sessionId} for one session).")
		return
	}
	id, ok := identity.FromContext(r.Context())
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		textError(w, http.StatusUnauthorized, "Unauthorized: send Authorization: Bearer <token>.")
		return
	}
	base := "http://" + r.Host
	if r.TLS != nil {
		base = "https://" + r.Host
	}
	ctx := context.WithValue(r.Context(), callerKey{}, callerInfo{id: id, attached: attached, base: base})
	if s.opts.Revoker != nil {
		var cancel context.CancelFunc
		ctx, cancel = s.opts.Revoker.Context(ctx, id)
		defer cancel()
	}
	r = r.WithContext(ctx)
	sid := r.Header.Get("Mcp-Session-Id")
	s.log.Debug("mcp request", "method", r.Method, "path", r.URL.Path, "mcp_session", sid, "version", r.Header.Get("Mcp-Protocol-Version"), "subject", id.Subject)
	if sid == "" && r.Header.Get("Mcp-Protocol-Version") >= statelessVersion {
		if s.serveFast(w, r, true) {
			return
		}
		s.stateless.ServeHTTP(w, r)
		return
	}
	s.bindings.serve(w, r, id, attached, sid)
}

// textError answers with a plain-text sentence, as the SDKs' servers do.
func textError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
