// Package memstore is a store.Store held in memory: for tests, benchmarks and
// embedding surfaced without a disk. Nothing survives the process.
package memstore

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/surfaced/surfaced/store"
)

// Store is an in-memory store.Store. The zero Store is empty and ready to use.
// One mutex guards everything: the store is a baseline and a test double,
// and a single lock keeps every call trivially atomic.
type Store struct {
	mu       sync.RWMutex
	closed   bool
	sessions map[string]*record
	leases   map[string]*store.Lease // by session id; Node is "" once released

	artifacts map[string]*artifact // by id
	blobs     map[string]*blob     // by ref
	blobN     uint64               // the last blob ref handed out
	keys      []store.SigningKey   // signing keys, oldest first
}

// record is one session with everything that belongs to it.
type record struct {
	s          store.Session
	transcript []store.Entry
	kv         map[string]store.KV
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Leaser = (*Store)(nil)
)

// New returns an empty Store.
func New() *Store { return &Store{} }

// CreateSession implements store.Store.
func (m *Store) CreateSession(ctx context.Context, s store.Session) error {
	s, err := checkSession(s)
	if err != nil {
		return fmt.Errorf("memstore: create session: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: create session %q: %w", s.ID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.ErrClosed
	}
	if _, ok := m.sessions[s.ID]; ok {
		return fmt.Errorf("memstore: create session %q: %w", s.ID, store.ErrExists)
	}
	if m.sessions == nil {
		m.sessions = make(map[string]*record)
	}
	m.sessions[s.ID] = &record{s: s, kv: make(map[string]store.KV)}
	return nil
}

// GetSession implements store.Store.
func (m *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	rec, unlock, err := m.read(ctx, "get session", id)
	if err != nil {
		return store.Session{}, err
	}
	defer unlock()
	return rec.s, nil
}

// UpdateSession implements store.Store.
func (m *Store) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	if err := store.CheckSessionUpdate(u); err != nil {
		return fmt.Errorf("memstore: update session %q: %w", id, err)
	}
	rec, unlock, err := m.write(ctx, "update session", id, fence)
	if err != nil {
		return err
	}
	defer unlock()
	if u.Title != nil {
		rec.s.Title = *u.Title
	}
	if u.Status != nil {
		rec.s.Status = *u.Status
	}
	if u.IDsReserved != nil {
		rec.s.IDsReserved = max(rec.s.IDsReserved, *u.IDsReserved)
	}
	rec.s.Updated = later(now(), rec.s.Updated)
	return nil
}

// later returns t, or 1 ms past prev when t is not after it, so that an
// update always moves Updated forward even if the clock did not.
func later(t, prev time.Time) time.Time {
	if t.After(prev) {
		return t
	}
	return prev.Add(time.Millisecond)
}

// ListSessions implements store.Store. It scans every session of the store,
// keeping the page's worth of newest ones in a heap: fine for the sizes
// memstore is meant for.
func (m *Store) ListSessions(ctx context.Context, q store.ListQuery) ([]store.Session, string, error) {
	limit, err := store.CheckListQuery(q)
	if err != nil {
		return nil, "", fmt.Errorf("memstore: list sessions: %w", err)
	}
	var after *listKey
	if q.Cursor != "" {
		k, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, "", fmt.Errorf("memstore: list sessions: %w", err)
		}
		after = &k
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("memstore: list sessions: %w", err)
	}
	// One session more than the page tells whether there is a next page.
	top := &oldestFirst{}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, "", store.ErrClosed
	}
	for _, rec := range m.sessions {
		s := &rec.s
		if s.Owner != q.Owner || (q.Agent != "" && s.Agent != q.Agent) || (q.Cwd != "" && s.Cwd != q.Cwd) {
			continue
		}
		k := keyOf(*s)
		if after != nil && !after.before(k) {
			continue
		}
		if top.Len() <= limit {
			heap.Push(top, listed{k, *s})
		} else if (*top)[0].key.compare(k) < 0 {
			(*top)[0] = listed{k, *s}
			heap.Fix(top, 0)
		}
	}
	m.mu.RUnlock()

	page := make([]store.Session, top.Len())
	for i := len(page) - 1; i >= 0; i-- {
		page[i] = heap.Pop(top).(listed).s
	}
	if len(page) <= limit {
		return page, "", nil
	}
	page = page[:limit]
	return page, encodeCursor(keyOf(page[limit-1])), nil
}

