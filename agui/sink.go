package agui

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// RunSink is the sink of an AG-UI run's subscriber (internal/delivery): of
// the session's frames it queues what the run renders, and ends the stream
// when the run is over. It keeps:
//
//   - every state and status frame while the run is open (STATE_DELTA: a
//     surface or key changed, by whoever; a domain's availability);
//   - the chat frames of the run's turn, from its start to its finish;
//   - the dialogs the agent opens during that turn, which end the run
//     (the interrupt outcome) after the batch that opened them.
//
// With a tag it follows the turn that answers the prompt sent with that tag
// (the session echoes the prompt as a user message carrying the tag and the
// prompt's id; the turn whose start lists that id is the one, after the
// turns queued before it). Without one it follows the first turn it sees
// start: a resume run, subscribed from the running turn's start. The
// dialogs a resume run answers are not interrupts of that run.
type RunSink struct {
	q         *delivery.Queue
	tag       string
	answering map[string]bool
	promptID  uint64
	turnID    uint64
	pending   []string // dialogs of the turn that wait for an answer
	done      bool
	out       []*pb.Frame
}

// NewRunSink is the sink of a run that sent its prompt with tag (empty: a
// resume run), answering the dialogs named in answering.
func NewRunSink(q *delivery.Queue, tag string, answering []string) *RunSink {
	k := &RunSink{q: q, tag: tag, answering: map[string]bool{}}
	for _, id := range answering {
		k.answering[id] = true
	}
	return k
}

// Frames implements delivery.Sink.
func (k *RunSink) Frames(_ actor.Context, b *pb.Frames) bool {
	frames, final := b.GetFrames(), b.GetFinal()
	// What the subscription begins with (the replay of a resume, the
	// sticky state) is owed the client: it counts in no queue bound.
	push := k.q.PushFrames
	if b.GetOwed() {
		push = k.q.PushOwed
	}
	if k.done {
		return false // the stream ends with what is queued
	}
	out := k.out[:0]
	for _, f := range frames {
		switch e := f.GetEvent().GetEvent().(type) {
		case *pb.Event_State, *pb.Event_Status:
			out = append(out, f)
		case *pb.Event_Chat:
			if k.chat(e.Chat) {
				out = append(out, f)
			}
		case *pb.Event_UiRequest:
			if k.dialog(e.UiRequest) {
				out = append(out, f)
			}
		}
		if k.done {
			break
		}
	}
	if !k.done && k.turnID != 0 && len(k.pending) > 0 {
		// The turn waits for an answer: the run ends here, interrupted.
		k.done = true
	}
	k.out = out[:0]
	switch {
	case k.done:
		ok := push(out, true)
		clear(out)
		return ok
	case final:
		// The session ended every stream before the run's turn ended (it
		// finishes a turn first; this is a safety net).
		ok := len(out) == 0 || push(out, false)
		clear(out)
		k.q.End(delivery.EndSessionGone)
		return ok
	case len(out) == 0:
		return true
	}
	ok := push(out, false)
	clear(out)
	return ok
}

// chat reports whether a chat frame is the run's, learning its turn.
func (k *RunSink) chat(c *pb.ChatEvent) bool {
	switch e := c.GetChunk().(type) {
	case *pb.ChatEvent_UserMessage:
		if k.tag != "" && k.promptID == 0 && e.UserMessage.GetTag() == k.tag {
			k.promptID = e.UserMessage.GetPromptId()
		}
		return false
	case *pb.ChatEvent_TurnStart:
		if k.turnID == 0 && (k.tag == "" || k.promptID != 0 && slices.Contains(e.TurnStart.GetPromptIds(), k.promptID)) {
			k.turnID = e.TurnStart.GetTurnId()
			return true
		}
		return false
	case *pb.ChatEvent_TurnFinish:
		if k.turnID != 0 && e.TurnFinish.GetTurnId() == k.turnID {
			k.done = true
			return true
		}
		return false
	}
	return k.turnID != 0
}

// dialog reports whether a ui-request frame is a dialog of the run's turn
// (or the end of one), keeping the set of those waiting.
func (k *RunSink) dialog(u *pb.UIRequestEvent) bool {
	id := u.GetId()
	i := slices.Index(k.pending, id)
	if u.GetResolved() {
		if i < 0 {
			return false
		}
		k.pending = slices.Delete(k.pending, i, i+1)
		return true
	}
	if k.turnID == 0 || i >= 0 || k.answering[id] || !IsDialog(u.GetMethod()) {
		return false
	}
	k.pending = append(k.pending, id)
	return true
}

// Gone implements delivery.Sink: the session went away before the run
// ended.
func (k *RunSink) Gone(actor.Context) { k.q.End(delivery.EndSessionGone) }
