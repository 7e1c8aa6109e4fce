package delivery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func newClock() *clock.Fake { return clock.NewFake(time.Unix(1_000_000, 0)) }

// frame is a session frame of about size bytes.
func frame(id string, size int) *pb.Frame {
	return &pb.Frame{Id: id, Event: pb.DiagnosticOf("test", strings.Repeat("x", size)), Size: uint32(size)}
}

// The byte bound counts the backlog: the items waiting for the writer,
// less the largest one.
func TestQueueBytesBound(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1000, MaxAge: time.Hour}, newClock())
	for i := 0; i < 3; i++ {
		if !q.PushFrames([]*pb.Frame{frame("e-1", 200)}, false) {
			t.Fatalf("push %d cut the client under the bound", i)
		}
	}
	if n, b, _ := q.Waiting(); n != 3 || b != 3*(200+3+itemOverhead) {
		t.Fatalf("waiting %d items, %d bytes", n, b)
	}
	// Five frames of 227 bytes are a backlog of 908 bytes; the sixth takes
	// it past 1000.
	q.PushFrames([]*pb.Frame{frame("e-4", 200)}, false)
	if !q.PushFrames([]*pb.Frame{frame("e-5", 200)}, false) {
		t.Fatal("a backlog under the bound cut the client")
	}
	if q.PushFrames([]*pb.Frame{frame("e-6", 200)}, false) {
		t.Fatal("a client past the byte bound was not cut")
	}
	items, end := q.Take(nil)
	if len(items) != 0 || end != EndSlowConsumer {
		t.Fatalf("after the cut: %d items, end %q", len(items), end)
	}
	if _, b, _ := q.Waiting(); b <= 1000 {
		t.Errorf("the cut reports %d bytes waiting", b)
	}
	if q.PushRaw([]byte("late")) {
		t.Error("a cut queue took more")
	}
}

// One item larger than the whole budget is not a backlog, nor is what the
// writer is writing: a large frame in the writer's hands and another queued
// behind it reach a client that reads. Items behind the queued large one
// are a backlog.
func TestQueueOneLargeItem(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 100, MaxAge: time.Hour}, newClock())
	if !q.PushFrames([]*pb.Frame{frame("e-1", 500), frame("e-2", 10)}, false) {
		t.Fatal("one large frame in a batch cut the client")
	}
	if items, _ := q.Take(nil); len(items) != 2 {
		t.Fatalf("took %d", len(items))
	}
	// The writer has them in hand; a second large one waits behind.
	if !q.PushFrames([]*pb.Frame{frame("e-3", 500)}, false) || !q.PushFrames([]*pb.Frame{frame("e-4", 10)}, false) {
		t.Fatal("a large frame behind one being written cut the client")
	}
	// A third is a backlog.
	if q.PushFrames([]*pb.Frame{frame("e-5", 500)}, false) {
		t.Fatal("two large frames waiting behind the writer did not cut")
	}
	if q.Ended() != EndSlowConsumer {
		t.Fatalf("end %q", q.Ended())
	}
}

// What a subscription begins with (a replay, the sticky state) is owed, not
// a backlog: it counts in neither bound, however large. Live frames behind
// it count in bytes, and begin to age once it is written.
func TestQueueOwed(t *testing.T) {
	clk := newClock()
	q := NewQueue(Limits{MaxBytes: 1000, MaxAge: 10 * time.Second}, clk)
	replay := make([]*pb.Frame, 40)
	for i := range replay {
		replay[i] = frame("e-1", 1000)
	}
	if !q.PushOwed(replay, false) {
		t.Fatal("a replay of 40 KB cut a client with a 1000-byte bound")
	}
	if !q.PushFrames([]*pb.Frame{frame("e-2", 300), frame("e-3", 300)}, false) {
		t.Fatal("live frames behind the replay cut the client under the bound")
	}
	// The replay is written slowly, as the client reads it: it does not age.
	q.Take(nil)
	clk.Advance(time.Minute)
	if !q.PushFrames([]*pb.Frame{frame("e-4", 300)}, false) {
		t.Fatal("the time the replay took counted as the live frames' age")
	}
	// Once it is written, what waits behind it ages from then.
	q.Written()
	clk.Advance(9 * time.Second)
	if !q.PushFrames([]*pb.Frame{frame("e-5", 10)}, false) {
		t.Fatal("cut inside the age bound")
	}
	clk.Advance(2 * time.Second)
	if q.PushFrames([]*pb.Frame{frame("e-6", 10)}, false) {
		t.Fatal("live frames waiting 11 s after the replay was written did not cut")
	}

	// Live frames behind the replay count in bytes.
	q = NewQueue(Limits{MaxBytes: 1000, MaxAge: time.Hour}, newClock())
	q.PushOwed(replay, false)
	for i := range 4 {
		if !q.PushFrames([]*pb.Frame{frame("e-2", 300)}, false) {
			t.Fatalf("live frame %d cut the client under the bound", i)
		}
	}
	if q.PushFrames([]*pb.Frame{frame("e-3", 300)}, false) {
		t.Fatal("a live backlog past the bound behind a replay did not cut")
	}

	// A final owed batch (a session that ended) ends the stream after it.
	q = NewQueue(Limits{MaxBytes: 100, MaxAge: time.Hour}, newClock())
	if !q.PushOwed(replay, true) {
		t.Fatal("a final replay was refused")
	}
	if items, end := q.Take(nil); len(items) != len(replay) || end != EndFinal {
		t.Fatalf("took %d, end %q", len(items), end)
	}
}

