package gateway

import (
	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/delivery"
	"github.com/surfaced/surfaced/internal/wire"
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
	// The first comment names how the stream began (fresh, resumed, resync).
	sse, err := delivery.StartSSE(c.Response(), st.mode)
	if err != nil {
		return nil
	}
	ctx, cancel := s.guard.Context(c.Request().Context(), guard.IdentityOf(c))
	defer cancel()
	st.run(ctx, s.sseWriter, sseTransport{sse})
	return nil
}

// sseTransport writes session frames as SSE events: "event: <kind>",
// "id: <epoch>-<seq>" and the data internal/wire renders.
type sseTransport struct{ *delivery.SSE }

func (t sseTransport) Write(it delivery.Item) error {
	if f := it.Frame; f != nil {
		d := t.Data()
		*d = wire.AppendData((*d)[:0], f.GetEvent())
		delivery.WriteEvent(t.Buffer(), wire.Kind(f.GetEvent()), f.GetId(), *d)
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
