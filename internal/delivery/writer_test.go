package delivery

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// fakeTransport records what a writer does. A write can be made to block
// until released or until the write deadline passes, as a socket whose peer
// stopped reading does.
type fakeTransport struct {
	mu       sync.Mutex
	written  []string // frame ids and raw messages, in order
	ends     []Reason
	keeps    int
	deadline time.Time
	block    chan struct{} // non-nil: writes block on it
	blocked  chan struct{} // signalled when a write blocks
	events   chan string   // "write", "keep", "end:<reason>"
}

func newFakeTransport() *fakeTransport {
	return &fakeTransport{events: make(chan string, 1000), blocked: make(chan struct{}, 1)}
}

func (f *fakeTransport) Write(it Item) error {
	f.mu.Lock()
	block, deadline := f.block, f.deadline
	f.mu.Unlock()
	if block != nil {
		select {
		case f.blocked <- struct{}{}:
		default:
		}
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-block:
		case <-t.C:
			return os.ErrDeadlineExceeded
		}
	}
	f.mu.Lock()
	if it.Frame != nil {
		f.written = append(f.written, it.Frame.GetId())
	} else {
		f.written = append(f.written, string(it.Raw))
	}
	f.mu.Unlock()
	f.events <- "write"
	return nil
}

func (f *fakeTransport) Flush() error { return nil }

func (f *fakeTransport) KeepAlive() error {
	f.mu.Lock()
	f.keeps++
	f.mu.Unlock()
	f.events <- "keep"
	return nil
}

func (f *fakeTransport) End(r Reason) error {
	f.mu.Lock()
	f.ends = append(f.ends, r)
	f.mu.Unlock()
	f.events <- "end:" + string(r)
	return nil
}

func (f *fakeTransport) SetWriteDeadline(t time.Time) error {
	f.mu.Lock()
	f.deadline = t
	f.mu.Unlock()
	return nil
}

func (f *fakeTransport) setBlock(ch chan struct{}) {
	f.mu.Lock()
	f.block = ch
	f.mu.Unlock()
}

func (f *fakeTransport) state() ([]string, []Reason) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.written...), append([]Reason(nil), f.ends...)
}

// waitEvent waits for the transport to report ev.
func (f *fakeTransport) waitEvent(t *testing.T, ev string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-f.events:
			if got == ev {
				return
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", ev)
		}
	}
}

// runWriter runs w over q and t in a goroutine; the result arrives on the
// returned channel.
func runWriter(ctx context.Context, w *Writer, q *Queue, t Transport) <-chan Reason {
	out := make(chan Reason, 1)
	go func() { out <- w.Run(ctx, q, t) }()
	return out
}

func result(t *testing.T, ch <-chan Reason) Reason {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not end")
		return ""
	}
}

func TestWriterWritesInOrderThenFinal(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	ft := newFakeTransport()
	done := runWriter(context.Background(), &Writer{}, q, ft)
	q.PushFrames([]*pb.Frame{frame("e-1", 1), frame("e-2", 1)}, false)
	q.PushRaw([]byte("reply"))
	q.PushFrames([]*pb.Frame{{Id: "e-3", Event: pb.EndOf("stopped")}}, true)
	if r := result(t, done); r != EndFinal {
		t.Fatalf("ended %q", r)
	}
	written, ends := ft.state()
	if len(written) != 4 || written[0] != "e-1" || written[2] != "reply" || written[3] != "e-3" {
		t.Errorf("written %v", written)
	}
	if len(ends) != 1 || ends[0] != EndFinal {
		t.Errorf("ends %v", ends)
	}
}

// A client the queue cut gets its end frame, and the cut is counted, once.
func TestWriterSlowConsumerCutByTheQueue(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 100, MaxAge: time.Hour}, nil)
	ft := newFakeTransport()
	release := make(chan struct{})
	ft.setBlock(release)
	var slow atomic.Int32
	done := runWriter(context.Background(), &Writer{OnSlow: func() { slow.Add(1) }}, q, ft)
	q.PushFrames([]*pb.Frame{frame("e-1", 200)}, false)
	<-ft.blocked
	q.PushFrames([]*pb.Frame{frame("e-2", 200)}, false)
	q.PushFrames([]*pb.Frame{frame("e-3", 200)}, false)
	ft.setBlock(nil)
	close(release)
	if r := result(t, done); r != EndSlowConsumer {
		t.Fatalf("ended %q", r)
	}
	if _, ends := ft.state(); len(ends) != 1 || ends[0] != EndSlowConsumer {
		t.Errorf("ends %v", ends)
	}
	if slow.Load() != 1 {
		t.Errorf("OnSlow called %d times", slow.Load())
	}
}

