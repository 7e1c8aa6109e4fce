package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/gateway/guard"
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

// wsRequest is any client→server message; which fields matter depends on type.
type wsRequest struct {
	ID        *string         `json:"id"`
	Type      *string         `json:"type"`
	Domain    *string         `json:"domain"`
	Action    *string         `json:"action"`
	Args      json.RawMessage `json:"args"`
	Message   *string         `json:"message"`
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Op        *string         `json:"op"`
	UIID      *string         `json:"uiId"`
	Confirmed *bool           `json:"confirmed"`
	Cancelled *bool           `json:"cancelled"`
}

// websocket serves GET /api/sessions/{id}/ws: the same frames as SSE, plus
// client requests answered by reply events.
func (s *Server) websocket(c echo.Context) error {
	last, err := lastEventID(c)
	if err != nil {
		return err
	}
	if !websocket.IsWebSocketUpgrade(c.Request()) {
		return apiErr(http.StatusBadRequest, "not_websocket", "this endpoint needs a WebSocket upgrade")
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

	ping := time.NewTicker(s.lim.WSPing)
	defer ping.Stop()
	var shutdownGrace <-chan time.Time
	shutdown := s.shutdown
	buf := make([]*pb.Frame, 0, 64)
	var msg bytes.Buffer
	var data []byte
	write := func(b []byte) bool {
		_ = conn.SetWriteDeadline(time.Now().Add(s.lim.QueueAge))
		return conn.WriteMessage(websocket.TextMessage, b) == nil
	}
	closeWith := func(code int, text string) {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	}
	for {
		select {
		case <-st.q.wake:
			frames, replies, final, cut := st.q.take(buf)
			buf = frames[:0]
			for _, f := range frames {
				msg.Reset()
				data = wire.AppendData(data[:0], f.Event)
				writeWSFrame(&msg, wire.Kind(f.Event), f.Id, data)
				if !write(msg.Bytes()) {
					return nil
				}
			}
			clear(frames)
			for _, r := range replies {
				if !write(r) {
					return nil
				}
			}
			if cut != "" {
				if cut == "slow_consumer" {
					s.rt.Metrics().SlowConsumer("ws")
					s.log.Warn("client cut: too far behind", "session", st.id, "kind", "ws")
					msg.Reset()
					writeWSFrame(&msg, "end", "", endData("slow_consumer"))
					_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
					_ = conn.WriteMessage(websocket.TextMessage, msg.Bytes())
					closeWith(websocket.ClosePolicyViolation, "slow consumer")
				} else {
					closeWith(websocket.CloseGoingAway, "session moved; reconnect with lastEventId")
				}
				return nil
			}
			if final {
				closeWith(websocket.CloseNormalClosure, "session ended")
				return nil
			}
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.lim.QueueAge)); err != nil {
				return nil
			}
		case <-readDone:
			return nil
		case <-shutdown:
			shutdown = nil
			shutdownGrace = time.After(3 * time.Second)
		case <-shutdownGrace:
			msg.Reset()
			writeWSFrame(&msg, "end", "", endData(s.shutdownReason()))
			write(msg.Bytes())
			closeWith(websocket.CloseGoingAway, "shutdown")
			return nil
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), guard.ErrRevoked) {
				msg.Reset()
				writeWSFrame(&msg, "end", "", endData("revoked"))
				write(msg.Bytes())
				closeWith(websocket.ClosePolicyViolation, "credential revoked")
			}
			return nil
		}
	}
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

// wsRead reads client requests until the connection fails. A peer that
// misses two pongs times out here.
func (s *Server) wsRead(ctx context.Context, conn *websocket.Conn, st *stream, caller *pb.Caller, done chan struct{}) {
	defer close(done)
	// Two missed pongs, plus a little grace for the round trip.
	deadline := 2*s.lim.WSPing + min(5*time.Second, s.lim.WSPing/2)
	_ = conn.SetReadDeadline(time.Now().Add(deadline))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(deadline)) })
	sem := make(chan struct{}, s.lim.WSInflight)
	for {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(deadline))
		if typ != websocket.TextMessage {
			st.q.pushReply(wsReply(nil, false, nil, apiErr(http.StatusBadRequest, "invalid_frame", "send requests as text frames holding JSON")))
			continue
		}
		var req wsRequest
		if err := decodeJSON(data, &req); err != nil {
			st.q.pushReply(wsReply(nil, false, nil, err))
			continue
		}
		if req.ID == nil || *req.ID == "" {
			st.q.pushReply(wsReply(nil, false, nil, fieldErr("id", "id is required (a string the reply will echo)")))
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			st.q.pushReply(wsReply(req.ID, false, nil, apiErr(http.StatusTooManyRequests, "too_many_requests",
				"too many requests in flight on this connection")))
			continue
		}
		go func(req wsRequest) {
			defer func() { <-sem }()
			fields, ok, err := s.wsHandle(ctx, st.id, caller, &req)
			st.q.pushReply(wsReply(req.ID, ok, fields, err))
		}(req)
	}
}

