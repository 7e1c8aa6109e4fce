package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/surfaced/surfaced/store"
)

// The artifacts of the SQLite store: records in the artifacts table, bytes
// in files under the data directory (blobFiles).

const artifactColumns = `a.id, a.session_id, a.media_type, a.size, a.sha256, a.name, a.derived_from, a.meta, a.created, s.owner`

const artifactFrom = ` FROM artifacts a JOIN sessions s ON s.id = a.session_id`

const artifactCursorVersion = "sa1:"

func scanArtifact(row interface{ Scan(...any) error }) (store.Artifact, error) {
	var a store.Artifact
	var created int64
	if err := row.Scan(&a.ID, &a.SessionID, &a.MediaType, &a.Size, &a.SHA256, &a.Name, &a.DerivedFrom, &a.Meta, &created, &a.Owner); err != nil {
		return store.Artifact{}, err
	}
	a.Created = fromMillis(created)
	if len(a.Meta) == 0 {
		a.Meta = nil
	}
	return a, nil
}

// WriteBlob implements store.ArtifactStore: the bytes go to a file named by
// their SHA-256 (see blobFiles).
func (s *Store) WriteBlob(ctx context.Context, r io.Reader, max int64) (store.Blob, error) {
	const op = "write blob"
	if s.closed.Load() {
		return store.Blob{}, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return store.Blob{}, s.fail(op, "", err)
	}
	b, err := s.blobs.write(ctx, r, max)
	if err != nil {
		return store.Blob{}, s.fail(op, "", err)
	}
	return b, nil
}

// CommitArtifact implements store.ArtifactStore. Under the file's lock, the
// file must exist and the row goes in with the quota check in one
// transaction on the single writer.
func (s *Store) CommitArtifact(ctx context.Context, a store.Artifact, b store.Blob, quota int64) (store.Artifact, error) {
	const op = "commit artifact"
	if s.closed.Load() {
		return store.Artifact{}, store.ErrClosed
	}
	if err := cmp.Or(store.CheckArtifact(a), store.CheckBlob(b)); err != nil {
		return store.Artifact{}, s.fail(op, "", err)
	}
	if b.Ref != b.SHA256 {
		return store.Artifact{}, s.fail(op, a.ID, fmt.Errorf("%w: blob %q is not one of this store's", store.ErrInvalid, b.Ref))
	}
	if a.Created.IsZero() {
		a.Created = now()
	}
	a.Created = fromMillis(a.Created.UnixMilli())
	a.Size, a.SHA256 = b.Size, b.SHA256
	unlock := s.blobs.lock(b.SHA256)
	defer unlock()
	if ok, err := s.blobs.exists(b.SHA256, b.Size); err != nil {
		return store.Artifact{}, s.fail(op, a.ID, err)
	} else if !ok {
		return store.Artifact{}, s.fail(op, a.ID, store.ErrBlobGone)
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT owner FROM sessions WHERE id = ?", a.SessionID).Scan(&a.Owner); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", a.SessionID, store.ErrNotFound)
		} else if err != nil {
			return err
		}
		if quota > 0 {
			var used int64
			if err := tx.QueryRowContext(ctx, "SELECT coalesce(sum(size), 0) FROM artifacts WHERE session_id = ?", a.SessionID).Scan(&used); err != nil {
				return err
			}
			if used+a.Size > quota {
				return fmt.Errorf("%w: %d bytes stored, %d more, quota %d", store.ErrQuotaExceeded, used, a.Size, quota)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO artifacts (id, session_id, media_type, size, sha256, name, derived_from, meta, created)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.SessionID, a.MediaType, a.Size, a.SHA256, a.Name, a.DerivedFrom, jsonOrNil(a.Meta), a.Created.UnixMilli())
		var se *sqlite.Error
		if errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		// The pin stays until the caller discards the blob (or pinTTL).
		return store.Artifact{}, s.failWrite(op, a.ID, err)
	}
	s.blobs.unpin(b.SHA256) // named now
	if len(a.Meta) == 0 {
		a.Meta = nil
	} else {
		a.Meta = append([]byte(nil), a.Meta...)
	}
	return a, nil
}

// DiscardBlob implements store.ArtifactStore: the write's pin goes, then
// the file unless an artifact names it or another write pinned it.
func (s *Store) DiscardBlob(ctx context.Context, b store.Blob) error {
	const op = "discard blob"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckBlob(b); err != nil || b.Ref != b.SHA256 {
		return s.fail(op, "", cmp.Or(err, fmt.Errorf("%w: blob %q is not one of this store's", store.ErrInvalid, b.Ref)))
	}
	defer s.blobs.lock(b.SHA256)()
	s.blobs.unpin(b.SHA256)
	if _, err := s.blobs.removeIfUnnamed(b.SHA256, pinTTL, func(sha string) (bool, error) { return s.named(ctx, sha) }); err != nil {
		return s.fail(op, "", err)
	}
	return nil
}

