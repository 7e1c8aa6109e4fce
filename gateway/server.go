// Package gateway is the browser-facing gateway: the HTTP API (echo), the SSE
// and WebSocket streams (each a thin transport over internal/delivery's
// subscriber actor, bounded queue and writer), and the embedded web UI.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/gateway/internal/webui"
	"github.com/surfaced/surfaced/internal/delivery"
	"github.com/surfaced/surfaced/internal/tracing"
)

// Limits of the gateway. Zero values take the defaults.
type Limits struct {
	BodyBytes       int64         // request body (1 MiB)
	PromptBodyBytes int64         // prompt body, images included (32 MiB)
	QueueBytes      int           // per-client outbound queue (1 MiB)
	QueueAge        time.Duration // oldest undelivered frame / write deadline (10 s)
	KeepAlive       time.Duration // SSE comment (15 s)
	WSPing          time.Duration // WebSocket ping (25 s)
	WSInflight      int           // concurrent requests per WebSocket (16)
	// RequestTimeout is how long a request waits for its session's answer
	// (30 s). A surface command carries it as its deadline: it is not run
	// after it, and is answered timeout just before it.
	RequestTimeout time.Duration
	// SSEPerSubject and WSPerSubject bound the event streams and the
	// WebSockets one subject holds open at once (100 each); past them a new
	// one is answered 429 too_many_streams. Under no_auth everyone is one
	// subject.
	SSEPerSubject int
	WSPerSubject  int
	// ReadTimeout bounds how long a request's headers and body may take to
	// arrive (60 s): a client that trickles its body is answered 408
	// body_timeout, or dropped. Streams (SSE, WebSocket, ACP) read no body
	// and lift it.
	ReadTimeout time.Duration
}

// Defaults of Limits.
const (
	DefaultReadTimeout       = 60 * time.Second
	DefaultStreamsPerSubject = 100
	// readHeaderTimeout bounds the headers alone; idleTimeout closes a
	// kept-alive connection nobody uses.
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.BodyBytes <= 0 {
		l.BodyBytes = 1 << 20
	}
	if l.PromptBodyBytes <= 0 {
		l.PromptBodyBytes = 32 << 20
	}
	if l.QueueBytes <= 0 {
		l.QueueBytes = 1 << 20
	}
	if l.QueueAge <= 0 {
		l.QueueAge = 10 * time.Second
	}
	if l.KeepAlive <= 0 {
		l.KeepAlive = 15 * time.Second
	}
	if l.WSPing <= 0 {
		l.WSPing = 25 * time.Second
	}
	if l.WSInflight <= 0 {
		l.WSInflight = 16
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = session.DefaultRequestTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.SSEPerSubject <= 0 {
		l.SSEPerSubject = DefaultStreamsPerSubject
	}
	if l.WSPerSubject <= 0 {
		l.WSPerSubject = DefaultStreamsPerSubject
	}
	return l
}

// Options configure a Server.
type Options struct {
	Runtime *surfaced.Runtime
	Guard   *guard.Guard
	Limits  Limits
	Logger  *slog.Logger
	// Mounts are extra handlers (the ACP mount, the debug endpoints) served
	// behind the same gates: path prefix -> handler.
	Mounts map[string]http.Handler
	// CORSMounts are the prefixes of Mounts served with the guard's CORS
	// layer too (the ACP mount).
	CORSMounts []string
	// SessionMounts are handlers of POST /api/sessions/{id}/<name>, by name
	// (the AG-UI mount's "ag-ui"), served behind the same gates; the
	// session's id is the request's path value "id".
	SessionMounts map[string]http.Handler
	// Slots count the streams each subject holds open against
	// SSEPerSubject and WSPerSubject; share them with the mounts whose
	// streams count against the same caps (NewSlots). Nil: the gateway's
	// own.
	Slots *delivery.Slots
	// AgentUI is what each agent ships for the web UI, by agent name: its
	// panel modules, served at /agents/{agent}/ui/ behind the same gates
	// and authentication, and listed by GET /api/agents.
	AgentUI map[string]AgentUI
	// Props adds props options to gateway actors (the inspector); kind is sse or ws.
	Props func(kind, sessionID string) []actor.PropsOption
	// WebRoot, when set, is a web app (static files, index.html at the top)
	// served at AppPrefix on the daemon's origin, as public as the UI.
	WebRoot fs.FS
}

// AppPrefix is where Options.WebRoot is served.
const AppPrefix = "/app/"

// Server is the HTTP side of the daemon.
type Server struct {
	rt    *surfaced.Runtime
	guard *guard.Guard
	lim   Limits
	log   *slog.Logger
	e     *echo.Echo
	opts  Options

	// drain ends the requests in flight at Close (their sessions have
	// stopped by then: nothing will answer them); they are answered 503
	// shutting_down.
	drain       context.Context
	cancelDrain context.CancelFunc
	// lastRefused is when a request last came in during the shutdown
	// (Unix ns): Close waits for the clients to go quiet.
	lastRefused atomic.Int64

	mu       sync.Mutex
	closing  bool
	streams  map[*stream]struct{}
	slots    *delivery.Slots // streams open (or opening) per subject and cap
	shutdown chan struct{}

	sseWriter, wsWriter, chatWriter *delivery.Writer
	detached                        sync.WaitGroup // SSE streams running off their request
}

// New builds the server and its routes.
func New(o Options) *Server {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{rt: o.Runtime, guard: o.Guard, lim: o.Limits.withDefaults(), log: log, opts: o,
		streams: map[*stream]struct{}{}, slots: o.Slots, shutdown: make(chan struct{})}
	if s.slots == nil {
		s.slots = NewSlots(s.lim)
	}
	s.drain, s.cancelDrain = context.WithCancel(context.Background())
	s.sseWriter = s.writer("sse", s.lim.KeepAlive)
	s.wsWriter = s.writer("ws", s.lim.WSPing)
	s.chatWriter = s.writer("chat", s.lim.KeepAlive)
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.JSONSerializer = jsonSerializer{}
	e.HTTPErrorHandler = s.errorHandler
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{}))
	if tracing.On() {
		e.Use(s.traceRequests)
	}
	e.Use(s.refuseWhenClosing)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableErrorHandler: false, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		log.Error("panic in handler", "path", c.Request().URL.Path, "err", err, "stack", string(stack))
		return err
	}}))
	// CORS for the mounts that want it runs before authentication, so that a
	// browser client can read a 401 too.
	e.Use(s.corsMounts())
	public := isPublic
	if o.WebRoot != nil {
		// The app's pages and assets need no credential, like the UI's: the
		// start URL exchange on /app/?token= gives the page its cookie.
		public = func(path string) bool {
			return isPublic(path) || path == strings.TrimSuffix(AppPrefix, "/") || strings.HasPrefix(path, AppPrefix)
		}
	}
	e.Use(s.guard.Middleware(public))
	s.e = e
	s.routes()
	return s
}

