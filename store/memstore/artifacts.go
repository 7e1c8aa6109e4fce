package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/surfaced/surfaced/store"
)

// blob is one stored copy of bytes. Each WriteBlob makes its own; a commit
// of bytes another artifact already names shares that one's copy and drops
// its own, so that equal bytes committed are kept once.
type blob struct {
	sha     string
	data    []byte
	written time.Time // the sweep's grace runs from it
}

// artifact is a stored record (Owner empty) and the blob it names.
type artifact struct {
	a   store.Artifact
	ref string
}

const artifactCursorVersion = "ma1:"

// WriteBlob implements store.ArtifactStore. The bytes are in memory, as
// everything of this store is.
func (m *Store) WriteBlob(ctx context.Context, r io.Reader, max int64) (store.Blob, error) {
	if err := ctx.Err(); err != nil {
		return store.Blob{}, fmt.Errorf("memstore: write blob: %w", err)
	}
	hr := store.NewHashingReader(r, max)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(hr); err != nil {
		return store.Blob{}, fmt.Errorf("memstore: write blob: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.Blob{}, store.ErrClosed
	}
	if m.blobs == nil {
		m.blobs = make(map[string]*blob)
	}
	m.blobN++
	b := store.Blob{Ref: fmt.Sprintf("m%d", m.blobN), SHA256: hr.Sum(), Size: hr.Size()}
	m.blobs[b.Ref] = &blob{sha: b.SHA256, data: buf.Bytes(), written: time.Now()}
	return b, nil
}

// CommitArtifact implements store.ArtifactStore.
func (m *Store) CommitArtifact(ctx context.Context, a store.Artifact, b store.Blob, quota int64) (store.Artifact, error) {
	const op = "memstore: commit artifact"
	if err := cmp.Or(store.CheckArtifact(a), store.CheckBlob(b)); err != nil {
		return store.Artifact{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Artifact{}, fmt.Errorf("%s %q: %w", op, a.ID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.Artifact{}, store.ErrClosed
	}
	rec, ok := m.sessions[a.SessionID]
	if !ok {
		return store.Artifact{}, fmt.Errorf("%s %q: session %q: %w", op, a.ID, a.SessionID, store.ErrNotFound)
	}
	if _, taken := m.artifacts[a.ID]; taken {
		return store.Artifact{}, fmt.Errorf("%s %q: %w", op, a.ID, store.ErrExists)
	}
	if bl, ok := m.blobs[b.Ref]; !ok || bl.sha != b.SHA256 || int64(len(bl.data)) != b.Size {
		return store.Artifact{}, fmt.Errorf("%s %q: %w", op, a.ID, store.ErrBlobGone)
	}
	if quota > 0 {
		if used := m.sessionBytes(a.SessionID); used+b.Size > quota {
			return store.Artifact{}, fmt.Errorf("%s %q: %w: %d bytes stored, %d more, quota %d", op, a.ID, store.ErrQuotaExceeded, used, b.Size, quota)
		}
	}
	a.Size, a.SHA256, a.Meta, a.Owner = b.Size, b.SHA256, cloneJSON(a.Meta), ""
	if a.Created.IsZero() {
		a.Created = now()
	}
	a.Created = ms(a.Created)
	if m.artifacts == nil {
		m.artifacts = make(map[string]*artifact)
	}
	ref := b.Ref
	for _, other := range m.artifacts {
		if other.a.SHA256 == b.SHA256 {
			ref = other.ref // share the copy kept already
			delete(m.blobs, b.Ref)
			break
		}
	}
	m.artifacts[a.ID] = &artifact{a: a, ref: ref}
	a.Owner = rec.s.Owner
	a.Meta = cloneJSON(a.Meta)
	return a, nil
}

// sessionBytes is the size of the session's artifacts; the caller holds m.mu.
func (m *Store) sessionBytes(sessionID string) int64 {
	var n int64
	for _, a := range m.artifacts {
		if a.a.SessionID == sessionID {
			n += a.a.Size
		}
	}
	return n
}

// artifact returns a copy of the record with its owner; the caller holds m.mu.
func (m *Store) artifact(id string) (store.Artifact, bool) {
	p, ok := m.artifacts[id]
	if !ok {
		return store.Artifact{}, false
	}
	a := p.a
	a.Meta = cloneJSON(a.Meta)
	if rec, ok := m.sessions[a.SessionID]; ok {
		a.Owner = rec.s.Owner
	}
	return a, true
}

// DiscardBlob implements store.ArtifactStore.
func (m *Store) DiscardBlob(ctx context.Context, b store.Blob) error {
	if err := store.CheckBlob(b); err != nil {
		return fmt.Errorf("memstore: discard blob: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.ErrClosed
	}
	m.dropUnreferenced(b.Ref)
	return nil
}

// GetArtifact implements store.ArtifactStore.
func (m *Store) GetArtifact(ctx context.Context, id string) (store.Artifact, error) {
	a, _, err := m.getArtifact(ctx, "get artifact", id)
	return a, err
}

func (m *Store) getArtifact(ctx context.Context, op, id string) (store.Artifact, []byte, error) {
	if err := store.CheckArtifactID(id); err != nil {
		return store.Artifact{}, nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Artifact{}, nil, fmt.Errorf("memstore: %s %q: %w", op, id, err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return store.Artifact{}, nil, store.ErrClosed
	}
	a, ok := m.artifact(id)
	if !ok {
		return store.Artifact{}, nil, fmt.Errorf("memstore: %s %q: %w", op, id, store.ErrNotFound)
	}
	bl, ok := m.blobs[m.artifacts[id].ref]
	if !ok {
		return store.Artifact{}, nil, fmt.Errorf("memstore: %s %q: its bytes are missing", op, id)
	}
	return a, bl.data, nil
}

// OpenArtifact implements store.ArtifactStore. The bytes are never
// modified, so the reader shares them.
func (m *Store) OpenArtifact(ctx context.Context, id string) (store.Artifact, store.ArtifactReader, error) {
	a, data, err := m.getArtifact(ctx, "open artifact", id)
	if err != nil {
		return store.Artifact{}, nil, err
	}
	return a, nopCloser{bytes.NewReader(data)}, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// ListArtifacts implements store.ArtifactStore. It scans every artifact of
// the store: fine for the sizes memstore is meant for.
func (m *Store) ListArtifacts(ctx context.Context, q store.ArtifactQuery) ([]store.Artifact, string, error) {
	const op = "memstore: list artifacts"
	limit, filter, err := store.CheckArtifactQuery(q)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	var afterCreated int64
	var afterID string
	if q.Cursor != "" {
		if afterCreated, afterID, err = store.DecodeCursor(artifactCursorVersion, q.Cursor); err != nil {
			return nil, "", fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, "", store.ErrClosed
	}
	var all []store.Artifact
	for id, p := range m.artifacts {
		if p.a.SessionID != q.SessionID || !filter.Match(p.a.MediaType) {
			continue
		}
		if q.Cursor != "" && cmp.Or(cmp.Compare(p.a.Created.UnixMilli(), afterCreated), strings.Compare(p.a.ID, afterID)) >= 0 {
			continue
		}
		a, _ := m.artifact(id)
		all = append(all, a)
	}
	m.mu.RUnlock()
	slices.SortFunc(all, func(a, b store.Artifact) int {
		return cmp.Or(b.Created.Compare(a.Created), strings.Compare(b.ID, a.ID))
	})
	if len(all) <= limit {
		return all, "", nil
	}
	page := all[:limit]
	last := page[limit-1]
	return page, store.EncodeCursor(artifactCursorVersion, last.Created.UnixMilli(), last.ID), nil
}

// DeleteArtifact implements store.ArtifactStore.
func (m *Store) DeleteArtifact(ctx context.Context, id string) (store.Artifact, error) {
	const op = "memstore: delete artifact"
	if err := store.CheckArtifactID(id); err != nil {
		return store.Artifact{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Artifact{}, fmt.Errorf("%s %q: %w", op, id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.Artifact{}, store.ErrClosed
	}
	a, ok := m.artifact(id)
	if !ok {
		return store.Artifact{}, fmt.Errorf("%s %q: %w", op, id, store.ErrNotFound)
	}
	ref := m.artifacts[id].ref
	delete(m.artifacts, id)
	m.dropUnreferenced(ref)
	return a, nil
}

// dropUnreferenced deletes the blob when no artifact names it; the caller
// holds m.mu for writing.
func (m *Store) dropUnreferenced(ref string) {
	for _, a := range m.artifacts {
		if a.ref == ref {
			return
		}
	}
	delete(m.blobs, ref)
}

// ArtifactBytes implements store.ArtifactStore.
func (m *Store) ArtifactBytes(ctx context.Context, sessionID string) (int64, error) {
	if err := store.CheckSessionID(sessionID); err != nil {
		return 0, fmt.Errorf("memstore: artifact bytes: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: artifact bytes %q: %w", sessionID, err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, store.ErrClosed
	}
	return m.sessionBytes(sessionID), nil
}

// SweepBlobs implements store.ArtifactStore.
func (m *Store) SweepBlobs(ctx context.Context, grace time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: sweep blobs: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, store.ErrClosed
	}
	named := make(map[string]bool, len(m.artifacts))
	for _, a := range m.artifacts {
		named[a.ref] = true
	}
	cutoff := time.Now().Add(-grace)
	n := 0
	for ref, b := range m.blobs {
		if !named[ref] && !b.written.After(cutoff) {
			delete(m.blobs, ref)
			n++
		}
	}
	return n, nil
}

// DeleteSession implements store.Store.
func (m *Store) DeleteSession(ctx context.Context, id string) error {
	const op = "memstore: delete session"
	if err := store.CheckSessionID(id); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w", op, id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.ErrClosed
	}
	if _, ok := m.sessions[id]; !ok {
		return fmt.Errorf("%s %q: %w", op, id, store.ErrNotFound)
	}
	delete(m.sessions, id)
	delete(m.leases, id)
	var refs []string
	for aid, a := range m.artifacts {
		if a.a.SessionID == id {
			refs = append(refs, a.ref)
			delete(m.artifacts, aid)
		}
	}
	for _, ref := range refs {
		m.dropUnreferenced(ref)
	}
	return nil
}

// EndedSessions implements store.Store.
func (m *Store) EndedSessions(ctx context.Context, before time.Time, limit int) ([]string, error) {
	limit, err := store.CheckEndedQuery(limit)
	if err != nil {
		return nil, fmt.Errorf("memstore: ended sessions: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: ended sessions: %w", err)
	}
	m.mu.RLock()
	var ended []store.Session
	for _, rec := range m.sessions {
		if rec.s.Status == store.StatusEnded && rec.s.Updated.Before(before) {
			ended = append(ended, rec.s)
		}
	}
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return nil, store.ErrClosed
	}
	slices.SortFunc(ended, func(a, b store.Session) int {
		return cmp.Or(a.Updated.Compare(b.Updated), strings.Compare(a.ID, b.ID))
	})
	out := make([]string, 0, min(limit, len(ended)))
	for _, s := range ended[:min(limit, len(ended))] {
		out = append(out, s.ID)
	}
	return out, nil
}

// SigningKeys implements store.ArtifactStore.
func (m *Store) SigningKeys(ctx context.Context, initial []byte) ([]store.SigningKey, error) {
	if err := store.CheckSigningKey(initial); err != nil {
		return nil, fmt.Errorf("memstore: signing keys: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: signing keys: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, store.ErrClosed
	}
	if len(m.keys) == 0 {
		m.keys = append(m.keys, store.SigningKey{ID: 1, Secret: bytes.Clone(initial), Created: now()})
	}
	return m.validKeys(), nil
}

// validKeys are the keys that verify now, current first, then newest
// first; the caller holds m.mu.
func (m *Store) validKeys() []store.SigningKey {
	t := time.Now()
	var out []store.SigningKey
	for i := len(m.keys) - 1; i >= 0; i-- {
		k := m.keys[i]
		if k.Current() || k.VerifyUntil.After(t) {
			k.Secret = bytes.Clone(k.Secret)
			out = append(out, k)
		}
	}
	slices.SortStableFunc(out, func(a, b store.SigningKey) int {
		switch {
		case a.Current() == b.Current():
			return 0
		case a.Current():
			return -1
		}
		return 1
	})
	return out
}

// RotateSigningKey implements store.ArtifactStore.
func (m *Store) RotateSigningKey(ctx context.Context, secret []byte, grace time.Duration) (store.SigningKey, error) {
	if err := store.CheckSigningKey(secret); err != nil {
		return store.SigningKey{}, fmt.Errorf("memstore: rotate signing key: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.SigningKey{}, fmt.Errorf("memstore: rotate signing key: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.SigningKey{}, store.ErrClosed
	}
	t := now()
	kept := m.keys[:0]
	var last int64
	for _, k := range m.keys {
		last = max(last, k.ID)
		if k.Current() {
			k.VerifyUntil = t.Add(max(grace, 0).Truncate(time.Millisecond))
			if grace <= 0 {
				continue
			}
		} else if !k.VerifyUntil.After(t) {
			continue
		}
		kept = append(kept, k)
	}
	k := store.SigningKey{ID: last + 1, Secret: bytes.Clone(secret), Created: t}
	m.keys = append(kept, k)
	k.Secret = bytes.Clone(k.Secret)
	return k, nil
}
