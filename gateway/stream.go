package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// stream is one connected browser client: its subscriber actor and the
// queue the actor fills and the connection's writer drains.
type stream struct {
	s       *Server
	kind    string // sse, ws or chat
	id      string // the session
	subject string // whose stream it is (a slot of Limits' per-subject caps)
	q       *delivery.Queue
	pid     *actor.PID
	sys     *actor.ActorSystem // where the subscriber lives (a rejoin replaces the runtime's)
	mode    string
	conn    net.Conn // a detached SSE stream's connection (Close may cut it)
}

// lastEventID reads the resume position: the Last-Event-ID header, else the
// lastEventId query parameter.
func lastEventID(c echo.Context) (string, error) {
	v := c.Request().Header.Get("Last-Event-ID")
	if v == "" {
		v = c.QueryParam("lastEventId")
	}
	if len(v) > 128 || strings.ContainsAny(v, "\r\n") {
		return "", apiErr(http.StatusBadRequest, codes.InvalidField, "Last-Event-ID is not an id this server gave out", "Last-Event-ID")
	}
	return v, nil
}

// openStream spawns the client's subscriber actor and subscribes it to the
// session; the session sends it the replay (or sticky state) and then every
// live frame. Nothing is written to the client before this succeeds, so a
// refusal is an ordinary JSON error.
func (s *Server) openStream(c echo.Context, kind, last string) (*stream, error) {
	return s.subscribe(c, kind, &pb.Subscribe{LastEventId: last},
		func(q *delivery.Queue) delivery.Sink { return delivery.QueueSink{Q: q} })
}

// subscribe spawns a subscriber actor whose sink sinkOf makes over the
// client's queue and subscribes it to the session as req says. A
// subscription from the running turn's start that finds no turn running
// registers nothing: it returns a nil stream and no error.
func (s *Server) subscribe(c echo.Context, kind string, req *pb.Subscribe, sinkOf func(*delivery.Queue) delivery.Sink) (*stream, error) {
	if s.isClosing() {
		return nil, errShuttingDown()
	}
	id := c.Param("id")
	subject := guard.IdentityOf(c).Subject
	limit, ok := s.admit(subject, kind)
	if !ok {
		s.log.WarnContext(c.Request().Context(), "stream refused: too many open", "subject", subject, "kind", kind, "limit", limit)
		what := "event streams"
		if kind == "ws" {
			what = "WebSockets"
		}
		return nil, apiErr(http.StatusTooManyRequests, codes.TooManyStreams,
			fmt.Sprintf("you already have %d %s open (the limit); close one first", limit, what))
	}
	opened := false
	defer func() {
		if !opened {
			s.release(subject, kind)
		}
	}()
	q := delivery.NewQueue(delivery.Limits{MaxBytes: s.lim.QueueBytes, MaxAge: s.lim.QueueAge}, nil)
	var opts []actor.PropsOption
	if s.opts.Props != nil {
		opts = s.opts.Props(kind, id)
	}
	sys := s.rt.System()
	pid := sys.Root.SpawnPrefix(delivery.Props(sinkOf(q), q, opts...), kind+"-")
	st := &stream{s: s, kind: kind, id: id, subject: subject, q: q, pid: pid, sys: sys}
	ctx, cancel := s.requestContext(c.Request().Context())
	defer cancel()
	req.ClientKind, req.Subject = kind, subject
	r, err := delivery.Subscribe(ctx, s.rt, id, pid, req)
	if err != nil {
		sys.Root.Stop(pid)
		return nil, s.askErr(err)
	}
	if r.GetError() != nil {
		sys.Root.Stop(pid)
		return nil, fromPB(r.GetError())
	}
	if r.GetMode() == session.ModeIdle {
		sys.Root.Stop(pid)
		return nil, nil
	}
	st.mode = r.GetMode()
	if !s.track(st) {
		sys.Root.Stop(pid)
		return nil, errShuttingDown()
	}
	opened = true
	s.rt.Metrics().ClientUp(kind)
	s.log.DebugContext(c.Request().Context(), "client subscribed", "session", id, "kind", kind, "mode", st.mode, "head", r.GetHead())
	return st, nil
}

// run drains the stream into t until it ends.
func (st *stream) run(ctx context.Context, w *delivery.Writer, t delivery.Transport) {
	if w.Run(ctx, st.q, t) == delivery.EndSlowConsumer {
		n, bytes, age := st.q.Waiting()
		st.s.log.Warn("client cut: too far behind", "session", st.id, "kind", st.kind, "items", n, "bytes", bytes, "age", age)
	}
}

func (st *stream) close() {
	st.sys.Root.Stop(st.pid)
	st.s.untrack(st)
	st.s.release(st.subject, st.kind)
	st.s.rt.Metrics().ClientDown(st.kind)
}

func endData(reason delivery.Reason) []byte {
	return []byte(`{"reason":"` + string(reason) + `"}`)
}

// shutdownReason is the end a stream gets from a node going away: shutdown
// on a single node (the session sleeps until the daemon is back), moved in a
// cluster (another node serves the session: reconnect now).
func (s *Server) shutdownReason() delivery.Reason {
	if s.rt.Clustered() {
		return delivery.EndMoved
	}
	return delivery.EndShutdown
}

// writer is the drain loop of a browser client of kind sse or ws.
func (s *Server) writer(kind string, keepAlive time.Duration) *delivery.Writer {
	return &delivery.Writer{
		KeepAlive:      keepAlive,
		Shutdown:       s.shutdown,
		ShutdownReason: s.shutdownReason(),
		OnSlow:         func() { s.rt.Metrics().SlowConsumer(kind) },
	}
}