// A client that keeps reading is not slow, however long a batch takes: the
// watchdog measures from the last item written. One that stops, in the
// middle of a batch, is, and gets its end frame behind the blocked item,
// not the rest of the batch.
func TestWriterSlowOnlyWhenNothingMoves(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: 10 * time.Second}, nil)
	ft := newFakeTransport()
	clk := newClock()
	var slow atomic.Int32
	found := make(chan struct{})
	w := &Writer{Clock: clk, KeepAlive: time.Hour, EndGrace: time.Minute, OnSlow: func() { slow.Add(1); close(found) }}
	release := make(chan struct{})
	ft.setBlock(release)
	done := runWriter(context.Background(), w, q, ft)
	frames := make([]*pb.Frame, 10)
	for i := range frames {
		frames[i] = frame(fmt.Sprintf("e-%d", i+1), 10)
	}
	q.PushOwed(frames, false)
	// Each item takes 6 s: a minute for the batch, never 10 s without one.
	// The keep-alive and the watchdog are armed before time moves.
	armed := func() {
		if !clk.WaitPending(2, 10*time.Second) {
			t.Fatal("the watchdog is not armed")
		}
	}
	for i := range 5 {
		<-ft.blocked
		armed()
		clk.Advance(6 * time.Second)
		release <- struct{}{}
		ft.waitEvent(t, "write")
		if slow.Load() != 0 {
			t.Fatalf("found slow after item %d", i+1)
		}
	}
	// Now the client stops.
	<-ft.blocked
	armed()
	clk.Advance(10 * time.Second)
	<-found
	ft.setBlock(nil)
	close(release)
	if r := result(t, done); r != EndSlowConsumer {
		t.Fatalf("ended %q", r)
	}
	written, ends := ft.state()
	if len(written) != 6 || len(ends) != 1 || ends[0] != EndSlowConsumer {
		t.Errorf("written %v, ends %v", written, ends)
	}
}

// A write that stays blocked for the queue's age bound makes the client a
// slow consumer even when nothing more is pushed (the queue never sees it):
// the cut is counted, and once the client reads again it gets its end frame
// behind what was blocked.
func TestWriterSlowConsumerWhenTheWriteStalls(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: 50 * time.Millisecond}, nil)
	ft := newFakeTransport()
	release := make(chan struct{})
	ft.setBlock(release)
	var slow atomic.Int32
	found := make(chan struct{})
	clk := newClock()
	w := &Writer{Clock: clk, EndGrace: time.Minute, OnSlow: func() { slow.Add(1); close(found) }}
	done := runWriter(context.Background(), w, q, ft)
	q.PushFrames([]*pb.Frame{frame("e-1", 10)}, false)
	<-ft.blocked
	// The age bound passes while the write is blocked: the client is slow
	// now (counted, its queue cut); then it reads again.
	clk.Advance(50 * time.Millisecond)
	<-found
	if slow.Load() != 1 || q.Ended() != EndSlowConsumer {
		t.Fatalf("when the write was found slow: OnSlow called %d times, queue end %q", slow.Load(), q.Ended())
	}
	ft.setBlock(nil)
	close(release)
	if r := result(t, done); r != EndSlowConsumer {
		t.Fatalf("ended %q", r)
	}
	written, ends := ft.state()
	if len(written) != 1 || len(ends) != 1 || ends[0] != EndSlowConsumer {
		t.Errorf("written %v, ends %v", written, ends)
	}
	if slow.Load() != 1 {
		t.Errorf("OnSlow called %d times", slow.Load())
	}
}

// A write that never finishes fails at the write deadline; the cut is still
// counted (and its end attempted).
func TestWriterSlowConsumerWhenTheDeadlineFires(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: 20 * time.Millisecond}, nil)
	ft := newFakeTransport()
	ft.setBlock(make(chan struct{})) // never released
	var slow atomic.Int32
	done := runWriter(context.Background(), &Writer{EndGrace: 20 * time.Millisecond, OnSlow: func() { slow.Add(1) }}, q, ft)
	q.PushFrames([]*pb.Frame{frame("e-1", 10)}, false)
	if r := result(t, done); r != EndSlowConsumer {
		t.Fatalf("ended %q", r)
	}
	if slow.Load() != 1 {
		t.Errorf("OnSlow called %d times", slow.Load())
	}
	if _, ends := ft.state(); len(ends) != 1 || ends[0] != EndSlowConsumer {
		t.Errorf("ends %v", ends)
	}
}

