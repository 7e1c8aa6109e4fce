package session

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The idle clock: a live session that nobody uses sleeps after
// limits.idle_timeout (its agent stops; the next request wakes it), an
// ended one's actor stops after limits.ended_linger.
//
// The clock starts when the session is activated and starts again at each
// use: a client's request that needs the agent or changes the session
// (subscribe, prompt, abort, command, data page, state write, dialog
// answer; in an ended session any request, reads included), the moment the
// last client leaves or the last turn ends, and the session's end. It is held while a client
// watches or a turn runs or waits. Nothing else moves it: the agent's own
// lines, the store's answers, lease renewals and the session's other timers
// come and go without keeping a session awake. It runs on the session's
// clock (internal/clock), not on protoactor's receive timeout, which every
// message would reset.
type idleClock struct {
	// since is when the session was last used.
	since time.Time
	// held: a client watched or a turn ran at the last look; the clock
	// starts again when that ends.
	held  bool
	timer clock.Timer
	gen   uint64
	// off: the actor is stopping; the clock is done.
	off bool
}

// idleDue is the idle timer firing (a stale generation is ignored).
type idleDue struct{ gen uint64 }

// used starts the idle clock again.
func (s *sessionActor) used() { s.idle.since = s.clock.Now() }

// usesSession reports whether a message is a use that starts the idle clock
// again: a client's request that needs the agent or changes the session; in
// an ended session, where nothing changes, any client's request.
func usesSession(msg any, ended bool) bool {
	switch msg.(type) {
	case *pb.Subscribe, *pb.Prompt, *pb.Abort, *pb.RunCommand, *pb.SurfaceFetch, *pb.SetState, *pb.UIResponse:
		return true
	case *pb.GetSummary, *pb.ListSurfaces, *pb.GetState, *pb.GetMessages:
		return ended
	}
	return false
}

// idleAfter is how long the session may go unused before it goes: the idle
// timeout of a live session (0: never), the linger of an ended one.
func (s *sessionActor) idleAfter() time.Duration {
	if s.status.status == StatusEnded {
		return s.lim.EndedLinger
	}
	return s.lim.IdleTimeout
}

// occupied: a client watches, or (live) a turn runs or waits.
func (s *sessionActor) occupied() bool {
	if s.hub.Len() > 0 {
		return true
	}
	return s.status.status != StatusEnded && (s.turns.Busy() || s.turns.Queued() > 0)
}

// quiet: unoccupied, and nothing a client asked for is in flight (a
// prompt's record, a state write, a command waiting for the agent). A
// session past its idle time sleeps once it is quiet.
func (s *sessionActor) quiet() bool {
	if s.occupied() {
		return false
	}
	return s.status.status == StatusEnded || (s.kv.Pending() == 0 && len(s.prompts) == 0 && len(s.waiting) == 0)
}

// checkIdle runs after every message, with the time the message was taken
// (a use counts from when it came, not from when its answer had gone): it
// follows the uses and the occupation of the session (whatever the limits:
// an ended session lingers from its last use, not from its activation), and
// holds, arms or fires the idle timer.
func (s *sessionActor) checkIdle(ctx actor.Context, now time.Time) {
	if s.idle.off || !s.activated || s.refusal != nil || s.hub == nil {
		s.stopIdleTimer()
		return
	}
	if usesSession(ctx.Message(), s.status.status == StatusEnded) && now.After(s.idle.since) {
		s.idle.since = now
	}
	if s.occupied() {
		s.idle.held = true
		s.stopIdleTimer()
		return
	}
	if s.idle.held {
		s.idle.held = false
		s.idle.since = now
	}
	after := s.idleAfter()
	if after <= 0 {
		s.stopIdleTimer()
		return
	}
	left := after - now.Sub(s.idle.since)

	if left > 0 {
		if s.idle.timer == nil {
			s.idle.gen++
			gen, self, root := s.idle.gen, s.self, s.root
			s.idle.timer = s.clock.AfterFunc(left, func() { root.Send(self, &idleDue{gen: gen}) })
		}
		return
	}
	// Past its time: it goes once nothing is in flight (this check runs
	// again after the message that settles it), and no request is on its
	// way to it (the directory's word; then it looks again shortly).
	if !s.quiet() {
		return
	}
	if s.cfg.MayLeave != nil && !s.cfg.MayLeave(ctx.Self()) {
		if s.idle.timer == nil {
			s.idle.gen++
			gen, self, root := s.idle.gen, s.self, s.root
			s.idle.timer = s.clock.AfterFunc(min(after, leaveRetry), func() { root.Send(self, &idleDue{gen: gen}) })
		}
		return
	}
	s.stopIdleTimer()
	s.goIdle(ctx)
}

// leaveRetry is how soon an idle session looks again when a request was on
// its way to it as it was about to go (the request is answered by then; if
// it was a use, the clock has started again).
const leaveRetry = 50 * time.Millisecond

// idleTimerFired: the timer is spent; checkIdle, which runs next, sees
// whether the session was used meanwhile (then it arms the rest).
func (s *sessionActor) idleTimerFired(m *idleDue) {
	if m.gen == s.idle.gen {
		s.idle.timer = nil
	}
}

func (s *sessionActor) stopIdleTimer() {
	if s.idle.timer != nil {
		s.idle.timer.Stop()
		s.idle.timer = nil
	}
}

// goIdle puts a live session nobody uses to sleep, or stops an ended one
// nobody asks about.
func (s *sessionActor) goIdle(ctx actor.Context) {
	if s.status.status != StatusEnded {
		s.log.Info("session idle; stopping its agent until the next request", "idle_timeout", s.lim.IdleTimeout)
		s.sleep(ctx, "idle")
	}
	s.leave(ctx)
}

// leave stops the actor once the message being handled is done; its idle
// clock stops with it. The directory forgets the activation here, before
// whoever asked for the stop is answered: protoactor drops, unanswered,
// what reaches a mailbox after the actor has stopped, so a request sent
// once the stop is answered must start a new activation, not find this
// one. Its scratch directory is let go first for the same reason: the next
// activation makes it again, and must not see this one remove it.
func (s *sessionActor) leave(ctx actor.Context) {
	s.idle.off = true
	s.stopIdleTimer()
	s.dropScratch(false)
	if s.cfg.OnStopping != nil {
		s.cfg.OnStopping(ctx.Self())
	}
	ctx.Stop(ctx.Self())
}
