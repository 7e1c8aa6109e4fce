package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/surfaced/surfaced/store"
)

// The artifacts of the PostgreSQL store: records in artifacts, bytes in
// artifact_chunks under a row of artifact_blobs (see the migration). Every
// node reads and writes them: nothing about an artifact is local to a node.

// ChunkSize is the size of the chunks the bytes of an artifact are kept in.
// A write holds one chunk in memory, a reader one.
const ChunkSize = 1 << 20

const artifactColumns = `a.id, a.session_id, a.media_type, a.size, a.sha256, a.blob_id, a.name, a.derived_from, a.meta, a.created, s.owner`

const artifactCursorVersion = "pa1:"

// artifactQueries is the SQL of the artifacts, with the schema filled in.
type artifactQueries struct {
	newBlob, insertChunk, finishBlob, dropBlob, deleteBlob       string
	blobOf, sessionForUpdate, sessionBytes, shareBlob, insertArt string
	getArtifact, chunk, deleteArt, named, sweepable              string
	list                                                         [4]string // by listByMedia | listAfter
	leaseForUpdate, sessionExists, sessionBlobs, endedSessions   string
	initKey, validKeys, lockKeys, nextKeyID, retireKey           string
	dropCurrentKey, dropExpiredKeys, insertKey                   string
	deleteSession                                                []string
}

