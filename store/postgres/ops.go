package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/surfaced/surfaced/store"
)

// bytesOf copies s for a bytea parameter: never nil, which pgx would send as
// NULL, even for "".
func bytesOf(s string) []byte {
	b := make([]byte, len(s))
	copy(b, s)
	return b
}

// CreateSession implements store.Store. A zero Created is the server's now.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) error {
	const op = "create session"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	if err := store.CheckSession(sess); err != nil {
		return s.fail(ctx, op, "", err)
	}
	n, err := s.exec(ctx, s.q.createSession, sess.ID, bytesOf(sess.Owner), bytesOf(sess.Agent), bytesOf(sess.Title),
		bytesOf(sess.Cwd), bytesOf(sess.Status), millisOrNil(sess.Created), millisOrNil(sess.Updated), int64(sess.IDsReserved))
	if err != nil {
		return s.failWrite(ctx, op, sess.ID, err)
	}
	if n == 0 {
		return s.fail(ctx, op, sess.ID, store.ErrExists)
	}
	return nil
}

func scanSession(row pgx.Row) (store.Session, error) {
	var sess store.Session
	var owner, agent, title, cwd, status []byte
	var created, updated, idsReserved int64
	if err := row.Scan(&sess.ID, &owner, &agent, &title, &cwd, &status, &created, &updated, &idsReserved); err != nil {
		return store.Session{}, err
	}
	sess.Owner, sess.Agent, sess.Title, sess.Cwd, sess.Status = string(owner), string(agent), string(title), string(cwd), string(status)
	sess.Created, sess.Updated, sess.IDsReserved = fromMillis(created), fromMillis(updated), uint64(idsReserved)
	return sess, nil
}

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	const op = "get session"
	if err := s.begin(ctx, op, ""); err != nil {
		return store.Session{}, err
	}
	if err := store.CheckSessionID(id); err != nil {
		return store.Session{}, s.fail(ctx, op, "", err)
	}
	sess, err := scanSession(s.pool.QueryRow(ctx, s.q.getSession, id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, s.fail(ctx, op, id, err)
	}
	return sess, nil
}

// UpdateSession implements store.Store. Updated moves to the server's now.
func (s *Store) UpdateSession(ctx context.Context, id string, fence store.Fence, u store.SessionUpdate) error {
	const op = "update session"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	if err := store.CheckSessionID(id); err != nil {
		return s.fail(ctx, op, "", err)
	}
	if err := store.CheckSessionUpdate(u); err != nil {
		return s.fail(ctx, op, id, err)
	}
	var title, status []byte // nil: NULL, keep the stored value
	var idsReserved *int64
	if u.Title != nil {
		title = bytesOf(*u.Title)
	}
	if u.Status != nil {
		status = bytesOf(*u.Status)
	}
	if u.IDsReserved != nil {
		n := int64(*u.IDsReserved)
		idsReserved = &n
	}
	var err error
	if fence != 0 {
		err = s.fencedWrite(ctx, fence, s.q.updateSessionFenced, id, title, status, idsReserved, int64(fence))
	} else {
		var n int64
		n, err = s.exec(ctx, s.q.updateSession, id, title, status, idsReserved)
		if err == nil && n == 0 {
			err = store.ErrNotFound
		}
	}
	if err != nil {
		return s.failWrite(ctx, op, id, err)
	}
	return nil
}