func TestWriterRevoked(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	ft := newFakeTransport()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := runWriter(ctx, &Writer{}, q, ft)
	cancel(identity.ErrRevoked)
	if r := result(t, done); r != EndRevoked {
		t.Fatalf("ended %q", r)
	}
	if _, ends := ft.state(); len(ends) != 1 || ends[0] != EndRevoked {
		t.Errorf("ends %v", ends)
	}
	// A client that left is not told anything.
	ft = newFakeTransport()
	ctx, cancel2 := context.WithCancel(context.Background())
	done = runWriter(ctx, &Writer{}, q, ft)
	cancel2()
	if r := result(t, done); r != EndClientGone {
		t.Fatalf("ended %q", r)
	}
	if _, ends := ft.state(); len(ends) != 0 {
		t.Errorf("ends %v", ends)
	}
}

func TestWriterKeepAlive(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	ft := newFakeTransport()
	clk := newClock()
	ctx, cancel := context.WithCancel(context.Background())
	done := runWriter(ctx, &Writer{Clock: clk, KeepAlive: 15 * time.Second}, q, ft)
	for range 2 {
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("no keep-alive armed")
		}
		clk.Advance(15 * time.Second)
		ft.waitEvent(t, "keep")
	}
	cancel()
	result(t, done)
}

func TestWriterShutdownGrace(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	ft := newFakeTransport()
	shutdown := make(chan struct{})
	clk := newClock()
	done := runWriter(context.Background(), &Writer{Clock: clk, Shutdown: shutdown, ShutdownGrace: 3 * time.Second, ShutdownReason: EndMoved}, q, ft)
	close(shutdown)
	// Within the grace the session's own end would still go first.
	q.PushFrames([]*pb.Frame{frame("e-1", 1)}, false)
	ft.waitEvent(t, "write")
	// Written: the write's watchdog is stopped.
	testkit.Eventually(t, 10*time.Second, func() bool { n, _, _ := q.Waiting(); return n == 0 }, "the frame written")
	if !clk.WaitPending(2, 10*time.Second) { // the keep-alive and the grace
		t.Fatal("no grace armed")
	}
	clk.Advance(3 * time.Second)
	if r := result(t, done); r != EndMoved {
		t.Fatalf("ended %q", r)
	}
	if written, ends := ft.state(); len(written) != 1 || len(ends) != 1 || ends[0] != EndMoved {
		t.Errorf("written %v, ends %v", written, ends)
	}
}

// Done ends the stream at once; an ended queue (an ACP connection that
// closed) delivers what it holds first.
func TestWriterDoneAndClosed(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	ft := newFakeTransport()
	stop := make(chan struct{})
	done := runWriter(context.Background(), &Writer{Done: stop}, q, ft)
	close(stop)
	if r := result(t, done); r != EndClosed {
		t.Fatalf("ended %q", r)
	}

	q = NewQueue(Limits{}, nil)
	q.PushRaw([]byte("left"))
	q.End(EndClosed)
	ft = newFakeTransport()
	if r := (&Writer{}).Run(context.Background(), q, ft); r != EndClosed {
		t.Fatalf("ended %q", r)
	}
	if written, ends := ft.state(); len(written) != 1 || len(ends) != 1 || ends[0] != EndClosed {
		t.Errorf("written %v, ends %v", written, ends)
	}
}

// What was queued before the writer came is written at once.
func TestWriterBacklog(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	q.PushRaw([]byte("early"))
	<-q.Wake() // a previous writer saw the signal and left
	ft := newFakeTransport()
	ctx, cancel := context.WithCancel(context.Background())
	done := runWriter(ctx, &Writer{}, q, ft)
	ft.waitEvent(t, "write")
	cancel()
	if r := result(t, done); r != EndClientGone {
		t.Fatalf("ended %q", r)
	}
}

// An ACP stream's queue outlives its reader: a slow reader's GET ends, the
// queue keeps what it holds for the next one.
func TestWriterKeepQueueWhenSlow(t *testing.T) {
	q := NewQueue(Limits{MaxBytes: 1 << 20, MaxAge: time.Hour}, nil)
	ft := newFakeTransport()
	release := make(chan struct{})
	ft.setBlock(release)
	clk := newClock()
	found := make(chan struct{})
	done := runWriter(context.Background(), &Writer{Clock: clk, KeepQueueWhenSlow: true, OnSlow: func() { close(found) }}, q, ft)
	q.PushRaw([]byte("first"))
	<-ft.blocked
	clk.Advance(time.Hour)
	<-found
	q.PushRaw([]byte("second"))
	ft.setBlock(nil)
	close(release)
	if r := result(t, done); r != EndSlowConsumer {
		t.Fatalf("ended %q", r)
	}
	if q.Ended() != "" {
		t.Fatalf("the queue was cut: %q", q.Ended())
	}
	if items, _ := q.Take(nil); len(items) != 1 || string(items[0].Raw) != "second" {
		t.Fatalf("left for the next reader: %v", items)
	}
}

