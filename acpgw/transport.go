package acpgw

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/delivery"
)

// HTTP headers of the transport.
const (
	HeaderConnectionID = "Acp-Connection-Id"
	HeaderSessionID    = "Acp-Session-Id"
	// HeaderAgent names the agent a connection talks to (surfaced acp --agent).
	HeaderAgent = "Surfaced-Agent"
)

// Defaults of Options.
const (
	DefaultPath        = "/acp"
	DefaultBufferBytes = 4 << 20
	DefaultBufferAge   = time.Minute
	DefaultKeepAlive   = 15 * time.Second
	DefaultIdleTimeout = 5 * time.Minute
	DefaultBodyBytes   = 32 << 20
	// DefaultConnectionsPerSubject and DefaultSessionsPerConnection are the
	// caps of Options.
	DefaultConnectionsPerSubject = 32
	DefaultSessionsPerConnection = 64
)

// writeTimeout bounds a write to a stream's reader: a reader that takes
// nothing for this long is gone, and its GET ends.
const writeTimeout = 10 * time.Second

// AgentInfo is what initialize reports as agentInfo.
type AgentInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// Options configure a Server. Only Runtime is required; the zero value of
// every other field takes its default.
type Options struct {
	Runtime *surfaced.Runtime
	Logger  *slog.Logger
	// Path is where the mount is served ("/acp"); Path+"/" is served too.
	Path string
	// AgentInfo replaces the default {surfaced, surfaced, <build version>}
	// whole when its Name is set.
	AgentInfo AgentInfo
	// WithholdToolPayloads withholds tool inputs, outputs and error
	// messages from editors (config acp.tool_call_payloads: false).
	WithholdToolPayloads bool
	// BufferBytes and BufferAge bound each stream of a connection: the
	// messages that wait for its reader, or for a reader to come (4 MiB,
	// 60 s). A stream past either closes its connection (a fault): its
	// client stopped reading, or never opened the stream.
	BufferBytes int
	BufferAge   time.Duration
	// KeepAlive is the interval of the SSE ":" comment (15 s).
	KeepAlive time.Duration
	// RequestTimeout bounds the daemon-side work of one method, and each
	// request to a session (limits.request_timeout; 30 s).
	RequestTimeout time.Duration
	// IdleTimeout closes a connection that has had no stream reader and no
	// request for this long (5 min): its client is gone.
	IdleTimeout time.Duration
	// BodyBytes bounds a POST body, images included (32 MiB).
	BodyBytes int64
	// ConnectionsPerSubject bounds the connections one subject holds open
	// (32): past it initialize is answered 429 too_many_connections.
	ConnectionsPerSubject int
	// SessionsPerConnection bounds the session streams of a connection
	// (64): the sessions attached to it, and those a request or a reader
	// names. Past it session/new, load, resume and prompt answer
	// too_many_sessions_on_connection, and a GET or POST naming yet another
	// session 429.
	SessionsPerConnection int
	// Revoker, when set, ends the streams of a revoked credential
	// (*guard.Guard is one).
	Revoker identity.Revoker
	// Props adds props options to the attachments' actors (the inspector).
	Props func(kind, sessionID string) []actor.PropsOption
}

// Server is the ACP mount: the Streamable HTTP transport and the session
// attachments behind it. Its Handler expects to run behind the guard (Host
// and Origin gates, authentication, CORS), which puts the caller's identity
// in the request context.
type Server struct {
	rt         *surfaced.Runtime
	log        *slog.Logger
	opts       Options
	path       string
	info       AgentInfo
	events     *eventCounter
	writer     *delivery.Writer
	callPrefix string // random per run: the gateway's request ids
	callSeq    atomic.Uint64
	reg        registry
}