// exec runs a write statement on a connection of its own (see conn).
func (s *Store) exec(ctx context.Context, sql string, args ...any) (rowsAffected int64, err error) {
	c, err := s.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	tag, err := c.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// fencedWrite runs a write statement that returns (fence ok, session found) and
// turns a write that wrote nothing into the error that says why.
func (s *Store) fencedWrite(ctx context.Context, fence store.Fence, sql string, args ...any) error {
	var fenceOK, found bool
	c, err := s.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if err := c.QueryRow(ctx, sql, args...).Scan(&fenceOK, &found); err != nil {
		return err
	}
	switch {
	case !fenceOK:
		return fmt.Errorf("token %d: %w", fence, store.ErrFenced)
	case !found:
		return store.ErrNotFound
	}
	return nil
}

// write runs sql, or, unless fence is zero, fencedSQL with fence as its
// last argument; both return (fence ok, session found).
func (s *Store) write(ctx context.Context, fence store.Fence, sql, fencedSQL string, args ...any) error {
	if fence != 0 {
		sql, args = fencedSQL, append(args, int64(fence))
	}
	return s.fencedWrite(ctx, fence, sql, args...)
}

// writeNothing is the check of a write of no entries: the session must
// exist and fence, unless it is zero, be current.
func (s *Store) writeNothing(ctx context.Context, id string, fence store.Fence) error {
	if fence != 0 {
		return s.fencedWrite(ctx, fence, s.q.checkFenced, id, int64(fence))
	}
	return s.exists(ctx, id)
}

// exists returns ErrNotFound unless the session is stored.
func (s *Store) exists(ctx context.Context, id string) error {
	var one int
	err := s.pool.QueryRow(ctx, s.q.exists, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// ListSessions implements store.Store.
func (s *Store) ListSessions(ctx context.Context, q store.ListQuery) ([]store.Session, string, error) {
	const op = "list sessions"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, "", err
	}
	limit, err := store.CheckListQuery(q)
	if err != nil {
		return nil, "", s.fail(ctx, op, "", err)
	}
	bits := 0
	args := make([]any, 1, 6)
	args[0] = bytesOf(q.Owner)
	if q.Agent != "" {
		bits |= listByAgent
		args = append(args, bytesOf(q.Agent))
	}
	if q.Cwd != "" {
		bits |= listByCwd
		args = append(args, bytesOf(q.Cwd))
	}
	if q.Cursor != "" {
		updated, id, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, "", s.fail(ctx, op, "", err)
		}
		bits |= listAfterCursor
		args = append(args, updated, id)
	}
	// One row more than the page tells whether there is a next page.
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, s.q.list[bits], args...)
	if err != nil {
		return nil, "", s.fail(ctx, op, "", err)
	}
	defer rows.Close()
	page := make([]store.Session, 0, min(limit+1, 64))
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, "", s.fail(ctx, op, "", err)
		}
		page = append(page, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail(ctx, op, "", err)
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
	if err := s.begin(ctx, op, ""); err != nil {
		return 0, err
	}
	if err := store.CheckCountQuery(q); err != nil {
		return 0, s.fail(ctx, op, "", err)
	}
	bits := 0
	args := []any{bytesOf(q.Owner)}
	if q.Agent != "" {
		bits |= countByAgent
		args = append(args, bytesOf(q.Agent))
	}
	if q.ExcludeEnded {
		bits |= countExcludeEnded
	}
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.count[bits], args...).Scan(&n); err != nil {
		return 0, s.fail(ctx, op, "", err)
	}
	return int(n), nil
}

