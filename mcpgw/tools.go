package mcpgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// toolError is a tool's failure: a tool result with isError, its code and
// message in the text and in structuredContent.error.
type toolError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *toolError) Error() string { return e.Code + ": " + e.Message }

func fail(code, format string, args ...any) *toolError {
	return &toolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// noSession is the answer for a session that does not exist and for one the
// caller does not own: the same answer.
func noSession(id string) *toolError {
	return fail(codes.NotFound, "no session %q (list_sessions lists yours)", id)
}

// result is a tool's answer: v as structuredContent and as JSON text.
func result(v any) *mcp.CallToolResult {
	b, err := plainjson.Marshal(v)
	if err != nil {
		return errorResult(fail(codes.Internal, "the answer does not encode: %v", err))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// errorResult is a failure as a tool result (isError), never a protocol
// error: the model reads it and can act on it.
func errorResult(e *toolError) *mcp.CallToolResult {
	body := map[string]any{"ok": false, "error": e}
	b, _ := plainjson.Marshal(body)
	return &mcp.CallToolResult{IsError: true,
		Content:           []mcp.Content{&mcp.TextContent{Text: e.Code + ": " + e.Message}},
		StructuredContent: json.RawMessage(b)}
}

// caller is the session-facing identity of the request's subject.
func caller(ctx context.Context) *pb.Caller {
	c, _ := callerOf(ctx)
	return &pb.Caller{Subject: c.id.Subject, Via: "mcp"}
}

// callerIdentity is who the tool call acts as, for the access rules.
func callerIdentity(ctx context.Context) identity.Identity {
	c, _ := callerOf(ctx)
	return c.id
}

func subject(ctx context.Context) string {
	c, _ := callerOf(ctx)
	return c.id.Subject
}

// ask sends msg to a session on the caller's behalf, within the request
// timeout; a directory refusal comes back as a toolError.
func (s *Server) ask(ctx context.Context, sessionID string, msg proto.Message) (proto.Message, *toolError) {
	if store.CheckSessionID(sessionID) != nil {
		return nil, noSession(sessionID)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	res, err := s.rt.Request(ctx, sessionID, msg)
	if err != nil {
		return nil, s.requestErr(sessionID, err)
	}
	return res, nil
}

func (s *Server) requestErr(sessionID string, err error) *toolError {
	var quota *surfaced.QuotaError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return noSession(sessionID)
	case errors.Is(err, session.ErrStoreUnavailable), errors.Is(err, store.ErrUnavailable):
		return fail(codes.StoreUnavailable, "the store cannot be used now; nothing was changed, try again")
	case errors.Is(err, store.ErrOutcomeUnknown):
		return fail(codes.OutcomeUnknown, "the store did not answer in time: the change may or may not have been made")
	case errors.As(err, &quota), errors.Is(err, session.ErrTooManySessions):
		return fail(codes.TooManySessions, "the daemon runs as many sessions as it may; try again later")
	case errors.Is(err, session.ErrClosed), errors.Is(err, surfaced.ErrShuttingDown):
		return fail(codes.ShuttingDown, "the daemon is shutting down; try again when it is back")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, session.ErrUnavailable):
		return fail(codes.Unavailable, "the session did not answer in time; try again")
	case errors.Is(err, context.Canceled):
		return fail(codes.Cancelled, "the request was cancelled")
	}
	s.log.Error("mcp request to a session failed", "session", sessionID, "err", err)
	return fail(codes.Internal, "internal error")
}

// refused maps a session's refusal (a result's error): not_found for a
// missing or foreign session, the code and message otherwise.
func refused(sessionID string, e *pb.Error) *toolError {
	if e.GetCode() == codes.NotFound {
		return noSession(sessionID)
	}
	return &toolError{Code: e.GetCode(), Message: e.GetMessage()}
}

// Arguments of the tools. The SDK derives their input schemas and checks
// the arguments against them (a mismatch is a tool result with isError).

type noArgs struct{}

type listSessionsArgs struct {
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many (1 to 500; default 50)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the nextCursor of the previous page"`
}

type createSessionArgs struct {
	Agent string `json:"agent,omitempty" jsonschema:"the agent to run (list_agents); may be absent when the daemon has one"`
	Title string `json:"title,omitempty" jsonschema:"a title for people, at most 200 characters"`
	Cwd   string `json:"cwd,omitempty" jsonschema:"the agent's working directory (an absolute path); default: the agent's"`
}

type sessionArgs struct {
	SessionID string `json:"sessionId" jsonschema:"the session's id (sess_…)"`
}

type promptArgs struct {
	SessionID     string   `json:"sessionId" jsonschema:"the session's id"`
	Message       string   `json:"message" jsonschema:"what to say to the agent"`
	AttachmentIDs []string `json:"attachmentIds,omitempty" jsonschema:"artifacts of the session to attach (att_…)"`
}

type commandArgs struct {
	SessionID      string          `json:"sessionId" jsonschema:"the session's id"`
	Domain         string          `json:"domain" jsonschema:"the surface (get_session lists them with their commands)"`
	Action         string          `json:"action" jsonschema:"the command"`
	Args           json.RawMessage `json:"args,omitempty" jsonschema:"the command's args (an object; its schema is the command's)"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty" jsonschema:"send the same key again to retry without running the command twice"`
}

type snapshotArgs struct {
	SessionID string `json:"sessionId" jsonschema:"the session's id"`
	Domain    string `json:"domain" jsonschema:"the surface"`
}

type dialogArgs struct {
	SessionID string  `json:"sessionId" jsonschema:"the session's id"`
	DialogID  string  `json:"dialogId" jsonschema:"the dialog's id (get_session lists the pending ones; prompt reports them)"`
	Value     *string `json:"value,omitempty" jsonschema:"the answer to a select, input or editor dialog"`
	Confirmed *bool   `json:"confirmed,omitempty" jsonschema:"the answer to a confirm dialog"`
	Cancelled *bool   `json:"cancelled,omitempty" jsonschema:"true: dismiss the dialog"`
}

// tool adds a tool whose handler answers a result or a toolError. Its
// input schema is In's (a json.RawMessage field takes any JSON value).
func tool[In any](s *Server, t *mcp.Tool, h func(ctx context.Context, req *mcp.CallToolRequest, in In) (any, *toolError)) {
	// As JSON, not a *jsonschema.Schema: the SDK reads a 2026-07-28 call's
	// tool schema again on every call (its parameter headers), and JSON
	// reads several times faster than the Schema type encodes.
	t.InputSchema = inputSchema[In]()
	mcp.AddTool(s.mcp, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		out, e := h(ctx, req, in)
		if e != nil {
			return errorResult(e), nil, nil
		}
		if r, ok := out.(*mcp.CallToolResult); ok {
			return r, nil, nil
		}
		return result(out), nil, nil
	})
}

func (s *Server) addTools() {
	tool(s, &mcp.Tool{Name: "list_agents", Description: "List the agents this daemon runs (a session runs one).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.listAgents)
	tool(s, &mcp.Tool{Name: "list_sessions", Description: "List your sessions, newest first.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.listSessions)
	tool(s, &mcp.Tool{Name: "create_session", Description: "Open a new session with an agent; its agent starts now. A browser can open it too."}, s.createSession)
	tool(s, &mcp.Tool{Name: "get_session", Description: "A session's status, its surfaces (with their commands and revs) and the agent's pending dialogs.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.getSession)
	tool(s, &mcp.Tool{Name: "prompt", Description: "Send a message to the session's agent and wait for its answer: the text, the tools it called, errors. " +
		"Ask for progress to see it stream; cancel the request to abort the turn."}, s.prompt)
	tool(s, &mcp.Tool{Name: "abort", Description: "Abort the session's running turn, whoever started it."}, s.abort)
	tool(s, &mcp.Tool{Name: "read_snapshot", Description: "Read a surface's snapshot (what it shows now) and its rev.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.readSnapshot)
	tool(s, &mcp.Tool{Name: "answer_dialog", Description: "Answer a dialog the agent opened (select, confirm, input, editor): give exactly one of value, confirmed, cancelled."}, s.answerDialog)
}

func (s *Server) listAgents(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (any, *toolError) {
	type agent struct {
		Name        string `json:"name"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
	}
	out := []agent{}
	for _, a := range s.rt.AgentsFor(callerIdentity(ctx)) {
		out = append(out, agent{Name: a.Name, Title: a.Title, Description: a.Description})
	}
	return map[string]any{"agents": out}, nil
}

func (s *Server) listSessions(ctx context.Context, _ *mcp.CallToolRequest, in listSessionsArgs) (any, *toolError) {
	if in.Limit < 0 || in.Limit > 500 {
		return nil, fail(codes.InvalidArgs, "limit must be from 1 to 500")
	}
	q := store.ListQuery{Owner: subject(ctx), Cursor: in.Cursor, Limit: in.Limit}
	if q.Limit == 0 {
		q.Limit = 50
	}
	page, next, err := s.rt.Store().ListSessions(ctx, q)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, fail(codes.InvalidArgs, "cursor is not one this server gave out")
	}
	if err != nil {
		return nil, s.requestErr("", err)
	}
	type item struct {
		SessionID string `json:"sessionId"`
		Agent     string `json:"agent"`
		Title     string `json:"title,omitempty"`
		Status    string `json:"status"`
		UpdatedAt string `json:"updatedAt"`
	}
	out := []item{}
	for _, p := range page {
		out = append(out, item{SessionID: p.ID, Agent: p.Agent, Title: p.Title, Status: p.Status, UpdatedAt: p.Updated.UTC().Format(time.RFC3339)})
	}
	res := map[string]any{"sessions": out}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

func (s *Server) createSession(ctx context.Context, _ *mcp.CallToolRequest, in createSessionArgs) (any, *toolError) {
	if len(in.Title) > 200 {
		return nil, fail(codes.InvalidArgs, "title must be at most 200 characters")
	}
	id, err := s.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: subject(ctx), Groups: callerIdentity(ctx).Groups, Agent: in.Agent, Cwd: in.Cwd, Title: in.Title})
	var quota *surfaced.QuotaError
	switch {
	case errors.As(err, &quota):
		return nil, fail(codes.TooManySessions, "%s", strings.TrimPrefix(err.Error(), "surfaced: "))
	case errors.Is(err, surfaced.ErrNoAgent), errors.Is(err, surfaced.ErrAgentChoice), errors.Is(err, surfaced.ErrNoAgents):
		return nil, fail(codes.InvalidAgent, "%v", err)
	case errors.Is(err, surfaced.ErrBadCwd):
		return nil, fail(codes.InvalidCwd, "%v", err)
	case err != nil:
		return nil, s.requestErr("", err)
	}
	return map[string]any{"sessionId": id, "resources": sessionURI(id)}, nil
}

func (s *Server) getSession(ctx context.Context, _ *mcp.CallToolRequest, in sessionArgs) (any, *toolError) {
	res, e := s.ask(ctx, in.SessionID, &pb.GetSummary{Caller: caller(ctx)})
	if e != nil {
		return nil, e
	}
	sum := res.(*pb.SessionSummary)
	if sum.GetError() != nil {
		return nil, refused(in.SessionID, sum.GetError())
	}
	type surfaceOut struct {
		Domain    string   `json:"domain"`
		Commands  []string `json:"commands"`
		Rev       uint64   `json:"rev"`
		Available bool     `json:"available"`
		URI       string   `json:"uri"`
	}
	surfaces := []surfaceOut{}
	for _, si := range sum.GetSurfaces() {
		cmds := si.GetCommands()
		if cmds == nil {
			cmds = []string{}
		}
		surfaces = append(surfaces, surfaceOut{Domain: si.GetDomain(), Commands: cmds, Rev: si.GetRev(), Available: si.GetAvailable(),
			URI: surfaceURI(in.SessionID, si.GetDomain())})
	}
	dialogs, de := s.pendingDialogs(ctx, in.SessionID)
	if de != nil {
		return nil, de
	}
	out := map[string]any{"sessionId": sum.GetSessionId(), "agent": sum.GetAgent(), "title": sum.GetTitle(),
		"status": sum.GetStatus(), "busy": sum.GetBusy(), "queued": sum.GetQueued(), "surfaces": surfaces,
		"dialogs": dialogs, "transcript": transcriptURI(in.SessionID)}
	if sum.GetCode() != "" {
		out["code"], out["detail"] = sum.GetCode(), sum.GetDetail()
	}
	return out, nil
}

func (s *Server) abort(ctx context.Context, _ *mcp.CallToolRequest, in sessionArgs) (any, *toolError) {
	res, e := s.ask(ctx, in.SessionID, &pb.Abort{Caller: caller(ctx)})
	if e != nil {
		return nil, e
	}
	r := res.(*pb.AbortResult)
	if r.GetError() != nil {
		return nil, refused(in.SessionID, r.GetError())
	}
	return map[string]any{"ok": true, "wasBusy": r.GetWasBusy()}, nil
}

// runCommandTool is run_command, which the middleware serves (commands.go):
// the hot path of a client that drives surfaces, kept off the SDK's
// per-call schema work (it reads a registered tool's schema again on every
// 2026-07-28 call, and decodes and re-encodes the arguments).
var runCommandTool = &mcp.Tool{Name: "run_command", Description: "Run a surface command, the same a browser's button runs: {sessionId, domain, action, args} → " +
	"the command's result and the surface's new rev. A browser watching the session sees the change at once.",
	InputSchema: inputSchema[commandArgs]()}

// inputSchema is In's schema as JSON (a json.RawMessage field takes any
// JSON value).
func inputSchema[In any]() json.RawMessage {
	sch, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcpgw: the input schema of %T: %v", *new(In), err))
	}
	raw, err := plainjson.Marshal(sch)
	if err != nil {
		panic(fmt.Sprintf("mcpgw: the input schema of %T: %v", *new(In), err))
	}
	return raw
}

// runCommand serves run_command: its arguments checked as its schema says
// (the required fields, their types, no others), then the command.
func (s *Server) runCommand(ctx context.Context, raw json.RawMessage) *mcp.CallToolResult {
	var in commandArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
		dec = json.NewDecoder(bytes.NewReader(raw))
	}
	if err := dec.Decode(&in); err != nil {
		return errorResult(fail(codes.InvalidArgs, "run_command: the arguments do not fit its schema: %v", err))
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"sessionId", in.SessionID}, {"domain", in.Domain}, {"action", in.Action}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return errorResult(fail(codes.InvalidArgs, "run_command: %s required", strings.Join(missing, ", ")))
	}
	out, e := s.command(ctx, in.SessionID, in.Domain, in.Action, in.Args, in.IdempotencyKey)
	if e != nil {
		return errorResult(e)
	}
	return out.(*mcp.CallToolResult)
}

// command runs a surface command and answers its result and the new rev.
// A command that failed is a toolError with the command's code; nothing of
// it was applied.
func (s *Server) command(ctx context.Context, sessionID, domain, action string, args json.RawMessage, key string) (any, *toolError) {
	if domain == "" || action == "" {
		return nil, fail(codes.InvalidArgs, "domain and action are required")
	}
	if args = bytes.TrimSpace(args); len(args) > 0 && string(args) != "null" && args[0] != '{' {
		return nil, fail(codes.InvalidArgs, "args must be a JSON object")
	}
	if len(key) > 200 {
		return nil, fail(codes.InvalidArgs, "idempotencyKey must be at most 200 characters")
	}
	res, e := s.ask(ctx, sessionID, &pb.RunCommand{Caller: caller(ctx), Domain: domain, Action: action, Args: args, IdempotencyKey: key,
		DeadlineMs: deadlineMs(ctx, s.opts.RequestTimeout)})
	if e != nil {
		return nil, e
	}
	r := res.(*pb.CommandResult)
	if r.GetRefused() != nil {
		return nil, refused(sessionID, r.GetRefused())
	}
	if !r.GetOk() {
		return nil, &toolError{Code: r.GetError().GetCode(), Message: r.GetError().GetMessage()}
	}
	out := map[string]any{"ok": true, "rev": r.GetRev()}
	if len(r.GetData()) > 0 {
		out["data"] = json.RawMessage(r.GetData())
	}
	if r.GetReplayed() {
		out["replayed"] = true
	}
	cr := result(out)
	cr.Content = append(cr.Content, s.artifactLinks(ctx, sessionID, r.GetData())...)
	return cr, nil
}

// deadlineMs is when the caller stops waiting for a command, in Unix
// milliseconds: the request timeout, or the request's own deadline when it
// comes first.
func deadlineMs(ctx context.Context, timeout time.Duration) int64 {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d.UnixMilli()
}

func (s *Server) readSnapshot(ctx context.Context, _ *mcp.CallToolRequest, in snapshotArgs) (any, *toolError) {
	snap, rev, e := s.snapshot(ctx, in.SessionID, in.Domain)
	if e != nil {
		return nil, e
	}
	return map[string]any{"domain": in.Domain, "rev": rev, "snapshot": snap, "uri": surfaceURI(in.SessionID, in.Domain)}, nil
}

// snapshot reads a surface's snapshot and rev.
func (s *Server) snapshot(ctx context.Context, sessionID, domain string) (json.RawMessage, uint64, *toolError) {
	res, e := s.ask(ctx, sessionID, &pb.GetState{Caller: caller(ctx)})
	if e != nil {
		return nil, 0, e
	}
	r := res.(*pb.StateEntries)
	if r.GetError() != nil {
		return nil, 0, refused(sessionID, r.GetError())
	}
	key := "surface:" + domain
	for _, kv := range r.GetEntries() {
		if kv.GetKey() == key && !kv.GetDeleted() {
			return kv.GetValue(), kv.GetRev(), nil
		}
	}
	return nil, 0, fail(codes.SurfaceNotRegistered, "session %q has no surface %q", sessionID, domain)
}

func (s *Server) answerDialog(ctx context.Context, _ *mcp.CallToolRequest, in dialogArgs) (any, *toolError) {
	if in.DialogID == "" {
		return nil, fail(codes.InvalidArgs, "dialogId is required")
	}
	msg := &pb.UIResponse{Caller: caller(ctx), Id: in.DialogID}
	n := 0
	if in.Value != nil {
		n++
		msg.Which, msg.Value = "value", *in.Value
	}
	if in.Confirmed != nil {
		n++
		msg.Which, msg.Confirmed = "confirmed", *in.Confirmed
	}
	if in.Cancelled != nil {
		if !*in.Cancelled {
			return nil, fail(codes.InvalidArgs, "cancelled may only be true")
		}
		n++
		msg.Which = codes.Cancelled
	}
	if n != 1 {
		return nil, fail(codes.InvalidArgs, "give exactly one of value, confirmed, cancelled")
	}
	res, e := s.ask(ctx, in.SessionID, msg)
	if e != nil {
		return nil, e
	}
	if r := res.(*pb.UIResponseResult); r.GetError() != nil {
		return nil, refused(in.SessionID, r.GetError())
	}
	return map[string]any{"ok": true}, nil
}
