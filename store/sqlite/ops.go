package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/surfaced/surfaced/store"
)

// fail wraps err from operation op on session id, telling a closed store
// apart from a failing one.
func (s *Store) fail(op, id string, err error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if id == "" {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
}

// CreateSession implements store.Store.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	sess, err := checkSession(sess)
	if err != nil {
		return s.fail("create session", "", err)
	}
	res, err := s.st.createSession.ExecContext(ctx, sess.ID, sess.Owner, sess.Agent, sess.Title, sess.Cwd, sess.Status, sess.Created.UnixMilli(), sess.Updated.UnixMilli())
	if err != nil {
		return s.fail("create session", sess.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.fail("create session", sess.ID, err)
	} else if n == 0 {
		return s.fail("create session", sess.ID, store.ErrExists)
	}
	return nil
}

func scanSession(row interface{ Scan(...any) error }) (store.Session, error) {
	var sess store.Session
	var created, updated int64
	if err := row.Scan(&sess.ID, &sess.Owner, &sess.Agent, &sess.Title, &sess.Cwd, &sess.Status, &created, &updated); err != nil {
		return store.Session{}, err
	}
	sess.Created, sess.Updated = fromMillis(created), fromMillis(updated)
	return sess, nil
}

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	if s.closed.Load() {
		return store.Session{}, store.ErrClosed
	}
	if err := store.CheckSessionID(id); err != nil {
		return store.Session{}, s.fail("get session", "", err)
	}
	sess, err := scanSession(s.st.getSession.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, s.fail("get session", id, err)
	}
	return sess, nil
}

// UpdateSession implements store.Store.
func (s *Store) UpdateSession(ctx context.Context, id string, u store.SessionUpdate) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(id); err != nil {
		return s.fail("update session", "", err)
	}
	var title, status sql.NullString
	if u.Title != nil {
		title = sql.NullString{String: *u.Title, Valid: true}
	}
	if u.Status != nil {
		status = sql.NullString{String: *u.Status, Valid: true}
	}
	res, err := s.st.updateSession.ExecContext(ctx, title, status, now().UnixMilli(), id)
	if err != nil {
		return s.fail("update session", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.fail("update session", id, err)
	} else if n == 0 {
		return s.fail("update session", id, store.ErrNotFound)
	}
	return nil
}

// ListSessions implements store.Store.
func (s *Store) ListSessions(ctx context.Context, q store.ListQuery) ([]store.Session, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	limit, err := checkQuery(q)
	if err != nil {
		return nil, "", s.fail("list sessions", "", err)
	}
	bits := 0
	args := make([]any, 1, 6)
	args[0] = q.Owner
	if q.Agent != "" {
		bits |= listByAgent
		args = append(args, q.Agent)
	}
	if q.Cwd != "" {
		bits |= listByCwd
		args = append(args, q.Cwd)
	}
	if q.Cursor != "" {
		updated, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, "", s.fail("list sessions", "", err)
		}
		bits |= listAfterCursor
		args = append(args, updated, id)
	}
	// One row more than the page tells whether there is a next page.
	args = append(args, limit+1)
	rows, err := s.st.list[bits].QueryContext(ctx, args...)
	if err != nil {
		return nil, "", s.fail("list sessions", "", err)
	}
	defer rows.Close()
	page := make([]store.Session, 0, min(limit+1, 64))
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, "", s.fail("list sessions", "", err)
		}
		page = append(page, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail("list sessions", "", err)
	}
	if len(page) <= limit {
		return page, "", nil
	}
	page = page[:limit]
	last := page[limit-1]
	return page, encodeCursor(last.Updated.UnixMilli(), last.ID), nil
}

// AppendTranscript implements store.Store.
func (s *Store) AppendTranscript(ctx context.Context, sessionID string, entries []store.Entry) error {
	const op = "append transcript"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(op, "", err)
	}
	if err := checkEntries(entries); err != nil {
		return s.fail(op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.exists(ctx, sessionID); err != nil {
			return s.fail(op, sessionID, err)
		}
		return nil
	}
	at := now()
	err := s.writeEach(ctx, s.st.appendEntry, len(entries), func(i int) []any {
		e := entries[i]
		if e.At.IsZero() {
			e.At = at
		}
		return []any{sessionID, e.Role, e.Text, e.ToolCallID, e.ToolName,
			jsonOrNil(e.ToolArgs), jsonOrNil(e.ToolResult), e.IsError, e.Via, e.At.UnixMilli()}
	})
	if err != nil {
		return s.fail(op, sessionID, err)
	}
	return nil
}

