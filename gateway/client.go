package gateway

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/dispatch"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// outbound is one client's bounded outbound queue, shared by the client's
// gateway actor (which fills it) and the connection's writer goroutine (which
// drains it). A client that falls behind is cut; it never slows the session
// or the other clients.
type outbound struct {
	mu       sync.Mutex
	frames   []*pb.Frame
	replies  [][]byte // WebSocket replies (not part of the session's frame log)
	bytes    int
	oldest   time.Time
	wake     chan struct{}
	final    bool   // the session ended the stream (the last frame is end)
	cut      string // set when the client must be disconnected: slow_consumer, session_gone
	maxBytes int
	maxAge   time.Duration
}

func newOutbound(maxBytes int, maxAge time.Duration) *outbound {
	return &outbound{wake: make(chan struct{}, 1), maxBytes: maxBytes, maxAge: maxAge}
}

func (q *outbound) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// push appends frames; it reports false when the client is now too far behind.
func (q *outbound) push(fs []*pb.Frame, final bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cut != "" {
		return false
	}
	now := time.Now()
	if len(q.frames) == 0 {
		q.oldest = now
	}
	for _, f := range fs {
		q.frames = append(q.frames, f)
		q.bytes += int(f.Size) + len(f.Id) + 24
	}
	if final {
		q.final = true
	}
	// One frame larger than the whole budget does not make a client slow;
	// a second one arriving while it is still queued does.
	if !final && len(q.frames) > 1 && (q.bytes > q.maxBytes || now.Sub(q.oldest) > q.maxAge) {
		q.cut = "slow_consumer"
		q.frames = nil
		q.bytes = 0
		q.signal()
		return false
	}
	q.signal()
	return true
}

func (q *outbound) pushReply(b []byte) {
	q.mu.Lock()
	q.replies = append(q.replies, b)
	q.mu.Unlock()
	q.signal()
}

// close marks the stream to end with reason (session_gone when the session
// actor vanished without an end frame).
func (q *outbound) close(reason string) {
	q.mu.Lock()
	if q.cut == "" && !q.final {
		q.cut = reason
	}
	q.mu.Unlock()
	q.signal()
}

// take returns everything queued; the writer writes it, then checks final/cut.
func (q *outbound) take(buf []*pb.Frame) (frames []*pb.Frame, replies [][]byte, final bool, cut string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	frames = append(buf[:0], q.frames...)
	clear(q.frames)
	q.frames = q.frames[:0]
	replies = q.replies
	q.replies = nil
	q.bytes = 0
	return frames, replies, q.final, q.cut
}

// clientActor is the gateway actor of one connected client: the session
// sends it frames; it keeps them in the client's queue. It stops when the
// client goes (the session watches it and forgets it).
type clientActor struct {
	q        *outbound
	watching bool
}

func clientProps(q *outbound, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &clientActor{q: q} }, append([]actor.PropsOption{dispatch.Option()}, opts...)...)
}

func (a *clientActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.Frames:
		if !a.watching && ctx.Sender() != nil {
			// Know when the session actor goes away without saying goodbye
			// (its node died): the client then reconnects and resumes.
			ctx.Watch(ctx.Sender())
			a.watching = true
		}
		if !a.q.push(m.GetFrames(), m.GetFinal()) {
			ctx.Stop(ctx.Self())
		}
	case *actor.Terminated:
		// Terminated is a system message: it overtakes the frames the
		// session sent before it stopped (its end frame, when it moved or
		// ended) if they still wait in this mailbox. Handle it behind them.
		ctx.Send(ctx.Self(), sessionGone{})
	case sessionGone:
		a.q.close("session_gone")
		ctx.Stop(ctx.Self())
	}
}

// sessionGone is what a client actor sends itself when the session actor it
// watches has terminated: a user message, so that it is handled after the
// frames already queued. It never leaves the node.
type sessionGone struct{}
