package delivery

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/dispatch"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Sink is what a subscriber actor hands the session's frames to. Its
// methods run on the actor's goroutine, one at a time.
type Sink interface {
	// Frames takes one batch of the session's frames: b.Final marks the
	// session's last (it ended the stream), b.Owed the subscription's
	// first (its replay or sticky state). It reports false when the client
	// cannot keep up: the actor then stops.
	Frames(ctx actor.Context, b *pb.Frames) bool
	// Gone tells that the session actor stopped without ending the
	// stream. Every frame it sent before has reached Frames.
	Gone(ctx actor.Context)
}

// Receiver is a Sink with messages of its own (an ACP attachment's prompts,
// cancels and dialog answers): the actor hands it every message it does not
// route itself, the lifecycle messages (*actor.Started, *actor.Stopping,
// *actor.Stopped) included.
type Receiver interface {
	Receive(ctx actor.Context)
}

// TerminationListener is a Sink that wants to hear at once that its session
// actor terminated, ahead of the frames still in the mailbox (Gone follows
// them): an ACP attachment sends the prompts that arrive meanwhile to a new
// attachment, which finds the session where it lives now.
type TerminationListener interface {
	SessionTerminated(ctx actor.Context)
}

// QueueSink is the sink of a client that takes the frames as they are (the
// browser's SSE and WebSocket): it queues them.
type QueueSink struct{ Q *Queue }

// Frames implements Sink: what the subscription is owed is paced by the
// client (Queue.PushOwed), the rest counts toward the queue's bounds.
func (s QueueSink) Frames(_ actor.Context, b *pb.Frames) bool {
	if b.GetOwed() {
		return s.Q.PushOwed(b.GetFrames(), b.GetFinal())
	}
	return s.Q.PushFrames(b.GetFrames(), b.GetFinal())
}

// Gone implements Sink: the stream ends after what is queued.
func (s QueueSink) Gone(actor.Context) { s.Q.End(EndSessionGone) }

// Props are the props of a subscriber actor that hands what it receives to
// sink, whose mailbox runs on q's writer while it waits (Queue.Dispatcher;
// nil: the daemon's dispatcher); opts add to them (the inspector's mailbox).
// Spawn them once.
func Props(sink Sink, q *Queue, opts ...actor.PropsOption) *actor.Props {
	return propsOf(newSubscriber(sink), q, opts...)
}

// propsOf spawns s itself: the props (which its actor context keeps) hold
// s, and s lets go of its sink when it stops.
func propsOf(s *subscriber, q *Queue, opts ...actor.PropsOption) *actor.Props {
	base := dispatch.Option()
	if q != nil {
		base = actor.WithDispatcher(q.Dispatcher())
	}
	return actor.PropsFromProducer(func() actor.Actor { return s }, append([]actor.PropsOption{base}, opts...)...)
}

// subscriber is the actor a session sends its frames to, for one client.
// Its Receive only routes.
type subscriber struct {
	sink    Sink
	recv    Receiver // sink, when it has messages of its own
	session *actor.PID
}

func newSubscriber(sink Sink) *subscriber {
	s := &subscriber{sink: sink}
	s.recv, _ = sink.(Receiver)
	return s
}

// sessionGone is what a subscriber sends itself when the session actor it
// watches has terminated: a user message, so that it is handled after the
// frames already in the mailbox. It never leaves the node.
type sessionGone struct{}

func (s *subscriber) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.Frames:
		s.frames(ctx, m)
	case *actor.Terminated:
		s.terminated(ctx, m)
	case sessionGone:
		s.sink.Gone(ctx)
	case *actor.Stopping:
		s.stopping(ctx)
		s.pass(ctx)
	case *actor.Stopped:
		s.pass(ctx)
		s.stopped()
	default:
		s.pass(ctx)
	}
}

// frames hands a batch to the sink. The first batch comes from the session
// (it sends with Request): the subscriber watches it from then on, to learn
// when it goes away without ending the stream (its node died, it moved).
func (s *subscriber) frames(ctx actor.Context, m *pb.Frames) {
	if s.session == nil && ctx.Sender() != nil {
		s.session = ctx.Sender()
		ctx.Watch(s.session)
	}
	if !s.sink.Frames(ctx, m) {
		ctx.Stop(ctx.Self())
	}
}

// terminated: Terminated is a system message, so it overtakes the frames the
// session sent before it stopped (its end frame, when it moved or ended) if
// they still wait in the mailbox. The sink hears of it behind them.
func (s *subscriber) terminated(ctx actor.Context, m *actor.Terminated) {
	if s.session == nil || !m.GetWho().Equal(s.session) {
		return
	}
	if l, ok := s.sink.(TerminationListener); ok {
		l.SessionTerminated(ctx)
	}
	ctx.Send(ctx.Self(), sessionGone{})
}

// stopping unwatches the session: its watcher set would otherwise keep this
// actor's PID, and through it the actor and its queue, for the session's
// whole life.
func (s *subscriber) stopping(ctx actor.Context) {
	if s.session != nil {
		ctx.Unwatch(s.session)
		s.session = nil
	}
}

// stopped lets go of the sink (the client's queue, an attachment's state):
// protoactor keeps a stopped actor's PID, and through it the actor, in the
// watcher set of the session until another watcher takes its slot.
func (s *subscriber) stopped() {
	s.sink, s.recv = nil, nil
}

func (s *subscriber) pass(ctx actor.Context) {
	if s.recv != nil {
		s.recv.Receive(ctx)
	}
}

// Sessions is what subscribing needs of the runtime: a request to a session
// by id, wherever it lives (*surfaced.Runtime).
type Sessions interface {
	Request(ctx context.Context, sessionID string, msg proto.Message) (proto.Message, error)
}

// Subscribe asks the session to send its frames to the subscriber pid: the
// replay after req.LastEventId inside the window, or the sticky state, then
// every live frame. A refusal (not found, ended) is the result's Error.
func Subscribe(ctx context.Context, sessions Sessions, sessionID string, pid *actor.PID, req *pb.Subscribe) (*pb.SubscribeResult, error) {
	req.Subscriber = pb.PidOf(pid)
	res, err := sessions.Request(ctx, sessionID, req)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*pb.SubscribeResult)
	if !ok {
		return nil, fmt.Errorf("subscribe to %s: unexpected answer %T", sessionID, res)
	}
	return r, nil
}
