// Package hub is a session's side of delivery: its frame log and the set of
// subscribers (SSE, WebSocket and ACP clients, on any node) it sends frames
// to. Everything the session emits while handling one message goes to every
// subscriber as one batch; subscribing (replay or sticky snapshot, then
// registration) happens in one step, so that no frame is missed or repeated
// between replay and live.
//
// A Hub belongs to the session actor: one goroutine at a time, no locks.
package hub

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/session/internal/framelog"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Subscription modes.
const (
	ModeFresh   = framelog.ModeFresh
	ModeResumed = framelog.ModeResumed
	ModeResync  = framelog.ModeResync
	// ModeLive: SubscribeNow; nothing was replayed.
	ModeLive = "live"
	// ModeTurn: SubscribeTurn; the running turn was replayed from its start.
	ModeTurn = "turn"
	// ModeIdle: SubscribeTurn found no turn running; nobody was registered.
	ModeIdle = "idle"
)

// Messenger is what a hub needs of the session actor's context.
type Messenger interface {
	// Request sends msg so that the receiver learns the sender (and can
	// watch it).
	Request(pid *actor.PID, msg any)
	Watch(pid *actor.PID)
	Unwatch(pid *actor.PID)
}

// Subscriber is one registered client.
type Subscriber struct {
	PID     *actor.PID
	Kind    string // sse, ws, acp
	Subject string
}

// Hub is a session's frame log and subscribers. The zero value is not
// usable; use New.
type Hub struct {
	sessionID string
	log       *framelog.Log
	subs      map[string]*Subscriber
	outbox    []*pb.Frame
	final     bool
	// turnStart is the seq of the running turn's start frame (0: no turn
	// runs), where SubscribeTurn replays from.
	turnStart uint64
	// OnEmit, when set, sees every event emitted (metrics).
	OnEmit func(ev *pb.Event)
}

// New returns a hub for a session whose log starts at epoch.
func New(sessionID, epoch string, replayFrames, replayBytes int) *Hub {
	return &Hub{sessionID: sessionID, log: framelog.New(epoch, replayFrames, replayBytes), subs: map[string]*Subscriber{}}
}

// Log is the frame log.
func (h *Hub) Log() *framelog.Log { return h.log }

// Len is the number of subscribers.
func (h *Hub) Len() int { return len(h.subs) }

// Subscribers calls fn for each subscriber.
func (h *Hub) Subscribers(fn func(*Subscriber)) {
	for _, s := range h.subs {
		fn(s)
	}
}

// Emit appends an event to the log and to this message's outbox. A
// non-empty sticky key makes it that key's last frame.
func (h *Hub) Emit(ev *pb.Event, sticky string) *pb.Frame {
	f := h.log.Append(ev, sticky)
	switch ev.GetChat().GetChunk().(type) {
	case *pb.ChatEvent_TurnStart:
		h.turnStart = f.GetSeq()
	case *pb.ChatEvent_TurnFinish:
		h.turnStart = 0
	}
	if h.OnEmit != nil {
		h.OnEmit(ev)
	}
	h.outbox = append(h.outbox, f)
	return f
}

// Seed puts an event in the log as sticky state without sending it (the
// state a new activation loaded).
func (h *Hub) Seed(ev *pb.Event, sticky string) {
	h.log.SetSticky(sticky, h.log.Append(ev, ""))
}

// Unstick removes a sticky key (a dialog that was answered).
func (h *Hub) Unstick(key string) { h.log.Unstick(key) }

// End emits an end frame: the next Flush ends every subscription.
func (h *Hub) End(reason string) {
	h.Emit(pb.EndOf(reason), "")
	h.final = true
}

// Ending reports whether an end frame waits to be flushed.
func (h *Hub) Ending() bool { return h.final }