func newArtifactQueries(schema string) artifactQueries {
	from := " FROM {s}.artifacts a JOIN {s}.sessions s ON s.id = a.session_id"
	q := artifactQueries{
		newBlob:     "INSERT INTO {s}.artifact_blobs (sha256, size, chunk_size, created) VALUES ('', 0, $1, " + nowMS + ") RETURNING blob_id",
		insertChunk: "INSERT INTO {s}.artifact_chunks (blob_id, seq, data) VALUES ($1, $2, $3)",
		finishBlob:  "UPDATE {s}.artifact_blobs SET sha256 = $2, size = $3, created = " + nowMS + " WHERE blob_id = $1",
		dropBlob:    "DELETE FROM {s}.artifact_blobs WHERE blob_id = $1",
		// The foreign key from artifacts stops the delete of a blob that a
		// commit names meanwhile (23503, which deleteBlob reads as "named").
		deleteBlob:       "DELETE FROM {s}.artifact_blobs b WHERE blob_id = $1 AND NOT EXISTS (SELECT 1 FROM {s}.artifacts WHERE blob_id = $1)",
		blobOf:           "SELECT sha256, size FROM {s}.artifact_blobs WHERE blob_id = $1 FOR KEY SHARE",
		sessionForUpdate: "SELECT owner FROM {s}.sessions WHERE id = $1 FOR UPDATE",
		sessionBytes:     "SELECT coalesce(sum(size), 0)::bigint FROM {s}.artifacts WHERE session_id = $1",
		// Another blob of the same bytes that an artifact names, locked so
		// that it cannot be deleted before this commit names it too.
		shareBlob: `SELECT b.blob_id FROM {s}.artifact_blobs b WHERE b.sha256 = $1 AND b.blob_id <> $2
			AND EXISTS (SELECT 1 FROM {s}.artifacts a WHERE a.blob_id = b.blob_id) ORDER BY b.blob_id LIMIT 1 FOR KEY SHARE OF b`,
		insertArt: `INSERT INTO {s}.artifacts (id, session_id, media_type, size, sha256, blob_id, name, derived_from, meta, created)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, ` + nowMS + `)) ON CONFLICT (id) DO NOTHING RETURNING created`,
		getArtifact: "SELECT " + artifactColumns + ", b.chunk_size" + from + " JOIN {s}.artifact_blobs b ON b.blob_id = a.blob_id WHERE a.id = $1",
		chunk:       "SELECT data FROM {s}.artifact_chunks WHERE blob_id = $1 AND seq = $2",
		deleteArt:   "DELETE FROM {s}.artifacts WHERE id = $1 RETURNING blob_id",
		named:       "SELECT EXISTS (SELECT 1 FROM {s}.artifacts WHERE blob_id = $1)",
		sweepable: `SELECT blob_id FROM {s}.artifact_blobs b WHERE created <= ` + nowMS + ` - $1
			AND NOT EXISTS (SELECT 1 FROM {s}.artifacts a WHERE a.blob_id = b.blob_id)`,
		// A purge locks the lease row before the session's (see the
		// package's lock order): a fenced write holds the lease first.
		leaseForUpdate: "SELECT 1 FROM {s}.leases WHERE session_id = $1 FOR UPDATE",
		sessionExists:  "SELECT 1 FROM {s}.sessions WHERE id = $1 FOR UPDATE",
		sessionBlobs:   "DELETE FROM {s}.artifacts WHERE session_id = $1 RETURNING blob_id",
		deleteSession: []string{
			"DELETE FROM {s}.transcript WHERE session_id = $1",
			"DELETE FROM {s}.kv WHERE session_id = $1",
			"DELETE FROM {s}.leases WHERE session_id = $1",
			"DELETE FROM {s}.sessions WHERE id = $1",
		},
		endedSessions: "SELECT id FROM {s}.sessions WHERE status = 'ended'::bytea AND updated < $1 ORDER BY updated, id LIMIT $2",

		initKey: `INSERT INTO {s}.artifact_keys (id, secret, created, verify_until)
			SELECT 1, $1, ` + nowMS + `, 0 WHERE NOT EXISTS (SELECT 1 FROM {s}.artifact_keys) ON CONFLICT (id) DO NOTHING`,
		validKeys: `SELECT id, secret, created, verify_until FROM {s}.artifact_keys
			WHERE verify_until = 0 OR verify_until > ` + nowMS + ` ORDER BY verify_until = 0 DESC, id DESC`,
		lockKeys:        "LOCK TABLE {s}.artifact_keys IN EXCLUSIVE MODE",
		nextKeyID:       "SELECT coalesce(max(id), 0) + 1, " + nowMS + " FROM {s}.artifact_keys",
		retireKey:       "UPDATE {s}.artifact_keys SET verify_until = " + nowMS + " + $1 WHERE verify_until = 0",
		dropCurrentKey:  "DELETE FROM {s}.artifact_keys WHERE verify_until = 0",
		dropExpiredKeys: "DELETE FROM {s}.artifact_keys WHERE verify_until <> 0 AND verify_until <= " + nowMS,
		insertKey:       "INSERT INTO {s}.artifact_keys (id, secret, created, verify_until) VALUES ($1, $2, $3, 0)",
	}
	for _, p := range []*string{&q.newBlob, &q.insertChunk, &q.finishBlob, &q.dropBlob, &q.deleteBlob, &q.blobOf,
		&q.sessionForUpdate, &q.sessionBytes, &q.shareBlob, &q.insertArt, &q.getArtifact, &q.chunk, &q.deleteArt,
		&q.named, &q.sweepable, &q.leaseForUpdate, &q.sessionExists, &q.sessionBlobs, &q.endedSessions, &q.initKey, &q.validKeys, &q.lockKeys,
		&q.nextKeyID, &q.retireKey, &q.dropCurrentKey, &q.dropExpiredKeys, &q.insertKey} {
		*p = replaceSchema(*p, schema)
	}
	for bits := range q.list {
		q.list[bits] = replaceSchema(listArtifactsSQL(bits, from), schema)
	}
	for i := range q.deleteSession {
		q.deleteSession[i] = replaceSchema(q.deleteSession[i], schema)
	}
	return q
}

// The bits of an artifact listing's filters, indexing artifactQueries.list.
const (
	listByMedia = 1 << iota
	listAfter
)

// listArtifactsSQL is the listing with the filters in bits: its parameters
// are the session, then the media range (exact, low, high) and the cursor
// (created, id) as present, then the limit. A row comparison with the
// cursor seeks into artifacts_by_session_created.
func listArtifactsSQL(bits int, from string) string {
	where := " WHERE a.session_id = $1"
	n := 1
	param := func() string {
		n++
		return "$" + strconv.Itoa(n)
	}
	if bits&listByMedia != 0 {
		e, lo, hi := param(), param(), param()
		where += " AND (a.media_type = " + e + " OR (a.media_type >= " + lo + " AND a.media_type < " + hi + "))"
	}
	if bits&listAfter != 0 {
		c, id := param(), param()
		where += " AND (a.created, a.id) < (" + c + ", " + id + ")"
	}
	return "SELECT " + artifactColumns + from + where + " ORDER BY a.created DESC, a.id DESC LIMIT " + param()
}