// New builds the mount and starts its idle reaper (stopped by Close).
func New(o Options) *Server {
	if o.Runtime == nil {
		panic("acpgw: Options.Runtime is required")
	}
	log := o.Logger
	if log == nil {
		log = o.Runtime.Logger()
	}
	s := &Server{rt: o.Runtime, log: log.With("component", "acp"), opts: o}
	s.path = strings.TrimSuffix(o.Path, "/")
	if s.path == "" {
		s.path = DefaultPath
	}
	s.info = o.AgentInfo
	if s.info.Name == "" {
		s.info = AgentInfo{Name: "surfaced", Title: "surfaced", Version: surfaced.Version}
	}
	if s.opts.BufferBytes <= 0 {
		s.opts.BufferBytes = DefaultBufferBytes
	}
	if s.opts.BufferAge <= 0 {
		s.opts.BufferAge = DefaultBufferAge
	}
	if s.opts.KeepAlive <= 0 {
		s.opts.KeepAlive = DefaultKeepAlive
	}
	if s.opts.RequestTimeout <= 0 {
		s.opts.RequestTimeout = session.DefaultRequestTimeout
	}
	if s.opts.IdleTimeout <= 0 {
		s.opts.IdleTimeout = DefaultIdleTimeout
	}
	if s.opts.BodyBytes <= 0 {
		s.opts.BodyBytes = DefaultBodyBytes
	}
	if s.opts.ConnectionsPerSubject <= 0 {
		s.opts.ConnectionsPerSubject = DefaultConnectionsPerSubject
	}
	if s.opts.SessionsPerConnection <= 0 {
		s.opts.SessionsPerConnection = DefaultSessionsPerConnection
	}
	s.writer = &delivery.Writer{
		KeepAlive: s.opts.KeepAlive,
		SlowAfter: writeTimeout,
		// A reader that stalls loses its GET, not its stream: what waits
		// goes to the next reader.
		KeepQueueWhenSlow: true,
		OnSlow:            func() { s.rt.Metrics().SlowConsumer("acp") },
	}
	s.events = newEventCounter(o.Runtime.Registry())
	s.callPrefix = newConnID()[:8]
	s.reg.start(s)
	return s
}

// Path is the mount path.
func (s *Server) Path() string { return s.path }

// Handler serves the mount.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) sys() *actor.ActorSystem { return s.rt.System() }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.path && r.URL.Path != s.path+"/" {
		textError(w, http.StatusNotFound, "Not Found: the ACP endpoint is "+s.path)
		return
	}
	id, ok := identity.FromContext(r.Context())
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		textError(w, http.StatusUnauthorized, "Unauthorized: send Authorization: Bearer <token>.")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r, id)
	case http.MethodGet:
		s.get(w, r, id)
	case http.MethodDelete:
		if c := s.reg.lookup(w, r, id); c != nil {
			c.close("closed by the client", false)
			w.WriteHeader(http.StatusAccepted)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		textError(w, http.StatusMethodNotAllowed, "Method Not Allowed: the ACP endpoint takes POST, GET and DELETE.")
	}
}

// post takes one JSON-RPC message: initialize opens a connection and is
// answered in the body; anything else is answered 202, its answer (if any)
// going to a stream of the connection.
func (s *Server) post(w http.ResponseWriter, r *http.Request, id identity.Identity) {
	if !isJSON(r.Header.Get("Content-Type")) {
		textError(w, http.StatusUnsupportedMediaType, "Unsupported Media Type: send one JSON-RPC message with Content-Type: application/json.")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.BodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			textError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request Entity Too Large: a message may have at most %d bytes.", s.opts.BodyBytes))
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			textError(w, http.StatusRequestTimeout, "Request Timeout: the body did not arrive in time.")
			return
		}
		textError(w, http.StatusBadRequest, "The body could not be read.")
		return
	}
	m, err := parseMessage(body)
	if errors.Is(err, errBatch) {
		textError(w, http.StatusNotImplemented, "Not Implemented: JSON-RPC batches are not supported; send one message per POST.")
		return
	}
	if err != nil {
		textError(w, http.StatusBadRequest, "Invalid JSON-RPC message: "+err.Error()+".")
		return
	}
	if m.kind == kindRequest && m.method == "initialize" {
		if r.Header.Get(HeaderConnectionID) != "" {
			textError(w, http.StatusBadRequest, "initialize is not allowed on an existing connection; POST it without "+HeaderConnectionID+" to open a new one.")
			return
		}
		s.initialize(w, r, m, id)
		return
	}
	c := s.reg.lookup(w, r, id)
	if c == nil {
		return
	}
	c.touch()
	header := r.Header.Get(HeaderSessionID)
	if len(header) > maxSessionIDLen {
		textError(w, http.StatusBadRequest, fmt.Sprintf("%s is longer than %d bytes.", HeaderSessionID, maxSessionIDLen))
		return
	}
	if m.kind == kindResponse {
		s.clientAnswer(w, c, m, header)
		return
	}
	if !c.hasRoomFor(header) {
		tooManyStreams(w, s.opts.SessionsPerConnection)
		return
	}
	paramsSession, hasParamsSession := sessionIDOf(m.params)
	if (sessionScoped(m.method) || hasParamsSession) && header == "" {
		textError(w, http.StatusBadRequest, "Missing "+HeaderSessionID+": "+m.method+" is session-scoped; send the session id in the header too.")
		return
	}
	if header != "" && hasParamsSession && header != paramsSession {
		textError(w, http.StatusBadRequest, "Mismatched "+HeaderSessionID+": the header and params.sessionId name different sessions.")
		return
	}
	if m.kind == kindRequest {
		routeTo := header
		if m.method == "session/load" {
			// The load answer goes to the connection stream (the RFD), after
			// the replay on the session stream.
			routeTo = ""
		}
		c.route(m.id, m.method, routeTo)
	}
	s.dispatch(c, m)
	w.WriteHeader(http.StatusAccepted)
}