// Flush sends what was emitted since the last Flush to every subscriber, as
// one batch (Request, so that each learns the session and watches it). After
// an end frame every subscription is over: the hub forgets its subscribers.
// It reports whether subscribers were dropped that way.
func (h *Hub) Flush(m Messenger) (ended bool) {
	if len(h.outbox) == 0 {
		return false
	}
	batch := &pb.Frames{SessionId: h.sessionID, Frames: h.outbox, Final: h.final}
	h.outbox = nil
	for key, sub := range h.subs {
		m.Request(sub.PID, batch)
		if h.final {
			m.Unwatch(sub.PID)
			delete(h.subs, key)
		}
	}
	ended = h.final
	h.final = false
	return ended
}

// Subscribe registers pid after sending it the frames it is owed: the
// sticky state for a fresh subscription, the frames after lastEventID for a
// resumable one, else a resync frame and the sticky state. Anything emitted
// before is flushed first, so that the new subscriber neither misses nor
// repeats a frame.
func (h *Hub) Subscribe(m Messenger, sub Subscriber, lastEventID string) *pb.SubscribeResult {
	h.Flush(m)
	frames, mode := h.log.Since(lastEventID)
	if mode == ModeResync {
		ev := pb.ResyncOf(resyncReason(lastEventID, h.log))
		head := h.log.Head()
		resync := &pb.Frame{Seq: head, Id: h.log.ID(head), Event: ev, Size: uint32(proto.Size(ev))}
		frames = append([]*pb.Frame{resync}, h.log.Sticky()...)
	}
	if len(frames) > 0 {
		m.Request(sub.PID, &pb.Frames{SessionId: h.sessionID, Frames: frames, Owed: true})
	}
	s := sub
	h.subs[sub.PID.String()] = &s
	m.Watch(sub.PID)
	return &pb.SubscribeResult{Ok: true, Epoch: h.log.Epoch(), Head: h.log.Head(), Mode: mode, Replayed: uint32(len(frames))}
}

// SubscribeNow registers pid for the frames emitted from now on: nothing is
// replayed, not even the sticky state (a per-turn chat stream about to send
// its prompt reads only what follows). The subscriber gets an empty batch
// at once, so that it learns the session and watches it before any frame
// comes: a session that goes away first still ends its stream.
func (h *Hub) SubscribeNow(m Messenger, sub Subscriber) *pb.SubscribeResult {
	h.Flush(m)
	res := h.Subscribe(m, sub, h.log.ID(h.log.Head()))
	m.Request(sub.PID, &pb.Frames{SessionId: h.sessionID})
	res.Mode = ModeLive
	return res
}

// SubscribeTurn registers pid for the running turn: its frames from its
// start frame on, replayed from the window, then live (a per-turn chat
// stream resumed). When no turn runs nobody is registered (ModeIdle). ok is
// false when the window no longer holds the turn's start (the turn emitted
// more than the window keeps): nobody is registered either.
func (h *Hub) SubscribeTurn(m Messenger, sub Subscriber) (res *pb.SubscribeResult, ok bool) {
	h.Flush(m)
	if h.turnStart == 0 {
		return &pb.SubscribeResult{Ok: true, Epoch: h.log.Epoch(), Head: h.log.Head(), Mode: ModeIdle}, true
	}
	if h.turnStart < h.log.Oldest() {
		return nil, false
	}
	res = h.Subscribe(m, sub, h.log.ID(h.turnStart-1))
	res.Mode = ModeTurn
	return res, true
}

// TurnStart is the seq of the running turn's start frame (0 when no turn
// runs).
func (h *Hub) TurnStart() uint64 { return h.turnStart }

// Unsubscribe forgets pid (it asked, or it is gone); it reports whether pid
// was a subscriber.
func (h *Hub) Unsubscribe(m Messenger, pid *actor.PID) bool {
	key := pid.String()
	if _, ok := h.subs[key]; !ok {
		return false
	}
	delete(h.subs, key)
	if m != nil {
		m.Unwatch(pid)
	}
	return true
}

// Gone forgets a subscriber that terminated (no unwatch needed).
func (h *Hub) Gone(pid *actor.PID) bool { return h.Unsubscribe(nil, pid) }

func resyncReason(last string, l *framelog.Log) string {
	if _, ok := l.Parse(last); !ok {
		return "the stream position is from another epoch of this session (it restarted or moved)"
	}
	return "the stream position is outside the replay window"
}