// AppendTranscript implements store.Store: one statement, whatever the
// number of entries. A zero At is the server's now.
func (s *Store) AppendTranscript(ctx context.Context, sessionID string, fence store.Fence, entries []store.Entry) error {
	const op = "append transcript"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(ctx, op, "", err)
	}
	if err := store.CheckEntries(entries); err != nil {
		return s.fail(ctx, op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.writeNothing(ctx, sessionID, fence); err != nil {
			return s.fail(ctx, op, sessionID, err)
		}
		return nil
	}
	n := len(entries)
	roles, texts, callIDs, names := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	toolArgs, toolResults, vias := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	isError, at := make([]bool, n), make([]*int64, n)
	turnIDs, promptIDs := make([]int64, n), make([]int64, n)
	attachments := make([][]byte, n)
	for i, e := range entries {
		attachments[i] = idsOrNil(e.AttachmentIDs)
		roles[i], texts[i], callIDs[i], names[i] = bytesOf(e.Role), bytesOf(e.Text), bytesOf(e.ToolCallID), bytesOf(e.ToolName)
		toolArgs[i], toolResults[i], vias[i] = jsonOrNil(e.ToolArgs), jsonOrNil(e.ToolResult), bytesOf(e.Via)
		isError[i], at[i] = e.IsError, millisOrNil(e.At)
		turnIDs[i], promptIDs[i] = int64(e.TurnID), int64(e.PromptID)
	}
	args := []any{sessionID, int64(n), roles, texts, callIDs, names, toolArgs, toolResults, isError, vias, at, turnIDs, promptIDs, attachments}
	if err := s.write(ctx, fence, s.q.appendTranscript, s.q.appendTranscriptFenced, args...); err != nil {
		return s.failWrite(ctx, op, sessionID, err)
	}
	return nil
}

// Transcript implements store.Store.
func (s *Store) Transcript(ctx context.Context, sessionID string) ([]store.Entry, error) {
	const op = "transcript"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, err
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	rows, err := s.pool.Query(ctx, s.q.transcript, sessionID)
	if err != nil {
		return nil, s.fail(ctx, op, sessionID, err)
	}
	defer rows.Close()
	var entries []store.Entry
	for rows.Next() {
		var e store.Entry
		var role, text, callID, name, via, attachments []byte
		var at, turnID, promptID int64
		if err := rows.Scan(&role, &text, &callID, &name, &e.ToolArgs, &e.ToolResult, &e.IsError, &via, &at, &turnID, &promptID, &attachments); err != nil {
			return nil, s.fail(ctx, op, sessionID, err)
		}
		var err error
		if e.AttachmentIDs, err = idsOf(attachments); err != nil {
			return nil, s.fail(ctx, op, sessionID, err)
		}
		e.Role, e.Text, e.ToolCallID, e.ToolName, e.Via = string(role), string(text), string(callID), string(name), string(via)
		e.At, e.TurnID, e.PromptID = fromMillis(at), uint64(turnID), uint64(promptID)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.exists(ctx, sessionID); err != nil {
			return nil, s.fail(ctx, op, sessionID, err)
		}
	}
	return entries, nil
}

// PutKV implements store.Store: one statement, whatever the number of
// entries.
func (s *Store) PutKV(ctx context.Context, sessionID string, fence store.Fence, entries []store.KV) error {
	const op = "put kv"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(ctx, op, "", err)
	}
	if err := store.CheckKV(entries); err != nil {
		return s.fail(ctx, op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.writeNothing(ctx, sessionID, fence); err != nil {
			return s.fail(ctx, op, sessionID, err)
		}
		return nil
	}
	n := len(entries)
	keys, values, revs, deleted := make([][]byte, n), make([][]byte, n), make([]int64, n), make([]bool, n)
	for i, e := range entries {
		keys[i], revs[i], deleted[i] = bytesOf(e.Key), int64(e.Rev), e.Deleted
		if !e.Deleted {
			values[i] = e.Value
		}
	}
	args := []any{sessionID, keys, values, revs, deleted}
	if err := s.write(ctx, fence, s.q.putKV, s.q.putKVFenced, args...); err != nil {
		return s.failWrite(ctx, op, sessionID, err)
	}
	return nil
}

// LoadKV implements store.Store.
func (s *Store) LoadKV(ctx context.Context, sessionID string) ([]store.KV, error) {
	const op = "load kv"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, err
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	rows, err := s.pool.Query(ctx, s.q.loadKV, sessionID)
	if err != nil {
		return nil, s.fail(ctx, op, sessionID, err)
	}
	defer rows.Close()
	var entries []store.KV
	for rows.Next() {
		var e store.KV
		var key []byte
		var rev int64
		if err := rows.Scan(&key, &e.Value, &rev, &e.Deleted); err != nil {
			return nil, s.fail(ctx, op, sessionID, err)
		}
		e.Key, e.Rev = string(key), uint64(rev)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, sessionID, err)
	}
	if len(entries) == 0 {
		if err := s.exists(ctx, sessionID); err != nil {
			return nil, s.fail(ctx, op, sessionID, err)
		}
	}
	return entries, nil
}

