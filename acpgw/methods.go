package acpgw

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/store"
)

// dispatch routes a method to its handler. Requests are answered on their
// route; work that may block runs on its own goroutine. session/prompt and
// session/cancel reach the session's attachment before dispatch returns, so
// that a client's prompts and cancels keep the order of its POSTs.
func (s *Server) dispatch(c *conn, m *rpcMessage) {
	if m.kind == kindNotification {
		switch m.method {
		case "session/cancel":
			s.sessionCancel(c, m)
		case "$/cancel_request":
			// The gateway answers every request on its own schedule; a
			// prompt is stopped with session/cancel.
		default:
			s.log.Debug("acp notification ignored", "connection", c.id, "method", m.method)
		}
		return
	}
	switch m.method {
	case "session/prompt":
		// Answered by the attachment when the turn ends, or now when it
		// cannot be taken.
		if _, e := s.sessionPrompt(c, m); e != nil {
			c.respond(m.id, nil, e)
		}
	case "session/new":
		go s.answer(c, m, s.sessionNew)
	case "session/load":
		go s.answer(c, m, s.sessionAttach("load"))
	case "session/resume":
		go s.answer(c, m, s.sessionAttach("resume"))
	case "session/list":
		go s.answer(c, m, s.sessionList)
	case "session/close":
		go s.answer(c, m, s.sessionClose)
	case "session/cancel":
		c.respond(m.id, nil, &acp.RequestError{Code: codeInvalidRequest,
			Message: "Invalid request: session/cancel is a notification; send it without an id"})
	default:
		// session/set_mode (agents are chosen by the Surfaced-Agent header,
		// not by mode), session/set_config_option (no options are
		// advertised), authenticate (no auth methods), and the rest.
		c.respond(m.id, nil, errMethodNotFound(m.method))
	}
}

// method is a method that answers its request when it returns: its result,
// or its error.
type method func(c *conn, m *rpcMessage) (any, *acp.RequestError)

// answer runs a method and sends its answer where the request was routed.
func (s *Server) answer(c *conn, m *rpcMessage, run method) {
	res, e := run(c, m)
	c.respond(m.id, res, e)
}

// initialize

// initializeParams are what initialize reads of its params.
type initializeParams struct {
	ProtocolVersion *json.RawMessage `json:"protocolVersion"`
	ClientInfo      *struct {
		Name string `json:"name"`
	} `json:"clientInfo"`
}

type promptCapabilities struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

type sessionCapabilities struct {
	List   struct{} `json:"list"`
	Resume struct{} `json:"resume"`
	Close  struct{} `json:"close"`
}

type agentCapabilities struct {
	LoadSession         bool                `json:"loadSession"`
	PromptCapabilities  promptCapabilities  `json:"promptCapabilities"`
	SessionCapabilities sessionCapabilities `json:"sessionCapabilities"`
}

type initializeResult struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentInfo         AgentInfo         `json:"agentInfo"`
	AgentCapabilities agentCapabilities `json:"agentCapabilities"`
	AuthMethods       []struct{}        `json:"authMethods"`
}

// initialize opens a connection: 200 with the JSON-RPC answer as the body and
// the connection id in Acp-Connection-Id. Invalid params answer 400 with the
// JSON-RPC error as the body, and open nothing.
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, m *rpcMessage, id identity.Identity) {
	var p initializeParams
	var perr *acp.RequestError
	switch {
	case len(m.params) == 0:
		perr = errInvalidParams("protocolVersion", "initialize needs params with protocolVersion")
	case json.Unmarshal(m.params, &p) != nil:
		perr = errInvalidParams("", "initialize params must be an object with protocolVersion")
	case p.ProtocolVersion == nil:
		perr = errInvalidParams("protocolVersion", "protocolVersion is required")
	default:
		var v int
		if json.Unmarshal(*p.ProtocolVersion, &v) != nil || v < 0 || v > 65535 {
			perr = errInvalidParams("protocolVersion", "protocolVersion must be an integer from 0 to 65535")
		}
	}
	if perr != nil {
		writeJSON(w, http.StatusBadRequest, encodeResponse(m.id, nil, perr), "")
		return
	}
	c := newConn(s, id, r.Header.Get(HeaderAgent))
	c.base = baseURL(r)
	if p.ClientInfo != nil {
		c.clientName = p.ClientInfo.Name
	}
	if spec, err := s.agentOf(c); err == nil {
		c.images = spec.Images
	}
	if err := s.reg.register(c); err != nil {
		c.cancel()
		if errors.Is(err, errTooManyConns) {
			s.log.Warn("acp connection refused: too many open", "subject", c.subject, "limit", s.opts.ConnectionsPerSubject)
			writeJSON(w, http.StatusTooManyRequests, encodeResponse(m.id, nil, errTooManyConnections(s.opts.ConnectionsPerSubject)), "")
			return
		}
		textError(w, http.StatusServiceUnavailable, "Service Unavailable: the daemon is shutting down.")
		return
	}
	res := initializeResult{
		// The gateway speaks ACP v1 and answers 1 whatever was asked: a
		// client that cannot speak it disconnects.
		ProtocolVersion: 1,
		AgentInfo:       s.info,
		AgentCapabilities: agentCapabilities{
			LoadSession:        true,
			PromptCapabilities: promptCapabilities{Image: c.images},
		},
		AuthMethods: []struct{}{},
	}
	s.log.Info("acp connection opened", "connection", c.id, "subject", c.subject, "client", c.clientName, "agent", c.agent)
	s.publish(ConnectionOpened{ConnectionID: c.id, Subject: c.subject, ClientName: c.clientName})
	writeJSON(w, http.StatusOK, encodeResponse(m.id, res, nil), c.id)
}

