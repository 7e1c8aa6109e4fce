package delivery

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// fakeSession stands in for a session actor: it sends each *pb.Frames it is
// given to the subscriber as the session does (Request: the subscriber
// learns who sent them), and answers a *pb.Ping-like probe so that a test
// knows its mailbox was run.
func fakeSession(sys *actor.ActorSystem, subscriber func() *actor.PID) *actor.PID {
	return sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *pb.Frames:
			ctx.Request(subscriber(), m)
		case probe:
			ctx.Respond(m)
		}
	}))
}

type probe struct{}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, ok, "%s", what)
}

// The frames a session sent just before it stopped (here its end frame)
// reach the sink even when the session's Terminated is already in the
// subscriber's mailbox behind them: Terminated is a system message and is
// taken first, so the subscriber must not tell the sink the session is gone
// on it alone.
func TestSubscriberSessionGoneAfterQueuedFrames(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	q := NewQueue(Limits{}, nil)
	held := &testkit.HeldDispatcher{}
	mb := testkit.NewCountingMailbox()
	sub := sys.Root.Spawn(Props(QueueSink{Q: q}, q, actor.WithDispatcher(held), actor.WithMailbox(mb.Producer())))
	sess := fakeSession(sys, func() *actor.PID { return sub })

	// The first frames make the subscriber watch the session.
	sys.Root.Send(sess, &pb.Frames{Frames: []*pb.Frame{frame("e-1", 1)}})
	waitFor(t, "the first frame", func() bool { n, _, _ := q.Waiting(); return n == 1 })

	held.Hold()
	sys.Root.Send(sess, &pb.Frames{Frames: []*pb.Frame{frame("e-2", 1)}})
	waitFor(t, "the second batch in the mailbox", func() bool { return mb.UserMessageCount() == 1 })
	if err := sys.Root.StopFuture(sess).Wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Terminated in the mailbox", func() bool { return mb.SystemPosted("*actor.Terminated") == 1 })
	held.Release()

	waitFor(t, "the end of the stream", func() bool { return q.Ended() != "" })
	items, end := q.Take(nil)
	if len(items) != 2 || items[1].Frame.GetId() != "e-2" || end != EndSessionGone {
		t.Fatalf("took %d items, end %q; want both frames, then session_gone", len(items), end)
	}
}

// A final batch ends the stream with the session's own end; the session
// going away after it changes nothing.
func TestSubscriberFinalThenGone(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	q := NewQueue(Limits{}, nil)
	sub := sys.Root.Spawn(Props(QueueSink{Q: q}, q))
	sess := fakeSession(sys, func() *actor.PID { return sub })
	sys.Root.Send(sess, &pb.Frames{Frames: []*pb.Frame{{Id: "e-1", Event: pb.EndOf("stopped")}}, Final: true})
	waitFor(t, "the final batch", func() bool { return q.Ended() == EndFinal })
	if err := sys.Root.StopFuture(sess).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Root.RequestFuture(sub, &actor.Touch{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if q.Ended() != EndFinal {
		t.Fatalf("end %q", q.Ended())
	}
}

// A sink that cannot keep up stops its subscriber.
func TestSubscriberStopsWhenTheSinkIsFull(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	q := NewQueue(Limits{MaxBytes: 10, MaxAge: time.Hour}, nil)
	sub := sys.Root.Spawn(Props(QueueSink{Q: q}, q))
	sess := fakeSession(sys, func() *actor.PID { return sub })
	stopped := make(chan struct{})
	watcher := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(sub)
		case *actor.Terminated:
			close(stopped)
		}
	}))
	defer sys.Root.Stop(watcher)
	sys.Root.Send(sess, &pb.Frames{Frames: []*pb.Frame{frame("e-1", 100), frame("e-2", 100)}})
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber of a cut client did not stop")
	}
	if q.Ended() != EndSlowConsumer {
		t.Fatalf("end %q", q.Ended())
	}
}

// Nothing of a client outlives its connection: once its subscriber stopped,
// its queue is garbage although the session it watched lives on, and the
// session does not keep the subscribers that come and go (protoactor keeps
// the last one that left in a stale slot of its watcher set: one, not one
// per connection).
func TestSubscriberLeavesNothingBehind(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var sub *actor.PID
	sess := fakeSession(sys, func() *actor.PID { return sub })

	const clients = 10
	var queues []weak.Pointer[Queue]
	var actors []weak.Pointer[subscriber]
	for range clients {
		func() {
			q := NewQueue(Limits{}, nil)
			s := newSubscriber(QueueSink{Q: q})
			sub = sys.Root.Spawn(propsOf(s, q))
			sys.Root.Send(sess, &pb.Frames{Frames: []*pb.Frame{frame("e-1", 1)}})
			waitFor(t, "the frame", func() bool { n, _, _ := q.Waiting(); return n == 1 })
			if err := sys.Root.StopFuture(sub).Wait(); err != nil {
				t.Fatal(err)
			}
			sub = nil
			queues = append(queues, weak.Make(q))
			actors = append(actors, weak.Make(s))
		}()
	}
	// The session has run its system messages (the subscribers' Unwatch).
	if _, err := sys.Root.RequestFuture(sess, probe{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	live := func() (q, a int) {
		for i := range queues {
			if queues[i].Value() != nil {
				q++
			}
			if actors[i].Value() != nil {
				a++
			}
		}
		return q, a
	}
	for i := 0; i < 5; i++ {
		if q, a := live(); q == 0 && a <= 1 {
			break
		}
		runtime.GC()
	}
	if q, a := live(); q != 0 || a > 1 {
		t.Fatalf("of %d clients gone, %d queues and %d subscribers are still reachable while their session lives", clients, q, a)
	}
}
