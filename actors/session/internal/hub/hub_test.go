package hub

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// recorder is a Messenger that keeps what was sent.
type recorder struct {
	sent    map[string][]*pb.Frames
	watched map[string]bool
}

func newRecorder() *recorder {
	return &recorder{sent: map[string][]*pb.Frames{}, watched: map[string]bool{}}
}

func (r *recorder) Request(pid *actor.PID, msg any) {
	r.sent[pid.Id] = append(r.sent[pid.Id], msg.(*pb.Frames))
}
func (r *recorder) Watch(pid *actor.PID)   { r.watched[pid.Id] = true }
func (r *recorder) Unwatch(pid *actor.PID) { delete(r.watched, pid.Id) }

func (r *recorder) frames(id string) []*pb.Frame {
	var out []*pb.Frame
	for _, b := range r.sent[id] {
		out = append(out, b.Frames...)
	}
	return out
}

func state(key string, rev uint64) *pb.Event {
	return pb.StateOf(key, []byte(fmt.Sprintf(`{"rev":%d}`, rev)), rev, false)
}

func sub(id string) Subscriber { return Subscriber{PID: actor.NewPID("local", id), Kind: "sse"} }

func TestFreshResumedAndResync(t *testing.T) {
	h := New("s1", "ep", 4, 1<<20)
	m := newRecorder()
	h.Emit(state("a.x", 1), "state:a.x")
	h.Emit(pb.DiagnosticOf("c", "m"), "")
	h.Emit(state("a.x", 2), "state:a.x")

	res := h.Subscribe(m, sub("fresh"), "")
	if res.GetMode() != ModeFresh || res.GetHead() != 3 {
		t.Fatalf("fresh: %v", res)
	}
	got := m.frames("fresh")
	if len(got) != 1 || got[0].GetId() != "ep-3" || got[0].GetEvent().GetState().GetRev() != 2 {
		t.Fatalf("fresh subscriber got %v; want the sticky state as of head", got)
	}
	if !m.watched["fresh"] {
		t.Fatal("subscriber not watched")
	}

	res = h.Subscribe(m, sub("resumed"), "ep-1")
	if res.GetMode() != ModeResumed {
		t.Fatalf("resume: %v", res)
	}
	if got := m.frames("resumed"); len(got) != 2 || got[0].GetSeq() != 2 || got[1].GetSeq() != 3 {
		t.Fatalf("resumed got %v; want seq 2 and 3", got)
	}

	for i := 0; i < 5; i++ {
		h.Emit(pb.DiagnosticOf("c", "m"), "")
	}
	h.Flush(m)
	res = h.Subscribe(m, sub("late"), "ep-1")
	if res.GetMode() != ModeResync {
		t.Fatalf("outside the window: %v", res)
	}
	got = m.frames("late")
	if pb.KindOf(got[0].GetEvent()) != pb.KindResync || len(got) != 2 {
		t.Fatalf("late got %v; want resync then the sticky state", got)
	}
	if res := h.Subscribe(m, sub("other"), "zz-1"); res.GetMode() != ModeResync {
		t.Fatalf("another epoch: %v", res)
	}
}

func TestOneBatchPerFlushAndEnd(t *testing.T) {
	h := New("s1", "ep", 100, 1<<20)
	m := newRecorder()
	h.Subscribe(m, sub("a"), "")
	h.Subscribe(m, sub("b"), "")
	h.Emit(pb.DiagnosticOf("c", "1"), "")
	h.Emit(pb.DiagnosticOf("c", "2"), "")
	if h.Flush(m) {
		t.Fatal("flush reported an end")
	}
	if n := len(m.sent["a"]); n != 1 || len(m.sent["a"][0].Frames) != 2 {
		t.Fatalf("a got %d batches", n)
	}
	if h.Flush(m) {
		t.Fatal("empty flush")
	}
	if len(m.sent["a"]) != 1 {
		t.Fatal("an empty flush sent a batch")
	}
	h.End("stopped")
	if !h.Flush(m) {
		t.Fatal("end not reported")
	}
	last := m.sent["b"][len(m.sent["b"])-1]
	if !last.GetFinal() || pb.KindOf(last.Frames[len(last.Frames)-1].GetEvent()) != pb.KindEnd {
		t.Fatalf("last batch %v; want final with the end frame", last)
	}
	if h.Len() != 0 || len(m.watched) != 0 {
		t.Fatalf("after the end: %d subscribers, watched %v", h.Len(), m.watched)
	}
}