func TestQueueAgeBound(t *testing.T) {
	clk := newClock()
	q := NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: 10 * time.Second}, clk)
	q.PushFrames([]*pb.Frame{frame("e-1", 10)}, false)
	clk.Advance(9 * time.Second)
	if !q.PushFrames([]*pb.Frame{frame("e-2", 10)}, false) {
		t.Fatal("cut inside the age bound")
	}
	clk.Advance(2 * time.Second)
	if q.PushFrames([]*pb.Frame{frame("e-3", 10)}, false) {
		t.Fatal("a client whose oldest frame waited 11 s was not cut")
	}
	if _, _, age := q.Waiting(); age != 11*time.Second {
		t.Errorf("the cut reports age %s", age)
	}

	// The age runs from the oldest unwritten item, in the writer's hands too.
	clk = newClock()
	q = NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: 10 * time.Second}, clk)
	q.PushFrames([]*pb.Frame{frame("e-1", 10)}, false)
	q.Take(nil) // the write blocks
	clk.Advance(11 * time.Second)
	if q.PushFrames([]*pb.Frame{frame("e-2", 10)}, false) {
		t.Fatal("frames behind a write blocked past the age bound did not cut")
	}

	// Once written, the next frame starts a new age.
	clk = newClock()
	q = NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: 10 * time.Second}, clk)
	q.PushFrames([]*pb.Frame{frame("e-1", 10)}, false)
	q.Take(nil)
	clk.Advance(20 * time.Second)
	q.Written()
	q.PushFrames([]*pb.Frame{frame("e-2", 10)}, false)
	clk.Advance(5 * time.Second)
	if !q.PushFrames([]*pb.Frame{frame("e-3", 10)}, false) {
		t.Fatal("the age of written frames was counted")
	}
}

// Messages already encoded (WebSocket replies, ACP messages) count in the
// same budget as frames.
func TestQueueRepliesCount(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1000, MaxAge: time.Hour}, newClock())
	q.PushFrames([]*pb.Frame{frame("e-1", 300)}, false)
	reply := []byte(`{"event":"reply","data":{"id":"c1","ok":false}}` + strings.Repeat(" ", 300))
	if !q.PushRaw(reply) {
		t.Fatal("cut under the bound")
	}
	if _, b, _ := q.Waiting(); b != 300+3+len(reply)+2*itemOverhead {
		t.Fatalf("waiting %d bytes", b)
	}
	q.PushRaw(reply)
	if q.PushRaw(reply) {
		t.Fatal("replies past the bound did not cut the client")
	}
	// Even empty items cost something: a flood of them is bounded.
	q = NewQueue(Limits{MaxBytes: 1000, MaxAge: time.Hour}, newClock())
	n := 0
	for q.PushRaw(nil) {
		n++
	}
	// The largest one aside.
	if n != 1000/itemOverhead+1 {
		t.Errorf("%d empty items fit in 1000 bytes", n)
	}
}

// The session's final batch never cuts; it ends the stream after it.
func TestQueueFinal(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 100, MaxAge: time.Hour}, newClock())
	q.PushFrames([]*pb.Frame{frame("e-1", 80)}, false)
	end := &pb.Frame{Id: "e-2", Event: pb.EndOf("stopped"), Size: 200}
	if !q.PushFrames([]*pb.Frame{frame("e-x", 80), end}, true) {
		t.Fatal("the final batch cut the client")
	}
	if q.PushFrames([]*pb.Frame{frame("e-3", 1)}, false) || q.PushRaw([]byte("x")) {
		t.Error("frames after the final batch were taken")
	}
	items, reason := q.Take(nil)
	if len(items) != 3 || items[2].Frame != end || reason != EndFinal {
		t.Fatalf("took %d items, end %q", len(items), reason)
	}
}