// scanArtifact reads the artifactColumns (and more into extra).
func scanArtifact(row pgx.Row, blobID *int64, extra ...any) (store.Artifact, error) {
	var a store.Artifact
	var mediaType, name, owner []byte
	var created int64
	dest := append([]any{&a.ID, &a.SessionID, &mediaType, &a.Size, &a.SHA256, blobID, &name, &a.DerivedFrom, &a.Meta, &created, &owner}, extra...)
	if err := row.Scan(dest...); err != nil {
		return store.Artifact{}, err
	}
	a.MediaType, a.Name, a.Owner, a.Created = string(mediaType), string(name), string(owner), fromMillis(created)
	if len(a.Meta) == 0 {
		a.Meta = nil
	}
	return a, nil
}

// WriteBlob implements store.ArtifactStore. Each chunk is its own
// statement, read from r before a connection is taken: a slow writer holds
// no connection of the pool while it sends. A write that fails is deleted;
// one the process did not live to finish is swept.
func (s *Store) WriteBlob(ctx context.Context, r io.Reader, max int64) (store.Blob, error) {
	const op = "write blob"
	if err := s.begin(ctx, op, ""); err != nil {
		return store.Blob{}, err
	}
	var blobID int64
	if err := s.pool.QueryRow(ctx, s.aq.newBlob, ChunkSize).Scan(&blobID); err != nil {
		return store.Blob{}, s.fail(ctx, op, "", err)
	}
	b, err := s.writeChunks(ctx, blobID, r, max)
	if err != nil {
		// Best effort: what is left is swept.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = s.pool.Exec(dctx, s.aq.dropBlob, blobID)
		cancel()
		return store.Blob{}, s.fail(ctx, op, "", err)
	}
	return b, nil
}

func (s *Store) writeChunks(ctx context.Context, blobID int64, r io.Reader, max int64) (store.Blob, error) {
	hr := store.NewHashingReader(r, max)
	buf := make([]byte, ChunkSize)
	for seq := int32(0); ; seq++ {
		n, err := io.ReadFull(hr, buf)
		if n > 0 {
			if _, err := s.pool.Exec(ctx, s.aq.insertChunk, blobID, seq, buf[:n]); err != nil {
				return store.Blob{}, fmt.Errorf("chunk %d: %w", seq, err)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return store.Blob{}, err
		}
		if err := ctx.Err(); err != nil {
			return store.Blob{}, err
		}
	}
	if _, err := s.pool.Exec(ctx, s.aq.finishBlob, blobID, hr.Sum(), hr.Size()); err != nil {
		return store.Blob{}, err
	}
	return store.Blob{Ref: strconv.FormatInt(blobID, 10), SHA256: hr.Sum(), Size: hr.Size()}, nil
}

// CommitArtifact implements store.ArtifactStore: one transaction that
// locks the session's row (so that the quota check and the insert are one
// step for every node), checks the blob, and names the copy of the same
// bytes another artifact names already, if any, dropping its own.
func (s *Store) CommitArtifact(ctx context.Context, a store.Artifact, b store.Blob, quota int64) (store.Artifact, error) {
	const op = "commit artifact"
	if err := s.begin(ctx, op, ""); err != nil {
		return store.Artifact{}, err
	}
	if err := cmp.Or(store.CheckArtifact(a), store.CheckBlob(b)); err != nil {
		return store.Artifact{}, s.fail(ctx, op, "", err)
	}
	mine, err := strconv.ParseInt(b.Ref, 10, 64)
	if err != nil {
		return store.Artifact{}, s.fail(ctx, op, a.ID, fmt.Errorf("%w: blob %q is not one of this store's", store.ErrInvalid, b.Ref))
	}
	a.Size, a.SHA256 = b.Size, b.SHA256
	shared := mine
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var owner []byte
		if err := tx.QueryRow(ctx, s.aq.sessionForUpdate, a.SessionID).Scan(&owner); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("session %q: %w", a.SessionID, store.ErrNotFound)
		} else if err != nil {
			return err
		}
		a.Owner = string(owner)
		var sha string
		var size int64
		if err := tx.QueryRow(ctx, s.aq.blobOf, mine).Scan(&sha, &size); errors.Is(err, pgx.ErrNoRows) || err == nil && (sha != b.SHA256 || size != b.Size) {
			return store.ErrBlobGone
		} else if err != nil {
			return err
		}
		if quota > 0 {
			var used int64
			if err := tx.QueryRow(ctx, s.aq.sessionBytes, a.SessionID).Scan(&used); err != nil {
				return err
			}
			if used+a.Size > quota {
				return fmt.Errorf("%w: %d bytes stored, %d more, quota %d", store.ErrQuotaExceeded, used, a.Size, quota)
			}
		}
		if err := tx.QueryRow(ctx, s.aq.shareBlob, b.SHA256, mine).Scan(&shared); errors.Is(err, pgx.ErrNoRows) {
			shared = mine
		} else if err != nil {
			return err
		}
		var created int64
		err := tx.QueryRow(ctx, s.aq.insertArt, a.ID, a.SessionID, bytesOf(a.MediaType), a.Size, a.SHA256, shared,
			bytesOf(a.Name), a.DerivedFrom, jsonOrNil(a.Meta), millisOrNil(a.Created)).Scan(&created)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrExists
		}
		a.Created = fromMillis(created)
		return err
	})
	if err != nil {
		return store.Artifact{}, s.failWrite(ctx, op, a.ID, err)
	}
	if shared != mine {
		s.deleteBlob(ctx, mine)
	}
	if len(a.Meta) == 0 {
		a.Meta = nil
	} else {
		a.Meta = append([]byte(nil), a.Meta...)
	}
	return a, nil
}

