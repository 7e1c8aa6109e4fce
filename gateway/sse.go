package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// events serves GET /api/sessions/{id}/events: the session's frames as SSE,
// resumed exactly from Last-Event-ID inside the replay window.
func (s *Server) events(c echo.Context) error {
	last, err := lastEventID(c)
	if err != nil {
		return err
	}
	st, err := s.openStream(c, "sse", last)
	if err != nil {
		return err
	}
	defer st.close()

	w := c.Response()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// Headers and a comment go out at once: proxies and browsers see a live stream.
	if _, err := w.Write([]byte(": " + st.mode + "\n\n")); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}

	ctx, cancel := s.guard.Context(c.Request().Context(), guard.IdentityOf(c))
	defer cancel()
	keep := time.NewTicker(s.lim.KeepAlive)
	defer keep.Stop()
	var shutdownGrace <-chan time.Time
	shutdown := s.shutdown
	buf := make([]*pb.Frame, 0, 64)
	var line bytes.Buffer
	var data []byte
	for {
		select {
		case <-st.q.wake:
			frames, _, final, cut := st.q.take(buf)
			buf = frames[:0]
			_ = rc.SetWriteDeadline(time.Now().Add(s.lim.QueueAge))
			for _, f := range frames {
				line.Reset()
				data = wire.AppendData(data[:0], f.Event)
				writeSSE(&line, wire.Kind(f.Event), f.Id, data)
				if _, err := w.Write(line.Bytes()); err != nil {
					return nil
				}
			}
			clear(frames)
			if cut != "" {
				if cut == "slow_consumer" {
					s.rt.Metrics().SlowConsumer("sse")
					s.log.Warn("client cut: too far behind", "session", st.id, "kind", "sse")
					s.writeSSEEnd(w, rc, "slow_consumer")
				}
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			if final {
				return nil
			}
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(s.lim.QueueAge))
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		case <-shutdown:
			// The sessions say end{shutdown} themselves as they stop; a
			// stream that hears nothing gets it from here.
			shutdown = nil
			shutdownGrace = time.After(3 * time.Second)
		case <-shutdownGrace:
			s.writeSSEEnd(w, rc, s.shutdownReason())
			return nil
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), guard.ErrRevoked) {
				s.writeSSEEnd(w, rc, "revoked")
			}
			return nil
		}
	}
}

// writeSSEEnd writes a client-only end frame (not part of the session's log:
// it carries no id, so the client's resume position stays where it was).
func (s *Server) writeSSEEnd(w http.ResponseWriter, rc *http.ResponseController, reason string) {
	_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
	var b bytes.Buffer
	writeSSE(&b, "end", "", endData(reason))
	_, _ = w.Write(b.Bytes())
	_ = rc.Flush()
}

// writeSSE encodes one event. JSON from the session never holds a raw
// newline; if some data did, each line gets its own data: field.
func writeSSE(b *bytes.Buffer, kind, id string, data []byte) {
	b.WriteString("event: ")
	b.WriteString(kind)
	b.WriteByte('\n')
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	for {
		i := bytes.IndexByte(data, '\n')
		b.WriteString("data: ")
		if i < 0 {
			b.Write(data)
			b.WriteString("\n\n")
			return
		}
		b.Write(bytes.TrimSuffix(data[:i], []byte("\r")))
		b.WriteByte('\n')
		data = data[i+1:]
	}
}