// GetArtifact implements store.ArtifactStore.
func (s *Store) GetArtifact(ctx context.Context, id string) (store.Artifact, error) {
	const op = "get artifact"
	if s.closed.Load() {
		return store.Artifact{}, store.ErrClosed
	}
	if err := store.CheckArtifactID(id); err != nil {
		return store.Artifact{}, s.fail(op, "", err)
	}
	a, err := scanArtifact(s.read.QueryRowContext(ctx, "SELECT "+artifactColumns+artifactFrom+" WHERE a.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Artifact{}, s.fail(op, id, err)
	}
	return a, nil
}

// OpenArtifact implements store.ArtifactStore: the reader is the file
// itself, so that a download can go out with sendfile.
func (s *Store) OpenArtifact(ctx context.Context, id string) (store.Artifact, store.ArtifactReader, error) {
	const op = "open artifact"
	a, err := s.GetArtifact(ctx, id)
	if err != nil {
		return store.Artifact{}, nil, err
	}
	f, err := os.Open(s.blobs.path(a.SHA256))
	if errors.Is(err, fs.ErrNotExist) {
		// Deleted between the read of its row and now.
		if _, gerr := s.GetArtifact(ctx, id); errors.Is(gerr, store.ErrNotFound) {
			return store.Artifact{}, nil, gerr
		}
		return store.Artifact{}, nil, s.fail(op, id, fmt.Errorf("its bytes are missing: %w", err))
	}
	if err != nil {
		return store.Artifact{}, nil, s.fail(op, id, err)
	}
	return a, f, nil
}

// ListArtifacts implements store.ArtifactStore.
func (s *Store) ListArtifacts(ctx context.Context, q store.ArtifactQuery) ([]store.Artifact, string, error) {
	const op = "list artifacts"
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	limit, filter, err := store.CheckArtifactQuery(q)
	if err != nil {
		return nil, "", s.fail(op, "", err)
	}
	where := " WHERE a.session_id = ?"
	args := []any{q.SessionID}
	if !filter.Any() {
		where += " AND (a.media_type = ? OR (a.media_type >= ? AND a.media_type < ?))"
		args = append(args, filter.Exact, filter.Low, filter.High)
	}
	if q.Cursor != "" {
		created, id, err := store.DecodeCursor(artifactCursorVersion, q.Cursor)
		if err != nil {
			return nil, "", s.fail(op, "", err)
		}
		where += " AND (a.created, a.id) < (?, ?)"
		args = append(args, created, id)
	}
	args = append(args, limit+1)
	rows, err := s.read.QueryContext(ctx, "SELECT "+artifactColumns+artifactFrom+where+" ORDER BY a.created DESC, a.id DESC LIMIT ?", args...)
	if err != nil {
		return nil, "", s.fail(op, q.SessionID, err)
	}
	defer rows.Close()
	page := make([]store.Artifact, 0, min(limit+1, 64))
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, "", s.fail(op, q.SessionID, err)
		}
		page = append(page, a)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail(op, q.SessionID, err)
	}
	if len(page) <= limit {
		return page, "", nil
	}
	page = page[:limit]
	last := page[limit-1]
	return page, store.EncodeCursor(artifactCursorVersion, last.Created.UnixMilli(), last.ID), nil
}

// DeleteArtifact implements store.ArtifactStore.
func (s *Store) DeleteArtifact(ctx context.Context, id string) (store.Artifact, error) {
	const op = "delete artifact"
	if s.closed.Load() {
		return store.Artifact{}, store.ErrClosed
	}
	if err := store.CheckArtifactID(id); err != nil {
		return store.Artifact{}, s.fail(op, "", err)
	}
	var a store.Artifact
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = scanArtifact(tx.QueryRowContext(ctx, "SELECT "+artifactColumns+artifactFrom+" WHERE a.id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM artifacts WHERE id = ?", id)
		return err
	})
	if err != nil {
		return store.Artifact{}, s.failWrite(op, id, err)
	}
	if err := s.dropFile(ctx, a.SHA256); err != nil {
		// The row is gone: the file is an orphan the sweep collects.
		s.log.Warn("an artifact's file could not be removed; the sweep will", "artifact", id, "err", err)
	}
	return a, nil
}

// dropFile removes the file of sha unless an artifact still names it.
func (s *Store) dropFile(ctx context.Context, sha string) error {
	defer s.blobs.lock(sha)()
	_, err := s.blobs.removeIfUnnamed(sha, pinTTL, func(sha string) (bool, error) { return s.named(ctx, sha) })
	return err
}

// named reports whether an artifact names the file of sha. The caller
// holds the file's lock, under which every commit of sha is made, so a
// reader (which sees every transaction committed before it began) cannot
// miss one.
func (s *Store) named(ctx context.Context, sha string) (bool, error) {
	var one int
	err := s.read.QueryRowContext(ctx, "SELECT 1 FROM artifacts WHERE sha256 = ? LIMIT 1", sha).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ArtifactBytes implements store.ArtifactStore.
func (s *Store) ArtifactBytes(ctx context.Context, sessionID string) (int64, error) {
	const op = "artifact bytes"
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return 0, s.fail(op, "", err)
	}
	var n int64
	if err := s.read.QueryRowContext(ctx, "SELECT coalesce(sum(size), 0) FROM artifacts WHERE session_id = ?", sessionID).Scan(&n); err != nil {
		return 0, s.fail(op, sessionID, err)
	}
	return n, nil
}

