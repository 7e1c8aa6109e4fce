package agent

import (
	"sync"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// DefaultWindowBytes is the agent output a session may have waiting in its
// mailbox when Config.Window is nil.
const DefaultWindowBytes = 4 << 20

// lineOverhead is what one line or diagnostic counts in a Window beyond its
// bytes: the message around it, so that a flood of tiny lines is bounded
// too.
const lineOverhead = 64

// Window is the flow control between an agent's stdout reader and the
// session actor: it bounds the output handed to the session (AgentLine,
// AgentLines, AgentDiagnostic) and not yet processed. While it is full the
// reader waits: it stops reading, the pipe fills, and the agent blocks on
// its own stdout until the session has caught up (Release). Memory stays
// bounded however fast an agent writes, and what the session has queued
// (a DELETE behind the lines) is never more than a window away.
//
// The session and its agent process actor share it; they always live on
// one node (the agent actor is the session's child), so this is memory
// shared by a parent and its child, like the correlation table the reader
// shares with the agent actor.
type Window struct {
	mu      sync.Mutex
	cond    sync.Cond
	max     int
	used    int
	closed  bool
	waiting bool // the reader waits for room
}

// NewWindow returns a window of max bytes (<= 0: DefaultWindowBytes).
func NewWindow(max int) *Window {
	if max <= 0 {
		max = DefaultWindowBytes
	}
	w := &Window{max: max}
	w.cond.L = &w.mu
	return w
}

// acquire waits until n more bytes fit (a message larger than the window
// goes when nothing else is in flight) and takes them. It returns false,
// without waiting, once the window is closed: nobody will process the
// message.
func (w *Window) acquire(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && w.used > 0 && w.used+n > w.max {
		w.waiting = true
		w.cond.Wait()
		w.waiting = false
	}
	if w.closed {
		return false
	}
	w.used += n
	return true
}

// Release gives back what a processed message took (Cost of it).
func (w *Window) Release(n int) {
	w.mu.Lock()
	w.used = max(w.used-n, 0)
	w.mu.Unlock()
	w.cond.Broadcast()
}

// Close ends the flow: the reader waits no more, and what it reads from now
// on is dropped. The agent actor closes its window as it stops.
func (w *Window) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// Used is the bytes in flight.
func (w *Window) Used() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.used
}

// Waiting reports whether the reader is waiting for room: the agent's
// output is held back.
func (w *Window) Waiting() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting
}

// Cost is what a message from the reader counts in its Window: its lines'
// bytes (or its diagnostic's) plus an overhead per line. The session
// releases the Cost of each such message once it has handled it; anything
// else costs 0.
func Cost(msg any) int {
	switch m := msg.(type) {
	case *pb.AgentLine:
		return len(m.GetLine()) + lineOverhead
	case *pb.AgentLines:
		n := 0
		for _, l := range m.GetLines() {
			n += len(l.GetLine()) + lineOverhead
		}
		return n
	case *pb.AgentDiagnostic:
		return len(m.GetMessage()) + lineOverhead
	}
	return 0
}
