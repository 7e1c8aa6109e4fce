package acpgw

import (
	"context"
	"errors"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// replayPace bounds the wait for room on a slow reader's stream, per
// replayed message: a long replay goes at the reader's pace instead of
// tripping the stream's bounds.
const replayPace = 30 * time.Second

// replayDeliveryWait bounds the wait for the replay to be written to the
// session stream's reader before the load answer goes out.
const replayDeliveryWait = 5 * time.Second

// replay sends the transcript as session/update notifications on the
// session's stream while the attachment holds live updates back, then lets
// them go (they follow the replay on the same stream), and, when the stream
// has a reader, waits until the reader's writer has written and flushed the
// replay: only then is the load answer queued on the connection stream.
//
// That orders the daemon's writes, not the client's reads: the answer and
// the replay travel on two HTTP responses, which a client may read in either
// order. A client that must see the replay first reads the session stream
// until it is idle (the bridge relays both in the order they arrive).
func (s *Server) replay(c *conn, a *attachedSession, sid string) *acp.RequestError {
	var mark uint64
	defer func() {
		release := make(chan struct{})
		s.sys().Root.Send(a.pid, &releaseLive{done: release})
		select {
		case <-release:
		case <-c.done:
		case <-time.After(s.opts.RequestTimeout):
		}
		if mark > 0 {
			c.waitWritten(sid, mark, replayDeliveryWait)
		}
	}()
	ctx, cancel := context.WithTimeout(c.ctx, s.opts.RequestTimeout)
	defer cancel()
	res, err := s.rt.Request(ctx, sid, &pb.GetMessages{Caller: &pb.Caller{Subject: c.subject, Via: "acp"}})
	if err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return errNoSuchSession()
		}
		s.log.Error("acp session/load: transcript", "connection", c.id, "session", sid, "err", err)
		return errInternal(codes.TranscriptFailed)
	}
	tr := res.(*pb.Transcript)
	if tr.GetError() != nil {
		if tr.GetError().GetCode() == codes.NotFound {
			return errNoSuchSession()
		}
		s.log.Error("acp session/load: transcript", "connection", c.id, "session", sid, "err", tr.GetError().GetMessage())
		return errInternal(codes.TranscriptFailed)
	}
	payloads := !s.opts.WithholdToolPayloads
	for _, e := range tr.GetEntries() {
		if u, ok := replayUpdate(e, payloads); ok {
			mark = c.pushPaced(sid, encodeNotification("session/update", acp.SessionNotification{SessionId: acp.SessionId(sid), Update: u}), replayPace)
		}
	}
	return nil
}

// pushPaced queues a message on a stream after waiting, up to timeout, for
// room (what waits at most half the stream's byte bound). It returns the
// stream's mark after the message, for waitWritten.
func (c *conn) pushPaced(sessionID string, msg []byte, timeout time.Duration) uint64 {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0
	}
	s := c.streamLocked(sessionID)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	s.q.WaitRoom(ctx)
	cancel()
	c.mu.Lock()
	s, over := c.pushToLocked(sessionID, msg)
	var mark uint64
	if s != nil {
		mark = s.q.Mark()
	}
	c.mu.Unlock()
	c.checkBound(over)
	return mark
}

// waitWritten waits, up to timeout, until the session stream's reader has
// written every message up to mark; at once when it has no reader.
func (c *conn) waitWritten(sessionID string, mark uint64, timeout time.Duration) bool {
	s := c.readStream(sessionID)
	if s == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	return s.q.WaitWritten(ctx, mark)
}
