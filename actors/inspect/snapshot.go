package inspect

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Actor is one inspected actor at the moment of a snapshot: one entry of
// GET /debug/actors.
type Actor struct {
	// ID is the actor's PID id (e.g. session-<id>-1/surface-counter).
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Session is the session the actor belongs to.
	Session string `json:"session"`
	// Domain is set for surface domain actors.
	Domain string `json:"domain,omitempty"`
	// Depth is the number of user messages waiting in the mailbox (not
	// counting the one being handled).
	Depth int `json:"depth"`
	// Posted and Processed count user messages since the actor started.
	Posted    uint64 `json:"posted"`
	Processed uint64 `json:"processed"`
	// P50US and P99US are handler times in µs over the recent window: the
	// last Options.Window messages handled within Options.WindowAge; 0 when
	// there are none.
	P50US int64 `json:"p50_us"`
	P99US int64 `json:"p99_us"`
	// Current is the Go type of the message being handled, empty when idle;
	// CurrentForMS is how long it has been running.
	Current      string    `json:"current,omitempty"`
	CurrentForMS *int64    `json:"current_for_ms,omitempty"`
	Started      time.Time `json:"started"`
}

// Sort orders of a Query.
const (
	SortDefault = ""        // by session, then kind, then id
	SortDepth   = "depth"   // deepest mailbox first
	SortLatency = "latency" // slowest first: max(p99, time on the current message)
)

// Query filters and orders a snapshot. The zero Query returns every actor.
type Query struct {
	Kind    string // "" for every kind
	Session string // "" for every session
	Sort    string // SortDefault, SortDepth or SortLatency
}

// QueryError is a Query value that is not valid.
type QueryError struct {
	Field   string // kind, session or sort
	Message string
}

func (e *QueryError) Error() string { return e.Message }

// Validate checks the query's values; the error is a *QueryError.
func (q Query) Validate() error {
	if q.Kind != "" && !slices.Contains(Kinds, q.Kind) {
		return &QueryError{Field: "kind", Message: fmt.Sprintf("kind must be one of %s, not %q", strings.Join(Kinds, ", "), q.Kind)}
	}
	switch q.Sort {
	case SortDefault, SortDepth, SortLatency:
	default:
		return &QueryError{Field: "sort", Message: fmt.Sprintf("sort must be depth or latency, not %q", q.Sort)}
	}
	if len(q.Session) > 128 || strings.ContainsFunc(q.Session, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return &QueryError{Field: "session", Message: "session is not a session id"}
	}
	return nil
}

// Snapshot returns the inspected actors that match q, ordered as q says.
// Every call reads the live records; it never blocks an actor for longer
// than copying its latency window.
func (in *Inspector) Snapshot(q Query) []Actor {
	now := now(in.clk)
	buf := make([]uint32, 0, in.window)
	out := []Actor{}
	for _, r := range in.records() {
		if q.Kind != "" && r.kind.name != q.Kind {
			continue
		}
		if q.Session != "" && r.session != q.Session {
			continue
		}
		out = append(out, r.snapshot(now, buf))
	}
	switch q.Sort {
	case SortDepth:
		slices.SortStableFunc(out, func(a, b Actor) int {
			if a.Depth != b.Depth {
				return b.Depth - a.Depth
			}
			return strings.Compare(a.ID, b.ID)
		})
	case SortLatency:
		slices.SortStableFunc(out, func(a, b Actor) int {
			la, lb := a.latencyKey(), b.latencyKey()
			switch {
			case la > lb:
				return -1
			case la < lb:
				return 1
			}
			return strings.Compare(a.ID, b.ID)
		})
	default:
		kindRank := func(k string) int {
			if i := slices.Index(Kinds, k); i >= 0 {
				return i
			}
			return len(Kinds)
		}
		slices.SortStableFunc(out, func(a, b Actor) int {
			if c := strings.Compare(a.Session, b.Session); c != 0 {
				return c
			}
			if c := kindRank(a.Kind) - kindRank(b.Kind); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
	}
	return out
}

// latencyKey is what sort=latency orders by, in µs: the window's p99, or the
// time spent on the current message when that is longer (an actor stuck on
// one message is the slowest of all, though its window may be empty).
func (a Actor) latencyKey() int64 {
	k := a.P99US
	if a.CurrentForMS != nil && *a.CurrentForMS*1000 > k {
		k = *a.CurrentForMS * 1000
	}
	return k
}

// Report is the answer of GET /debug/actors and each event of its stream.
type Report struct {
	Node   string  `json:"node"`
	Actors []Actor `json:"actors"`
}
