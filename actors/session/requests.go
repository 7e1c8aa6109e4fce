package session

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/session/internal/turn"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

func (s *sessionActor) getSummary(ctx actor.Context, m *pb.GetSummary) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.SessionSummary{Error: notFound()})
		return
	}
	ctx.Respond(s.summary())
}

func (s *sessionActor) listSurfaces(ctx actor.Context, m *pb.ListSurfaces) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.SurfaceList{Error: notFound()})
		return
	}
	ctx.Respond(&pb.SurfaceList{Surfaces: s.surfaceInfos()})
}

// prompt hands a client's prompt to the turn machine: it starts a turn now,
// or waits in the inbox.
func (s *sessionActor) prompt(ctx actor.Context, m *pb.Prompt) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.PromptResult{Error: notFound()})
		return
	}
	if s.status.status == StatusError && !s.agent.restarting {
		ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeUnavailable, "the agent is not running: "+s.status.detail)})
		return
	}
	if !s.deps.Writer.Available() {
		ctx.Respond(&pb.PromptResult{Error: storeUnavailable("the prompt was not taken")})
		return
	}
	for _, a := range m.GetAttachments() {
		// The sender checked them; an attachment of another session would
		// hand the agent someone else's bytes.
		if a.GetSessionId() != s.rec.ID {
			ctx.Respond(&pb.PromptResult{Error: pb.Err(CodeInvalid, fmt.Sprintf("%s is not an artifact of this session", a.GetId()))})
			return
		}
	}
	id, refused := s.turns.Prompt(turn.Prompt{Text: m.GetMessage(), Images: m.GetImages(), Attachments: m.GetAttachments(),
		Via: m.GetCaller().GetVia(), Tag: m.GetClientTag(), Trace: tracing.HeaderOf(ctx)})
	if refused != nil {
		ctx.Respond(&pb.PromptResult{Error: refused})
		return
	}
	// Answered once its record is durable (promptRecorded).
	s.prompts[id] = ctx.Sender()
}

// recordPrompt writes a prompt's user entry; the prompt is answered, and
// the turn machine told, when the write is done.
func (s *sessionActor) recordPrompt(id uint64, entry store.Entry) {
	self, root := s.self, s.root
	s.submit(store.Op{Transcript: []store.Entry{entry},
		Done: func(err error) { root.Send(self, &promptRecorded{id: id, err: err}) }})
}

// promptRecorded answers a prompt whose record is done: accepted once it
// is durable (it is in the transcript whatever happens next), refused when
// its write failed (it never happened), or unknown.
func (s *sessionActor) promptRecorded(ctx actor.Context, m *promptRecorded) {
	sender, waiting := s.prompts[m.id]
	delete(s.prompts, m.id)
	if m.err != nil {
		s.turns.Unrecorded(m.id)
		s.log.Warn("prompt not taken: its record failed", "prompt", m.id, "err", m.err)
		if waiting && sender != nil {
			res := &pb.PromptResult{Error: writeRefusal(m.err, "the prompt")}
			if errors.Is(m.err, store.ErrFenced) {
				res.Error = pb.Err(CodeMoved, "the session moved to another node; send the prompt again")
			}
			ctx.Send(sender, res)
		}
		return
	}
	acc, ok := s.turns.Recorded(m.id)
	if !ok {
		return
	}
	s.deps.Metrics.Prompt()
	if waiting && sender != nil {
		ctx.Send(sender, &pb.PromptResult{Accepted: true, Queued: acc.Queued, PromptId: acc.ID})
	}
}

// answerPrompts answers the prompts whose record is still in flight when
// the activation goes: their outcome is not known here.
func (s *sessionActor) answerPrompts(ctx actor.Context, e *pb.Error) {
	for id, sender := range s.prompts {
		if sender != nil {
			ctx.Send(sender, &pb.PromptResult{Error: e})
		}
		delete(s.prompts, id)
	}
}