// writeEach runs stmt on the writer with the arguments args(i) for i in
// [0, n), all or none: one statement alone is a transaction already, several
// run in one. A statement that breaks the foreign key to sessions means
// there is no such session: ErrNotFound.
//
// Running a lone statement outside BEGIN/COMMIT halves the CPU time of the
// common single-entry write (BenchmarkStore/sqlite/PutKV1KiB).
func (s *Store) writeEach(ctx context.Context, stmt *sql.Stmt, n int, args func(i int) []any) error {
	if n == 1 {
		_, err := stmt.ExecContext(ctx, args(0)...)
		return noSession(err)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	txStmt := tx.StmtContext(ctx, stmt)
	for i := range n {
		if _, err := txStmt.ExecContext(ctx, args(i)...); err != nil {
			return fmt.Errorf("entry %d: %w", i, noSession(err))
		}
	}
	return tx.Commit()
}

// noSession turns a foreign key violation, which the writes of transcript
// and kv rows only meet for a session id that is not stored, into
// ErrNotFound.
func noSession(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return store.ErrNotFound
	}
	return err
}

// Transcript implements store.Store.
func (s *Store) Transcript(ctx context.Context, sessionID string) ([]store.Entry, error) {
	const op = "transcript"
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return nil, s.fail(op, "", err)
	}
	rows, err := s.st.transcript.QueryContext(ctx, sessionID)
	if err != nil {
		return nil, s.fail(op, sessionID, err)
	}
	defer rows.Close()
	var entries []store.Entry
	for rows.Next() {
		var e store.Entry
		var at int64
		if err := rows.Scan(&e.Role, &e.Text, &e.ToolCallID, &e.ToolName, &e.ToolArgs, &e.ToolResult, &e.IsError, &e.Via, &at); err != nil {
			return nil, s.fail(op, sessionID, err)
		}
		e.At = fromMillis(at)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.exists(ctx, sessionID); err != nil {
			return nil, s.fail(op, sessionID, err)
		}
	}
	return entries, nil
}

// exists returns ErrNotFound unless the session is stored.
func (s *Store) exists(ctx context.Context, id string) error {
	var one int
	err := s.st.readExists.QueryRowContext(ctx, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// PutKV implements store.Store.
func (s *Store) PutKV(ctx context.Context, sessionID string, entries []store.KV) error {
	const op = "put kv"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(op, "", err)
	}
	if err := checkKV(entries); err != nil {
		return s.fail(op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.exists(ctx, sessionID); err != nil {
			return s.fail(op, sessionID, err)
		}
		return nil
	}
	err := s.writeEach(ctx, s.st.upsertKV, len(entries), func(i int) []any {
		e := entries[i]
		var value any
		if !e.Deleted {
			value = e.Value
		}
		return []any{sessionID, e.Key, value, int64(e.Rev), e.Deleted}
	})
	if err != nil {
		return s.fail(op, sessionID, err)
	}
	return nil
}

// LoadKV implements store.Store.
func (s *Store) LoadKV(ctx context.Context, sessionID string) ([]store.KV, error) {
	const op = "load kv"
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return nil, s.fail(op, "", err)
	}
	rows, err := s.st.loadKV.QueryContext(ctx, sessionID)
	if err != nil {
		return nil, s.fail(op, sessionID, err)
	}
	defer rows.Close()
	var entries []store.KV
	for rows.Next() {
		var e store.KV
		var rev int64
		if err := rows.Scan(&e.Key, &e.Value, &rev, &e.Deleted); err != nil {
			return nil, s.fail(op, sessionID, err)
		}
		e.Rev = uint64(rev)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.exists(ctx, sessionID); err != nil {
			return nil, s.fail(op, sessionID, err)
		}
	}
	return entries, nil
}
