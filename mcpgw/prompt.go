package mcpgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// maxAttachments bounds a prompt's attachments, as the HTTP API does.
const maxAttachments = 16

// abortGrace bounds how long a cancelled prompt waits for its turn to end
// after the abort (or, queued, for its turn to start and be aborted).
const abortGrace = 30 * time.Second

// events is the frames a prompt's subscription received, in order, until
// the prompt's handler takes them.
type events struct {
	mu     sync.Mutex
	list   []*pb.Event
	ended  bool // the session ended the subscription (or went away)
	notify chan struct{}
}

func newEvents() *events { return &events{notify: make(chan struct{}, 1)} }

func (q *events) sink() *sink {
	return &sink{
		frames: func(frames []*pb.Frame, final bool) {
			q.mu.Lock()
			for _, f := range frames {
				q.list = append(q.list, f.GetEvent())
			}
			q.ended = q.ended || final
			q.mu.Unlock()
			q.wake()
		},
		gone: func() {
			q.mu.Lock()
			q.ended = true
			q.mu.Unlock()
			q.wake()
		},
	}
}

func (q *events) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *events) take() ([]*pb.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.list
	q.list = nil
	return l, q.ended
}

// toolCall is a tool the agent called during the turn.
type toolCall struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// answer is the prompt tool's result: what the turn that answered the
// prompt said and did.
type answer struct {
	SessionID  string      `json:"sessionId"`
	PromptID   uint64      `json:"promptId"`
	TurnID     uint64      `json:"turnId,omitempty"`
	StopReason string      `json:"stopReason"`
	Text       string      `json:"text"`
	ToolCalls  []*toolCall `json:"toolCalls"`
	Errors     []string    `json:"errors,omitempty"`
	// Dialogs the agent opened that still wait for an answer.
	Dialogs   []dialog `json:"dialogs,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
}

// turnFollower follows the turn that answers one prompt through the
// session's frames, and reports its progress to the client.
type turnFollower struct {
	ans     answer
	started bool
	done    bool
	calls   map[string]*toolCall
	dialogs map[string]dialog
	// progress reports a step (nil: the client asked for none).
	progress func(msg string)
}

func (f *turnFollower) ours(ids []uint64) bool {
	return f.ans.PromptID != 0 && slices.Contains(ids, f.ans.PromptID)
}

// take reads one event of the session.
func (f *turnFollower) take(ev *pb.Event) {
	if u := ev.GetUiRequest(); u != nil && f.started {
		if u.GetResolved() {
			delete(f.dialogs, u.GetId())
		} else if d, ok := dialogOf(u); ok {
			f.dialogs[d.ID] = d
			f.report("dialog %s (%s): %s — answer it with answer_dialog", d.ID, d.Method, firstOf(d.Title, d.Message))
		}
		return
	}
	if a := ev.GetArtifact(); a != nil && f.started && a.GetEvent() == "added" {
		f.ans.Artifacts = append(f.ans.Artifacts, a.GetArtifact().GetId())
		return
	}
	c := ev.GetChat()
	if c == nil {
		return
	}
	switch {
	case c.GetTurnStart() != nil:
		if f.ours(c.GetTurnStart().GetPromptIds()) {
			f.started = true
			f.ans.TurnID = c.GetTurnStart().GetTurnId()
			f.report("the agent is answering (turn %d)", f.ans.TurnID)
		}
	case !f.started:
	case c.GetPartDelta() != nil:
		if d := c.GetPartDelta(); d.GetKind() == pb.PartKind_PART_KIND_TEXT {
			f.ans.Text += d.GetDelta()
			f.report("%s", d.GetDelta())
		}
	case c.GetToolInput() != nil:
		t := c.GetToolInput()
		tc := &toolCall{ID: t.GetToolCallId(), Name: t.GetToolName(), Input: rawJSON(t.GetInput())}
		f.calls[tc.ID] = tc
		f.ans.ToolCalls = append(f.ans.ToolCalls, tc)
		f.report("calling %s", tc.Name)
	case c.GetToolOutput() != nil:
		if o := c.GetToolOutput(); !o.GetPreliminary() {
			if tc := f.calls[o.GetToolCallId()]; tc != nil {
				tc.Output = rawJSON(o.GetOutput())
				f.report("%s done", tc.Name)
			}
		}
	case c.GetToolError() != nil:
		e := c.GetToolError()
		if tc := f.calls[e.GetToolCallId()]; tc != nil {
			tc.Error = firstOf(e.GetErrorText(), e.GetErrorCode())
			tc.Output = rawJSON(e.GetOutput())
			f.report("%s failed: %s", tc.Name, tc.Error)
		}
	case c.GetTurnError() != nil:
		f.ans.Errors = append(f.ans.Errors, c.GetTurnError().GetErrorText())
	case c.GetTurnFinish() != nil:
		if fin := c.GetTurnFinish(); f.ours(fin.GetPromptIds()) {
			f.done = true
			f.ans.StopReason = fin.GetStopReason()
		}
	}
}

func (f *turnFollower) report(format string, args ...any) {
	if f.progress != nil {
		f.progress(fmt.Sprintf(format, args...))
	}
}

func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return json.RawMessage(b)
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func newTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}

// prompt sends a message to the session's agent and answers when the turn
// that answers it ends: its text, its tool calls, its errors. With a
// progress token every step streams as a progress notification. A
// cancelled request aborts the turn (once it runs, when the prompt waited
// in the inbox).
func (s *Server) prompt(ctx context.Context, req *mcp.CallToolRequest, in promptArgs) (any, *toolError) {
	msg := &pb.Prompt{Caller: caller(ctx), Message: in.Message, ClientTag: newTag()}
	if e := s.attach(ctx, in.SessionID, in.AttachmentIDs, msg); e != nil {
		return nil, e
	}
	q := newEvents()
	stop, e := s.watch(ctx, in.SessionID, subject(ctx), pb.SubscribeFrom_SUBSCRIBE_FROM_NOW, q.sink())
	if e != nil {
		return nil, e
	}
	res, e := s.ask(ctx, in.SessionID, msg)
	if e != nil {
		stop()
		return nil, e
	}
	r := res.(*pb.PromptResult)
	if r.GetError() != nil {
		stop()
		return nil, refused(in.SessionID, r.GetError())
	}
	f := &turnFollower{calls: map[string]*toolCall{}, dialogs: map[string]dialog{}, ans: answer{SessionID: in.SessionID, PromptID: r.GetPromptId(), ToolCalls: []*toolCall{}}}
	if token := req.Params.GetProgressToken(); token != nil {
		n := 0.0
		f.progress = func(m string) {
			n++
			// Best effort: a client that went away learns nothing more.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: m})
		}
	}
	deadline := make(chan struct{})
	t := s.opts.Clock.AfterFunc(s.opts.TurnTimeout, func() { close(deadline) })
	defer t.Stop()
	for {
		evs, ended := q.take()
		for _, ev := range evs {
			f.take(ev)
		}
		if f.done {
			stop()
			return s.answerOf(ctx, f), nil
		}
		if ended {
			stop()
			return nil, fail(codes.SessionEnded, "session %q ended (or went away) before the turn ended", in.SessionID)
		}
		select {
		case <-q.notify:
		case <-deadline:
			stop()
			f.ans.StopReason = "timeout"
			f.ans.Errors = append(f.ans.Errors, fmt.Sprintf("the turn did not end within %s (mcp.turn_timeout); it goes on, get_session and the transcript show it", s.opts.TurnTimeout))
			return s.answerOf(ctx, f), nil
		case <-ctx.Done():
			// The client cancelled: its turn is aborted, now or when it
			// starts; the request's answer goes nowhere.
			go s.abortWhenStarted(in.SessionID, caller(ctx), q, f, stop)
			return nil, fail(codes.Cancelled, "the prompt was cancelled; its turn is aborted")
		}
	}
}

// abortWhenStarted aborts a cancelled prompt's turn: at once when it runs,
// else when it starts. It lets go of the subscription when the turn ended,
// or after abortGrace.
func (s *Server) abortWhenStarted(sessionID string, c *pb.Caller, q *events, f *turnFollower, stop func()) {
	defer stop()
	f.progress = nil
	grace := make(chan struct{})
	t := s.opts.Clock.AfterFunc(abortGrace, func() { close(grace) })
	defer t.Stop()
	aborted := false
	for {
		evs, ended := q.take()
		for _, ev := range evs {
			f.take(ev)
		}
		if f.done || ended {
			return
		}
		if f.started && !aborted {
			aborted = true
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
			res, e := s.ask(ctx, sessionID, &pb.Abort{Caller: c})
			cancel()
			if e != nil {
				s.log.Warn("mcp: the abort of a cancelled prompt did not reach the session", "session", sessionID, "code", e.Code, "err", e.Message)
			} else if r := res.(*pb.AbortResult); r.GetError() != nil {
				s.log.Warn("mcp: the session refused the abort of a cancelled prompt", "session", sessionID, "code", r.GetError().GetCode())
			} else {
				s.log.Info("mcp prompt cancelled: turn aborted", "session", sessionID, "turn", f.ans.TurnID, "prompt", f.ans.PromptID)
			}
		}
		select {
		case <-q.notify:
		case <-grace:
			return
		}
	}
}

func (s *Server) answerOf(ctx context.Context, f *turnFollower) *mcp.CallToolResult {
	for _, d := range f.dialogs {
		f.ans.Dialogs = append(f.ans.Dialogs, d)
	}
	slices.SortFunc(f.ans.Dialogs, func(a, b dialog) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	r := result(f.ans)
	if f.ans.StopReason == "error" {
		r.IsError = true
	}
	r.Content = append(r.Content, s.links(ctx, f.ans.SessionID, f.ans.Artifacts)...)
	return r
}

// attach checks the prompt's attachments (artifacts of the session, which
// the caller owns) and puts them on msg.
func (s *Server) attach(ctx context.Context, sessionID string, ids []string, msg *pb.Prompt) *toolError {
	if len(ids) == 0 {
		return nil
	}
	if len(ids) > maxAttachments {
		return fail(codes.InvalidArgs, "a prompt takes at most %d attachments", maxAttachments)
	}
	if _, err := s.rt.Artifacts().Session(ctx, sessionID, subject(ctx)); errors.Is(err, artifact.ErrNotFound) {
		return noSession(sessionID)
	} else if err != nil {
		return s.requestErr(sessionID, err)
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			return fail(codes.InvalidArgs, "attachmentIds[%d] repeats %s", i, id)
		}
		seen[id] = true
		a, err := s.rt.Artifacts().Get(ctx, sessionID, id)
		if errors.Is(err, artifact.ErrNotFound) {
			return fail(codes.InvalidArgs, "attachmentIds[%d] (%s) is not an artifact of this session", i, id)
		}
		if err != nil {
			return s.requestErr(sessionID, err)
		}
		msg.Attachments = append(msg.Attachments, artifact.ToProto(a))
	}
	return nil
}