// agentOf resolves the connection's agent: the Surfaced-Agent header at
// initialize, else the only configured agent. Only the agents the
// connection's subject may use count (the access rules): another is
// answered as one the daemon does not have.
func (s *Server) agentOf(c *conn) (surfaced.AgentSpec, *acp.RequestError) {
	agents := s.rt.AgentsFor(c.caller())
	names := make([]string, 0, len(agents))
	for _, a := range agents {
		names = append(names, strconv.Quote(a.Name))
	}
	if c.agent != "" {
		if a, ok := s.rt.AgentFor(c.caller(), c.agent); ok {
			return a, nil
		}
		return surfaced.AgentSpec{}, &acp.RequestError{Code: codeInvalidParams,
			Message: fmt.Sprintf("This daemon has no agent named %q. It has %s.", c.agent, strings.Join(names, ", ")),
			Data:    map[string]any{"field": HeaderAgent, "agents": agentNames(agents)}}
	}
	switch len(agents) {
	case 0:
		return surfaced.AgentSpec{}, &acp.RequestError{Code: codeInvalidParams, Message: "This daemon has no agents configured."}
	case 1:
		return agents[0], nil
	}
	return surfaced.AgentSpec{}, &acp.RequestError{Code: codeInvalidParams,
		Message: fmt.Sprintf("This daemon has several agents: %s. Choose one with the %s header (surfaced acp --agent NAME).", strings.Join(names, ", "), HeaderAgent),
		Data:    map[string]any{"field": HeaderAgent, "agents": agentNames(agents)}}
}

func agentNames(agents []surfaced.AgentSpec) []string {
	out := make([]string, 0, len(agents))
	for _, a := range agents {
		out = append(out, a.Name)
	}
	return out
}

// session/list

type listParams struct {
	Cwd    *string `json:"cwd"`
	Cursor *string `json:"cursor"`
}

type listItem struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title,omitempty"`
	UpdatedAt string `json:"updatedAt"`
}

type listResult struct {
	Sessions   []listItem `json:"sessions"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// listPage is how many sessions one session/list answer holds at most.
const listPage = 50

func (s *Server) sessionList(c *conn, m *rpcMessage) (any, *acp.RequestError) {
	var p listParams
	if len(m.params) > 0 {
		if e := decodeParams(m.params, &p); e != nil {
			return nil, e
		}
	}
	cwd, e := requireCwd(p.Cwd, false)
	if e != nil {
		return nil, e
	}
	spec, e := s.agentOf(c)
	if e != nil {
		return nil, e
	}
	fp := cursorFingerprint(c.subject, spec.Name, cwd)
	q := store.ListQuery{Owner: c.subject, Agent: spec.Name, Cwd: cwd, Limit: listPage}
	if p.Cursor != nil && *p.Cursor != "" {
		inner, ok := openCursor(*p.Cursor, fp)
		if !ok {
			return nil, errInvalidParams("cursor", "cursor is not one this listing gave out (cursors are bound to the caller, the agent and the cwd filter)")
		}
		q.Cursor = inner
	}
	ctx, cancel := context.WithTimeout(c.ctx, s.opts.RequestTimeout)
	defer cancel()
	page, next, err := s.rt.Store().ListSessions(ctx, q)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, errInvalidParams("cursor", "cursor is not one this listing gave out")
	}
	if err != nil {
		s.log.Error("acp session/list failed", "connection", c.id, "err", err)
		return nil, errInternal(codes.StoreFailed)
	}
	out := listResult{Sessions: []listItem{}}
	for _, rec := range page {
		if rec.Status == session.StatusEnded {
			// An ended session cannot be continued; an editor has nothing to
			// do with it.
			continue
		}
		out.Sessions = append(out.Sessions, listItem{SessionID: rec.ID, Cwd: rec.Cwd, Title: rec.Title,
			UpdatedAt: rec.Updated.UTC().Format(time.RFC3339Nano)})
	}
	if next != "" {
		out.NextCursor = sealCursor(next, fp)
	}
	return out, nil
}

// cursorFingerprint binds a listing cursor to its scope: replayed under
// another subject, agent or cwd filter it is refused rather than leak a
// position in someone else's list.
func cursorFingerprint(subject, agent, cwd string) [8]byte {
	sum := sha256.Sum256([]byte("acp-list\x00" + subject + "\x00" + agent + "\x00" + cwd))
	var fp [8]byte
	copy(fp[:], sum[:8])
	return fp
}

func sealCursor(inner string, fp [8]byte) string {
	return base64.RawURLEncoding.EncodeToString(append(fp[:], inner...))
}

func openCursor(c string, fp [8]byte) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < len(fp)+1 || string(b[:len(fp)]) != string(fp[:]) {
		return "", false
	}
	return string(b[len(fp):]), true
}