// blobCleanupTimeout bounds the deletion of bytes no artifact names after
// a write (the sweep collects what it leaves).
const blobCleanupTimeout = 10 * time.Second

// deleteBlob deletes a blob unless an artifact names it, and reports
// whether it did. A failure leaves an orphan the sweep collects.
func (s *Store) deleteBlob(ctx context.Context, blobID int64) (bool, error) {
	// The caller's change is made (or refused) already: this cleanup
	// outlives its caller, within a bound of its own (a frozen server
	// must not hold the caller's answer).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), blobCleanupTimeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, s.aq.deleteBlob, blobID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return false, nil // a commit named it meanwhile
	}
	if err != nil {
		s.log.Warn("an artifact blob could not be deleted; the sweep will", "blob", blobID, "err", err)
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// DiscardBlob implements store.ArtifactStore.
func (s *Store) DiscardBlob(ctx context.Context, b store.Blob) error {
	const op = "discard blob"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	id, err := strconv.ParseInt(b.Ref, 10, 64)
	if err := cmp.Or(store.CheckBlob(b), err); err != nil {
		return s.fail(ctx, op, "", fmt.Errorf("%w: blob %q is not one of this store's", store.ErrInvalid, b.Ref))
	}
	if _, err := s.deleteBlob(ctx, id); err != nil {
		return s.fail(ctx, op, "", err)
	}
	return nil
}

// GetArtifact implements store.ArtifactStore.
func (s *Store) GetArtifact(ctx context.Context, id string) (store.Artifact, error) {
	a, _, _, err := s.getArtifact(ctx, "get artifact", id)
	return a, err
}

func (s *Store) getArtifact(ctx context.Context, op, id string) (a store.Artifact, blobID int64, chunkSize int, err error) {
	if err := s.begin(ctx, op, ""); err != nil {
		return store.Artifact{}, 0, 0, err
	}
	if err := store.CheckArtifactID(id); err != nil {
		return store.Artifact{}, 0, 0, s.fail(ctx, op, "", err)
	}
	a, err = scanArtifact(s.pool.QueryRow(ctx, s.aq.getArtifact, id), &blobID, &chunkSize)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Artifact{}, 0, 0, s.fail(ctx, op, id, err)
	}
	return a, blobID, chunkSize, nil
}

// OpenArtifact implements store.ArtifactStore. The reader fetches one chunk
// at a time, each with a statement of its own (a slow reader holds no
// connection), with ctx; reading an artifact deleted meanwhile fails.
func (s *Store) OpenArtifact(ctx context.Context, id string) (store.Artifact, store.ArtifactReader, error) {
	a, blobID, chunkSize, err := s.getArtifact(ctx, "open artifact", id)
	if err != nil {
		return store.Artifact{}, nil, err
	}
	return a, &chunkReader{s: s, ctx: ctx, id: id, blobID: blobID, size: a.Size, chunkSize: int64(chunkSize), seq: -1}, nil
}

