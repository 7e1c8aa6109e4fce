package session

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// maxWaiting bounds the commands that wait for a starting agent.
const maxWaiting = 1024

// waitingCommand is a client's command for a domain the agent has not
// registered yet, held while the agent starts.
type waitingCommand struct {
	seq    uint64
	msg    *pb.RunCommand
	sender *actor.PID
	timer  clock.Timer
}

// commandWaitOver: a waiting command's time is up.
type commandWaitOver struct{ seq uint64 }

// agentComing reports whether the agent is on its way to ready: spawned and
// not ready yet, or about to be restarted after a crash.
func (s *sessionActor) agentComing() bool {
	return (s.agent.pid != nil && s.agent.phase == agentStarting) || s.agent.restarting
}

// waitForAgent holds a command until the agent is ready (settleWaiting), up
// to the command's deadline (for the ready timeout when it has none).
func (s *sessionActor) waitForAgent(ctx actor.Context, m *pb.RunCommand) {
	if len(s.waiting) >= maxWaiting {
		s.deps.Metrics.Command(proc.CodeAgentUnavailable)
		ctx.Respond(&pb.CommandResult{Error: pb.Err(proc.CodeAgentUnavailable,
			fmt.Sprintf("the agent is starting and %d commands already wait for it; the command was not run", maxWaiting))})
		return
	}
	wait := s.lim.ReadyTimeout
	if ms := m.GetDeadlineMs(); ms > 0 {
		wait = time.UnixMilli(ms).Sub(s.clock.Now())
	}
	s.waitSeq++
	w := &waitingCommand{seq: s.waitSeq, msg: m, sender: ctx.Sender()}
	self, root, seq := s.self, s.root, w.seq
	w.timer = s.clock.AfterFunc(wait, func() { root.Send(self, &commandWaitOver{seq: seq}) })
	s.waiting = append(s.waiting, w)
}

// commandWaitOver answers a command that waited as long as it could.
func (s *sessionActor) commandWaitOver(ctx actor.Context, m *commandWaitOver) {
	for i, w := range s.waiting {
		if w.seq == m.seq {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			s.answerWaiting(ctx, w, &pb.CommandResult{Error: pb.Err(proc.CodeAgentUnavailable,
				"the agent did not become ready in time; the command was not run")})
			return
		}
	}
}

// settleWaiting runs after every message: once the agent is ready the
// waiting commands go to their domains (or are answered
// surface_not_registered: the ready agent did not register the domain); once
// it is neither ready nor coming (it failed to start, the session ended or
// sleeps) they are answered with why.
func (s *sessionActor) settleWaiting(ctx actor.Context) {
	if len(s.waiting) == 0 || s.agentComing() {
		return
	}
	waiting := s.waiting
	s.waiting = nil
	ready := s.agent.ready()
	for _, w := range waiting {
		w.timer.Stop()
		switch d, ok := s.registered(w.msg.GetDomain()); {
		case ready && ok:
			// The command's use counts from here: it waited for the agent,
			// however long the agent took, and the session does not sleep
			// under it while its domain runs it.
			s.used()
			ctx.RequestWithCustomSender(d.pid, w.msg, w.sender)
		case ready:
			s.answerWaiting(ctx, w, &pb.CommandResult{Error: pb.Err(proc.CodeSurfaceNotRegistered, notRegistered(w.msg.GetDomain()))})
		case s.status.status == StatusEnded:
			s.answerWaiting(ctx, w, &pb.CommandResult{Refused: pb.Err(CodeEnded, "the session has ended")})
		default:
			why := "the agent is not running"
			if s.status.detail != "" {
				why += ": " + s.status.detail
			}
			s.answerWaiting(ctx, w, &pb.CommandResult{Error: pb.Err(proc.CodeAgentUnavailable, why+"; the command was not run")})
		}
	}
}

// refuseWaiting answers every waiting command with e (a refusal: the
// directory asks again elsewhere when e is session_moved).
func (s *sessionActor) refuseWaiting(ctx actor.Context, e *pb.Error) {
	waiting := s.waiting
	s.waiting = nil
	for _, w := range waiting {
		w.timer.Stop()
		s.answerWaiting(ctx, w, &pb.CommandResult{Refused: e})
	}
}

func (s *sessionActor) answerWaiting(ctx actor.Context, w *waitingCommand, res *pb.CommandResult) {
	code := res.GetRefused().GetCode()
	if code == "" {
		code = res.GetError().GetCode()
	}
	s.deps.Metrics.Command(code)
	if w.sender != nil {
		ctx.Send(w.sender, res)
	}
}