// CountSessions implements store.Store. It scans every session of the
// store, as ListSessions does.
func (m *Store) CountSessions(ctx context.Context, q store.CountQuery) (int, error) {
	if err := store.CheckCountQuery(q); err != nil {
		return 0, fmt.Errorf("memstore: count sessions: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: count sessions: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, store.ErrClosed
	}
	n := 0
	for _, rec := range m.sessions {
		s := &rec.s
		if s.Owner == q.Owner && (q.Agent == "" || s.Agent == q.Agent) && !(q.ExcludeEnded && s.Status == store.StatusEnded) {
			n++
		}
	}
	return n, nil
}

// listed is a session in the heap of ListSessions.
type listed struct {
	key listKey
	s   store.Session
}

// oldestFirst is a min-heap of listed sessions: its root is the one a
// newer session pushes out of the page.
type oldestFirst []listed

func (h oldestFirst) Len() int           { return len(h) }
func (h oldestFirst) Less(i, j int) bool { return h[i].key.compare(h[j].key) < 0 }
func (h oldestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *oldestFirst) Push(x any)        { *h = append(*h, x.(listed)) }
func (h *oldestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// AppendTranscript implements store.Store.
func (m *Store) AppendTranscript(ctx context.Context, sessionID string, fence store.Fence, entries []store.Entry) error {
	entries, err := checkEntries(entries)
	if err != nil {
		return fmt.Errorf("memstore: append transcript %q: %w", sessionID, err)
	}
	rec, unlock, err := m.write(ctx, "append transcript", sessionID, fence)
	if err != nil {
		return err
	}
	defer unlock()
	rec.transcript = append(rec.transcript, entries...)
	return nil
}

// Transcript implements store.Store.
func (m *Store) Transcript(ctx context.Context, sessionID string) ([]store.Entry, error) {
	rec, unlock, err := m.read(ctx, "transcript", sessionID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]store.Entry, len(rec.transcript))
	for i, e := range rec.transcript {
		out[i] = cloneEntry(e)
	}
	return out, nil
}

// PutKV implements store.Store.
func (m *Store) PutKV(ctx context.Context, sessionID string, fence store.Fence, entries []store.KV) error {
	entries, err := checkKV(entries)
	if err != nil {
		return fmt.Errorf("memstore: put kv %q: %w", sessionID, err)
	}
	rec, unlock, err := m.write(ctx, "put kv", sessionID, fence)
	if err != nil {
		return err
	}
	defer unlock()
	for _, e := range entries {
		if old, ok := rec.kv[e.Key]; ok && e.Rev <= old.Rev {
			continue
		}
		rec.kv[e.Key] = e
	}
	return nil
}

// LoadKV implements store.Store.
func (m *Store) LoadKV(ctx context.Context, sessionID string) ([]store.KV, error) {
	rec, unlock, err := m.read(ctx, "load kv", sessionID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]store.KV, 0, len(rec.kv))
	for _, e := range rec.kv {
		e.Value = bytes.Clone(e.Value)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b store.KV) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Close implements store.Store: it drops everything the store held.
func (m *Store) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.sessions = nil
	m.leases = nil
	m.artifacts = nil
	m.blobs = nil
	m.keys = nil
	return nil
}

// read locks the store for reading and returns the session's record; the
// caller must call unlock when done with it.
func (m *Store) read(ctx context.Context, op, id string) (rec *record, unlock func(), err error) {
	if err := store.CheckSessionID(id); err != nil {
		return nil, nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("memstore: %s %q: %w", op, id, err)
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, nil, store.ErrClosed
	}
	rec, ok := m.sessions[id]
	if !ok {
		m.mu.RUnlock()
		return nil, nil, fmt.Errorf("memstore: %s %q: %w", op, id, store.ErrNotFound)
	}
	return rec, m.mu.RUnlock, nil
}