// chunkReader reads a blob chunk by chunk.
type chunkReader struct {
	s         *Store
	ctx       context.Context
	id        string
	blobID    int64
	size      int64
	chunkSize int64
	off       int64
	seq       int64  // the chunk in cur; -1 for none
	cur       []byte // the bytes of chunk seq
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	seq := r.off / r.chunkSize
	if seq != r.seq {
		r.cur, r.seq = nil, -1
		var data []byte
		err := r.s.pool.QueryRow(r.ctx, r.s.aq.chunk, r.blobID, int32(seq)).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("postgres: read artifact %q: chunk %d is gone (the artifact was deleted while being read)", r.id, seq)
		}
		if err != nil {
			return 0, r.s.fail(r.ctx, "read artifact", r.id, err)
		}
		r.cur, r.seq = data, seq
	}
	at := r.off - r.seq*r.chunkSize
	if at >= int64(len(r.cur)) {
		return 0, fmt.Errorf("postgres: read artifact %q: chunk %d is short", r.id, seq)
	}
	n := copy(p, r.cur[at:])
	r.off += int64(n)
	return n, nil
}

func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, errors.New("postgres: seek: invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("postgres: seek: negative position")
	}
	r.off = abs
	return abs, nil
}

func (r *chunkReader) Close() error {
	r.cur = nil
	return nil
}

// ListArtifacts implements store.ArtifactStore.
func (s *Store) ListArtifacts(ctx context.Context, q store.ArtifactQuery) ([]store.Artifact, string, error) {
	const op = "list artifacts"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, "", err
	}
	limit, filter, err := store.CheckArtifactQuery(q)
	if err != nil {
		return nil, "", s.fail(ctx, op, "", err)
	}
	bits := 0
	args := []any{q.SessionID}
	if !filter.Any() {
		bits |= listByMedia
		args = append(args, bytesOf(filter.Exact), bytesOf(filter.Low), bytesOf(filter.High))
	}
	if q.Cursor != "" {
		created, id, err := store.DecodeCursor(artifactCursorVersion, q.Cursor)
		if err != nil {
			return nil, "", s.fail(ctx, op, "", err)
		}
		bits |= listAfter
		args = append(args, created, id)
	}
	rows, err := s.pool.Query(ctx, s.aq.list[bits], append(args, limit+1)...)
	if err != nil {
		return nil, "", s.fail(ctx, op, q.SessionID, err)
	}
	defer rows.Close()
	page := make([]store.Artifact, 0, min(limit+1, 64))
	for rows.Next() {
		var blobID int64
		a, err := scanArtifact(rows, &blobID)
		if err != nil {
			return nil, "", s.fail(ctx, op, q.SessionID, err)
		}
		page = append(page, a)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail(ctx, op, q.SessionID, err)
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
	a, _, _, err := s.getArtifact(ctx, op, id)
	if err != nil {
		return store.Artifact{}, err
	}
	var blobID int64
	if err := s.pool.QueryRow(ctx, s.aq.deleteArt, id).Scan(&blobID); errors.Is(err, pgx.ErrNoRows) {
		return store.Artifact{}, s.fail(ctx, op, id, store.ErrNotFound)
	} else if err != nil {
		return store.Artifact{}, s.failWrite(ctx, op, id, err)
	}
	s.deleteBlob(ctx, blobID)
	return a, nil
}

// ArtifactBytes implements store.ArtifactStore.
func (s *Store) ArtifactBytes(ctx context.Context, sessionID string) (int64, error) {
	const op = "artifact bytes"
	if err := s.begin(ctx, op, ""); err != nil {
		return 0, err
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return 0, s.fail(ctx, op, "", err)
	}
	var n int64
	if err := s.pool.QueryRow(ctx, s.aq.sessionBytes, sessionID).Scan(&n); err != nil {
		return 0, s.fail(ctx, op, sessionID, err)
	}
	return n, nil
}