// isPublic: pages and probes need no credential (the Host and Origin gates
// still apply); everything that touches a session does.
func isPublic(path string) bool {
	switch path {
	case "/", "/index.html", "/surfaced.js", "/app.js", "/style.css", "/favicon.ico", "/healthz", "/readyz":
		return true
	}
	// An artifact's bytes: a signed URL needs no credential (the handler
	// checks the signature, or the credential's subject when there is one).
	return isContentPath(path)
}

// HTTPServer returns the http.Server to serve Handler with: headers within
// 10 s, a whole request (headers and body) within Limits.ReadTimeout, idle
// kept-alive connections closed after 2 minutes. No write timeout: streams
// bound their own writes.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.lim.ReadTimeout,
		IdleTimeout:       idleTimeout,
	}
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.e }

// Echo exposes the router (to mount more routes behind the same gates).
func (s *Server) Echo() *echo.Echo { return s.e }

func (s *Server) routes() {
	e := s.e
	static, _ := fs.Sub(webui.FS(), ".")
	fileServer := http.FileServer(http.FS(static))
	serveStatic := func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// blob: images are the composer's previews of files being attached.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		fileServer.ServeHTTP(c.Response(), c.Request())
		return nil
	}
	for _, p := range []string{"/", "/index.html", "/surfaced.js", "/app.js", "/style.css"} {
		e.GET(p, serveStatic)
	}
	if s.opts.WebRoot != nil {
		app := http.StripPrefix(strings.TrimSuffix(AppPrefix, "/"), http.FileServer(http.FS(s.opts.WebRoot)))
		e.GET(strings.TrimSuffix(AppPrefix, "/"), func(c echo.Context) error {
			return c.Redirect(http.StatusMovedPermanently, AppPrefix)
		})
		e.GET(AppPrefix+"*", func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			// As the UI's, with blob: images for previews of files being uploaded.
			h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
			app.ServeHTTP(c.Response(), c.Request())
			return nil
		})
	}
	e.GET("/healthz", func(c echo.Context) error {
		out := map[string]any{"ok": true, "node": s.rt.NodeID(), "version": surfaced.Version}
		if s.rt.Clustered() {
			out["members"] = s.rt.ClusterMembers()
			out["ready"] = s.rt.Ready()
		}
		return c.JSON(http.StatusOK, out)
	})
	e.GET("/readyz", func(c echo.Context) error {
		if s.isClosing() {
			return errShuttingDown()
		}
		if !s.rt.Ready() {
			return apiErr(http.StatusServiceUnavailable, codes.NotReady, "this node is out of step with the cluster right now (rejoining, or leaving)")
		}
		if h := s.rt.StoreHealth(); !h.Available {
			return storeUnavailable(fmt.Sprintf("the store cannot be written (since %s): %v", h.Since.UTC().Format(time.RFC3339), h.Err))
		}
		return c.JSON(http.StatusOK, map[string]any{"ok": true})
	})
	metrics := promhttp.HandlerFor(s.rt.Registry(), promhttp.HandlerOpts{})
	e.GET("/metrics", echo.WrapHandler(metrics))

	e.GET(AgentUIPrefix+":agent/ui/*", s.agentFile)
	e.HEAD(AgentUIPrefix+":agent/ui/*", s.agentFile)

	api := e.Group("/api")
	api.GET("/agents", s.listAgents)
	api.POST("/sessions", s.createSession)
	api.GET("/sessions", s.listSessions)
	api.GET("/sessions/:id", s.getSession)
	api.DELETE("/sessions/:id", s.deleteSession)
	api.GET("/sessions/:id/messages", s.getMessages)
	api.POST("/sessions/:id/prompt", s.prompt)
	api.POST("/sessions/:id/abort", s.abort)
	api.POST("/sessions/:id/chat", s.chat)
	api.GET("/sessions/:id/chat/stream", s.chatStream)
	for name, h := range s.opts.SessionMounts {
		// The handler finds the session as the request's path value "id".
		api.POST("/sessions/:id/"+name, func(c echo.Context) error {
			r := c.Request()
			r.SetPathValue("id", c.Param("id"))
			h.ServeHTTP(c.Response(), r)
			return nil
		})
	}
	api.GET("/sessions/:id/surfaces", s.listSurfaces)
	api.POST("/sessions/:id/surfaces/:domain/:action", s.runCommand)
	api.GET("/sessions/:id/surfaces/:domain/data/*", s.fetchData)
	api.POST("/sessions/:id/state", s.setState)
	api.GET("/sessions/:id/state", s.getState)
	api.POST("/sessions/:id/ui-response", s.uiResponse)
	api.GET("/sessions/:id/events", s.events)
	api.GET("/sessions/:id/ws", s.websocket)
	api.POST("/sessions/:id/artifacts", s.putArtifact)
	api.GET("/sessions/:id/artifacts", s.listArtifacts)
	api.GET("/sessions/:id/artifacts/:att", s.getArtifact)
	api.DELETE("/sessions/:id/artifacts/:att", s.deleteArtifact)
	api.GET("/artifacts/:att/content", s.artifactContent)
	api.HEAD("/artifacts/:att/content", s.artifactContent)

	for prefix, h := range s.opts.Mounts {
		wrapped := echo.WrapHandler(h)
		p := strings.TrimSuffix(prefix, "/")
		e.Any(p, wrapped)
		e.Any(p+"/*", wrapped)
	}
}

