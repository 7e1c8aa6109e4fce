package acpgw

import (
	"context"
	"errors"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/store"
)

// The session methods: each attaches the session to the connection (or
// finds its attachment) and answers when that is decided.

func (s *Server) sessionNew(c *conn, m *rpcMessage) (any, *acp.RequestError) {
	var p sessionParams
	if e := decodeParams(m.params, &p); e != nil {
		return nil, e
	}
	cwd, e := requireCwd(p.Cwd, true)
	if e == nil {
		e = s.mcpServersOf(c, p.mcp())
	}
	if e != nil {
		return nil, e
	}
	spec, e := s.agentOf(c)
	if e != nil {
		return nil, e
	}
	// A session the connection could not attach would be created for
	// nothing.
	if !c.hasRoomForAnother() {
		return nil, errTooManySessionsOnConnection(s.opts.SessionsPerConnection)
	}
	ctx, cancel := context.WithTimeout(c.ctx, s.opts.RequestTimeout)
	defer cancel()
	id, err := s.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: c.subject, Groups: c.groups, Agent: spec.Name, Cwd: cwd})
	var quota *surfaced.QuotaError
	switch {
	case errors.As(err, &quota):
		return nil, errTooManySessions(quota)
	case errors.Is(err, surfaced.ErrBadCwd):
		return nil, errInvalidParams("cwd", "%s", strings.TrimPrefix(err.Error(), surfaced.ErrBadCwd.Error()+": "))
	case err != nil:
		s.log.Error("acp session/new failed", "connection", c.id, "err", err)
		if code := storeErrCode(err); code != "" {
			return nil, errStore(code)
		}
		return nil, errInternal(codes.CreateFailed)
	}
	if e := s.waitAttached(c, c.attach(id, spec.Name, false)); e != nil {
		return nil, e
	}
	s.attached(c, id, spec.Name, "new")
	return map[string]string{"sessionId": id}, nil
}

// sessionAttach serves session/load (replay, then answer) and session/resume
// (answer, no replay).
func (s *Server) sessionAttach(how string) method {
	return func(c *conn, m *rpcMessage) (any, *acp.RequestError) {
		var p sessionParams
		if e := decodeParams(m.params, &p); e != nil {
			return nil, e
		}
		sid, e := requireSessionID(p.SessionID)
		if e == nil {
			_, e = requireCwd(p.Cwd, true)
		}
		if e == nil && (how == "load" || p.McpServers != nil) {
			e = s.mcpServersOf(c, p.mcp())
		}
		if e != nil {
			return nil, e
		}
		spec, e := s.agentOf(c)
		if e != nil {
			return nil, e
		}
		a := c.attach(sid, spec.Name, how == "load")
		if e := s.waitAttached(c, a); e != nil {
			return nil, e
		}
		if how == "load" {
			if e := s.replay(c, a, sid); e != nil {
				return nil, e
			}
		}
		s.attached(c, sid, spec.Name, how)
		return struct{}{}, nil
	}
}

func (s *Server) waitAttached(c *conn, a *attachedSession) *acp.RequestError {
	select {
	case <-a.ready:
		return a.err
	case <-c.done:
		return errInternal(codes.ConnectionClosed)
	}
}

func (s *Server) attached(c *conn, sessionID, agent, how string) {
	s.log.Info("acp session attached", "connection", c.id, "session", sessionID, "agent", agent, "how", how)
	s.publish(SessionAttached{ConnectionID: c.id, SessionID: sessionID, Agent: agent, How: how})
}

func (s *Server) sessionClose(c *conn, m *rpcMessage) (any, *acp.RequestError) {
	var p sessionParams
	if e := decodeParams(m.params, &p); e != nil {
		return nil, e
	}
	sid, e := requireSessionID(p.SessionID)
	if e != nil {
		return nil, e
	}
	if done := c.detach(sid); done != nil {
		select {
		case <-done:
		case <-c.done:
		case <-time.After(s.opts.RequestTimeout):
		}
		return struct{}{}, nil
	}
	spec, e := s.agentOf(c)
	if e != nil {
		return nil, e
	}
	ctx, cancel := context.WithTimeout(c.ctx, s.opts.RequestTimeout)
	defer cancel()
	if e := s.owned(ctx, c, sid, spec.Name); e != nil {
		return nil, e
	}
	return struct{}{}, nil
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
		return errInternal(codes.StoreFailed)
	case rec.Owner != c.subject, rec.Agent != agent, rec.Status == session.StatusEnded:
		return errNoSuchSession()
	}
	return nil
}

// sessionPrompt hands the prompt to the session's attachment, which
// answers it when its turn ends.
func (s *Server) sessionPrompt(c *conn, m *rpcMessage) (any, *acp.RequestError) {
	var p promptParams
	if e := decodeParams(m.params, &p); e != nil {
		return nil, e
	}
	sid, e := requireSessionID(p.SessionID)
	if e == nil && p.Prompt == nil {
		e = errInvalidParams("prompt", "prompt is required (an array of content blocks)")
	}
	if e != nil {
		return nil, e
	}
	text, imgs, e := promptContent(*p.Prompt)
	if e != nil {
		return nil, e
	}
	a := c.lookupSession(sid)
	if a == nil {
		spec, e := s.agentOf(c)
		if e != nil {
			return nil, e
		}
		// A prompt for a session this connection did not attach (yet)
		// attaches it, as session/resume would; the attachment checks
		// ownership before anything reaches the session.
		a = c.attach(sid, spec.Name, false)
		if a.pid == nil {
			return nil, a.err
		}
		go func() {
			if s.waitAttached(c, a) == nil {
				s.attached(c, sid, spec.Name, "resume")
			}
		}()
	}
	s.sys().Root.Send(a.pid, &promptRequest{id: m.id, text: text, images: imgs})
	return nil, nil
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
