package acpgw

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/gateway/guard"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// requestTimeout bounds the daemon-side work of one method.
const requestTimeout = session.DefaultRequestTimeout

// replayTimeout bounds the wait for room in a slow reader's backlog during a
// session/load replay.
const replayTimeout = 30 * time.Second

// replayDeliveryWait bounds the wait for the replay to be written to the
// session stream's reader before the load answer goes out.
const replayDeliveryWait = 5 * time.Second

// replaySettle is the pause between a delivered replay and the load answer.
const replaySettle = 50 * time.Millisecond

// dispatch runs a method. Requests are answered on their route; work that
// may block runs on its own goroutine. session/prompt and session/cancel
// reach the session's gateway actor before dispatch returns, so that a
// client's prompts and cancels keep the order of its POSTs.
func (s *Server) dispatch(c *conn, m *rpcMessage, h http.Header) {
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
		s.sessionPrompt(c, m)
	case "session/new":
		go s.sessionNew(c, m)
	case "session/load":
		go s.sessionAttach(c, m, "load")
	case "session/resume":
		go s.sessionAttach(c, m, "resume")
	case "session/list":
		go s.sessionList(c, m)
	case "session/close":
		go s.sessionClose(c, m)
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

// ---------------------------------------------------------------------------
// initialize

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
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, m *rpcMessage, id guard.Identity) {
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
	c := newConn(s, id.Subject, r.Header.Get(HeaderAgent))
	if p.ClientInfo != nil {
		c.clientName = p.ClientInfo.Name
	}
	if spec, err := s.agentOf(c); err == nil {
		c.images = spec.Images
	}
	if !s.register(c) {
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

// agentOf resolves the connection's agent: the Surfaced-Agent header at
// initialize, else the only configured agent.
func (s *Server) agentOf(c *conn) (surfaced.AgentSpec, *acp.RequestError) {
	agents := s.rt.Agents()
	names := make([]string, 0, len(agents))
	for _, a := range agents {
		names = append(names, strconv.Quote(a.Name))
	}
	if c.agent != "" {
		if a, ok := s.rt.Agent(c.agent); ok {
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

// ---------------------------------------------------------------------------
// Params

// decodeParams decodes params into v; the error names what is wrong.
func decodeParams(params json.RawMessage, v any) *acp.RequestError {
	if len(params) == 0 {
		return errInvalidParams("params", "params are required")
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errInvalidParams(te.Field, "%s must be %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return errInvalidParams("", "params must be an object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	default:
		return "a number"
	}
}

func requireSessionID(sid *string) (string, *acp.RequestError) {
	if sid == nil {
		return "", errInvalidParams("sessionId", "sessionId is required")
	}
	if *sid == "" || len(*sid) > maxSessionIDLen {
		return "", errInvalidParams("sessionId", "sessionId must be 1 to %d characters", maxSessionIDLen)
	}
	return *sid, nil
}

func requireCwd(cwd *string, required bool) (string, *acp.RequestError) {
	if cwd == nil {
		if required {
			return "", errInvalidParams("cwd", "cwd is required (an absolute path)")
		}
		return "", nil
	}
	if !filepath.IsAbs(*cwd) {
		return "", errInvalidParams("cwd", "cwd must be an absolute path, got %q", *cwd)
	}
	return filepath.Clean(*cwd), nil
}

// mcpServersOf checks mcpServers (required, an array) and logs what is
// ignored: the daemon never spawns what an editor names.
func (s *Server) mcpServersOf(c *conn, raw json.RawMessage) *acp.RequestError {
	if raw == nil {
		return errInvalidParams("mcpServers", "mcpServers is required (an array, [] for none)")
	}
	var servers []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &servers) != nil {
		return errInvalidParams("mcpServers", "mcpServers must be an array of MCP server descriptions")
	}
	if len(servers) > 0 {
		names := make([]string, 0, len(servers))
		for _, m := range servers {
			names = append(names, m.Name)
		}
		s.log.Info("acp mcpServers ignored: the daemon's agents bring their own tools", "connection", c.id, "servers", names)
	}
	return nil
}

// ---------------------------------------------------------------------------
// session/new, session/load, session/resume

type sessionParams struct {
	SessionID  *string          `json:"sessionId"`
	Cwd        *string          `json:"cwd"`
	McpServers *json.RawMessage `json:"mcpServers"`
}

func (p sessionParams) mcp() json.RawMessage {
	if p.McpServers == nil {
		return nil
	}
	return *p.McpServers
}

func (s *Server) sessionNew(c *conn, m *rpcMessage) {
	var p sessionParams
	if e := decodeParams(m.params, &p); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	cwd, e := requireCwd(p.Cwd, true)
	if e == nil {
		e = s.mcpServersOf(c, p.mcp())
	}
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	spec, e := s.agentOf(c)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	id, err := s.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: c.subject, Agent: spec.Name, Cwd: cwd})
	var quota *surfaced.QuotaError
	switch {
	case errors.As(err, &quota):
		c.respond(m.id, nil, errTooManySessions(quota))
		return
	case errors.Is(err, surfaced.ErrBadCwd):
		c.respond(m.id, nil, errInvalidParams("cwd", "%s", strings.TrimPrefix(err.Error(), surfaced.ErrBadCwd.Error()+": ")))
		return
	case err != nil:
		s.log.Error("acp session/new failed", "connection", c.id, "err", err)
		c.respond(m.id, nil, errInternal("create_failed"))
		return
	}
	a := c.attach(id, spec.Name, false)
	if e := s.waitAttached(c, a); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	s.attached(c, id, spec.Name, "new")
	c.respond(m.id, map[string]string{"sessionId": id}, nil)
}

// sessionAttach serves session/load (replay, then answer) and session/resume
// (answer, no replay).
func (s *Server) sessionAttach(c *conn, m *rpcMessage, how string) {
	var p sessionParams
	if e := decodeParams(m.params, &p); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	sid, e := requireSessionID(p.SessionID)
	if e == nil {
		_, e = requireCwd(p.Cwd, true)
	}
	if e == nil && (how == "load" || p.McpServers != nil) {
		e = s.mcpServersOf(c, p.mcp())
	}
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	spec, e := s.agentOf(c)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	a := c.attach(sid, spec.Name, how == "load")
	if e := s.waitAttached(c, a); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	if how == "load" {
		if e := s.replay(c, a, sid); e != nil {
			c.respond(m.id, nil, e)
			return
		}
	}
	s.attached(c, sid, spec.Name, how)
	c.respond(m.id, struct{}{}, nil)
}

func (s *Server) waitAttached(c *conn, a *attachedSession) *acp.RequestError {
	select {
	case <-a.ready:
		return a.err
	case <-c.done:
		return errInternal("connection_closed")
	}
}

func (s *Server) attached(c *conn, sessionID, agent, how string) {
	s.log.Info("acp session attached", "connection", c.id, "session", sessionID, "agent", agent, "how", how)
	s.publish(SessionAttached{ConnectionID: c.id, SessionID: sessionID, Agent: agent, How: how})
}

// replay sends the transcript as session/update notifications on the
// session's stream while the gateway actor holds live updates back, then
// lets them go, and waits (bounded) for a reader to take the replay, so that
// it reaches the client before the load answer on the connection stream.
func (s *Server) replay(c *conn, a *attachedSession, sid string) *acp.RequestError {
	release := make(chan struct{})
	replayed := 0
	defer func() {
		s.sys().Root.Send(a.pid, &releaseLive{done: release})
		select {
		case <-release:
		case <-c.done:
		case <-time.After(requestTimeout):
		}
		if c.waitTaken(sid, replayDeliveryWait) && replayed > 0 {
			// Written is not yet read: the answer goes on another HTTP
			// response, which the client may read first. A moment lets
			// it take the replay in.
			time.Sleep(replaySettle)
		}
	}()
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	res, err := s.rt.Request(ctx, sid, &pb.GetMessages{Caller: &pb.Caller{Subject: c.subject, Via: "acp"}})
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return errNoSuchSession()
		}
		s.log.Error("acp session/load: transcript", "connection", c.id, "session", sid, "err", err)
		return errInternal("transcript_failed")
	}
	tr := res.(*pb.Transcript)
	if tr.GetError() != nil {
		if tr.GetError().GetCode() == session.CodeNotFound {
			return errNoSuchSession()
		}
		s.log.Error("acp session/load: transcript", "connection", c.id, "session", sid, "err", tr.GetError().GetMessage())
		return errInternal("transcript_failed")
	}
	payloads := !s.opts.WithholdToolPayloads
	for _, e := range tr.GetEntries() {
		if u, ok := replayUpdate(e, payloads); ok {
			replayed++
			c.pushWait(sid, encodeNotification("session/update", acp.SessionNotification{SessionId: acp.SessionId(sid), Update: u}), replayTimeout)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
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

func (s *Server) sessionList(c *conn, m *rpcMessage) {
	var p listParams
	if len(m.params) > 0 {
		if e := decodeParams(m.params, &p); e != nil {
			c.respond(m.id, nil, e)
			return
		}
	}
	cwd, e := requireCwd(p.Cwd, false)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	spec, e := s.agentOf(c)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	fp := cursorFingerprint(c.subject, spec.Name, cwd)
	q := store.ListQuery{Owner: c.subject, Agent: spec.Name, Cwd: cwd, Limit: listPage}
	if p.Cursor != nil && *p.Cursor != "" {
		inner, ok := openCursor(*p.Cursor, fp)
		if !ok {
			c.respond(m.id, nil, errInvalidParams("cursor", "cursor is not one this listing gave out (cursors are bound to the caller, the agent and the cwd filter)"))
			return
		}
		q.Cursor = inner
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	page, next, err := s.rt.Store().ListSessions(ctx, q)
	if errors.Is(err, store.ErrBadCursor) {
		c.respond(m.id, nil, errInvalidParams("cursor", "cursor is not one this listing gave out"))
		return
	}
	if err != nil {
		s.log.Error("acp session/list failed", "connection", c.id, "err", err)
		c.respond(m.id, nil, errInternal("store_failed"))
		return
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
	c.respond(m.id, out, nil)
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

// ---------------------------------------------------------------------------
// session/close

func (s *Server) sessionClose(c *conn, m *rpcMessage) {
	var p sessionParams
	if e := decodeParams(m.params, &p); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	sid, e := requireSessionID(p.SessionID)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	if done := c.detach(sid); done != nil {
		select {
		case <-done:
		case <-c.done:
		case <-time.After(requestTimeout):
		}
		c.respond(m.id, struct{}{}, nil)
		return
	}
	spec, e := s.agentOf(c)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	if e := s.owned(ctx, c, sid, spec.Name); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	c.respond(m.id, struct{}{}, nil)
}

// owned checks in the store that the session exists, belongs to the
// connection's subject and agent, and has not ended; every failure but a
// store fault is the one -32002 answer.
func (s *Server) owned(ctx context.Context, c *conn, sid, agent string) *acp.RequestError {
	rec, err := s.rt.Store().GetSession(ctx, sid)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		return errNoSuchSession()
	case err != nil:
		s.log.Error("acp session lookup failed", "connection", c.id, "session", sid, "err", err)
		return errInternal("store_failed")
	case rec.Owner != c.subject, rec.Agent != agent, rec.Status == session.StatusEnded:
		return errNoSuchSession()
	}
	return nil
}

// ---------------------------------------------------------------------------
// session/prompt, session/cancel

type promptParams struct {
	SessionID *string            `json:"sessionId"`
	Prompt    *[]json.RawMessage `json:"prompt"`
}

type contentBlock struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	URI      string  `json:"uri"`
	Name     string  `json:"name"`
	Data     string  `json:"data"`
	MimeType string  `json:"mimeType"`
}

// promptContent turns ACP content blocks into the prompt's text and images:
// text as is, resource_link as "name (uri)", images for agents that take
// them; any other block is refused naming its type.
func promptContent(blocks []json.RawMessage) (string, []*pb.Image, *acp.RequestError) {
	var texts []string
	var imgs []*pb.Image
	for i, raw := range blocks {
		var b contentBlock
		if json.Unmarshal(raw, &b) != nil {
			return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d]", i), "prompt[%d] must be a content block object", i)
		}
		switch b.Type {
		case "text":
			if b.Text == nil {
				return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d].text", i), "prompt[%d].text is required", i)
			}
			texts = append(texts, *b.Text)
		case "resource_link":
			if b.URI == "" {
				return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d].uri", i), "prompt[%d].uri is required", i)
			}
			name := b.Name
			if name == "" {
				name = b.URI
			}
			texts = append(texts, name+" ("+b.URI+")")
		case "image":
			// Whether the agent takes images is the session's to say (an
			// agent may announce it when it starts): a refusal comes back
			// from the session as -32602 naming "image".
			if b.Data == "" || b.MimeType == "" {
				return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d]", i), "prompt[%d] (image) needs data and mimeType", i)
			}
			imgs = append(imgs, &pb.Image{MimeType: b.MimeType, Data: b.Data})
		case "":
			return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d].type", i), "prompt[%d].type is required", i)
		default:
			return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d]", i), "This agent does not accept %q content in a prompt.", b.Type)
		}
	}
	text := strings.Join(texts, "\n\n")
	if strings.TrimSpace(text) == "" {
		return "", nil, errInvalidParams("prompt", "The prompt carried no text.")
	}
	return text, imgs, nil
}