func (s *Server) corsMounts() echo.MiddlewareFunc {
	cors := s.guard.CORS()
	var prefixes []string
	for _, p := range s.opts.CORSMounts {
		prefixes = append(prefixes, strings.TrimSuffix(p, "/"))
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		withCORS := cors(next)
		return func(c echo.Context) error {
			path := c.Request().URL.Path
			for _, p := range prefixes {
				if path == p || strings.HasPrefix(path, p+"/") {
					return withCORS(c)
				}
			}
			return next(c)
		}
	}
}

// refuseWhenClosing answers every new request 503 shutting_down once the
// daemon is shutting down (the liveness probe aside), so that a client
// learns it at once instead of queueing work nothing will do. Every answer
// written from then on closes its connection: a client then sends its next
// request on a new one (answered, or refused once the listener is closed),
// never on a kept-alive connection the HTTP server closes as idle while
// the request is on its way.
func (s *Server) refuseWhenClosing(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		if s.isClosing() && c.Request().URL.Path != "/healthz" {
			s.lastRefused.Store(time.Now().UnixNano())
			res.Header().Set("Connection", "close")
			return errShuttingDown()
		}
		res.Before(func() {
			if s.isClosing() {
				res.Header().Set("Connection", "close")
			}
		})
		return next(c)
	}
}

