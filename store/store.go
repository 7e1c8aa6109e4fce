// Package store persists sessions, their transcripts and their KV entries
// (surface snapshots included, each with its rev), their artifacts (the
// bytes and their records, see ArtifactStore) and the keys that sign
// artifact URLs.
//
// The session actor and its domain actors are the only writers of a session's
// rows; the store does not arbitrate between writers, it keeps what they wrote.
// Between nodes sharing a store, a Leaser's leases say which node's actors
// those are, and a write made under a Fence fails once the session's lease
// has moved on, so that a stale node cannot commit.
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
// session, list query or count query without owner, a KV entry without key,
// a rev, turn or prompt id or IDsReserved above math.MaxInt64, bytes that
// should be JSON and are not, a negative list limit, a lease without node or
// with a ttl under a millisecond.
//
// Every other string (owner, title, transcript text, KV key, ...) is kept
// byte for byte, NUL and invalid UTF-8 included.
var ErrInvalid = errors.New("store: invalid argument")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("store: closed")

// ErrOutcomeUnknown is wrapped by the error of a write that may have been
// applied: it was sent, and no answer came back (the connection died, or
// the deadline passed with the commit in flight). A write that fails with
// an error that does not wrap it was not applied, none of it.
var ErrOutcomeUnknown = errors.New("store: outcome of the write unknown")

// ErrFull is wrapped by the error of a write refused because the store's
// disk is full (SQLite's SQLITE_FULL). Nothing of the write was applied.
var ErrFull = errors.New("store: disk full")

// ErrUnavailable is wrapped by the error Writer answers an op with when it
// did not send it because the store cannot be written now (see
// Writer.Available), and by callers' errors for a write the store could
// not take. Nothing of the write was applied.
var ErrUnavailable = errors.New("store: unavailable")

// ErrAborted is wrapped by the error Writer answers an op of a chain with
// when an earlier op of the chain, of the same epoch, failed: the op was
// built on a write that did not happen, so it was not sent (see Op.Chain).
var ErrAborted = errors.New("store: write aborted: a write it was built on failed")

// MaxSessionIDLen is the longest session id, in bytes, that a store accepts.
const MaxSessionIDLen = 128

// CheckSessionID returns an error wrapping ErrInvalid unless id is a
// session id a store accepts. Ids are opaque strings chosen by the caller:
// 1 to MaxSessionIDLen bytes of UTF-8 without NUL (which SQL text columns
// cannot all hold).
func CheckSessionID(id string) error { return checkName("session id", id, MaxSessionIDLen) }

func checkName(what, name string, maxLen int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(name) > maxLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(name), maxLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s %q is not UTF-8", ErrInvalid, what, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains NUL", ErrInvalid, what, name)
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

	// IDsReserved is the top of the session's reserved id block: every turn
	// or prompt id handed out so far is at most this, so that ids handed
	// out after a restart, on any node, continue above it. Zero: none
	// reserved. It never goes down (see SessionUpdate.IDsReserved); at most
	// math.MaxInt64.
	IDsReserved uint64
}

