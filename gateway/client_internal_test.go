package gateway

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The frames a session sent just before it stopped (here its end frame)
// reach the client even when the session's Terminated is already in the
// client actor's mailbox behind them: Terminated is a system message and
// is taken first, so the client must not close the stream on it alone.
func TestClientGetsFramesQueuedBeforeTheSessionStopped(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	q := newOutbound(1<<20, time.Minute)
	d := &testkit.HeldDispatcher{}
	mb := testkit.NewCountingMailbox()
	client := sys.Root.Spawn(clientProps(q, actor.WithDispatcher(d), actor.WithMailbox(mb.Producer())))

	send := make(chan *pb.Frames)
	sess := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*pb.Frames); ok {
			ctx.Request(client, m) // as the session does: the client learns the sender and watches it
		}
	}))
	frame := func(id, kind string) *pb.Frame {
		ev := pb.DiagnosticOf("test", "")
		if kind == "end" {
			ev = pb.EndOf("stopped")
		}
		return &pb.Frame{Id: id, Event: ev}
	}
	go func() {
		for m := range send {
			sys.Root.Send(sess, m)
		}
	}()
	// The first frames make the client watch the session.
	send <- &pb.Frames{Frames: []*pb.Frame{frame("e-1", "state")}}
	waitUntil(t, func() bool { f, _, _, _ := q.peek(); return len(f) == 1 })

	d.Hold()
	send <- &pb.Frames{Frames: []*pb.Frame{frame("e-2", "end")}, Final: true}
	close(send)
	// The frames are in the client's mailbox; then the session stops.
	waitUntil(t, func() bool { return mb.UserMessageCount() == 1 })
	if err := sys.Root.StopFuture(sess).Wait(); err != nil {
		t.Fatal(err)
	}
	// The Terminated notice is in the client's mailbox, behind the frames.
	waitUntil(t, func() bool { return mb.SystemPosted("*actor.Terminated") == 1 })
	d.Release()

	waitUntil(t, func() bool { _, _, _, cut := q.peek(); return cut != "" || q.isFinal() })
	time.Sleep(50 * time.Millisecond)
	frames, _, final, cut := q.peek()
	if len(frames) != 2 || wire.Kind(frames[1].GetEvent()) != "end" || !final || cut != "" {
		t.Fatalf("queued %d frames, final %v, cut %q; want the end frame delivered and no cut", len(frames), final, cut)
	}
}

// peek returns the queue's state without draining it.
func (q *outbound) peek() ([]*pb.Frame, [][]byte, bool, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]*pb.Frame(nil), q.frames...), q.replies, q.final, q.cut
}

func (q *outbound) isFinal() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.final
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