func errShuttingDown() *APIError {
	return apiErr(http.StatusServiceUnavailable, codes.ShuttingDown, "the daemon is shutting down; try again when it is back")
}

// requestContext bounds a request to a session: the caller's context, the
// request timeout, and the daemon's drain at Close.
func (s *Server) requestContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, s.lim.RequestTimeout)
	stop := context.AfterFunc(s.drain, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// askErr maps the error of a request to a session: while the daemon shuts
// down, every failure but "not found" is shutting_down.
func (s *Server) askErr(err error) error {
	if s.isClosing() && !errors.Is(err, session.ErrNotFound) {
		return errShuttingDown()
	}
	if ae := fromRequestErr(err); ae != nil {
		return ae
	}
	return err
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Shutdown ends every stream with end{shutdown} (after the sessions said so,
// when they could) and stops accepting new ones.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	s.lastRefused.Store(time.Now().UnixNano())
	close(s.shutdown)
	s.mu.Unlock()
}

// Close answers the requests still waiting for a session 503
// shutting_down, waits, within ctx, for the streams to end (after Shutdown
// they end within the shutdown grace, sooner when the runtime's shutdown
// ended their sessions), then cuts the connections of those still open.
// Call it after the runtime's Shutdown (the sessions have stopped: nothing
// answers those requests any more), before the HTTP server's Shutdown,
// which waits for the handlers: SSE streams run off their requests, so it
// does not wait for them.
//
// Last it waits, within ctx, until no request has come for quietAfter: the
// clients have heard shutting_down and stopped, and the HTTP server's
// Shutdown (which closes the listener, resetting the connections still in
// its backlog, and the idle kept-alive ones) finds nobody on the way.
func (s *Server) Close(ctx context.Context) {
	s.Shutdown(ctx)
	s.cancelDrain()
	defer s.quiesce(ctx)
	done := make(chan struct{})
	go func() {
		s.detached.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	s.mu.Lock()
	for st := range s.streams {
		if st.conn != nil {
			st.conn.Close()
		}
	}
	s.mu.Unlock()
	<-done
}

// admit takes one of the subject's stream slots of kind; it reports false
// (and takes nothing) when the subject holds as many as it may.
func (s *Server) admit(subject, kind string) (limit int, ok bool) {
	return s.slots.Take(subject, slotKind(kind))
}

// slotKind is the cap a stream of kind counts against: a WebSocket the
// WebSockets', any other (an event stream, a turn's chat stream) the event
// streams'.
func slotKind(kind string) string {
	if kind == "ws" {
		return delivery.CapWebSockets
	}
	return delivery.CapEventStreams
}

// release gives a stream slot back.
func (s *Server) release(subject, kind string) { s.slots.Give(subject, slotKind(kind)) }

// NewSlots are the stream slots of l's caps, for Options.Slots: the daemon
// shares them between the gateway and the other transports whose streams
// count against the same caps (the AG-UI mount).
func NewSlots(l Limits) *delivery.Slots {
	l = l.withDefaults()
	return delivery.NewSlots(func(cap string) int {
		if cap == delivery.CapWebSockets {
			return l.WSPerSubject
		}
		return l.SSEPerSubject
	})
}

// quietAfter is how long no request must have come before the shutdown
// goes on to close the listener.
const quietAfter = 250 * time.Millisecond

// quiesce waits until no request has come for quietAfter, or ctx ends.
func (s *Server) quiesce(ctx context.Context) {
	for {
		wait := quietAfter - time.Since(time.Unix(0, s.lastRefused.Load()))
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

func (s *Server) track(st *stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.streams[st] = struct{}{}
	return true
}

func (s *Server) untrack(st *stream) {
	s.mu.Lock()
	delete(s.streams, st)
	s.mu.Unlock()
}
