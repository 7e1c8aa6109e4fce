package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

func (s *Server) caller(c echo.Context) *pb.Caller {
	return &pb.Caller{Subject: guard.IdentityOf(c).Subject, Via: "browser"}
}

// ask sends a request to a session on behalf of the HTTP request.
func (s *Server) ask(c echo.Context, msg proto.Message) (proto.Message, error) {
	ctx, cancel := s.requestContext(c.Request().Context())
	defer cancel()
	res, err := s.rt.Request(ctx, c.Param("id"), msg)
	if err != nil {
		return nil, s.askErr(err)
	}
	return res, nil
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func (s *Server) listAgents(c echo.Context) error {
	type agent struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		// Panels: the panel module URL of each domain that has one.
		Panels map[string]string `json:"panels"`
	}
	out := []agent{}
	for _, a := range s.rt.AgentsFor(guard.IdentityOf(c)) {
		title := a.Title
		if title == "" {
			title = a.Name
		}
		out = append(out, agent{Name: a.Name, Title: title, Description: a.Description, Panels: s.panelURLs(a.Name)})
	}
	return c.JSON(http.StatusOK, map[string]any{"agents": out})
}

func (s *Server) createSession(c echo.Context) error {
	var body struct {
		Agent *string `json:"agent"`
		Cwd   *string `json:"cwd"`
		Title *string `json:"title"`
	}
	if err := decodeBody(c, s.lim.BodyBytes, &body); err != nil {
		return err
	}
	if s.isClosing() {
		return errShuttingDown()
	}
	who := guard.IdentityOf(c)
	opts := surfaced.CreateOptions{Owner: who.Subject, Groups: who.Groups}
	if body.Agent != nil {
		opts.Agent = *body.Agent
	}
	if body.Cwd != nil {
		opts.Cwd = *body.Cwd
		if opts.Cwd == "" {
			return fieldErr("cwd", "cwd must not be empty when given")
		}
	}
	if body.Title != nil {
		if len(*body.Title) > 200 {
			return fieldErr("title", "title must be at most 200 characters")
		}
		opts.Title = *body.Title
	}
	id, err := s.rt.CreateSession(c.Request().Context(), opts)
	var quota *surfaced.QuotaError
	switch {
	case errors.As(err, &quota):
		if quota.Scope == surfaced.QuotaTotal {
			return apiErr(http.StatusTooManyRequests, codes.TooManySessions, fmt.Sprintf("this daemon already runs %d sessions", quota.Count))
		}
		return apiErr(http.StatusTooManyRequests, codes.TooManySessions, fmt.Sprintf("you already have %d open sessions; delete one first", quota.Count))
	case errors.Is(err, surfaced.ErrNoAgent), errors.Is(err, surfaced.ErrAgentChoice), errors.Is(err, surfaced.ErrNoAgents):
		return apiErr(http.StatusBadRequest, codes.InvalidAgent, sentence(err), "agent")
	case errors.Is(err, surfaced.ErrBadCwd):
		return apiErr(http.StatusBadRequest, codes.InvalidCwd, sentence(err), "cwd")
	case err != nil:
		return s.askErr(err)
	}
	return c.JSON(http.StatusCreated, map[string]string{"sessionId": id})
}

func sentence(err error) string {
	m := err.Error()
	if m == "" {
		return m
	}
	return strings.ToUpper(m[:1]) + m[1:] + "."
}

