package delivery

import "sync"

// Caps a stream counts against (Slots).
const (
	// CapEventStreams: a subject's event streams, per-turn chat streams
	// and AG-UI runs together (limits.sse_streams_per_subject).
	CapEventStreams = "sse"
	// CapWebSockets: a subject's WebSockets (limits.ws_per_subject).
	CapWebSockets = "ws"
)

// Slots counts the streams each subject holds open (or is opening) against
// a cap per kind of stream. Transports whose streams count against the same
// cap share one Slots (the daemon makes one for the browser's gateway and
// the AG-UI mount). Safe for concurrent use; make it with NewSlots.
type Slots struct {
	limit func(cap string) int
	mu    sync.Mutex
	open  map[slotKey]int
}

type slotKey struct{ subject, cap string }

// NewSlots counts against limit(cap), the number of streams of that cap a
// subject may hold at once.
func NewSlots(limit func(cap string) int) *Slots {
	return &Slots{limit: limit, open: map[slotKey]int{}}
}

// Take takes one of subject's slots of cap; it reports false (and takes
// nothing) when the subject holds as many as it may. limit is the cap's.
func (s *Slots) Take(subject, cap string) (limit int, ok bool) {
	limit = s.limit(cap)
	k := slotKey{subject, cap}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[k] >= limit {
		return limit, false
	}
	s.open[k]++
	return limit, true
}

// Give gives a slot Take took back.
func (s *Slots) Give(subject, cap string) {
	k := slotKey{subject, cap}
	s.mu.Lock()
	if s.open[k]--; s.open[k] <= 0 {
		delete(s.open, k)
	}
	s.mu.Unlock()
}