// SessionUpdate changes some fields of a session; nil fields are kept.
type SessionUpdate struct {
	Title  *string
	Status *string
	// IDsReserved raises Session.IDsReserved to this value. A value at or
	// below the stored one keeps the stored one (as a KV write never lowers
	// a key's rev), so that a late or repeated update cannot hand out a
	// reserved block again; the rest of the update still applies. At most
	// math.MaxInt64.
	IDsReserved *uint64
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

// StatusEnded is the Status of a session that has ended for good. The store
// keeps Status as the caller wrote it; only CountQuery.ExcludeEnded gives
// this one value a meaning. The SQL stores' schemas hold it (an index of
// the sessions that have not ended), so it never changes.
const StatusEnded = "ended"

// CountQuery selects the sessions CountSessions counts. Owner is required;
// Agent filters when set. ExcludeEnded counts only the sessions that have
// not ended, those whose Status is not exactly StatusEnded (a quota of live
// sessions); the zero value counts every status.
type CountQuery struct {
	Owner        string
	Agent        string
	ExcludeEnded bool
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
	Via        string // browser, acp, agent
	TurnID     uint64 // the turn that produced (or, for user entries, answered) the entry; at most math.MaxInt64
	PromptID   uint64 // user entries: the prompt's id in its session; at most math.MaxInt64
	// AttachmentIDs are the ids of the artifacts a user entry's prompt
	// attached (never their bytes); nil when none. Kept in order.
	AttachmentIDs []string
	At            time.Time // zero means now when appending; kept in ms, UTC
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
// A write that returns nil is committed (durable as the store promises);
// one whose error wraps ErrOutcomeUnknown may have been kept; any other
// error means that none of it was. A full disk is ErrFull.
// The conformance suite in package storetest pins down the behaviour below.
//
// The writes of an existing session (UpdateSession, AppendTranscript,
// PutKV) take the Fence they are made under: zero on a single node, the
// session's lease token in a cluster. Under a fence that is no longer
// current they write nothing and fail with ErrFenced (see Fence).
// CreateSession is never fenced: a taken id fails with ErrExists anyway.
type Store interface {
	// CreateSession stores a new session; ErrExists if its id is taken.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns the session or ErrNotFound.
	GetSession(ctx context.Context, id string) (Session, error)
	// UpdateSession sets the non-nil fields (IDsReserved only upwards) and
	// moves Updated forward (to now, or 1 ms past the stored value if the
	// clock has not passed it), so an empty update marks the session as
	// active. ErrNotFound for an unknown id.
	UpdateSession(ctx context.Context, id string, fence Fence, u SessionUpdate) error
	// ListSessions returns a page of the owner's sessions, newest Updated
	// first (ties broken by id). nextCursor is empty on the last page. Paging
	// is keyset-based: a session not updated while paging is seen exactly
	// once; one updated meanwhile moves to the front, so it is never seen
	// twice but may be missed. A cursor the store did not produce fails with
	// an error wrapping ErrBadCursor.
	ListSessions(ctx context.Context, q ListQuery) (sessions []Session, nextCursor string, err error)
	// CountSessions returns how many of the owner's sessions q selects: one
	// query served by an index, not a walk through the listing. The SQL
	// stores index the sessions that have not ended apart, so that a quota
	// check with ExcludeEnded reads none of an owner's ended sessions,
	// however many there are.
	CountSessions(ctx context.Context, q CountQuery) (int, error)

	// AppendTranscript adds entries after the session's existing ones, in
	// order. ErrNotFound for an unknown session.
	AppendTranscript(ctx context.Context, sessionID string, fence Fence, entries []Entry) error
	// Transcript returns every entry of the session in append order;
	// ErrNotFound for an unknown session.
	Transcript(ctx context.Context, sessionID string) ([]Entry, error)

	// PutKV writes entries in order; an entry whose rev is not above the
	// stored rev of its key (tombstones included) is skipped. Values come back
	// from LoadKV byte-identical. ErrNotFound for an unknown session.
	PutKV(ctx context.Context, sessionID string, fence Fence, entries []KV) error
	// LoadKV returns every entry of the session, tombstones included, in key
	// order; ErrNotFound for an unknown session.
	LoadKV(ctx context.Context, sessionID string) ([]KV, error)

	// DeleteSession deletes the session and everything of it: its
	// transcript, its KV entries, its lease and its artifacts (their bytes
	// go when no other artifact names them), all or none. ErrNotFound for
	// an unknown session. It is never fenced: whoever deletes a session
	// stops its actor first, and the writes of an actor that had not
	// stopped fail with ErrNotFound afterwards.
	DeleteSession(ctx context.Context, id string) error
	// EndedSessions returns the ids of up to limit sessions (at most
	// MaxListLimit; 0 means DefaultListLimit) whose Status is StatusEnded
	// and whose Updated is before before, least recently updated first:
	// the sessions a retention sweep deletes. The SQL stores serve it from
	// an index of the ended sessions.
	EndedSessions(ctx context.Context, before time.Time, limit int) ([]string, error)

	// ArtifactStore: the sessions' artifacts.
	ArtifactStore

	// Close releases the store. Later calls fail with ErrClosed; closing
	// again returns nil.
	Close() error
}

// Batcher is implemented by stores that can write the KV entries of
// several sessions in one transaction, with one commit for all (group
// commit). Writer uses it for a run of KV writes of many sessions.
type Batcher interface {
	// PutKVBatch writes every item as PutKV would, all in one transaction,
	// and returns one error per item: an item the store refuses for what it
	// is (ErrFenced, ErrNotFound, ErrInvalid) writes nothing and fails
	// alone. err is the transaction's: when it is not nil none of it was
	// kept, or, when it wraps ErrOutcomeUnknown, all of it may have been;
	// itemErrs is nil then.
	PutKVBatch(ctx context.Context, items []KVBatch) (itemErrs []error, err error)
}

// ConcurrentWrites is implemented by stores that run only so many writes
// at once (SQLite: one writer connection). NewWriter, when not told how
// many workers to start, starts that many, so that the writes queued for
// the store's connection wait in a worker's queue instead and go in its
// next batch (a Batcher's one transaction).
type ConcurrentWrites interface {
	ConcurrentWrites() int
}

// KVBatch is one session's part of a PutKVBatch.
type KVBatch struct {
	SessionID string
	Fence     Fence
	Entries   []KV
}

// Lease is a node's claim on a session's writes. Token is the fencing token:
// every lease issued for a session has a greater token than the ones before
// it. Expires is by the store's clock (the database server's for a shared
// store), so a node should schedule renewals from the ttl it asked for, not
// from Expires against its own clock.
type Lease struct {
	Token   int64
	Node    string
	Expires time.Time
}

// ErrLeaseHeld is wrapped by the error AcquireLease returns while another
// node holds an unexpired lease on the session; the message names the
// holder and its expiry.
var ErrLeaseHeld = errors.New("store: session lease held by another node")

// ErrFenced is wrapped by the error of a write or lease renewal made under a
// token that is no longer the session's current one.
var ErrFenced = errors.New("store: write fenced: the session's lease moved to another node")

// MaxNodeLen is the longest node name, in bytes, that a store accepts.
const MaxNodeLen = 128

// Leaser is implemented by stores shared between nodes (and by the
// single-node stores, trivially correct): it keeps, per session, which node
// may write it, so that a session is never written by two nodes at once.
//
// A lease's token stays the session's current one from AcquireLease until
// another node acquires a new lease or the holder releases it; expiry alone
// does not end it. A node whose lease expired unnoticed can therefore still
// renew it and write, as long as nobody else has taken the session: that is
// safe, and what fencing must stop is the write that comes after a takeover.
// A lease needs no stored session: a node can claim an id before creating it.
//
// Node names follow the rules of session ids (1 to MaxNodeLen bytes of
// UTF-8 without NUL). A node that restarts under the same name while its
// previous lease is unexpired gets that lease back, token included; a name
// that changes with each start (host plus a start nonce) fences the
// previous process's late writes too.
type Leaser interface {
	// AcquireLease claims sessionID for node until now+ttl. If node already
	// holds the current, unexpired lease it is renewed with the same token.
	// If another node holds an unexpired lease the error wraps ErrLeaseHeld
	// (with the holder and expiry in the message) and the returned Lease
	// names the holder and its expiry, with Token 0. Otherwise (free,
	// released or expired) a new token is issued: strictly greater than
	// every token ever issued for that session. ttl is kept in milliseconds
	// and must be at least one.
	AcquireLease(ctx context.Context, sessionID, node string, ttl time.Duration) (Lease, error)
	// RenewLease extends the lease whose token is current to now+ttl; the
	// error wraps ErrFenced if token is no longer current (someone took
	// over, or it was released).
	RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) (Lease, error)
	// ReleaseLease ends the lease if token is current (a no-op otherwise),
	// so that another node can take the session without waiting for expiry.
	// Writes under the released token fail with ErrFenced.
	ReleaseLease(ctx context.Context, sessionID string, token int64) error
}

// CheckNode returns an error wrapping ErrInvalid unless node is a node
// name a Leaser accepts.
func CheckNode(node string) error { return checkName("node name", node, MaxNodeLen) }

// CheckLeaseTTL returns an error wrapping ErrInvalid unless ttl is a lease
// duration a Leaser accepts: at least a millisecond.
func CheckLeaseTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: lease ttl %v is less than 1ms", ErrInvalid, ttl)
	}
	return nil
}

// Fence is the lease token a session's writes are made under, passed to
// every write of an existing session (PutKV, AppendTranscript,
// UpdateSession).
//
// The zero Fence is no fence at all: the write is not checked (a single
// node, where nobody else writes the session). Any other Fence, a negative
// one included, makes the write succeed only while it is the session's
// current lease token (see Leaser); otherwise the write fails with an error
// wrapping ErrFenced and writes nothing. The check is atomic with the write.
// A stale fence fails a write before its session is looked up: ErrFenced
// even for a session that does not exist. Arguments are checked before the
// fence: a bad one is ErrInvalid under any fence.
type Fence int64