// SweepBlobs implements store.ArtifactStore.
func (s *Store) SweepBlobs(ctx context.Context, grace time.Duration) (int, error) {
	const op = "sweep blobs"
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	n, err := s.blobs.sweep(ctx, grace, func(sha string) (bool, error) { return s.named(ctx, sha) })
	if err != nil {
		return n, s.fail(op, "", err)
	}
	return n, nil
}

// DeleteSession implements store.Store: the rows in one transaction, then
// the files no artifact names any more.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	const op = "delete session"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(id); err != nil {
		return s.fail(op, "", err)
	}
	var shas []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, "SELECT 1 FROM sessions WHERE id = ?", id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		} else if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT DISTINCT sha256 FROM artifacts WHERE session_id = ?", id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var sha string
			if err := rows.Scan(&sha); err != nil {
				rows.Close()
				return err
			}
			shas = append(shas, sha)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, q := range []string{
			"DELETE FROM artifacts WHERE session_id = ?",
			"DELETE FROM transcript WHERE session_id = ?",
			"DELETE FROM kv WHERE session_id = ?",
			"DELETE FROM leases WHERE session_id = ?",
			"DELETE FROM sessions WHERE id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.failWrite(op, id, err)
	}
	for _, sha := range shas {
		if err := s.dropFile(ctx, sha); err != nil {
			s.log.Warn("an artifact's file could not be removed; the sweep will", "session", id, "err", err)
		}
	}
	return nil
}

// EndedSessions implements store.Store, from the partial index
// sessions_ended_by_updated.
func (s *Store) EndedSessions(ctx context.Context, before time.Time, limit int) ([]string, error) {
	const op = "ended sessions"
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	limit, err := store.CheckEndedQuery(limit)
	if err != nil {
		return nil, s.fail(op, "", err)
	}
	rows, err := s.read.QueryContext(ctx, "SELECT id FROM sessions WHERE status = 'ended' AND updated < ? ORDER BY updated, id LIMIT ?",
		before.UnixMilli(), limit)
	if err != nil {
		return nil, s.fail(op, "", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.fail(op, "", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(op, "", err)
	}
	return ids, nil
}

// SigningKeys implements store.ArtifactStore.
func (s *Store) SigningKeys(ctx context.Context, initial []byte) ([]store.SigningKey, error) {
	const op = "signing keys"
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := store.CheckSigningKey(initial); err != nil {
		return nil, s.fail(op, "", err)
	}
	var keys []store.SigningKey
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO artifact_keys (id, secret, created, verify_until)
			SELECT 1, ?, ?, 0 WHERE NOT EXISTS (SELECT 1 FROM artifact_keys)`, initial, now().UnixMilli()); err != nil {
			return err
		}
		var err error
		keys, err = validKeys(ctx, tx)
		return err
	})
	if err != nil {
		return nil, s.fail(op, "", err)
	}
	return keys, nil
}

// validKeys reads the keys that verify now, current first, then newest
// first.
func validKeys(ctx context.Context, tx *sql.Tx) ([]store.SigningKey, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, secret, created, verify_until FROM artifact_keys
		WHERE verify_until = 0 OR verify_until > ? ORDER BY verify_until = 0 DESC, id DESC`, now().UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []store.SigningKey
	for rows.Next() {
		var k store.SigningKey
		var created, until int64
		if err := rows.Scan(&k.ID, &k.Secret, &created, &until); err != nil {
			return nil, err
		}
		k.Created = fromMillis(created)
		if until != 0 {
			k.VerifyUntil = fromMillis(until)
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// RotateSigningKey implements store.ArtifactStore.
func (s *Store) RotateSigningKey(ctx context.Context, secret []byte, grace time.Duration) (store.SigningKey, error) {
	const op = "rotate signing key"
	if s.closed.Load() {
		return store.SigningKey{}, store.ErrClosed
	}
	if err := store.CheckSigningKey(secret); err != nil {
		return store.SigningKey{}, s.fail(op, "", err)
	}
	t := now()
	k := store.SigningKey{Secret: append([]byte(nil), secret...), Created: t}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		// Numbered before any key goes: an id is never used twice.
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) + 1 FROM artifact_keys").Scan(&k.ID); err != nil {
			return err
		}
		if grace > 0 {
			if _, err := tx.ExecContext(ctx, "UPDATE artifact_keys SET verify_until = ? WHERE verify_until = 0", t.Add(grace).UnixMilli()); err != nil {
				return err
			}
		} else if _, err := tx.ExecContext(ctx, "DELETE FROM artifact_keys WHERE verify_until = 0"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM artifact_keys WHERE verify_until <> 0 AND verify_until <= ?", t.UnixMilli()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO artifact_keys (id, secret, created, verify_until) VALUES (?, ?, ?, 0)", k.ID, secret, t.UnixMilli())
		return err
	})
	if err != nil {
		return store.SigningKey{}, s.fail(op, "", err)
	}
	return k, nil
}