// PutKVBatch implements store.Batcher: in one transaction, sent as one
// pipeline, with one commit for all, the unfenced items as one statement
// (putKVMany) and each fenced item as PutKV's statement, which checks its
// own fence. Only the commit's failure can leave the outcome unknown:
// before it, nothing is committed.
func (s *Store) PutKVBatch(ctx context.Context, items []store.KVBatch) ([]error, error) {
	const op = "put kv batch"
	if err := s.begin(ctx, op, ""); err != nil {
		return nil, err
	}
	itemErrs := make([]error, len(items))
	b := &pgx.Batch{}
	var fenced, unfenced []int
	var ids []string
	var keys, values [][]byte
	var revs []int64
	var deleted []bool
	for i, it := range items {
		if err := store.CheckSessionID(it.SessionID); err != nil {
			itemErrs[i] = s.fail(ctx, op, "", err)
			continue
		}
		if err := store.CheckKV(it.Entries); err != nil {
			itemErrs[i] = s.fail(ctx, op, it.SessionID, err)
			continue
		}
		if it.Fence == 0 {
			for _, e := range it.Entries {
				ids, keys, revs, deleted = append(ids, it.SessionID), append(keys, bytesOf(e.Key)), append(revs, int64(e.Rev)), append(deleted, e.Deleted)
				if e.Deleted {
					values = append(values, nil)
				} else {
					values = append(values, e.Value)
				}
			}
			unfenced = append(unfenced, i)
			continue
		}
		n := len(it.Entries)
		k, v, r, d := make([][]byte, n), make([][]byte, n), make([]int64, n), make([]bool, n)
		for j, e := range it.Entries {
			k[j], r[j], d[j] = bytesOf(e.Key), int64(e.Rev), e.Deleted
			if !e.Deleted {
				v[j] = e.Value
			}
		}
		b.Queue(s.q.putKVFenced, it.SessionID, k, v, r, d, int64(it.Fence))
		fenced = append(fenced, i)
	}
	if len(unfenced) > 0 {
		b.Queue(s.q.putKVMany, ids, keys, values, revs, deleted)
	}
	if b.Len() == 0 {
		return itemErrs, nil
	}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return nil, s.fail(ctx, op, "", err)
	}
	br := tx.SendBatch(ctx, b)
	batchErr := func() error {
		for _, i := range fenced {
			var fenceOK, found bool
			if err := br.QueryRow().Scan(&fenceOK, &found); err != nil {
				return err
			}
			switch {
			case !fenceOK:
				itemErrs[i] = s.fail(ctx, op, items[i].SessionID, fmt.Errorf("token %d: %w", items[i].Fence, store.ErrFenced))
			case !found:
				itemErrs[i] = s.fail(ctx, op, items[i].SessionID, store.ErrNotFound)
			}
		}
		if len(unfenced) == 0 {
			return nil
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		found := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			found[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, i := range unfenced {
			if !found[items[i].SessionID] {
				itemErrs[i] = s.fail(ctx, op, items[i].SessionID, store.ErrNotFound)
			}
		}
		return nil
	}()
	if err := br.Close(); err != nil && batchErr == nil {
		batchErr = err
	}
	if batchErr != nil {
		// Not committed: the transaction rolls back (or died with its
		// connection).
		_ = tx.Rollback(context.Background())
		return nil, s.fail(ctx, op, "", batchErr)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, s.failWrite(ctx, op, "", err)
	}
	return itemErrs, nil
}
