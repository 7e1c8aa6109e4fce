package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// DefaultDrainBound bounds how long a session that is asked to stop
// (shutdown, idle, moved) without a deadline waits for what it started.
const DefaultDrainBound = 10 * time.Second

// drainState is a session finishing what it started before it stops.
type drainState struct {
	stop    *pb.Stop
	senders []*actor.PID // the Stop requests, answered once it stops
	// refusal answers every prompt, command and state write that comes
	// meanwhile: nothing of it happened.
	refusal *pb.Error
	domains int // domain actors that have not answered Drained
	timer   clock.Timer
	over    bool // the deadline passed: stop with what is left
	done    bool
}

// drainOver is the drain's deadline.
type drainOver struct{}

// drainRefusal is what a request that comes while the session stops for
// reason is told: nothing of it was done, and where to send it again.
func drainRefusal(reason string) *pb.Error {
	switch reason {
	case "moved":
		return pb.Err(codes.SessionMoved, "the session is moving to another node; nothing of this request was done: send it again")
	case "idle":
		return pb.Err(codes.Unavailable, "the session is going to sleep; nothing of this request was done: send it again (it wakes)")
	}
	return pb.Err(codes.ShuttingDown, "the daemon is shutting down; nothing of this request was done: send it again when it is back")
}

// startDrain answers Stop{shutdown, idle, moved}: the session stops taking
// prompts, commands and state writes (each refused as not done), asks its
// domains to finish the commands they started, and waits for every write it
// handed to the store on behalf of a request (a prompt's record, a state
// write, a command's snapshot), until the Stop's deadline. Then every
// request has its answer: what happened to it. Stopping at once answered a
// prompt whose record was in flight 504 outcome_unknown, and a command
// whose snapshot was, nothing at all.
func (s *sessionActor) startDrain(ctx actor.Context, m *pb.Stop) {
	dr := &drainState{stop: m, senders: []*actor.PID{ctx.Sender()}, refusal: drainRefusal(m.GetReason())}
	s.drain = dr
	// The session is stopping: its idle clock is done (a session that went
	// idle mid-drain would stop without answering the Stop).
	s.idle.off = true
	s.stopIdleTimer()
	s.refuseWaiting(ctx, dr.refusal)
	for _, d := range s.domains {
		if d.pid != nil {
			ctx.Request(d.pid, &surface.Drain{Refusal: dr.refusal})
			dr.domains++
		}
	}
	bound := DefaultDrainBound
	if ms := m.GetDeadlineMs(); ms > 0 {
		bound = time.UnixMilli(ms).Sub(s.clock.Now())
	}
	self, root := s.self, s.root
	dr.timer = s.clock.AfterFunc(max(bound, 0), func() { root.Send(self, &drainOver{}) })
	s.behavior.Become(s.draining)
	s.finishDrain(ctx)
}

// draining is a live session finishing what it started before it stops:
// what would start something new is refused, the rest is handled as live.
func (s *sessionActor) draining(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.Prompt, *pb.RunCommand, *pb.SetState:
		s.refuseWhileDraining(ctx)
	case *pb.Stop:
		s.stopAgain(ctx, m)
	case *surface.Drained:
		s.drain.domains--
	case *drainOver:
		s.drain.over = true
	case *restartAgent:
		// No new agent: the session is stopping.
	default:
		s.live(ctx)
	}
	s.finishDrain(ctx)
}

// refuseWhileDraining answers a prompt, command or state write that came
// while the session drains: not done (a stranger hears not found, as ever).
func (s *sessionActor) refuseWhileDraining(ctx actor.Context) {
	e := s.drain.refusal
	if c, ok := ctx.Message().(interface{ GetCaller() *pb.Caller }); ok && !s.allowed(c.GetCaller()) {
		e = notFound()
	}
	switch ctx.Message().(type) {
	case *pb.Prompt:
		ctx.Respond(&pb.PromptResult{Error: e})
	case *pb.RunCommand:
		s.refuseCommand(ctx, e.GetCode(), e.GetMessage())
	case *pb.SetState:
		ctx.Respond(&pb.SetStateResult{Error: e})
	}
}

// stopAgain: another Stop to sleep while the session drains is answered
// when it stops; one to end it (DELETE) is refused as not done: the session
// sleeps, it does not end.
func (s *sessionActor) stopAgain(ctx actor.Context, m *pb.Stop) {
	switch {
	case !s.allowed(m.GetCaller()):
		ctx.Respond(&pb.StopResult{Error: notFound()})
	case m.GetReason() == "shutdown" || m.GetReason() == "idle" || m.GetReason() == "moved":
		s.drain.senders = append(s.drain.senders, ctx.Sender())
	default:
		ctx.Respond(&pb.StopResult{Error: s.drain.refusal})
	}
}

// finishDrain stops the session once nothing it waits for is in flight, or
// the deadline passed: it goes to sleep, its clients get their end, and the
// Stop requests their answer. A session that ended meanwhile (its agent
// crashed past the restart policy) has said its end already.
func (s *sessionActor) finishDrain(ctx actor.Context) {
	dr := s.drain
	if dr == nil || dr.done {
		return
	}
	if s.refusal != nil {
		// The lease went to another node meanwhile (lostLease): the
		// activation answered what it held and is stopping already.
		dr.done = true
		dr.timer.Stop()
		s.answerStops(ctx)
		return
	}
	ended := s.status.status == StatusEnded
	if !ended && !dr.over && (len(s.prompts) > 0 || s.kv.Pending() > 0 || dr.domains > 0) {
		return
	}
	dr.done = true
	dr.timer.Stop()
	if !ended {
		if dr.over {
			s.log.Warn("stopping with writes still in flight", "reason", dr.stop.GetReason(),
				"prompts", len(s.prompts), "kv", s.kv.Pending(), "domains", dr.domains)
		}
		s.sleep(ctx, dr.stop.GetReason())
		s.endStream(dr.stop.GetReason())
	}
	s.flush(ctx)
	s.leave(ctx)
	s.answerStops(ctx)
}

// answerStops answers the Stop requests the drain holds: the session
// stopped.
func (s *sessionActor) answerStops(ctx actor.Context) {
	for _, to := range s.drain.senders {
		if to != nil {
			ctx.Send(to, &pb.StopResult{Ok: true})
		}
	}
	s.drain.senders = nil
}