func wsReply(id *string, ok bool, fields map[string]any, err error) []byte {
	data := map[string]any{"id": id, "ok": ok}
	for k, v := range fields {
		data[k] = v
	}
	if err != nil {
		var ae *APIError
		if !errors.As(err, &ae) {
			ae = apiErr(http.StatusInternalServerError, "internal", "internal error")
		}
		data["ok"] = false
		data["error"] = ae
		data["status"] = ae.Status
	}
	b, _ := json.Marshal(map[string]any{"event": "reply", "data": data})
	return b
}

func (s *Server) wsAsk(ctx context.Context, id string, msg proto.Message) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, session.DefaultRequestTimeout)
	defer cancel()
	res, err := s.rt.Request(ctx, id, msg)
	if err != nil {
		if ae := fromRequestErr(err); ae != nil {
			return nil, ae
		}
		return nil, err
	}
	return res, nil
}

// wsHandle runs one request; the returned fields join the reply. ok is
// false with a nil error for a command that ran and failed: its result says
// why, as over HTTP. An error is the request's own failure.
func (s *Server) wsHandle(ctx context.Context, id string, caller *pb.Caller, r *wsRequest) (fields map[string]any, ok bool, err error) {
	if r.Type == nil {
		return nil, false, fieldErr("type", "type is required: command, prompt, abort, state or ui-response")
	}
	if *r.Type == "command" {
		return s.wsCommand(ctx, id, caller, r)
	}
	fields, err = s.wsRequest(ctx, id, caller, r)
	return fields, err == nil, err
}

// wsCommand runs a surface command: ok is the command's own.
func (s *Server) wsCommand(ctx context.Context, id string, caller *pb.Caller, r *wsRequest) (map[string]any, bool, error) {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	if str(r.Domain) == "" {
		return nil, false, fieldErr("domain", "domain is required")
	}
	if str(r.Action) == "" {
		return nil, false, fieldErr("action", "action is required")
	}
	res, err := s.wsAsk(ctx, id, &pb.RunCommand{Caller: caller, Domain: *r.Domain, Action: *r.Action, Args: r.Args})
	if err != nil {
		return nil, false, err
	}
	cr := res.(*pb.CommandResult)
	if cr.GetRefused() != nil {
		return nil, false, fromPB(cr.GetRefused())
	}
	return map[string]any{"result": commandJSON(cr)}, cr.GetOk(), nil
}

// wsRequest runs a request other than a command.
func (s *Server) wsRequest(ctx context.Context, id string, caller *pb.Caller, r *wsRequest) (map[string]any, error) {
	switch *r.Type {
	case "prompt":
		if r.Message == nil {
			return nil, fieldErr("message", "message is required")
		}
		res, err := s.wsAsk(ctx, id, &pb.Prompt{Caller: caller, Message: *r.Message})
		if err != nil {
			return nil, err
		}
		pr := res.(*pb.PromptResult)
		if pr.GetError() != nil {
			return nil, fromPB(pr.GetError())
		}
		return map[string]any{"accepted": true, "queued": pr.GetQueued(), "promptId": pr.GetPromptId()}, nil
	case "abort":
		res, err := s.wsAsk(ctx, id, &pb.Abort{Caller: caller})
		if err != nil {
			return nil, err
		}
		if e := res.(*pb.AbortResult).GetError(); e != nil {
			return nil, fromPB(e)
		}
		return map[string]any{"wasBusy": res.(*pb.AbortResult).GetWasBusy()}, nil
	case "state":
		msg, err := stateRequest(caller, r.Key, r.Value, r.Op)
		if err != nil {
			return nil, err
		}
		res, err := s.wsAsk(ctx, id, msg)
		if err != nil {
			return nil, err
		}
		sr := res.(*pb.SetStateResult)
		if sr.GetError() != nil {
			return nil, fromPB(sr.GetError())
		}
		return map[string]any{"rev": sr.GetRev()}, nil
	case "ui-response":
		body := uiResponseBody{ID: r.UIID, Value: nil, Confirmed: r.Confirmed, Cancelled: r.Cancelled}
		if len(r.Value) > 0 {
			var v string
			if json.Unmarshal(r.Value, &v) != nil {
				return nil, fieldErr("value", "value must be a string")
			}
			body.Value = &v
		}
		msg, err := body.request(caller)
		if err != nil {
			if ae, ok := err.(*APIError); ok && len(ae.Fields) == 1 && ae.Fields[0] == "id" {
				return nil, fieldErr("uiId", "uiId (the dialog's id) is required")
			}
			return nil, err
		}
		res, err := s.wsAsk(ctx, id, msg)
		if err != nil {
			return nil, err
		}
		if e := res.(*pb.UIResponseResult).GetError(); e != nil {
			return nil, fromPB(e)
		}
		return nil, nil
	default:
		return nil, apiErr(http.StatusBadRequest, "unknown_type", "type "+strings.TrimSpace(*r.Type)+" is not one of command, prompt, abort, state, ui-response", "type")
	}
}
