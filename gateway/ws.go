package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/delivery"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 4096,
	// The guard's Origin gate already ran (it is stricter than gorilla's
	// same-host check, and also covers listed browser origins).
	CheckOrigin: func(*http.Request) bool { return true },
}

// websocket serves GET /api/sessions/{id}/ws: the same frames as SSE, plus
// client requests answered by reply events, which wait in the same queue.
func (s *Server) websocket(c echo.Context) error {
	last, err := lastEventID(c)
	if err != nil {
		return err
	}
	if !websocket.IsWebSocketUpgrade(c.Request()) {
		return apiErr(http.StatusBadRequest, codes.NotWebSocket, "this endpoint needs a WebSocket upgrade")
	}
	st, err := s.openStream(c, "ws", last)
	if err != nil {
		return err
	}
	defer st.close()
	conn, err := upgrader.Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader answered the client
	}
	defer conn.Close()
	conn.SetReadLimit(s.lim.BodyBytes)

	ctx, cancel := s.guard.Context(c.Request().Context(), guard.IdentityOf(c))
	defer cancel()
	caller := &pb.Caller{Subject: guard.IdentityOf(c).Subject, Via: "browser"}
	readDone := make(chan struct{})
	go s.wsRead(ctx, conn, st, caller, readDone)

	w := *s.wsWriter
	w.Done = readDone
	st.run(ctx, &w, &wsTransport{conn: conn})
	return nil
}

// wsTransport writes session frames as {"event","id","data"} text messages
// and replies as they are; its keep-alive is a ping.
type wsTransport struct {
	conn     *websocket.Conn
	deadline time.Time
	msg      bytes.Buffer
	data     []byte
	progress func()
}

// SetProgress implements delivery.ProgressReporter.
func (t *wsTransport) SetProgress(f func()) { t.progress = f }

func (t *wsTransport) Write(it delivery.Item) error {
	f := it.Frame
	if f == nil {
		return t.send(it.Raw)
	}
	t.msg.Reset()
	t.data = wire.AppendData(t.data[:0], f.GetEvent())
	writeWSFrame(&t.msg, pb.KindOf(f.GetEvent()), f.GetId(), t.data)
	return t.send(t.msg.Bytes())
}

// send writes one text message; a large one goes in pieces (fragments of
// the message), so that the writer sees a client that reads it slowly but
// steadily move.
func (t *wsTransport) send(b []byte) error {
	if len(b) <= delivery.PieceSize || t.progress == nil {
		return t.conn.WriteMessage(websocket.TextMessage, b)
	}
	w, err := t.conn.NextWriter(websocket.TextMessage)
	if err != nil {
		return err
	}
	if err := delivery.WriteInPieces(w, b, t.progress); err != nil {
		return err
	}
	return w.Close()
}

// Flush lets go of a large frame's buffers: each message went out whole.
func (t *wsTransport) Flush() error {
	if t.msg.Cap() > 64<<10 {
		t.msg = bytes.Buffer{}
	}
	if cap(t.data) > 64<<10 {
		t.data = nil
	}
	return nil
}

func (t *wsTransport) KeepAlive() error {
	return t.conn.WriteControl(websocket.PingMessage, nil, t.deadline)
}

func (t *wsTransport) SetWriteDeadline(d time.Time) error {
	t.deadline = d
	return t.conn.SetWriteDeadline(d)
}

// End writes the client-only end frame where the browser needs a reason,
// and the close frame.
func (t *wsTransport) End(reason delivery.Reason) error {
	switch reason {
	case delivery.EndSlowConsumer:
		t.endFrame(reason)
		return t.close(websocket.ClosePolicyViolation, "slow consumer")
	case delivery.EndSessionGone:
		return t.close(websocket.CloseGoingAway, "session moved; reconnect with lastEventId")
	case delivery.EndFinal:
		return t.close(websocket.CloseNormalClosure, "session ended")
	case delivery.EndShutdown, delivery.EndMoved:
		t.endFrame(reason)
		return t.close(websocket.CloseGoingAway, "shutdown")
	case delivery.EndRevoked:
		t.endFrame(reason)
		return t.close(websocket.ClosePolicyViolation, "credential revoked")
	}
	return nil
}

func (t *wsTransport) endFrame(reason delivery.Reason) {
	t.msg.Reset()
	writeWSFrame(&t.msg, "end", "", endData(reason))
	_ = t.conn.WriteMessage(websocket.TextMessage, t.msg.Bytes())
}

func (t *wsTransport) close(code int, text string) error {
	return t.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

func writeWSFrame(b *bytes.Buffer, kind, id string, data []byte) {
	b.WriteString(`{"event":"`)
	b.WriteString(kind)
	if id != "" {
		b.WriteString(`","id":"`)
		b.WriteString(id)
	}
	b.WriteString(`","data":`)
	b.Write(data)
	b.WriteByte('}')
}

// wsRead reads client requests until the connection fails; their replies
// join the stream's queue, where they count toward its bounds. A peer that
// misses two pongs times out here. Once the queue has ended (the client was
// cut, or the stream is over) nothing more is read: a client that sends
// without reading its replies is held back by its own socket, not answered
// into a void, and the connection goes when its writer is done.
func (s *Server) wsRead(ctx context.Context, conn *websocket.Conn, st *stream, caller *pb.Caller, done chan struct{}) {
	defer close(done)
	// Two missed pongs, plus a little grace for the round trip.
	deadline := 2*s.lim.WSPing + min(5*time.Second, s.lim.WSPing/2)
	_ = conn.SetReadDeadline(time.Now().Add(deadline))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(deadline)) })
	sem := make(chan struct{}, s.lim.WSInflight)
	connName := session.NewID() // request ids are unique within a connection only
	for {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(deadline))
		if !s.wsDispatch(ctx, st, connName, caller, sem, typ, data) {
			<-ctx.Done()
			return
		}
	}
}

// wsDispatch answers one client message at once (a bad frame, too many in
// flight) or starts its request. It reports false when the stream's queue
// has ended.
func (s *Server) wsDispatch(ctx context.Context, st *stream, connName string, caller *pb.Caller, sem chan struct{}, typ int, data []byte) bool {
	if typ != websocket.TextMessage {
		return st.q.PushRaw(wsReply(nil, false, nil, apiErr(http.StatusBadRequest, codes.InvalidFrame, "send requests as text frames holding JSON")))
	}
	var req wsRequest
	if err := decodeJSON(data, &req); err != nil {
		return st.q.PushRaw(wsReply(nil, false, nil, err))
	}
	if req.ID == nil || *req.ID == "" {
		return st.q.PushRaw(wsReply(nil, false, nil, fieldErr("id", "id is required (a string the reply will echo)")))
	}
	select {
	case sem <- struct{}{}:
	default:
		return st.q.PushRaw(wsReply(req.ID, false, nil, apiErr(http.StatusTooManyRequests, codes.TooManyRequests,
			fmt.Sprintf("%d requests are in flight on this connection already; wait for their replies", cap(sem)))))
	}
	if st.q.Ended() != "" {
		<-sem
		return false
	}
	// The request's context is the connection's: when the connection goes,
	// so does the request (and its wait for the session).
	go func() {
		defer func() { <-sem }()
		fields, ok, err := s.wsHandle(ctx, st.id, connName, caller, &req)
		st.q.PushRaw(wsReply(req.ID, ok, fields, err))
	}()
	return true
}
