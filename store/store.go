// Package store persists sessions, their transcripts and their KV entries
// (surface snapshots included, each with its rev).
//
// The session actor and its domain actors are the only writers of a session's
// rows; the store does not arbitrate between writers, it keeps what they wrote.
// A KV write never lowers a key's rev: PutKV ignores an entry whose rev is not
// above the stored one, so a late write-behind can never move a key backwards.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNotFound is returned for a session id that the store does not hold.
var ErrNotFound = errors.New("store: not found")

// ErrExists is returned when creating a session whose id is taken.
var ErrExists = errors.New("store: already exists")

// ErrBadCursor is wrapped by the error ListSessions returns for a cursor that
// it did not produce (garbled, truncated or from another format).
var ErrBadCursor = errors.New("store: malformed cursor")

// ErrInvalid is wrapped by the error returned for an argument the store
// refuses before touching anything: an empty or over-long session id, a
// session without owner, a KV entry without key, a rev above math.MaxInt64,
// bytes that should be JSON and are not, a negative list limit.
var ErrInvalid = errors.New("store: invalid argument")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("store: closed")

// MaxSessionIDLen is the longest session id, in bytes, that a store accepts.
const MaxSessionIDLen = 128

// CheckSessionID returns an error wrapping ErrInvalid unless id is a
// session id a store accepts. Ids are opaque strings chosen by the caller:
// 1 to MaxSessionIDLen bytes of UTF-8 without NUL (which SQL text columns
// cannot all hold).
func CheckSessionID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	case len(id) > MaxSessionIDLen:
		return fmt.Errorf("%w: session id is %d bytes, more than %d", ErrInvalid, len(id), MaxSessionIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: session id %q is not UTF-8", ErrInvalid, id)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: session id %q contains NUL", ErrInvalid, id)
	}
	return nil
}

// Limits of ListQuery.Limit.
const (
	DefaultListLimit = 50  // used when Limit is 0
	MaxListLimit     = 500 // a larger Limit is lowered to this
)

// Session is the durable record of one session. Times are kept with
// millisecond precision in UTC.
type Session struct {
	ID      string
	Owner   string // the subject that created it
	Agent   string // the configured agent's name
	Title   string
	Cwd     string
	Status  string    // starting, ready, error, ended, idle
	Created time.Time // zero means now when creating
	Updated time.Time // zero means Created when creating
}

// SessionUpdate changes some fields of a session; nil fields are kept.
type SessionUpdate struct {
	Title  *string
	Status *string
}

// ListQuery selects sessions. Owner is required; Agent and Cwd filter when set.
// Sessions come newest-updated first; Cursor is the NextCursor of the previous page.
type ListQuery struct {
	Owner  string
	Agent  string
	Cwd    string
	Cursor string
	Limit  int // 0 means 50; at most 500
}

// Entry is one transcript entry.
type Entry struct {
	Role       string // user, assistant, thinking, tool
	Text       string
	ToolCallID string
	ToolName   string
	ToolArgs   []byte // JSON
	ToolResult []byte // JSON
	IsError    bool
	Via        string    // browser, acp, agent
	TurnID     uint64    // the turn that produced (or, for user entries, answered) the entry
	PromptID   uint64    // user entries: the prompt's id in its session
	At         time.Time // zero means now when appending; kept in ms, UTC
}

// KV is one session KV entry. A deleted entry is a tombstone: its rev is kept
// so that the key's next write continues above it.
type KV struct {
	Key     string
	Value   []byte // JSON; nil when Deleted
	Rev     uint64 // at most math.MaxInt64 (SQL integers are signed)
	Deleted bool
}

// Store is the persistence of sessions. Implementations are safe for
// concurrent use. Every write call is atomic: all of it is kept or none.
// The conformance suite in package storetest pins down the behaviour below.
type Store interface {
	// CreateSession stores a new session; ErrExists if its id is taken.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns the session or ErrNotFound.
	GetSession(ctx context.Context, id string) (Session, error)
	// UpdateSession sets the non-nil fields and moves Updated forward (to now,
	// or 1 ms past the stored value if the clock has not passed it), so an
	// empty update marks the session as active. ErrNotFound for an unknown id.
	UpdateSession(ctx context.Context, id string, u SessionUpdate) error
	// ListSessions returns a page of the owner's sessions, newest Updated
	// first (ties broken by id). nextCursor is empty on the last page. Paging
	// is keyset-based: a session not updated while paging is seen exactly
	// once; one updated meanwhile moves to the front, so it is never seen
	// twice but may be missed. A cursor the store did not produce fails with
	// an error wrapping ErrBadCursor.
	ListSessions(ctx context.Context, q ListQuery) (sessions []Session, nextCursor string, err error)

	// AppendTranscript adds entries after the session's existing ones, in
	// order. ErrNotFound for an unknown session.
	AppendTranscript(ctx context.Context, sessionID string, entries []Entry) error
	// Transcript returns every entry of the session in append order;
	// ErrNotFound for an unknown session.
	Transcript(ctx context.Context, sessionID string) ([]Entry, error)

	// PutKV writes entries in order; an entry whose rev is not above the
	// stored rev of its key (tombstones included) is skipped. Values come back
	// from LoadKV byte-identical. ErrNotFound for an unknown session.
	PutKV(ctx context.Context, sessionID string, entries []KV) error
	// LoadKV returns every entry of the session, tombstones included, in key
	// order; ErrNotFound for an unknown session.
	LoadKV(ctx context.Context, sessionID string) ([]KV, error)

	// Close releases the store. Later calls fail with ErrClosed; closing
	// again returns nil.
	Close() error
}
