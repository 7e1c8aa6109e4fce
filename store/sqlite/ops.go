package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/surfaced/surfaced/store"
)

// fail wraps err from operation op on session id, telling a closed store
// apart from a failing one, and a full disk (store.ErrFull) from other
// failures.
func (s *Store) fail(op, id string, err error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if diskFull(err) {
		err = fmt.Errorf("%w: %w", store.ErrFull, err)
	}
	if id == "" {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
}

// failWrite is fail for a write. SQLite answers for what it did, but for
// one case: when the call's context ends while the statement runs, the
// driver (modernc.org/sqlite) interrupts it and answers the context's
// error whether or not the statement finished first, commit included, so
// such a write's outcome is unknown.
func (s *Store) failWrite(op, id string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
	}
	return s.fail(op, id, err)
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
	res, err := s.st.createSession.ExecContext(ctx, sess.ID, sess.Owner, sess.Agent, sess.Title, sess.Cwd, sess.Status,
		sess.Created.UnixMilli(), sess.Updated.UnixMilli(), int64(sess.IDsReserved))
	if err != nil {
		return s.failWrite("create session", sess.ID, err)
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
	var created, updated, idsReserved int64
	if err := row.Scan(&sess.ID, &sess.Owner, &sess.Agent, &sess.Title, &sess.Cwd, &sess.Status, &created, &updated, &idsReserved); err != nil {
		return store.Session{}, err
	}
	sess.Created, sess.Updated, sess.IDsReserved = fromMillis(created), fromMillis(updated), uint64(idsReserved)
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
func (s *Store) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(id); err != nil {
		return s.fail("update session", "", err)
	}
	if err := store.CheckSessionUpdate(u); err != nil {
		return s.fail("update session", id, err)
	}
	var title, status sql.NullString
	var idsReserved sql.NullInt64
	if u.Title != nil {
		title = sql.NullString{String: *u.Title, Valid: true}
	}
	if u.Status != nil {
		status = sql.NullString{String: *u.Status, Valid: true}
	}
	if u.IDsReserved != nil {
		idsReserved = sql.NullInt64{Int64: int64(*u.IDsReserved), Valid: true}
	}
	update := func(stmt *sql.Stmt, fence ...any) error {
		res, err := stmt.ExecContext(ctx, append([]any{title, status, now().UnixMilli(), id, idsReserved}, fence...)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		return nil
	}
	var err error
	if fence != 0 {
		// Nothing updated: fenced, or no such session.
		if err = update(s.st.updateSessionFenced, int64(fence)); errors.Is(err, store.ErrNotFound) {
			if ferr := s.checkFence(ctx, s.st.checkFence, id, fence); ferr != nil {
				err = ferr
			}
		}
	} else {
		err = update(s.st.updateSession)
	}
	if err != nil {
		return s.failWrite("update session", id, err)
	}
	return nil
}

// ListSessions implements store.Store.
func (s *Store) ListSessions(ctx context.Context, q store.ListQuery) ([]store.Session, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	limit, err := store.CheckListQuery(q)
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

// CountSessions implements store.Store: one SELECT count(*), served by
// the partial index sessions_live_by_owner_agent when it excludes ended
// sessions, else by sessions_by_owner_updated.
func (s *Store) CountSessions(ctx context.Context, q store.CountQuery) (int, error) {
	const op = "count sessions"
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	if err := store.CheckCountQuery(q); err != nil {
		return 0, s.fail(op, "", err)
	}
	bits := 0
	args := []any{q.Owner}
	if q.Agent != "" {
		bits |= countByAgent
		args = append(args, q.Agent)
	}
	if q.ExcludeEnded {
		bits |= countExcludeEnded
	}
	var n int
	if err := s.st.count[bits].QueryRowContext(ctx, args...).Scan(&n); err != nil {
		return 0, s.fail(op, "", err)
	}
	return n, nil
}

// AppendTranscript implements store.Store.
func (s *Store) AppendTranscript(ctx context.Context, sessionID string, fence store.Fence, entries []store.Entry) error {
	const op = "append transcript"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(op, "", err)
	}
	if err := store.CheckEntries(entries); err != nil {
		return s.fail(op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.writeExists(ctx, sessionID, fence); err != nil {
			return s.fail(op, sessionID, err)
		}
		return nil
	}
	at := now()
	err := s.writeEach(ctx, sessionID, fence, s.st.appendEntry, s.st.appendEntryFenced, len(entries), func(i int) []any {
		e := entries[i]
		if e.At.IsZero() {
			e.At = at
		}
		return []any{sessionID, e.Role, e.Text, e.ToolCallID, e.ToolName,
			jsonOrNil(e.ToolArgs), jsonOrNil(e.ToolResult), e.IsError, e.Via, e.At.UnixMilli(),
			int64(e.TurnID), int64(e.PromptID), idsOrNil(e.AttachmentIDs)}
	})
	if err != nil {
		return s.failWrite(op, sessionID, err)
	}
	return nil
}

// writeEach runs stmt on the writer with the arguments args(i) for i in
// [0, n), all or none: one statement alone is a transaction already, several
// run in one. Under a fence (not zero), one runs as fencedStmt, which checks
// it, and several in a transaction that checks it first. A statement that
// breaks the foreign key to sessions means there is no such session:
// ErrNotFound.
//
// Running a lone statement outside BEGIN/COMMIT halves the CPU time of the
// common single-entry write (BenchmarkStore/sqlite/PutKV1KiB).
func (s *Store) writeEach(ctx context.Context, sessionID string, fence store.Fence, stmt, fencedStmt *sql.Stmt, n int, args func(i int) []any) error {
	switch {
	case n == 1 && fence == 0:
		_, err := stmt.ExecContext(ctx, args(0)...)
		return noSession(err)
	case n == 1:
		// The check is part of the statement (a third of the time of a
		// transaction around both). One that wrote nothing was fenced or,
		// for a KV entry, skipped: ask which. A token never becomes current
		// again, so the answer cannot turn a fenced write into a skip.
		res, err := fencedStmt.ExecContext(ctx, append(args(0), int64(fence))...)
		if err != nil {
			return noSession(err)
		}
		if written, err := res.RowsAffected(); err != nil {
			return err
		} else if written == 0 {
			return s.checkFence(ctx, s.st.checkFence, sessionID, fence)
		}
		return nil
	}
	return s.inTx(ctx, sessionID, fence, func(tx *sql.Tx) error {
		txStmt := tx.StmtContext(ctx, stmt)
		for i := range n {
			if _, err := txStmt.ExecContext(ctx, args(i)...); err != nil {
				return fmt.Errorf("entry %d: %w", i, noSession(err))
			}
		}
		return nil
	})
}

// inTx runs write in a transaction on the writer, after checking fence,
// unless it is zero, in the same transaction. Its BEGIN IMMEDIATE takes
// SQLite's write lock, so that no lease can change between the check and
// the commit, from this process or another one on the same file.
func (s *Store) inTx(ctx context.Context, sessionID string, fence store.Fence, write func(tx *sql.Tx) error) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if fence != 0 {
			if err := s.checkFence(ctx, tx.StmtContext(ctx, s.st.checkFence), sessionID, fence); err != nil {
				return err
			}
		}
		return write(tx)
	})
}

