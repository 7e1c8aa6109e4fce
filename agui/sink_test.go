package agui

import (
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func newQueue() *delivery.Queue {
	return delivery.NewQueue(delivery.Limits{MaxBytes: 1 << 20, MaxAge: time.Minute}, nil)
}

// queued is what the sink queued: one letter per frame kind (s state,
// t status, c chat, u ui-request), and how the queue ended.
func queued(q *delivery.Queue) (string, delivery.Reason) {
	items, end := q.Take(nil)
	var b strings.Builder
	for _, it := range items {
		switch it.Frame.GetEvent().GetEvent().(type) {
		case *pb.Event_State:
			b.WriteByte('s')
		case *pb.Event_Status:
			b.WriteByte('t')
		case *pb.Event_Chat:
			b.WriteByte('c')
		case *pb.Event_UiRequest:
			b.WriteByte('u')
		}
	}
	return b.String(), end
}

func userMessage(tag string, prompt uint64) *pb.Frame {
	return chatFrame(0, &pb.ChatEvent_UserMessage{UserMessage: &pb.UserMessage{PromptId: prompt, Tag: tag}})
}

func dialog(id, method string, resolved bool) *pb.Frame {
	return &pb.Frame{Event: pb.UIRequestOf(&pb.UIRequestEvent{Id: id, Method: method, Resolved: resolved})}
}

// A run's sink keeps the state, the status and its own turn, which may come
// after another; it ends with the turn's finish.
func TestRunSinkFollowsItsTurn(t *testing.T) {
	q := newQueue()
	k := NewRunSink(q, "tag-1", nil)
	state := &pb.Frame{Event: pb.StateOf("k", []byte(`1`), 1, false)}
	status := &pb.Frame{Event: pb.StatusOf(&pb.StatusEvent{Status: "ready"})}
	batches := [][]*pb.Frame{
		{chatFrame(0, turnStart(1)), chatFrame(0, partDelta("1-1-t0", text, "theirs")), state},
		{userMessage("tag-1", 2), status, dialog("other", "confirm", false)}, // another turn's dialog
		{chatFrame(0, turnFinish(1, "end_turn")), chatFrame(0, &pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: 2, PromptIds: []uint64{2}}})},
		{chatFrame(0, partDelta("2-1-t0", text, "mine")), state},
		{chatFrame(0, turnFinish(2, "end_turn")), state},
	}
	for i, b := range batches {
		if !k.Frames(nil, &pb.Frames{Frames: b}) {
			t.Fatalf("batch %d refused", i)
		}
	}
	if got, end := queued(q); got != "stccsc" || end != delivery.EndFinal {
		t.Fatalf("queued %q, end %q", got, end)
	}
	if k.Frames(nil, &pb.Frames{Frames: []*pb.Frame{state}}) {
		t.Fatal("the sink took frames after its turn's finish")
	}
}

// A dialog of the run's turn ends the run after the batch that opened it;
// the dialogs a resume run answers do not.
func TestRunSinkInterrupts(t *testing.T) {
	q := newQueue()
	k := NewRunSink(q, "", []string{"answered"})
	k.Frames(nil, &pb.Frames{Frames: []*pb.Frame{chatFrame(0, turnStart(5)), dialog("answered", "confirm", false), dialog("n", "notify", false)}})
	k.Frames(nil, &pb.Frames{Frames: []*pb.Frame{dialog("answered", "confirm", true), chatFrame(0, partDelta("5-1-t0", text, "go on"))}})
	if got, end := queued(q); got != "cc" || end != "" {
		t.Fatalf("queued %q, end %q", got, end)
	}
	k.Frames(nil, &pb.Frames{Frames: []*pb.Frame{dialog("next", "select", false), chatFrame(0, partDelta("5-1-t0", text, "more"))}})
	if got, end := queued(q); got != "uc" || end != delivery.EndFinal {
		t.Fatalf("queued %q, end %q", got, end)
	}
}

// The session's last batch before the run's turn ended cuts the stream as a
// session gone away does.
func TestRunSinkSessionEnds(t *testing.T) {
	q := newQueue()
	k := NewRunSink(q, "", nil)
	k.Frames(nil, &pb.Frames{Frames: []*pb.Frame{chatFrame(0, turnStart(5)), {Event: pb.EndOf("stopped")}}, Final: true})
	if got, end := queued(q); got != "c" || end != delivery.EndSessionGone {
		t.Fatalf("queued %q, end %q", got, end)
	}
}
