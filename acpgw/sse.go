package acpgw

import (
	"context"
	"net/http"
	"strings"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/delivery"
)

// serveStream is one GET holding a stream's lease: delivery's writer drains
// the stream's queue to it as SSE, what was queued before the GET first, a
// ":" keep-alive every KeepAlive. It returns when the client goes, the
// connection closes (what was queued goes out, then the reason as a
// comment), the credential is revoked (the connection closes too), or a
// write stalls (the GET ends; what waits stays for the next one).
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, c *conn, st *outStream, id identity.Identity) {
	sse, err := delivery.StartSSE(w, "")
	if err != nil {
		return
	}
	ctx := r.Context()
	if s.opts.Revoker != nil {
		var cancel context.CancelFunc
		ctx, cancel = s.opts.Revoker.Context(ctx, id)
		defer cancel()
	}
	switch s.writer.Run(ctx, st.q, sseTransport{SSE: sse, c: c}) {
	case delivery.EndRevoked:
		c.close("the credential was revoked", true)
	case delivery.EndSlowConsumer:
		s.log.Warn("acp stream reader too slow: its GET ends, the stream waits for the next", "connection", c.id, "session", st.sessionID)
	case delivery.EndClientGone:
		s.log.Debug("acp stream reader gone", "connection", c.id, "session", st.sessionID)
	}
}

// sseTransport writes ACP messages as SSE events with data only (ACP v1 has
// no event names and no resume of a stream).
type sseTransport struct {
	*delivery.SSE
	c *conn
}

func (t sseTransport) Write(it delivery.Item) error {
	delivery.WriteEvent(t.Buffer(), "", "", it.Raw)
	return t.Spill()
}

func (t sseTransport) KeepAlive() error { return t.Comment("") }

// End says why the stream ends, as a comment, when the connection closed
// or the credential was revoked.
func (t sseTransport) End(reason delivery.Reason) error {
	switch reason {
	case delivery.EndClosed:
		_, why := t.c.closeReason()
		return t.Comment("closed: " + oneLine(why))
	case delivery.EndRevoked:
		return t.Comment("closed: the credential was revoked")
	}
	return nil
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