// SweepBlobs implements store.ArtifactStore: the age is by the server's
// clock, so that every node agrees on it. Unfinished writes (sha256 ”)
// are blobs no artifact names too.
func (s *Store) SweepBlobs(ctx context.Context, grace time.Duration) (int, error) {
	const op = "sweep blobs"
	if err := s.begin(ctx, op, ""); err != nil {
		return 0, err
	}
	rows, err := s.pool.Query(ctx, s.aq.sweepable, max(grace, 0).Milliseconds())
	if err != nil {
		return 0, s.fail(ctx, op, "", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, s.fail(ctx, op, "", err)
	}
	n := 0
	for _, id := range ids {
		deleted, err := s.deleteBlob(ctx, id)
		if err != nil {
			return n, s.fail(ctx, op, "", err)
		}
		if deleted {
			n++
		}
	}
	return n, nil
}

// DeleteSession implements store.Store: the rows in one transaction, then
// the blobs no artifact names any more.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	const op = "delete session"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	if err := store.CheckSessionID(id); err != nil {
		return s.fail(ctx, op, "", err)
	}
	var blobs []int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.aq.leaseForUpdate, id); err != nil {
			return err
		}
		var one int
		if err := tx.QueryRow(ctx, s.aq.sessionExists, id).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		} else if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.aq.sessionBlobs, id)
		if err != nil {
			return err
		}
		if blobs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		for _, q := range s.aq.deleteSession {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.failWrite(ctx, op, id, err)
	}
	seen := map[int64]bool{}
	for _, b := range blobs {
		if !seen[b] {
			seen[b] = true
			s.deleteBlob(ctx, b)
		}
	}
	return nil
}

// EndedSessions implements store.Store, from the partial index
// sessions_ended_by_updated.
func (s *Store) EndedSessions(ctx context.Context, before time.Time, limit int) ([]string, error) {
	const op = "ended sessions"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, err
	}
	limit, err := store.CheckEndedQuery(limit)
	if err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	rows, err := s.pool.Query(ctx, s.aq.endedSessions, before.UnixMilli(), limit)
	if err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	return ids, nil
}

// SigningKeys implements store.ArtifactStore.
func (s *Store) SigningKeys(ctx context.Context, initial []byte) ([]store.SigningKey, error) {
	const op = "signing keys"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, err
	}
	if err := store.CheckSigningKey(initial); err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	var keys []store.SigningKey
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Several nodes starting at once: the first insert wins, the
		// others conflict on id 1 and do nothing.
		if _, err := tx.Exec(ctx, s.aq.initKey, initial); err != nil {
			return err
		}
		var err error
		keys, err = s.validKeys(ctx, tx)
		return err
	})
	if err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	return keys, nil
}

func (s *Store) validKeys(ctx context.Context, tx pgx.Tx) ([]store.SigningKey, error) {
	rows, err := tx.Query(ctx, s.aq.validKeys)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SigningKey, error) {
		var k store.SigningKey
		var created, until int64
		if err := row.Scan(&k.ID, &k.Secret, &created, &until); err != nil {
			return k, err
		}
		k.Created = fromMillis(created)
		if until != 0 {
			k.VerifyUntil = fromMillis(until)
		}
		return k, nil
	})
}

// RotateSigningKey implements store.ArtifactStore. Rotations of all nodes
// queue on the table's lock.
func (s *Store) RotateSigningKey(ctx context.Context, secret []byte, grace time.Duration) (store.SigningKey, error) {
	const op = "rotate signing key"
	if err := s.begin(ctx, op, ""); err != nil {
		return store.SigningKey{}, err
	}
	if err := store.CheckSigningKey(secret); err != nil {
		return store.SigningKey{}, s.fail(ctx, op, "", err)
	}
	k := store.SigningKey{Secret: append([]byte(nil), secret...)}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.aq.lockKeys); err != nil {
			return err
		}
		var created int64
		if err := tx.QueryRow(ctx, s.aq.nextKeyID).Scan(&k.ID, &created); err != nil {
			return err
		}
		k.Created = fromMillis(created)
		if grace > 0 {
			if _, err := tx.Exec(ctx, s.aq.retireKey, grace.Milliseconds()); err != nil {
				return err
			}
		} else if _, err := tx.Exec(ctx, s.aq.dropCurrentKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.aq.dropExpiredKeys); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.aq.insertKey, k.ID, secret, created)
		return err
	})
	if err != nil {
		return store.SigningKey{}, s.fail(ctx, op, "", err)
	}
	return k, nil
}
