package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/gateway/guard"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// stream is one connected client: its gateway actor and its queue.
type stream struct {
	s    *Server
	kind string
	id   string
	q    *outbound
	pid  *actor.PID
	sys  *actor.ActorSystem // where the gateway actor lives (a rejoin replaces the runtime's)
	mode string
}

// lastEventID reads the resume position: the Last-Event-ID header, else the
// lastEventId query parameter.
func lastEventID(c echo.Context) (string, error) {
	v := c.Request().Header.Get("Last-Event-ID")
	if v == "" {
		v = c.QueryParam("lastEventId")
	}
	if len(v) > 128 || strings.ContainsAny(v, "\r\n") {
		return "", apiErr(http.StatusBadRequest, "invalid_field", "Last-Event-ID is not an id this server gave out", "Last-Event-ID")
	}
	return v, nil
}

// openStream spawns the client's gateway actor and subscribes it to the
// session; the session sends it the replay (or sticky state) and then every
// live frame. Nothing is written to the client before this succeeds, so a
// refusal is an ordinary JSON error.
func (s *Server) openStream(c echo.Context, kind, last string) (*stream, error) {
	if s.isClosing() {
		return nil, apiErr(http.StatusServiceUnavailable, "shutting_down", "the daemon is shutting down")
	}
	id := c.Param("id")
	q := newOutbound(s.lim.QueueBytes, s.lim.QueueAge)
	var opts []actor.PropsOption
	if s.opts.Props != nil {
		opts = s.opts.Props(kind, id)
	}
	sys := s.rt.System()
	pid := sys.Root.SpawnPrefix(clientProps(q, opts...), kind+"-")
	st := &stream{s: s, kind: kind, id: id, q: q, pid: pid, sys: sys}
	ctx, cancel := context.WithTimeout(c.Request().Context(), session.DefaultRequestTimeout)
	defer cancel()
	res, err := s.rt.Request(ctx, id, &pb.Subscribe{Subscriber: pb.PidOf(pid), LastEventId: last, ClientKind: kind,
		Subject: guard.IdentityOf(c).Subject})
	if err != nil {
		sys.Root.Stop(pid)
		if ae := fromRequestErr(err); ae != nil {
			return nil, ae
		}
		return nil, err
	}
	r := res.(*pb.SubscribeResult)
	if r.GetError() != nil {
		sys.Root.Stop(pid)
		return nil, fromPB(r.GetError())
	}
	st.mode = r.GetMode()
	if !s.track(st) {
		sys.Root.Stop(pid)
		return nil, apiErr(http.StatusServiceUnavailable, "shutting_down", "the daemon is shutting down")
	}
	s.rt.Metrics().ClientUp(kind)
	s.log.Debug("client subscribed", "session", id, "kind", kind, "mode", st.mode, "head", r.GetHead())
	return st, nil
}

func (st *stream) close() {
	st.sys.Root.Stop(st.pid)
	st.s.untrack(st)
	st.s.rt.Metrics().ClientDown(st.kind)
}

func endData(reason string) []byte {
	return []byte(`{"reason":"` + reason + `"}`)
}

// shutdownReason is the end a stream gets from a node going away: shutdown
// on a single node (the session sleeps until the daemon is back), moved in a
// cluster (another node serves the session: reconnect now).
func (s *Server) shutdownReason() string {
	if s.rt.Clustered() {
		return "moved"
	}
	return "shutdown"
}