// write is read with the write lock held, after checking fence unless it is
// zero: under the lock, the check and the caller's write are one step.
func (m *Store) write(ctx context.Context, op, id string, fence store.Fence) (rec *record, unlock func(), err error) {
	if err := store.CheckSessionID(id); err != nil {
		return nil, nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("memstore: %s %q: %w", op, id, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, nil, store.ErrClosed
	}
	if fence != 0 && !m.current(id, int64(fence)) {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("memstore: %s %q: token %d: %w", op, id, fence, store.ErrFenced)
	}
	rec, ok := m.sessions[id]
	if !ok {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("memstore: %s %q: %w", op, id, store.ErrNotFound)
	}
	return rec, m.mu.Unlock, nil
}

// now is the current time as the store keeps it: milliseconds, UTC.
func now() time.Time { return ms(time.Now()) }

// ms drops t's precision below a millisecond and its location.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

func checkSession(s store.Session) (store.Session, error) {
	if err := store.CheckSession(s); err != nil {
		return s, err
	}
	if s.Created.IsZero() {
		s.Created = now()
	}
	s.Created = ms(s.Created)
	if s.Updated.IsZero() {
		s.Updated = s.Created
	}
	s.Updated = ms(s.Updated)
	return s, nil
}

// checkEntries validates entries and returns copies the caller cannot alter.
func checkEntries(entries []store.Entry) ([]store.Entry, error) {
	if err := store.CheckEntries(entries); err != nil {
		return nil, err
	}
	out := make([]store.Entry, len(entries))
	at := now()
	for i, e := range entries {
		if e.At.IsZero() {
			e.At = at
		}
		e.At = ms(e.At)
		out[i] = cloneEntry(e)
	}
	return out, nil
}

func cloneEntry(e store.Entry) store.Entry {
	e.ToolArgs = cloneJSON(e.ToolArgs)
	e.ToolResult = cloneJSON(e.ToolResult)
	if len(e.AttachmentIDs) == 0 {
		e.AttachmentIDs = nil
	} else {
		e.AttachmentIDs = slices.Clone(e.AttachmentIDs)
	}
	return e
}

// cloneJSON copies b; empty JSON is absent JSON, nil.
func cloneJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// checkKV validates entries and returns copies the caller cannot alter.
func checkKV(entries []store.KV) ([]store.KV, error) {
	if err := store.CheckKV(entries); err != nil {
		return nil, err
	}
	out := make([]store.KV, len(entries))
	for i, e := range entries {
		if e.Deleted {
			e.Value = nil
		} else {
			e.Value = bytes.Clone(e.Value)
		}
		out[i] = e
	}
	return out, nil
}

// listKey is the position of a session in a listing: newest Updated first,
// then the greater id first.
type listKey struct {
	updated int64 // unix ms
	id      string
}

func keyOf(s store.Session) listKey { return listKey{s.Updated.UnixMilli(), s.ID} }

func (k listKey) compare(o listKey) int {
	if k.updated != o.updated {
		if k.updated < o.updated {
			return -1
		}
		return 1
	}
	return strings.Compare(k.id, o.id)
}

// before reports whether o comes after k in a listing, i.e. sorts below it.
func (k listKey) before(o listKey) bool { return o.compare(k) < 0 }

const cursorVersion = "m1:"

// encodeCursor is the cursor for the page after k: base64 of the version,
// the position and a CRC-32 of both, so that a cursor that was cut, extended
// or made up is refused rather than read as another position.
func encodeCursor(k listKey) string {
	payload := []byte(cursorVersion + strconv.FormatInt(k.updated, 10) + ":" + k.id)
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint32(payload, crc32.ChecksumIEEE(payload)))
}

