package gateway

import (
	"context"
	"net"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/delivery"
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
	id := guard.IdentityOf(c)
	if conn, _, err := http.NewResponseController(c.Response()).Hijack(); err == nil {
		s.detach(st, conn, c.Response().Header().Clone(), id)
		return nil
	}
	// Not an HTTP/1 connection (HTTP/2, a recorder): the stream runs on
	// the request's goroutine.
	defer st.close()
	// The first comment names how the stream began (fresh, resumed, resync).
	sse, err := delivery.StartSSE(c.Response(), st.mode)
	if err != nil {
		return nil
	}
	ctx, cancel := s.guard.Context(c.Request().Context(), id)
	defer cancel()
	st.run(ctx, s.sseWriter, sseTransport{sse})
	return nil
}

// detach runs a stream on a connection taken over from net/http, on a
// goroutine of its own, and lets the request's handler return: an idle
// stream then holds its connection, its queue, its subscriber and two small
// goroutines (the writer's, and a reader that notices the client leave),
// not net/http's buffers and request goroutine. Close waits for these
// streams.
func (s *Server) detach(st *stream, conn net.Conn, h http.Header, id identity.Identity) {
	s.mu.Lock()
	st.conn = conn
	s.mu.Unlock()
	ctx, cancel := s.guard.Context(context.Background(), id)
	s.detached.Add(1)
	go func() {
		defer s.detached.Done()
		defer cancel()
		defer conn.Close()
		defer st.close()
		go watchClose(conn, cancel)
		sse, err := delivery.StartSSEConn(conn, h, st.mode)
		if err != nil {
			return
		}
		st.run(ctx, s.sseWriter, sseTransport{sse})
	}()
}

// watchClose reads the connection until the client closes it (an SSE client
// sends nothing after its request), then ends the stream.
func watchClose(conn net.Conn, gone context.CancelFunc) {
	var b [64]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			gone()
			return
		}
	}
}

// sseTransport writes session frames as SSE events: "event: <kind>",
// "id: <epoch>-<seq>" and the data internal/wire renders.
type sseTransport struct{ *delivery.SSE }

func (t sseTransport) Write(it delivery.Item) error {
	if f := it.Frame; f != nil {
		d := t.Data()
		*d = wire.AppendData((*d)[:0], f.GetEvent())
		delivery.WriteEvent(t.Buffer(), pb.KindOf(f.GetEvent()), f.GetId(), *d)
	} else {
		delivery.WriteEvent(t.Buffer(), "", "", it.Raw)
	}
	return t.Spill()
}

func (t sseTransport) KeepAlive() error { return t.Comment("keep-alive") }

// End writes the client-only end frame: no id, so that the client's resume
// position stays where it was. A stream the session ended carries the
// session's own end; one whose session went away just closes (the client
// reconnects and resumes).
func (t sseTransport) End(reason delivery.Reason) error {
	switch reason {
	case delivery.EndSlowConsumer, delivery.EndShutdown, delivery.EndMoved, delivery.EndRevoked:
		delivery.WriteEvent(t.Buffer(), "end", "", endData(reason))
		return t.Flush()
	}
	return nil
}
