package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// heldDispatcher runs mailboxes on demand: Schedule queues the run until
// release, so that a test can fill a mailbox before it is processed.
type heldDispatcher struct {
	mu    sync.Mutex
	held  bool
	queue []func()
}

func (d *heldDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if d.held {
		d.queue = append(d.queue, fn)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	go fn()
}

func (d *heldDispatcher) Throughput() int { return 300 }

func (d *heldDispatcher) hold() { d.mu.Lock(); d.held = true; d.mu.Unlock() }

func (d *heldDispatcher) release() {
	d.mu.Lock()
	q := d.queue
	d.queue, d.held = nil, false
	d.mu.Unlock()
	for _, fn := range q {
		go fn()
	}
}

// The frames a session sent just before it stopped (here its end frame)
// reach the client even when the session's Terminated is already in the
// client actor's mailbox behind them: Terminated is a system message and
// is taken first, so the client must not close the stream on it alone.
func TestClientGetsFramesQueuedBeforeTheSessionStopped(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	q := newOutbound(1<<20, time.Minute)
	d := &heldDispatcher{}
	mb := &countingMailbox{Mailbox: actor.Unbounded()()}
	client := sys.Root.Spawn(clientProps(q, actor.WithDispatcher(d), actor.WithMailbox(func() actor.Mailbox { return mb })))

	send := make(chan *pb.Frames)
	sess := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*pb.Frames); ok {
			ctx.Request(client, m) // as the session does: the client learns the sender and watches it
		}
	}))
	frame := func(id, kind string) *pb.Frame { return &pb.Frame{Id: id, Kind: kind, Data: []byte(`{}`)} }
	go func() {
		for m := range send {
			sys.Root.Send(sess, m)
		}
	}()
	// The first frames make the client watch the session.
	send <- &pb.Frames{Frames: []*pb.Frame{frame("e-1", "state")}}
	waitUntil(t, func() bool { f, _, _, _ := q.peek(); return len(f) == 1 })

	d.hold()
	send <- &pb.Frames{Frames: []*pb.Frame{frame("e-2", "end")}, Final: true}
	close(send)
	// The frames are in the client's mailbox; then the session stops.
	waitUntil(t, func() bool { return mb.UserMessageCount() == 1 })
	sys0 := mb.system.Load()
	if err := sys.Root.StopFuture(sess).Wait(); err != nil {
		t.Fatal(err)
	}
	// The Terminated notice is in the client's mailbox, behind the frames.
	waitUntil(t, func() bool { return mb.system.Load() == sys0+1 })
	d.release()

	waitUntil(t, func() bool { _, _, _, cut := q.peek(); return cut != "" || q.isFinal() })
	time.Sleep(50 * time.Millisecond)
	frames, _, final, cut := q.peek()
	if len(frames) != 2 || frames[1].GetKind() != "end" || !final || cut != "" {
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

// countingMailbox counts the system messages posted to it.
type countingMailbox struct {
	actor.Mailbox
	system atomic.Int64
}

func (m *countingMailbox) PostSystemMessage(msg any) {
	m.system.Add(1)
	m.Mailbox.PostSystemMessage(msg)
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