func decodeCursor(c string) (listKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return listKey{}, fmt.Errorf("%w: not base64: %v", store.ErrBadCursor, err)
	}
	if len(raw) < 4 {
		return listKey{}, fmt.Errorf("%w: too short", store.ErrBadCursor)
	}
	payload, sum := raw[:len(raw)-4], binary.BigEndian.Uint32(raw[len(raw)-4:])
	if crc32.ChecksumIEEE(payload) != sum {
		return listKey{}, fmt.Errorf("%w: checksum mismatch (cut, altered or from another store)", store.ErrBadCursor)
	}
	rest, ok := strings.CutPrefix(string(payload), cursorVersion)
	if !ok {
		return listKey{}, fmt.Errorf("%w: unknown format", store.ErrBadCursor)
	}
	updated, id, ok := strings.Cut(rest, ":")
	if !ok {
		return listKey{}, fmt.Errorf("%w: no session id", store.ErrBadCursor)
	}
	t, err := strconv.ParseInt(updated, 10, 64)
	if err != nil {
		return listKey{}, fmt.Errorf("%w: bad time: %v", store.ErrBadCursor, err)
	}
	if err := store.CheckSessionID(id); err != nil {
		return listKey{}, fmt.Errorf("%w: %v", store.ErrBadCursor, err)
	}
	return listKey{t, id}, nil
}

// current reports whether token is the session's current lease token: the
// last one issued, not released. Expiry does not end it; a takeover does.
// The caller holds m.mu.
func (m *Store) current(sessionID string, token int64) bool {
	l, ok := m.leases[sessionID]
	return ok && l.Node != "" && l.Token == token
}

// AcquireLease implements store.Leaser.
func (m *Store) AcquireLease(ctx context.Context, sessionID, node string, ttl time.Duration) (store.Lease, error) {
	if err := cmp.Or(store.CheckSessionID(sessionID), store.CheckNode(node), store.CheckLeaseTTL(ttl)); err != nil {
		return store.Lease{}, fmt.Errorf("memstore: acquire lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Lease{}, fmt.Errorf("memstore: acquire lease %q: %w", sessionID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.Lease{}, store.ErrClosed
	}
	t := now()
	l, ok := m.leases[sessionID]
	switch {
	case !ok:
		l = &store.Lease{}
		if m.leases == nil {
			m.leases = make(map[string]*store.Lease)
		}
		m.leases[sessionID] = l
		l.Token = 1
	case l.Node == node && l.Expires.After(t):
		// Renewed by its holder: same token.
	case l.Node != "" && l.Expires.After(t):
		return store.Lease{Node: l.Node, Expires: l.Expires}, fmt.Errorf("memstore: acquire lease %q for %q: %w: node %q holds it until %s",
			sessionID, node, store.ErrLeaseHeld, l.Node, l.Expires.Format(time.RFC3339Nano))
	default:
		l.Token++
	}
	l.Node, l.Expires = node, t.Add(ttl.Truncate(time.Millisecond))
	return *l, nil
}

// RenewLease implements store.Leaser.
func (m *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) (store.Lease, error) {
	if err := cmp.Or(store.CheckSessionID(sessionID), store.CheckLeaseTTL(ttl)); err != nil {
		return store.Lease{}, fmt.Errorf("memstore: renew lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Lease{}, fmt.Errorf("memstore: renew lease %q: %w", sessionID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.Lease{}, store.ErrClosed
	}
	if !m.current(sessionID, token) {
		return store.Lease{}, fmt.Errorf("memstore: renew lease %q: token %d: %w", sessionID, token, store.ErrFenced)
	}
	l := m.leases[sessionID]
	l.Expires = now().Add(ttl.Truncate(time.Millisecond))
	return *l, nil
}

// ReleaseLease implements store.Leaser.
func (m *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	if err := store.CheckSessionID(sessionID); err != nil {
		return fmt.Errorf("memstore: release lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: release lease %q: %w", sessionID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.ErrClosed
	}
	if m.current(sessionID, token) {
		l := m.leases[sessionID]
		l.Node, l.Expires = "", now()
	}
	return nil
}

// Inline tells store.Writer that writes here are cheap and never block, so
// they may run on the caller's goroutine.
func (s *Store) Inline() bool { return true }