func (s *sessionActor) abort(ctx actor.Context, m *pb.Abort) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.AbortResult{Error: notFound()})
		return
	}
	busy := s.turns.Abort()
	ctx.Respond(&pb.AbortResult{Ok: true, WasBusy: busy})
}

func (s *sessionActor) uiResponse(ctx actor.Context, m *pb.UIResponse) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.UIResponseResult{Error: notFound()})
		return
	}
	if e := s.turns.UIResponse(m.GetId(), m.GetWhich(), m.GetValue(), m.GetConfirmed()); e != nil {
		ctx.Respond(&pb.UIResponseResult{Error: e})
		return
	}
	ctx.Respond(&pb.UIResponseResult{Ok: true})
}

// runCommand routes a client's command to its domain actor, which answers
// the caller directly. While the agent is starting, a command for a domain it
// has not registered yet waits for it.
func (s *sessionActor) runCommand(ctx actor.Context, m *pb.RunCommand) {
	if !s.allowed(m.GetCaller()) {
		s.refuseCommand(ctx, CodeNotFound, "no such session")
		return
	}
	if !s.limiter.AllowN(s.clock.Now(), 1) {
		s.deps.Metrics.Limited()
		s.refuseCommand(ctx, CodeRateLimited, fmt.Sprintf("more than %d commands per second on this session", s.lim.CommandsPerSecond))
		return
	}
	d, ok := s.registered(m.GetDomain())
	if (!ok || !s.available(d)) && s.agentComing() {
		// The agent has not registered its domains (again) yet: the command
		// waits for it rather than fail (settleWaiting).
		s.waitForAgent(ctx, m)
		return
	}
	if !ok {
		s.deps.Metrics.Command(proc.CodeSurfaceNotRegistered)
		ctx.Respond(&pb.CommandResult{Error: pb.Err(proc.CodeSurfaceNotRegistered, notRegistered(m.GetDomain()))})
		return
	}
	ctx.Forward(d.pid)
}

// fetchData routes a data page request to the domain's data plane actor,
// which answers the caller directly: beside the domain's commands, never
// behind them.
func (s *sessionActor) fetchData(ctx actor.Context, m *pb.SurfaceFetch) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.SurfaceFetchResult{Refused: notFound()})
		return
	}
	d, ok := s.registered(m.GetDomain())
	switch {
	case !ok:
		ctx.Respond(&pb.SurfaceFetchResult{Error: pb.Err(proc.CodeSurfaceNotRegistered, notRegistered(m.GetDomain()))})
	case d.data == nil || !d.hasData:
		ctx.Respond(&pb.SurfaceFetchResult{Error: pb.Err(proc.CodeNoDataPlane, fmt.Sprintf("the surface %q serves no data pages", m.GetDomain()))})
	default:
		ctx.Forward(d.data)
	}
}

func (s *sessionActor) refuseCommand(ctx actor.Context, code, msg string) {
	s.deps.Metrics.Command(code)
	ctx.Respond(&pb.CommandResult{Refused: pb.Err(code, msg)})
}

// artifactNotice emits the artifact frame for an artifact of the session
// that was added or deleted (by an HTTP request on any node, or by the
// agent). Not sticky: a client that was not watching lists them.
func (s *sessionActor) artifactNotice(ctx actor.Context, m *pb.ArtifactNotice) {
	if !m.GetCaller().GetSystem() {
		ctx.Respond(&pb.ArtifactNoticeResult{Error: notFound()})
		return
	}
	ev := m.GetEvent()
	if ev.GetArtifact().GetSessionId() != s.rec.ID {
		ctx.Respond(&pb.ArtifactNoticeResult{Error: pb.Err(CodeInvalid, "the artifact is not one of this session's")})
		return
	}
	s.emit(pb.ArtifactOf(ev.GetEvent(), ev.GetArtifact()), "")
	ctx.Respond(&pb.ArtifactNoticeResult{Ok: true})
}