// End (the session went away) keeps what is queued; Cut drops it.
func TestQueueEndAndCut(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	q.PushFrames([]*pb.Frame{frame("e-1", 10), frame("e-2", 10)}, false)
	q.End(EndSessionGone)
	q.End(EndClosed) // the first reason stays
	items, end := q.Take(nil)
	if len(items) != 2 || end != EndSessionGone {
		t.Fatalf("took %d items, end %q", len(items), end)
	}

	q = NewQueue(Limits{}, nil)
	q.PushFrames([]*pb.Frame{frame("e-1", 10)}, false)
	q.Cut(EndSlowConsumer)
	if items, end := q.Take(nil); len(items) != 0 || end != EndSlowConsumer {
		t.Fatalf("after Cut: %d items, end %q", len(items), end)
	}
	select {
	case <-q.Wake():
	default:
		t.Error("the writer was not woken for the cut")
	}
}

// Take hands over the items in order and reuses the writer's slice.
func TestQueueTakeOrder(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	q.PushFrames([]*pb.Frame{frame("e-1", 1)}, false)
	q.PushRaw([]byte("r"))
	q.PushFrames([]*pb.Frame{frame("e-2", 1)}, false)
	buf := make([]Item, 0, 8)
	items, _ := q.Take(buf)
	if len(items) != 3 || items[0].Frame.GetId() != "e-1" || string(items[1].Raw) != "r" || items[2].Frame.GetId() != "e-2" {
		t.Fatalf("took %+v", items)
	}
	q.Written()
	q.PushRaw([]byte("next"))
	again, _ := q.Take(items)
	if len(again) != 1 || cap(again) != cap(buf) {
		t.Fatalf("second take: %d items, cap %d (the first take's slice had %d)", len(again), cap(again), cap(buf))
	}
}

func TestQueueWaitWritten(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	q.attach()
	q.PushRaw([]byte("a"))
	q.PushRaw([]byte("b"))
	mark := q.Mark()
	done := make(chan bool)
	go func() { done <- q.WaitWritten(context.Background(), mark) }()
	q.Take(nil)
	select {
	case <-done:
		t.Fatal("WaitWritten returned before the writer wrote")
	default:
	}
	q.Written()
	if !<-done {
		t.Fatal("WaitWritten failed")
	}
	// A cut queue never gets written: the waiter is told at once.
	q.PushRaw([]byte("c"))
	mark = q.Mark()
	go func() { done <- q.WaitWritten(context.Background(), mark) }()
	q.Cut(EndSlowConsumer)
	if <-done {
		t.Fatal("WaitWritten reported a cut queue written")
	}
	// And ctx bounds it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q2 := NewQueue(Limits{}, nil)
	q2.attach()
	q2.PushRaw([]byte("d"))
	if q2.WaitWritten(ctx, q2.Mark()) {
		t.Fatal("WaitWritten ignored its context")
	}
	// Without a writer nobody is going to write it.
	q3 := NewQueue(Limits{}, nil)
	q3.PushRaw([]byte("e"))
	if q3.WaitWritten(context.Background(), q3.Mark()) {
		t.Fatal("WaitWritten waited with no writer")
	}
	// A writer that leaves ends the wait.
	q3.attach()
	go func() { done <- q3.WaitWritten(context.Background(), q3.Mark()) }()
	q3.detach()
	if <-done {
		t.Fatal("WaitWritten reported written when the writer left")
	}
}

func TestQueueWaitRoom(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1000, MaxAge: time.Hour}, nil)
	big := make([]byte, 600)
	q.PushRaw(big)
	done := make(chan bool)
	go func() { done <- q.WaitRoom(context.Background()) }()
	q.Take(nil)
	q.Written()
	if !<-done {
		t.Fatal("WaitRoom failed")
	}
	if !q.WaitRoom(context.Background()) {
		t.Fatal("an empty queue has no room")
	}
}

// A writer that left mid-write loses what it took; the rest waits for the
// next writer, who is woken.
func TestQueueDetach(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 100, MaxAge: time.Hour}, nil)
	q.attach()
	q.PushRaw(make([]byte, 60))
	q.Take(nil)
	<-q.Wake()
	q.detach()
	if n, b, _ := q.Waiting(); n != 0 || b != 0 {
		t.Fatalf("after Detach: %d items, %d bytes", n, b)
	}
	select {
	case <-q.Wake():
	default:
		t.Error("the next writer was not woken")
	}
	if !q.PushRaw(make([]byte, 60)) {
		t.Fatal("the lost items still counted")
	}
}