func (s *Server) listSessions(c echo.Context) error {
	q := store.ListQuery{Owner: guard.IdentityOf(c).Subject, Cursor: c.QueryParam("cursor")}
	if l := c.QueryParam("limit"); l != "" {
		var n int
		if _, err := fmt.Sscanf(l, "%d", &n); err != nil || n < 1 || n > 500 || fmt.Sprint(n) != l {
			return apiErr(http.StatusBadRequest, codes.InvalidField, "limit must be a number from 1 to 500", "limit")
		}
		q.Limit = n
	}
	page, next, err := s.rt.Store().ListSessions(c.Request().Context(), q)
	if errors.Is(err, store.ErrBadCursor) {
		return apiErr(http.StatusBadRequest, codes.InvalidField, "cursor is not one this server gave out", "cursor")
	}
	if err != nil {
		return err
	}
	type item struct {
		SessionID string `json:"sessionId"`
		Agent     string `json:"agent"`
		Title     string `json:"title"`
		Status    string `json:"status"`
		Cwd       string `json:"cwd"`
		CreatedAt string `json:"createdAt"`
		UpdatedAt string `json:"updatedAt"`
	}
	out := struct {
		Sessions   []item `json:"sessions"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{Sessions: []item{}, NextCursor: next}
	live := map[string]bool{}
	for _, id := range s.rt.LiveSessions() {
		live[id] = true
	}
	clustered := s.rt.Clustered()
	for _, p := range page {
		status := p.Status
		// On one node, a session that is not live here has no agent. In a
		// cluster it may live on another node: the stored status stands.
		if status != session.StatusEnded && !live[p.ID] && !clustered {
			status = session.StatusIdle
		}
		out.Sessions = append(out.Sessions, item{SessionID: p.ID, Agent: p.Agent, Title: p.Title, Status: status, Cwd: p.Cwd,
			CreatedAt: p.Created.UTC().Format(time.RFC3339Nano), UpdatedAt: p.Updated.UTC().Format(time.RFC3339Nano)})
	}
	return c.JSON(http.StatusOK, out)
}

type surfaceJSON struct {
	Domain    string   `json:"domain"`
	Commands  []string `json:"commands"`
	Hosted    string   `json:"hosted"`
	Rev       uint64   `json:"rev"`
	Available bool     `json:"available"`
}

func surfacesJSON(in []*pb.SurfaceInfo) []surfaceJSON {
	out := make([]surfaceJSON, 0, len(in))
	for _, s := range in {
		cmds := s.GetCommands()
		if cmds == nil {
			cmds = []string{}
		}
		out = append(out, surfaceJSON{Domain: s.GetDomain(), Commands: cmds, Hosted: s.GetHosted(), Rev: s.GetRev(), Available: s.GetAvailable()})
	}
	return out
}

func (s *Server) getSession(c echo.Context) error {
	res, err := s.ask(c, &pb.GetSummary{Caller: s.caller(c)})
	if err != nil {
		return err
	}
	sum := res.(*pb.SessionSummary)
	if sum.GetError() != nil {
		return fromPB(sum.GetError())
	}
	return c.JSON(http.StatusOK, map[string]any{
		"sessionId": sum.GetSessionId(), "agent": sum.GetAgent(), "title": sum.GetTitle(),
		"status": sum.GetStatus(), "busy": sum.GetBusy(), "queued": sum.GetQueued(), "cwd": sum.GetCwd(),
		"createdAt": rfc3339(sum.GetCreatedAtMs()), "updatedAt": rfc3339(sum.GetUpdatedAtMs()),
		"surfaces": surfacesJSON(sum.GetSurfaces()), "code": sum.GetCode(), "detail": sum.GetDetail(),
		"images": sum.GetImages(), "node": sum.GetNode(),
	})
}

func (s *Server) deleteSession(c echo.Context) error {
	switch c.QueryParam("purge") {
	case "", "false":
	case "true":
		return s.purgeSession(c)
	default:
		return fieldErr("purge", `purge must be "true" or "false"`)
	}
	res, err := s.ask(c, &pb.Stop{Caller: s.caller(c), Reason: "stopped"})
	if err != nil {
		return err
	}
	if e := res.(*pb.StopResult).GetError(); e != nil {
		return fromPB(e)
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// purgeSession deletes the session with everything of it (DELETE
// ?purge=true): its clients get end{reason:"deleted"}, and every later
// request about it answers 404.
func (s *Server) purgeSession(c echo.Context) error {
	if err := s.ownSession(c); err != nil {
		return err
	}
	ctx, cancel := s.requestContext(c.Request().Context())
	defer cancel()
	if err := s.rt.PurgeSession(ctx, c.Param("id")); errors.Is(err, surfaced.ErrSessionNotFound) {
		return notFound()
	} else if err != nil {
		return s.askErr(err)
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) getMessages(c echo.Context) error {
	res, err := s.ask(c, &pb.GetMessages{Caller: s.caller(c)})
	if err != nil {
		return err
	}
	tr := res.(*pb.Transcript)
	if tr.GetError() != nil {
		return fromPB(tr.GetError())
	}
	type msg struct {
		Role       string          `json:"role"`
		Text       string          `json:"text,omitempty"`
		ToolCallID string          `json:"toolCallId,omitempty"`
		ToolName   string          `json:"toolName,omitempty"`
		Args       json.RawMessage `json:"args,omitempty"`
		Result     json.RawMessage `json:"result,omitempty"`
		IsError    bool            `json:"isError,omitempty"`
		Via        string          `json:"via,omitempty"`
		TurnID     uint64          `json:"turnId"`
		PromptID   uint64          `json:"promptId,omitempty"`
		// The artifacts a user message attached, by id.
		AttachmentIDs []string `json:"attachmentIds,omitempty"`
		At            string   `json:"at"`
	}
	out := make([]msg, 0, len(tr.GetEntries()))
	for _, e := range tr.GetEntries() {
		out = append(out, msg{Role: e.GetRole(), Text: e.GetText(), ToolCallID: e.GetToolCallId(), ToolName: e.GetToolName(),
			Args: json.RawMessage(e.GetToolArgs()), Result: json.RawMessage(e.GetToolResult()), IsError: e.GetIsError(),
			Via: e.GetVia(), TurnID: e.GetTurnId(), PromptID: e.GetPromptId(), AttachmentIDs: e.GetAttachmentIds(), At: rfc3339(e.GetAtMs())})
	}
	return c.JSON(http.StatusOK, map[string]any{"messages": out})
}

type imageJSON struct {
	MimeType *string `json:"mimeType"`
	Data     *string `json:"data"`
}

func (s *Server) prompt(c echo.Context) error {
	var body struct {
		Message       *string     `json:"message"`
		Images        []imageJSON `json:"images"`
		AttachmentIDs []string    `json:"attachmentIds"`
	}
	if err := decodeBody(c, s.lim.PromptBodyBytes, &body); err != nil {
		return err
	}
	if body.Message == nil {
		return fieldErr("message", "message is required")
	}
	msg := &pb.Prompt{Caller: s.caller(c), Message: *body.Message}
	attached, err := s.attachments(c, body.AttachmentIDs)
	if err != nil {
		return err
	}
	for _, a := range attached {
		msg.Attachments = append(msg.Attachments, artifact.ToProto(a))
	}
	for i, im := range body.Images {
		field := fmt.Sprintf("images[%d]", i)
		if im.MimeType == nil || !strings.HasPrefix(*im.MimeType, "image/") {
			return fieldErr(field+".mimeType", field+".mimeType must be an image/* media type")
		}
		if im.Data == nil || *im.Data == "" {
			return fieldErr(field+".data", field+".data must be base64 image data")
		}
		if _, err := base64.StdEncoding.DecodeString(*im.Data); err != nil {
			return fieldErr(field+".data", field+".data is not valid base64")
		}
		msg.Images = append(msg.Images, &pb.Image{MimeType: *im.MimeType, Data: *im.Data})
	}
	res, err := s.ask(c, msg)
	if err != nil {
		return err
	}
	r := res.(*pb.PromptResult)
	if r.GetError() != nil {
		ae := fromPB(r.GetError())
		if ae.Code == codes.EmptyPrompt {
			ae.Fields = []string{"message"}
		}
		return ae
	}
	return c.JSON(http.StatusAccepted, map[string]any{"accepted": true, "queued": r.GetQueued(), "promptId": r.GetPromptId()})
}

func (s *Server) abort(c echo.Context) error {
	var body struct{}
	if err := decodeBody(c, s.lim.BodyBytes, &body); err != nil {
		return err
	}
	res, err := s.ask(c, &pb.Abort{Caller: s.caller(c)})
	if err != nil {
		return err
	}
	r := res.(*pb.AbortResult)
	if r.GetError() != nil {
		return fromPB(r.GetError())
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true, "wasBusy": r.GetWasBusy()})
}

func (s *Server) listSurfaces(c echo.Context) error {
	res, err := s.ask(c, &pb.ListSurfaces{Caller: s.caller(c)})
	if err != nil {
		return err
	}
	r := res.(*pb.SurfaceList)
	if r.GetError() != nil {
		return fromPB(r.GetError())
	}
	return c.JSON(http.StatusOK, map[string]any{"surfaces": surfacesJSON(r.GetSurfaces())})
}

func (s *Server) runCommand(c echo.Context) error {
	var body struct {
		Args json.RawMessage `json:"args"`
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	if err := decodeBody(c, s.lim.BodyBytes, &body); err != nil {
		return err
	}
	res, err := s.ask(c, &pb.RunCommand{Caller: s.caller(c), Domain: c.Param("domain"), Action: c.Param("action"), Args: body.Args,
		IdempotencyKey: key})
	if err != nil {
		return err
	}
	r := res.(*pb.CommandResult)
	if r.GetReplayed() {
		c.Response().Header().Set(HeaderIdempotentReplayed, "true")
	}
	return writeCommandResult(c, r)
}

func commandJSON(r *pb.CommandResult) map[string]any {
	var out map[string]any
	if r.GetOk() {
		out = map[string]any{"ok": true}
		if len(r.GetData()) > 0 {
			out["data"] = json.RawMessage(r.GetData())
		}
	} else {
		out = map[string]any{"ok": false, "error": map[string]string{"code": r.GetError().GetCode(), "message": r.GetError().GetMessage()}}
	}
	if r.GetReplayed() {
		out["replayed"] = true
	}
	return out
}

func writeCommandResult(c echo.Context, r *pb.CommandResult) error {
	if r.GetRefused() != nil {
		return fromPB(r.GetRefused())
	}
	return c.JSON(http.StatusOK, commandJSON(r))
}

func (s *Server) setState(c echo.Context) error {
	var body struct {
		Key   *string         `json:"key"`
		Value json.RawMessage `json:"value"`
		Op    *string         `json:"op"`
	}
	if err := decodeBody(c, s.lim.BodyBytes, &body); err != nil {
		return err
	}
	msg, err := stateRequest(s.caller(c), body.Key, body.Value, body.Op)
	if err != nil {
		return err
	}
	res, err := s.ask(c, msg)
	if err != nil {
		return err
	}
	r := res.(*pb.SetStateResult)
	if r.GetError() != nil {
		ae := fromPB(r.GetError())
		if ae.Status == http.StatusBadRequest {
			ae.Fields = []string{map[string]string{codes.InvalidKey: "key"}[ae.Code]}
			if ae.Fields[0] == "" {
				ae.Fields = []string{"value"}
			}
		}
		return ae
	}
	return c.JSON(http.StatusOK, map[string]any{"ok": true, "rev": r.GetRev()})
}

// stateRequest validates a state write (HTTP and WebSocket alike).
func stateRequest(caller *pb.Caller, key *string, value json.RawMessage, op *string) (*pb.SetState, error) {
	if key == nil || *key == "" {
		return nil, fieldErr("key", "key is required")
	}
	o := "set"
	if op != nil {
		o = *op
	}
	switch o {
	case "set":
		if value == nil {
			return nil, fieldErr("value", "value is required to set a key (use op:\"delete\" to delete it)")
		}
		return &pb.SetState{Caller: caller, Key: *key, Value: value}, nil
	case "delete":
		return &pb.SetState{Caller: caller, Key: *key, Delete: true}, nil
	default:
		return nil, fieldErr("op", `op must be "set" or "delete"`)
	}
}

func (s *Server) getState(c echo.Context) error {
	res, err := s.ask(c, &pb.GetState{Caller: s.caller(c)})
	if err != nil {
		return err
	}
	r := res.(*pb.StateEntries)
	if r.GetError() != nil {
		return fromPB(r.GetError())
	}
	type entry struct {
		Value json.RawMessage `json:"value"`
		Rev   uint64          `json:"rev"`
	}
	out := map[string]entry{}
	for _, e := range r.GetEntries() {
		if !e.GetDeleted() {
			out[e.GetKey()] = entry{Value: e.GetValue(), Rev: e.GetRev()}
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": out})
}

type uiResponseBody struct {
	ID        *string `json:"id"`
	Value     *string `json:"value"`
	Confirmed *bool   `json:"confirmed"`
	Cancelled *bool   `json:"cancelled"`
}

func (b uiResponseBody) request(caller *pb.Caller) (*pb.UIResponse, error) {
	if b.ID == nil || *b.ID == "" {
		return nil, fieldErr("id", "id is required")
	}
	n := 0
	msg := &pb.UIResponse{Caller: caller, Id: *b.ID}
	if b.Value != nil {
		n++
		msg.Which, msg.Value = "value", *b.Value
	}
	if b.Confirmed != nil {
		n++
		msg.Which, msg.Confirmed = "confirmed", *b.Confirmed
	}
	if b.Cancelled != nil {
		if !*b.Cancelled {
			return nil, fieldErr("cancelled", "cancelled may only be true")
		}
		n++
		msg.Which = "cancelled"
	}
	if n != 1 {
		return nil, apiErr(http.StatusBadRequest, codes.InvalidField, "give exactly one of value, confirmed, cancelled", "value", "confirmed", "cancelled")
	}
	return msg, nil
}

func (s *Server) uiResponse(c echo.Context) error {
	var body uiResponseBody
	if err := decodeBody(c, s.lim.BodyBytes, &body); err != nil {
		return err
	}
	msg, err := body.request(s.caller(c))
	if err != nil {
		return err
	}
	res, err := s.ask(c, msg)
	if err != nil {
		return err
	}
	if e := res.(*pb.UIResponseResult).GetError(); e != nil {
		return fromPB(e)
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}
