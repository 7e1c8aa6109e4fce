package session

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A replyBox is the address a request's answer comes back to: a process in
// the actor system's registry, as a protoactor future is, that keeps the
// first message sent to it.
//
// It exists because a future cannot be withdrawn safely. Completing one
// from the caller's side (the caller left) while the answer arrives writes
// the future's result twice without a lock, a data race in protoactor's
// futureProcess. Here the first message wins through a channel, and
// withdrawing is leaving the registry, which is also how a domain actor on
// this node learns that a command's caller is gone (surface.callerGone).
type replyBox struct {
	reg *actor.ProcessRegistryValue
	pid *actor.PID
	ch  chan any // the first answer; later ones are dropped
}

func newReplyBox(sys *actor.ActorSystem) *replyBox {
	b := &replyBox{reg: sys.ProcessRegistry, ch: make(chan any, 1)}
	b.pid, _ = sys.ProcessRegistry.Add(b, "reply"+sys.ProcessRegistry.NextId())
	return b
}

// SendUserMessage implements actor.Process: the first answer is kept.
func (b *replyBox) SendUserMessage(_ *actor.PID, message any) {
	_, msg, _ := actor.UnwrapEnvelope(message)
	select {
	case b.ch <- msg:
	default:
	}
}

// SendSystemMessage implements actor.Process; a reply box watches nothing.
func (b *replyBox) SendSystemMessage(*actor.PID, any) {}

// Stop implements actor.Process.
func (b *replyBox) Stop(*actor.PID) { b.close() }

// close withdraws the box: answers after it are dead letters. It may be
// called more than once.
func (b *replyBox) close() { b.reg.Remove(b.pid) }

// wait returns the answer, actor.ErrTimeout after timeout, or the cause of
// ctx's end. It does not close the box.
func (b *replyBox) wait(ctx context.Context, timeout time.Duration) (any, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case res := <-b.ch:
		if _, dead := res.(*actor.DeadLetterResponse); dead {
			return nil, actor.ErrDeadLetter
		}
		return res, nil
	case <-t.C:
		return nil, actor.ErrTimeout
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