// checkFence returns an error wrapping ErrFenced unless fence is the
// session's current lease token; stmt is checkFence, on the writer.
func (s *Store) checkFence(ctx context.Context, stmt *sql.Stmt, sessionID string, fence store.Fence) error {
	var current bool
	if err := stmt.QueryRowContext(ctx, sessionID, int64(fence)).Scan(&current); err != nil {
		return fmt.Errorf("check fence: %w", err)
	}
	if !current {
		return fmt.Errorf("token %d: %w", fence, store.ErrFenced)
	}
	return nil
}

// tx runs fn in a transaction on the writer and commits unless it fails.
func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// writeExists is exists for a write of nothing, which must still pass
// fence unless it is zero.
func (s *Store) writeExists(ctx context.Context, id string, fence store.Fence) error {
	if fence == 0 {
		return s.exists(ctx, id)
	}
	return s.inTx(ctx, id, fence, func(tx *sql.Tx) error {
		var one int
		err := tx.StmtContext(ctx, s.st.writeExists).QueryRowContext(ctx, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
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
		var at, turnID, promptID int64
		var attachments sql.NullString
		if err := rows.Scan(&e.Role, &e.Text, &e.ToolCallID, &e.ToolName, &e.ToolArgs, &e.ToolResult, &e.IsError, &e.Via, &at,
			&turnID, &promptID, &attachments); err != nil {
			return nil, s.fail(op, sessionID, err)
		}
		if e.AttachmentIDs, err = idsOf(attachments); err != nil {
			return nil, s.fail(op, sessionID, err)
		}
		e.At, e.TurnID, e.PromptID = fromMillis(at), uint64(turnID), uint64(promptID)
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
func (s *Store) PutKV(ctx context.Context, sessionID string, fence store.Fence, entries []store.KV) error {
	const op = "put kv"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(op, "", err)
	}
	if err := store.CheckKV(entries); err != nil {
		return s.fail(op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.writeExists(ctx, sessionID, fence); err != nil {
			return s.fail(op, sessionID, err)
		}
		return nil
	}
	err := s.writeEach(ctx, sessionID, fence, s.st.upsertKV, s.st.upsertKVFenced, len(entries), func(i int) []any {
		e := entries[i]
		var value any
		if !e.Deleted {
			value = e.Value
		}
		return []any{sessionID, e.Key, value, int64(e.Rev), e.Deleted}
	})
	if err != nil {
		return s.failWrite(op, sessionID, err)
	}
	return nil
}

// PutKVBatch implements store.Batcher: the items of many sessions in one
// transaction, so that they share one commit (one append to the WAL, one
// lock of the database) instead of one each. Each item is written as PutKV
// writes it: its fence checked in the transaction, a key's rev never
// lowered. An item refused for what it is (an invalid entry, a missing
// session, a stale fence) writes nothing and fails alone; any other failure
// rolls the whole transaction back.
func (s *Store) PutKVBatch(ctx context.Context, items []store.KVBatch) ([]error, error) {
	const op = "put kv batch"
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	itemErrs := make([]error, len(items))
	valid := 0
	for i, it := range items {
		if err := store.CheckSessionID(it.SessionID); err != nil {
			itemErrs[i] = s.fail(op, "", err)
			continue
		}
		if err := store.CheckKV(it.Entries); err != nil {
			itemErrs[i] = s.fail(op, it.SessionID, err)
			continue
		}
		valid++
	}
	if valid == 0 {
		return itemErrs, nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		upsert := tx.StmtContext(ctx, s.st.upsertKV)
		for i, it := range items {
			if itemErrs[i] != nil {
				continue
			}
			if it.Fence != 0 {
				err := s.checkFence(ctx, tx.StmtContext(ctx, s.st.checkFence), it.SessionID, it.Fence)
				if errors.Is(err, store.ErrFenced) {
					itemErrs[i] = s.fail(op, it.SessionID, err)
					continue
				}
				if err != nil {
					return err
				}
			}
			if len(it.Entries) == 0 {
				var one int
				err := tx.StmtContext(ctx, s.st.writeExists).QueryRowContext(ctx, it.SessionID).Scan(&one)
				if errors.Is(err, sql.ErrNoRows) {
					itemErrs[i] = s.fail(op, it.SessionID, store.ErrNotFound)
					continue
				}
				if err != nil {
					return err
				}
			}
			for j, e := range it.Entries {
				var value any
				if !e.Deleted {
					value = e.Value
				}
				_, err := upsert.ExecContext(ctx, it.SessionID, e.Key, value, int64(e.Rev), e.Deleted)
				if err == nil {
					continue
				}
				// A missing session fails its first entry (the foreign
				// key), before anything of the item is written; the
				// statement alone is undone, not the transaction.
				if err = noSession(err); errors.Is(err, store.ErrNotFound) && j == 0 {
					itemErrs[i] = s.fail(op, it.SessionID, err)
					break
				}
				return fmt.Errorf("session %q, entry %d: %w", it.SessionID, j, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.failWrite(op, "", err)
	}
	return itemErrs, nil
}

// ConcurrentWrites implements store.ConcurrentWrites: the store has one
// writer connection, so a store.Writer writes through one worker, whose
// batches then hold every session's queued writes (PutKVBatch), instead of
// several workers taking turns on the connection, a transaction each.
func (s *Store) ConcurrentWrites() int { return 1 }

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

// diskFull reports whether err says the disk is full: SQLITE_FULL
// ("database or disk is full"), which SQLite answers when a write of the
// database, its WAL or a temporary file runs out of space (ENOSPC), or a
// file grew past the process's size limit (EFBIG).
func diskFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG)
}
