package gateway

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/delivery"
	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// uiMessageStreamHeader tells the AI SDK that the body is a UI message
// stream, and which version.
const uiMessageStreamHeader = "x-vercel-ai-ui-message-stream"

// turnSink is the sink of a per-turn chat stream: of the session's frames it
// queues the chat chunks of one turn, from its start to its finish, and
// ends the stream after the finish. Everything else (state, status, other
// turns, user messages) stays out.
//
// With a tag it streams the turn that answers the prompt sent with that
// tag: the session echoes the prompt as a user message carrying the tag and
// the prompt's id, and the turn whose start lists that id is the one (it may
// answer queued prompts with it). Without a tag it streams the first turn
// it sees start: subscribed from the running turn's start, that is the
// running turn.
type turnSink struct {
	q        *delivery.Queue
	tag      string
	promptID uint64 // learned from the echo of the tagged prompt
	turnID   uint64 // the turn streamed, once it started
	done     bool   // its finish is queued
}

// Frames implements delivery.Sink.
func (k *turnSink) Frames(_ actor.Context, b *pb.Frames) bool {
	frames, final := b.GetFrames(), b.GetFinal()
	push := k.q.PushFrames
	if b.GetOwed() {
		// The running turn so far, replayed: paced by the client.
		push = k.q.PushOwed
	}
	if k.done {
		return false // the stream ends with what is queued: nothing more is needed
	}
	var out []*pb.Frame
	for _, f := range frames {
		c := f.GetEvent().GetChat()
		if c == nil {
			continue
		}
		switch e := c.GetChunk().(type) {
		case *pb.ChatEvent_UserMessage:
			if k.tag != "" && k.promptID == 0 && e.UserMessage.GetTag() == k.tag {
				k.promptID = e.UserMessage.GetPromptId()
			}
		case *pb.ChatEvent_TurnStart:
			if k.turnID == 0 && (k.tag == "" || k.promptID != 0 && slices.Contains(e.TurnStart.GetPromptIds(), k.promptID)) {
				k.turnID = e.TurnStart.GetTurnId()
				out = append(out, f)
			}
		case *pb.ChatEvent_TurnFinish:
			if k.turnID != 0 && e.TurnFinish.GetTurnId() == k.turnID {
				out = append(out, f)
				k.done = true
			}
		default:
			if k.turnID != 0 {
				out = append(out, f)
			}
		}
		if k.done {
			break
		}
	}
	switch {
	case k.done:
		// The finish is the stream's last chunk: [DONE] follows it.
		return push(out, true)
	case final:
		// The session ended every stream before the turn finished (it
		// always finishes a turn first; this is a safety net): the stream
		// ends as a session gone away does.
		ok := len(out) == 0 || push(out, false)
		k.q.End(delivery.EndSessionGone)
		return ok
	case len(out) == 0:
		return true
	}
	return push(out, false)
}

// Gone implements delivery.Sink: the session went away before the turn
// finished.
func (k *turnSink) Gone(actor.Context) { k.q.End(delivery.EndSessionGone) }

// chatTransport writes a per-turn chat stream as the AI SDK's UI message
// stream protocol (v1) has it: each chunk one "data: <json>" event, and
// "data: [DONE]" after the turn's finish. Comments (the first one, the
// keep-alives) are ignored by the SDK's parser.
type chatTransport struct{ *delivery.SSE }

func (t chatTransport) Write(it delivery.Item) error {
	if f := it.Frame; f != nil {
		d := t.Data()
		*d = wire.AppendChunk((*d)[:0], f.GetEvent().GetChat())
		delivery.WriteEvent(t.Buffer(), "", "", *d)
	} else {
		delivery.WriteEvent(t.Buffer(), "", "", it.Raw)
	}
	return t.Spill()
}

func (t chatTransport) KeepAlive() error { return t.Comment("keep-alive") }

// End: after the turn's finish, [DONE]. A stream cut before it (the client
// too slow, the daemon stopping, the session gone, the credential revoked)
// gets an error chunk that says why and no [DONE]: the turn did not end on
// this stream, and may still run (GET …/chat/stream resumes it).
func (t chatTransport) End(reason delivery.Reason) error {
	switch reason {
	case delivery.EndFinal:
		delivery.WriteEvent(t.Buffer(), "", "", []byte("[DONE]"))
	case delivery.EndClientGone, delivery.EndClosed:
		return nil
	default:
		d := t.Data()
		*d = append((*d)[:0], `{"type":"error","errorText":`...)
		*d = wire.AppendString(*d, cutText(reason))
		*d = append(*d, '}')
		delivery.WriteEvent(t.Buffer(), "", "", *d)
	}
	return t.Flush()
}

// cutText says why a chat stream ended before its turn's finish.
func cutText(reason delivery.Reason) string {
	const resume = " The turn may still be running: GET /api/sessions/{id}/chat/stream resumes it."
	switch reason {
	case delivery.EndSlowConsumer:
		return "The stream was cut: the client read too slowly." + resume
	case delivery.EndShutdown:
		return "The stream was cut: the daemon is shutting down."
	case delivery.EndMoved:
		return "The stream was cut: the session moved to another node." + resume
	case delivery.EndRevoked:
		return "The stream was cut: its credential was revoked."
	case delivery.EndSessionGone:
		return "The stream was cut: the session went away before the turn finished." + resume
	}
	return "The stream was cut (" + string(reason) + ")."
}
