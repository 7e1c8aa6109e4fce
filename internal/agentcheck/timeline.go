package agentcheck

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// entryKind is what an entry of the timeline records.
type entryKind int

const (
	sent     entryKind = iota + 1 // a line the daemon wrote to the agent's stdin
	received                      // a record the agent wrote on stdout
	stderr                        // a line of the agent's stderr
	exited                        // the agent process ended
	frame                         // a frame the session sent its subscribers
)

// entry is one thing that happened, as the check saw it.
type entry struct {
	pos  int // position in the timeline
	at   time.Time
	kind entryKind
	// inc is the agent process (1 for the first one a session starts, 2 for
	// the next...) of a tap entry.
	inc int
	// line is a sent or received record, or a stderr line.
	line []byte
	// typ and id are the record's envelope; typ is "" for a record that is
	// not a protocol line (invalid is why).
	typ, id string
	invalid string
	exit    agentproc.ExitStatus
	event   *pb.Event
}

// timeline records, in the order they happen, what the agent wrote and was
// sent (through the runtime's agent tap) and what the session told its
// subscribers (through a subscriber actor). Steps take a mark and read or
// wait for what came after it.
type timeline struct {
	mu      sync.Mutex
	entries []entry
	wake    chan struct{} // closed (and replaced) when an entry is added
	incs    int           // agent processes started
	trace   io.Writer     // when set, every tap entry is printed as it happens
}

func newTimeline(trace io.Writer) *timeline {
	return &timeline{wake: make(chan struct{}), trace: trace}
}

func (t *timeline) add(e entry) {
	e.at = time.Now()
	t.mu.Lock()
	e.pos = len(t.entries)
	t.entries = append(t.entries, e)
	close(t.wake)
	t.wake = make(chan struct{})
	if t.trace != nil {
		writeTrace(t.trace, e)
	}
	t.mu.Unlock()
}

func writeTrace(w io.Writer, e entry) {
	switch e.kind {
	case sent:
		fmt.Fprintf(w, "[agent %d] → %s\n", e.inc, e.line)
	case received:
		fmt.Fprintf(w, "[agent %d] ← %s\n", e.inc, e.line)
	case stderr:
		fmt.Fprintf(w, "[agent %d] stderr: %s\n", e.inc, e.line)
	case exited:
		fmt.Fprintf(w, "[agent %d] exited: %s\n", e.inc, exitText(e.exit))
	}
}

// mark is the position after the last entry.
func (t *timeline) mark() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// since returns the entries from position from on.
func (t *timeline) since(from int) []entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from > len(t.entries) {
		return nil
	}
	return append([]entry(nil), t.entries[from:]...)
}

// wait returns the first entry from position from on that match accepts,
// waiting for it until the timeout passes or ctx ends (ok false then).
func (t *timeline) wait(ctx context.Context, timeout time.Duration, from int, match func(entry) bool) (e entry, ok bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		t.mu.Lock()
		for ; from < len(t.entries); from++ {
			if match(t.entries[from]) {
				e := t.entries[from]
				t.mu.Unlock()
				return e, true
			}
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return entry{}, false
		case <-ctx.Done():
			return entry{}, false
		}
	}
}

// tap is the runtime's agent tap for one agent process.
type tap struct {
	t   *timeline
	inc int
}

// newTap is surfaced.Config.AgentTap: each agent process gets the next
// number.
func (t *timeline) newTap(string) agentproc.Tap {
	t.mu.Lock()
	t.incs++
	n := t.incs
	t.mu.Unlock()
	return &tap{t: t, inc: n}
}

func (p *tap) record(kind entryKind, line []byte) {
	e := entry{kind: kind, inc: p.inc, line: append([]byte(nil), line...)}
	env, err := agentproc.DecodeEnvelope(line)
	if err != nil {
		e.invalid = err.(*agentproc.InvalidLineError).Reason
	} else {
		e.typ, e.id = env.Type, env.ID
	}
	p.t.add(e)
}

func (p *tap) Sent(line []byte)     { p.record(sent, line) }
func (p *tap) Received(line []byte) { p.record(received, line) }
func (p *tap) Stderr(line string)   { p.t.add(entry{kind: stderr, inc: p.inc, line: []byte(line)}) }
func (p *tap) Exited(st agentproc.ExitStatus) {
	p.t.add(entry{kind: exited, inc: p.inc, exit: st})
}

// subscriberProps is the actor the session sends its frames to: each frame
// becomes an entry.
func (t *timeline) subscriberProps() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if fs, ok := ctx.Message().(*pb.Frames); ok {
			for _, f := range fs.GetFrames() {
				t.add(entry{kind: frame, event: f.GetEvent()})
			}
		}
	})
}

// Matchers of entries.

func isStatus(statuses ...string) func(entry) bool {
	return func(e entry) bool {
		if e.kind != frame || e.event.GetStatus() == nil {
			return false
		}
		for _, s := range statuses {
			if e.event.GetStatus().GetStatus() == s {
				return true
			}
		}
		return false
	}
}

func isExit(inc int) func(entry) bool {
	return func(e entry) bool { return e.kind == exited && e.inc == inc }
}

func isSent(typ string) func(entry) bool {
	return func(e entry) bool { return e.kind == sent && e.typ == typ }
}

func isReceived(inc int, typ string) func(entry) bool {
	return func(e entry) bool { return e.kind == received && e.inc == inc && e.typ == typ }
}

func isState(key string) func(entry) bool {
	return func(e entry) bool { return e.kind == frame && e.event.GetState().GetKey() == key }
}
