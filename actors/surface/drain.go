package surface

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Drain asks a domain actor to finish what it started, because its session
// is about to stop (the daemon shuts down, the session moves or sleeps):
// the commands queued and those that arrive from now on are refused with
// Refusal (nothing of them happened); the agent-hosted command in flight is
// finished, and every snapshot write in flight lands, before the domain
// answers Drained. The session sends it to its own children: it never
// leaves the node.
type Drain struct{ Refusal *pb.Error }

// Drained answers Drain: the domain has nothing in flight any more.
type Drained struct{ Domain string }

// drain starts refusing commands and answers the queued ones.
func (d *domainActor) drain(ctx actor.Context, m *Drain) {
	d.closing, d.drainTo = m.Refusal, ctx.Sender()
	for _, p := range d.queue {
		if p.timer != nil {
			p.timer.Stop()
		}
		d.respondAfterWrites(ctx, p.to, d.closed(p.cmd))
	}
	d.queue, d.queueBytes = nil, 0
}

// closed is the answer to a command the domain did not run because its
// session is stopping.
func (d *domainActor) closed(cmd *pb.RunCommand) *pb.CommandResult {
	if d.closing == nil {
		return d.result(cmd, surfaceFail(agentproc.CodeAgentUnavailable, "the session is stopping"))
	}
	return &pb.CommandResult{Correlation: cmd.GetCorrelation(), Refused: d.closing}
}

// drainedCheck tells the session once a draining domain has nothing in
// flight.
func (d *domainActor) drainedCheck(ctx actor.Context) {
	if d.drainTo != nil && d.inflight == nil && len(d.release) == 0 {
		ctx.Send(d.drainTo, &Drained{Domain: d.cfg.Domain})
		d.drainTo = nil
	}
}

// stopping answers every command still waiting: the session is going. A
// command not run was not applied; one the agent was running when a drain
// gave up on it, or whose snapshot write has not come back, may have been
// (the session stopped waiting for it).
func (d *domainActor) stopping(ctx actor.Context) {
	for _, p := range d.queue {
		if p.timer != nil {
			p.timer.Stop()
		}
		d.reply(ctx, p.to, d.closed(p.cmd))
	}
	d.queue, d.queueBytes = nil, 0
	if d.inflight != nil {
		d.inflight.timer.Stop()
		res := d.closed(d.inflight.cmd)
		if d.closing != nil {
			// The drain's deadline passed with the agent still at it: it
			// may have acted on the command.
			res = &pb.CommandResult{Correlation: d.inflight.cmd.GetCorrelation(), Refused: pb.Err(agentproc.CodeOutcomeUnknown,
				"the session stopped before the agent answered: the command may or may not have been applied")}
		}
		d.reply(ctx, d.inflight.to, res)
		d.inflight = nil
	}
	for _, o := range d.release {
		if !o.done {
			o.result = d.refusal(o.result, store.ErrOutcomeUnknown)
		}
		d.reply(ctx, o.to, o.result)
	}
	d.release = nil
}
