// Package framelog is a session's frame log: every frame a client can see
// gets the next sequence number; the newest frames stay in a bounded replay
// window; the last frame of each sticky key (state keys, the session status,
// open dialogs) is kept for new subscribers. A reconnecting client resumes
// exactly after the last id it saw, or is told to resync.
package framelog

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Subscription modes.
const (
	ModeFresh   = "fresh"
	ModeResumed = "resumed"
	ModeResync  = "resync"
)

// Defaults of the replay window.
const (
	DefaultReplayFrames = 4096
	DefaultReplayBytes  = 4 << 20
)

// Log is one session's frame log. It belongs to the session actor: one
// goroutine at a time, no locks.
type Log struct {
	epoch     string
	head      uint64
	maxFrames int
	maxBytes  int

	ring  []*pb.Frame // oldest first; ring[start:] is live
	start int
	bytes int

	sticky map[string]int // key -> index in order
	order  []stickyEntry
	holes  int
}

type stickyEntry struct {
	key   string
	frame *pb.Frame // nil: removed
}

// New returns an empty log of epoch keeping at most maxFrames frames and
// maxBytes bytes for replay (0: the defaults).
func New(epoch string, maxFrames, maxBytes int) *Log {
	if maxFrames <= 0 {
		maxFrames = DefaultReplayFrames
	}
	if maxBytes <= 0 {
		maxBytes = DefaultReplayBytes
	}
	return &Log{epoch: epoch, maxFrames: maxFrames, maxBytes: maxBytes, sticky: map[string]int{}}
}

func frameSize(f *pb.Frame) int { return int(f.Size) + len(f.Id) + 48 }

// ID formats an SSE id of this log.
func (l *Log) ID(seq uint64) string {
	return l.epoch + "-" + strconv.FormatUint(seq, 10)
}

// Append assigns the next seq to an event's frame and keeps it in the
// window. A non-empty stickyKey makes it the key's last frame.
func (l *Log) Append(ev *pb.Event, stickyKey string) *pb.Frame {
	l.head++
	f := &pb.Frame{Seq: l.head, Id: l.ID(l.head), Event: ev, Size: uint32(proto.Size(ev))}
	l.ring = append(l.ring, f)
	l.bytes += frameSize(f)
	for n := len(l.ring) - l.start; n > 1 && (n > l.maxFrames || l.bytes > l.maxBytes); n-- {
		l.bytes -= frameSize(l.ring[l.start])
		l.ring[l.start] = nil
		l.start++
	}
	if l.start > 1024 && l.start > len(l.ring)/2 {
		l.ring = append([]*pb.Frame(nil), l.ring[l.start:]...)
		l.start = 0
	}
	if stickyKey != "" {
		l.SetSticky(stickyKey, f)
	}
	return f
}

// SetSticky makes f the last frame of a sticky key.
func (l *Log) SetSticky(key string, f *pb.Frame) {
	if i, ok := l.sticky[key]; ok {
		l.order[i].frame = f
		return
	}
	l.sticky[key] = len(l.order)
	l.order = append(l.order, stickyEntry{key: key, frame: f})
}

// Unstick removes a sticky key (a dialog that was answered).
func (l *Log) Unstick(key string) {
	i, ok := l.sticky[key]
	if !ok {
		return
	}
	delete(l.sticky, key)
	l.order[i] = stickyEntry{}
	l.holes++
	if l.holes > 64 && l.holes > len(l.order)/2 {
		kept := l.order[:0]
		for _, e := range l.order {
			if e.frame != nil {
				l.sticky[e.key] = len(kept)
				kept = append(kept, e)
			}
		}
		for i := len(kept); i < len(l.order); i++ {
			l.order[i] = stickyEntry{}
		}
		l.order = kept
		l.holes = 0
	}
}

// Sticky returns the sticky frames, each re-labelled with the id of the
// current head ("the state as of head"), in key insertion order.
func (l *Log) Sticky() []*pb.Frame {
	id := l.ID(l.head)
	out := make([]*pb.Frame, 0, len(l.sticky))
	for _, e := range l.order {
		if e.frame == nil {
			continue
		}
		out = append(out, &pb.Frame{Seq: l.head, Id: id, Event: e.frame.Event, Size: e.frame.Size})
	}
	return out
}

// Oldest is the seq of the oldest frame still in the window (head+1 when empty).
func (l *Log) Oldest() uint64 {
	if len(l.ring) == l.start {
		return l.head + 1
	}
	return l.ring[l.start].Seq
}

// Since answers a subscription that last saw lastEventID: the frames to send
// first and how the subscription begins. A fresh subscription gets the sticky
// frames; a resumable one the frames after its position; any other (another
// epoch, a position outside the window or ahead of the head, garbage) gets a
// resync frame and the sticky frames.
func (l *Log) Since(lastEventID string) ([]*pb.Frame, string) {
	if lastEventID == "" {
		return l.Sticky(), ModeFresh
	}
	seq, ok := l.Parse(lastEventID)
	if !ok || seq > l.head || seq+1 < l.Oldest() {
		return nil, ModeResync
	}
	from := int(seq+1-l.Oldest()) + l.start
	out := make([]*pb.Frame, len(l.ring)-from)
	copy(out, l.ring[from:])
	return out, ModeResumed
}

// Epoch is the log's epoch: it changes only when a log starts from nothing.
func (l *Log) Epoch() string { return l.epoch }

// Head is the seq of the newest frame (0 before the first).
func (l *Log) Head() uint64 { return l.head }

// Parse reads the seq of an id of this log's epoch.
func (l *Log) Parse(id string) (uint64, bool) {
	epoch, seqText, ok := strings.Cut(id, "-")
	if !ok || epoch != l.epoch {
		return 0, false
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return 0, false
	}
	return seq, true
}
