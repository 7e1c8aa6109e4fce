package acpgw

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/surfaced/surfaced/gateway/guard"
)

// writeTimeout bounds one write to a stream reader: a reader that takes
// nothing for this long is gone, and its lease is released.
const writeTimeout = 10 * time.Second

// serveStream is one GET: it holds the stream's lease and writes what is
// queued as SSE events ("data: <json>"), a ":" comment first so that the
// headers leave at once, and a ":" keep-alive every KeepAlive. It returns
// when the client goes, the connection closes, or the credential is revoked.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, c *conn, st *outStream, id guard.Identity) {
	defer c.release(st)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := w.Write([]byte(":\n\n")); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}

	ctx := r.Context()
	if s.opts.Revoker != nil {
		var cancel context.CancelFunc
		ctx, cancel = s.opts.Revoker.Context(ctx, id)
		defer cancel()
	}
	keep := time.NewTicker(s.keepAlive)
	defer keep.Stop()
	var buf [][]byte
	var out bytes.Buffer
	write := func() bool {
		buf = c.take(st, buf)
		if len(buf) == 0 {
			return true
		}
		out.Reset()
		for _, m := range buf {
			out.WriteString("data: ")
			out.Write(m)
			out.WriteString("\n\n")
		}
		n := len(buf)
		clear(buf)
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(out.Bytes()); err != nil {
			s.log.Debug("acp stream reader gone", "connection", c.id, "session", st.sessionID, "err", err)
			return false
		}
		if rc.Flush() != nil {
			return false
		}
		c.delivered(st, n)
		return true
	}
	// Anything queued before the GET goes out now.
	if !write() {
		return
	}
	for {
		select {
		case <-st.wake:
			if !write() {
				return
			}
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := w.Write([]byte(":\n\n")); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		case <-c.done:
			// The connection closed: deliver what is left, then say why.
			if !write() {
				return
			}
			_, reason := c.closeReason()
			_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = w.Write([]byte(": closed: " + oneLine(reason) + "\n\n"))
			_ = rc.Flush()
			return
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), guard.ErrRevoked) {
				_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = w.Write([]byte(": closed: the credential was revoked\n\n"))
				_ = rc.Flush()
				c.close("the credential was revoked", true)
			}
			return
		}
	}
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
