package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

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

	// IdempotencyKey is a command's key across connections; without it the
	// request id is the key, within this connection.
	IdempotencyKey *string `json:"idempotencyKey"`
}

// wsReply encodes the reply event of a request.
func wsReply(id *string, ok bool, fields map[string]any, err error) []byte {
	data := map[string]any{"id": id, "ok": ok}
	for k, v := range fields {
		data[k] = v
	}
	if err != nil {
		var ae *APIError
		if !errors.As(err, &ae) {
			ae = apiErr(http.StatusInternalServerError, codes.Internal, "internal error")
		}
		data["ok"] = false
		data["error"] = ae
		data["status"] = ae.Status
	}
	b, _ := plainjson.Marshal(map[string]any{"event": "reply", "data": data})
	return b
}

func (s *Server) wsAsk(ctx context.Context, id string, msg proto.Message) (proto.Message, error) {
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	res, err := s.rt.Request(ctx, id, msg)
	if err != nil {
		return nil, s.askErr(err)
	}
	return res, nil
}

// wsHandle runs one request; the returned fields join the reply. ok is
// false with a nil error for a command that ran and failed: its result says
// why, as over HTTP. An error is the request's own failure.
// conn names the connection: a request id is a command's idempotency key
// within it.
func (s *Server) wsHandle(ctx context.Context, id, conn string, caller *pb.Caller, r *wsRequest) (fields map[string]any, ok bool, err error) {
	if r.Type == nil {
		return nil, false, fieldErr("type", "type is required: command, prompt, abort, state or ui-response")
	}
	if *r.Type == "command" {
		return s.wsCommand(ctx, id, conn, caller, r)
	}
	fields, err = s.wsRequest(ctx, id, caller, r)
	return fields, err == nil, err
}

// wsCommand runs a surface command: ok is the command's own.
func (s *Server) wsCommand(ctx context.Context, id, conn string, caller *pb.Caller, r *wsRequest) (map[string]any, bool, error) {
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
	key := wsKeyPrefix + conn + ":" + *r.ID
	if r.IdempotencyKey != nil {
		if err := checkIdempotencyKey(*r.IdempotencyKey); err != nil {
			ae := err.(*APIError)
			ae.Fields = []string{"idempotencyKey"}
			return nil, false, ae
		}
		key = clientKeyPrefix + *r.IdempotencyKey
	}
	res, err := s.wsAsk(ctx, id, &pb.RunCommand{Caller: caller, Domain: *r.Domain, Action: *r.Action, Args: r.Args, IdempotencyKey: key})
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
		return nil, apiErr(http.StatusBadRequest, codes.UnknownType, "type "+strings.TrimSpace(*r.Type)+" is not one of command, prompt, abort, state, ui-response", "type")
	}
}