// goid is the calling goroutine's id (for tests only).
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b))
	return f[1]
}

// A subscriber's mailbox run goes to the writer while it waits: what it
// queues is written by the same goroutine, with no hand-off. Without a
// waiting writer it runs elsewhere.
func TestWriterRunsTheSubscriberMailbox(t *testing.T) {
	q := NewQueue(Limits{}, nil)
	ran := make(chan string, 1)
	q.Dispatcher().Schedule(func() { ran <- goid() })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("with no writer the run was lost")
	}

	ft := &goidTransport{fakeTransport: newFakeTransport(), ids: make(chan string, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := runWriter(ctx, &Writer{}, q, ft)
	// Once the writer waits, a run goes to it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		handed := false
		select {
		case q.handoff <- func() { ran <- goid(); q.PushRaw([]byte("x")) }:
			handed = true
		default:
		}
		if handed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never waited for work")
		}
		time.Sleep(time.Millisecond)
	}
	runID, writeID := <-ran, <-ft.ids
	if runID != writeID {
		t.Errorf("the mailbox ran on goroutine %s, the write on %s", runID, writeID)
	}
	cancel()
	result(t, done)
}

type goidTransport struct {
	*fakeTransport
	ids chan string
}

func (g *goidTransport) Write(it Item) error {
	g.ids <- goid()
	return g.fakeTransport.Write(it)
}

// piecesTransport writes each item in pieces, as the SSE and WebSocket
// transports write a large one: each piece waits for the test, then reports
// progress.
type piecesTransport struct {
	*fakeTransport
	pieces   int
	next     chan struct{} // one receive: one piece goes out
	waiting  chan struct{} // signalled when a piece waits
	progress func()
}

func (p *piecesTransport) SetProgress(f func()) { p.progress = f }

func (p *piecesTransport) Write(it Item) error {
	for range p.pieces {
		p.waiting <- struct{}{}
		<-p.next
		p.progress()
	}
	return p.fakeTransport.Write(it)
}

// One large frame that a client reads slowly but steadily, piece by piece,
// is never slow, by the writer's watchdog or by the age of what waits
// behind it; once the client stops, it is.
func TestWriterLargeItemInPieces(t *testing.T) {
	clk := newClock()
	q := NewQueue(Limits{MaxBytes: 100, MaxAge: 10 * time.Second}, clk)
	pt := &piecesTransport{fakeTransport: newFakeTransport(), pieces: 20, next: make(chan struct{}), waiting: make(chan struct{})}
	var slow atomic.Int32
	found := make(chan struct{})
	w := &Writer{Clock: clk, KeepAlive: time.Hour, EndGrace: time.Minute, OnSlow: func() { slow.Add(1); close(found) }}
	done := runWriter(context.Background(), w, q, pt)
	q.PushFrames([]*pb.Frame{frame("e-1", 10_000)}, false)
	armed := func() {
		if !clk.WaitPending(2, 10*time.Second) { // the keep-alive and the watchdog
			t.Fatal("the watchdog is not armed")
		}
	}
	// A piece every 6 s: two minutes for the frame, never 10 s without one.
	for i := range 19 {
		<-pt.waiting
		armed()
		clk.Advance(6 * time.Second)
		pt.next <- struct{}{}
		if i == 10 && !q.PushFrames([]*pb.Frame{frame("e-2", 10)}, false) {
			t.Fatal("a frame behind a large one being read steadily was cut for its age")
		}
		if slow.Load() != 0 {
			t.Fatalf("found slow after piece %d", i+1)
		}
	}
	// The client stops before the last piece.
	<-pt.waiting
	armed()
	clk.Advance(10 * time.Second)
	<-found
	pt.next <- struct{}{}
	if r := result(t, done); r != EndSlowConsumer {
		t.Fatalf("ended %q", r)
	}
}

// WriteInPieces reports each piece of a large write but the last.
func TestWriteInPieces(t *testing.T) {
	var b strings.Builder
	n := 0
	data := strings.Repeat("x", 2*PieceSize+10)
	if err := WriteInPieces(&b, []byte(data), func() { n++ }); err != nil {
		t.Fatal(err)
	}
	if b.String() != data || n != 2 {
		t.Fatalf("wrote %d bytes, %d progress reports", b.Len(), n)
	}
}