func TestSubscribeFlushesFirst(t *testing.T) {
	h := New("s1", "ep", 100, 1<<20)
	m := newRecorder()
	h.Subscribe(m, sub("old"), "")
	h.Emit(pb.DiagnosticOf("c", "pending"), "")
	res := h.Subscribe(m, sub("new"), "ep-0")
	if res.GetMode() != ModeResumed {
		t.Fatalf("%v", res)
	}
	// The pending frame went to the old subscriber as live and to the new one as replay: once each.
	if n := len(m.frames("old")); n != 1 {
		t.Fatalf("old got %d frames", n)
	}
	if n := len(m.frames("new")); n != 1 {
		t.Fatalf("new got %d frames", n)
	}
	h.Flush(m)
	if n := len(m.frames("new")); n != 1 {
		t.Fatalf("new got the frame twice")
	}
}

func TestUnsubscribeAndGone(t *testing.T) {
	h := New("s1", "ep", 100, 1<<20)
	m := newRecorder()
	h.Subscribe(m, sub("a"), "")
	h.Subscribe(m, sub("b"), "")
	if !h.Unsubscribe(m, actor.NewPID("local", "a")) || m.watched["a"] {
		t.Fatal("a not unsubscribed and unwatched")
	}
	if h.Unsubscribe(m, actor.NewPID("local", "a")) {
		t.Fatal("a unsubscribed twice")
	}
	if !h.Gone(actor.NewPID("local", "b")) || h.Len() != 0 {
		t.Fatal("b not forgotten")
	}
}

func chat(c pb.ChatChunk) *pb.Event { return pb.ChatOf(c) }

func turnStart(id uint64) *pb.Event {
	return chat(&pb.ChatEvent_TurnStart{TurnStart: &pb.TurnStart{TurnId: id}})
}

func turnFinish(id uint64) *pb.Event {
	return chat(&pb.ChatEvent_TurnFinish{TurnFinish: &pb.TurnFinish{TurnId: id}})
}

func delta(s string) *pb.Event {
	return chat(&pb.ChatEvent_PartDelta{PartDelta: &pb.PartDelta{Id: "p", Delta: s}})
}

func TestSubscribeNowReplaysNothing(t *testing.T) {
	h := New("s1", "ep", 16, 1<<20)
	m := newRecorder()
	h.Emit(state("a.x", 1), "state:a.x")
	h.Emit(delta("before"), "")
	res := h.SubscribeNow(m, sub("now"))
	if res.GetMode() != ModeLive || res.GetHead() != 2 || res.GetReplayed() != 0 {
		t.Fatalf("subscribe now: %v", res)
	}
	if got := m.frames("now"); len(got) != 0 || len(m.sent["now"]) != 1 {
		t.Fatalf("subscribe now replayed %v in %d batches; want one empty batch, not even the sticky state", got, len(m.sent["now"]))
	}
	h.Emit(delta("after"), "")
	h.Flush(m)
	if got := m.frames("now"); len(got) != 1 || got[0].GetSeq() != 3 {
		t.Fatalf("live frames %v; want seq 3", got)
	}
}

func TestSubscribeTurn(t *testing.T) {
	h := New("s1", "ep", 8, 1<<20)
	m := newRecorder()

	// No turn: nobody is registered.
	res, ok := h.SubscribeTurn(m, sub("idle"))
	if !ok || res.GetMode() != ModeIdle || h.Len() != 0 || m.watched["idle"] {
		t.Fatalf("no turn: %v ok %v, %d subscribers", res, ok, h.Len())
	}

	h.Emit(delta("old turn's"), "")
	h.Emit(turnStart(7), "")
	h.Emit(state("a.x", 1), "state:a.x")
	h.Emit(delta("one"), "")
	h.Flush(m)
	res, ok = h.SubscribeTurn(m, sub("mid"))
	if !ok || res.GetMode() != ModeTurn {
		t.Fatalf("mid turn: %v ok %v", res, ok)
	}
	got := m.frames("mid")
	if len(got) != 3 || got[0].GetEvent().GetChat().GetTurnStart().GetTurnId() != 7 || got[2].GetSeq() != 4 {
		t.Fatalf("mid turn replay %v; want the turn's start and what followed", got)
	}
	h.Emit(delta("two"), "")
	h.Emit(turnFinish(7), "")
	h.Flush(m)
	if got := m.frames("mid"); len(got) != 5 {
		t.Fatalf("after the replay the subscriber gets the live frames: %v", got)
	}
	if res, ok := h.SubscribeTurn(m, sub("after")); !ok || res.GetMode() != ModeIdle {
		t.Fatalf("after the finish: %v ok %v", res, ok)
	}

	// A turn longer than the window cannot be replayed from its start.
	h.Emit(turnStart(8), "")
	for i := 0; i < 8; i++ {
		h.Emit(delta("x"), "")
	}
	h.Flush(m)
	if res, ok := h.SubscribeTurn(m, sub("late")); ok || res != nil || m.watched["late"] {
		t.Fatalf("turn start outside the window: %v ok %v", res, ok)
	}
	if h.TurnStart() == 0 {
		t.Fatal("the turn still runs")
	}
}