func (s *Server) sessionPrompt(c *conn, m *rpcMessage) {
	var p promptParams
	if e := decodeParams(m.params, &p); e != nil {
		c.respond(m.id, nil, e)
		return
	}
	sid, e := requireSessionID(p.SessionID)
	if e == nil && p.Prompt == nil {
		e = errInvalidParams("prompt", "prompt is required (an array of content blocks)")
	}
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	text, imgs, e := promptContent(*p.Prompt)
	if e != nil {
		c.respond(m.id, nil, e)
		return
	}
	a := c.lookupSession(sid)
	if a == nil {
		spec, e := s.agentOf(c)
		if e != nil {
			c.respond(m.id, nil, e)
			return
		}
		// A prompt for a session this connection did not attach (yet)
		// attaches it, as session/resume would; the gateway actor checks
		// ownership before anything reaches the session.
		a = c.attach(sid, spec.Name, false)
		if a.pid == nil {
			c.respond(m.id, nil, a.err)
			return
		}
		go func() {
			if s.waitAttached(c, a) == nil {
				s.attached(c, sid, spec.Name, "resume")
			}
		}()
	}
	s.sys().Root.Send(a.pid, &promptRequest{id: m.id, text: text, images: imgs})
}

func (s *Server) sessionCancel(c *conn, m *rpcMessage) {
	sid, ok := sessionIDOf(m.params)
	if !ok {
		s.log.Debug("acp session/cancel without a sessionId ignored", "connection", c.id)
		return
	}
	if a := c.lookupSession(sid); a != nil {
		s.sys().Root.Send(a.pid, &cancelRequest{})
		return
	}
	// Only sessions this connection attached can be cancelled from it.
	s.log.Debug("acp session/cancel for a session not attached here ignored", "connection", c.id, "session", sid)
}