// clientAnswer takes the client's response to a request the daemon put to
// it. An answer to a request that went out on a session stream names that
// session.
func (s *Server) clientAnswer(w http.ResponseWriter, c *conn, m *rpcMessage, header string) {
	if sid, ok := c.callSession(m.id); ok && sid != "" {
		if header == "" {
			textError(w, http.StatusBadRequest, "Missing "+HeaderSessionID+": the request this answers went out on session "+sid+"'s stream.")
			return
		}
		if header != sid {
			textError(w, http.StatusBadRequest, "Mismatched "+HeaderSessionID+": the request this answers went out on another session's stream.")
			return
		}
	}
	if cc, ok := c.takeCall(m.id); ok {
		cc.answer(m.result, m.err)
	} else {
		s.log.Debug("acp answer to no pending request dropped", "connection", c.id, "id", string(m.id))
	}
	w.WriteHeader(http.StatusAccepted)
}

// get serves one of the connection's streams to its one reader.
func (s *Server) get(w http.ResponseWriter, r *http.Request, id identity.Identity) {
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		textError(w, http.StatusUpgradeRequired, "WebSocket is not served here; read the SSE streams (GET with Accept: text/event-stream).")
		return
	}
	if !acceptsEventStream(r.Header.Values("Accept")) {
		textError(w, http.StatusNotAcceptable, "Not Acceptable: the ACP streams are text/event-stream; send Accept: text/event-stream.")
		return
	}
	c := s.reg.lookup(w, r, id)
	if c == nil {
		return
	}
	sessionID := r.Header.Get(HeaderSessionID)
	if len(sessionID) > maxSessionIDLen {
		textError(w, http.StatusBadRequest, fmt.Sprintf("%s is longer than %d bytes.", HeaderSessionID, maxSessionIDLen))
		return
	}
	if !c.hasRoomFor(sessionID) {
		tooManyStreams(w, s.opts.SessionsPerConnection)
		return
	}
	st, ok := c.lease(sessionID)
	if !ok {
		if closed, _ := c.isClosed(); closed {
			textError(w, http.StatusNotFound, "Unknown "+HeaderConnectionID+": the connection is closing.")
			return
		}
		textError(w, http.StatusConflict, "Conflict: this stream already has an active reader.")
		return
	}
	defer c.release(st)
	s.serveStream(w, r, c, st, id)
}

// sessionIDOf reads params.sessionId when it is a string.
func sessionIDOf(params json.RawMessage) (string, bool) {
	if len(params) == 0 {
		return "", false
	}
	var p struct {
		SessionID *json.RawMessage `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil || p.SessionID == nil {
		return "", false
	}
	var sid string
	if json.Unmarshal(*p.SessionID, &sid) != nil {
		return "", false
	}
	return sid, true
}

// sessionScoped are the methods whose POST must name their session in
// Acp-Session-Id (the TypeScript SDK's list).
func sessionScoped(method string) bool {
	switch method {
	case "session/prompt", "session/cancel", "session/load", "session/resume", "session/close",
		"session/set_mode", "session/set_config_option", "session/delete", "session/fork", "session/set_model":
		return true
	}
	return false
}

const maxSessionIDLen = 128

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func acceptsEventStream(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// tooManyStreams answers a request that names one session more than its
// connection may have streams for.
func tooManyStreams(w http.ResponseWriter, limit int) {
	textError(w, http.StatusTooManyRequests, fmt.Sprintf("Too Many Requests: this connection already has streams for %d sessions (the limit); close a session (session/close) or use another connection.", limit))
}

// textError answers with a plain-text sentence, as the TypeScript SDK's
// server does (its client shows the body).
func textError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// writeJSON answers with a JSON body (initialize's answer, or its error).
func writeJSON(w http.ResponseWriter, status int, body []byte, connID string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if connID != "" {
		h.Set(HeaderConnectionID, connID)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
