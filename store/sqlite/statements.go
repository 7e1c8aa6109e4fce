package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/surfaced/surfaced/store"
)

// statements are prepared once at Open: parsing SQL is a fifth of the time
// of a small write otherwise (see the CPU profile of BenchmarkStore/sqlite).
// Write statements are prepared on the writer; read statements on the read
// pool, where database/sql prepares them again on each connection it opens.
type statements struct {
	// Writer.
	createSession, updateSession, appendEntry, upsertKV *sql.Stmt
	writeExists, checkFence                             *sql.Stmt
	// One-entry writes under a fence, the check in the statement.
	updateSessionFenced, appendEntryFenced, upsertKVFenced *sql.Stmt
	getLease, putLease, renewLease, releaseLease           *sql.Stmt
	// Readers.
	getSession, readExists, transcript, loadKV *sql.Stmt
	list                                       [8]*sql.Stmt // indexed by the list* bits
	count                                      [4]*sql.Stmt // indexed by the count* bits

	all []*sql.Stmt
}

const sessionColumns = "id, owner, agent, title, cwd, status, created, updated, ids_reserved"

// The bits of a listing's filters, indexing statements.list.
const (
	listByAgent = 1 << iota
	listByCwd
	listAfterCursor
)

// listSQL is the listing query with the filters in bits; its parameters are
// owner, then agent, cwd, cursor updated and id as present, then the limit.
func listSQL(bits int) string {
	var where strings.Builder
	where.WriteString("owner = ?")
	if bits&listByAgent != 0 {
		where.WriteString(" AND agent = ?")
	}
	if bits&listByCwd != 0 {
		where.WriteString(" AND cwd = ?")
	}
	if bits&listAfterCursor != 0 {
		// A row value comparison, which SQLite turns into a seek in
		// sessions_by_owner_updated.
		where.WriteString(" AND (updated, id) < (?, ?)")
	}
	return "SELECT " + sessionColumns + " FROM sessions WHERE " + where.String() + " ORDER BY updated DESC, id DESC LIMIT ?"
}

// The bits of a count's filters, indexing statements.count.
const (
	countByAgent = 1 << iota
	countExcludeEnded
)

// notEnded is the condition of the sessions that have not ended, as the
// partial index sessions_live_by_owner_agent has it: SQLite uses that index
// only for a query that holds this very term.
const notEnded = "status <> '" + store.StatusEnded + "'"

// countSQL is the count query with the filters in bits; its parameters are
// owner, then agent if counted by agent.
func countSQL(bits int) string {
	q := "SELECT count(*) FROM sessions WHERE owner = ?"
	if bits&countByAgent != 0 {
		q += " AND agent = ?"
	}
	if bits&countExcludeEnded != 0 {
		q += " AND " + notEnded
	}
	return q
}

// fenceCond is true while the token, parameter number token, is the current
// lease token of the session, parameter number id: from its issue until a
// takeover or a release; expiry alone does not end it.
func fenceCond(id, token int) string {
	return fmt.Sprintf("EXISTS (SELECT 1 FROM leases WHERE session_id = ?%d AND token = ?%d AND node <> '')", id, token)
}

// updateSessionSet is the SET of an update: ?1 title, ?2 status and ?5 ids
// reserved when not NULL, ?3 now, and ?4 is the id. updated moves forward
// even when the clock has not; ids_reserved never goes down.
const updateSessionSet = `SET title = coalesce(?1, title), status = coalesce(?2, status), updated = max(?3, updated + 1),
	ids_reserved = max(ids_reserved, coalesce(?5, ids_reserved))`

// appendEntrySQL adds an entry after the session's last one: the primary key
// index finds max(seq) without a scan.
const appendEntrySQL = `INSERT INTO transcript
	(session_id, seq, role, text, tool_call_id, tool_name, tool_args, tool_result, is_error, via, at, turn_id, prompt_id, attachment_ids)
	SELECT ?1, coalesce(max(seq), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13
	FROM transcript WHERE session_id = ?1`

func (s *Store) prepareStatements(ctx context.Context) error {
	st := &s.st
	prep := func(db *sql.DB, dst **sql.Stmt, query string) error {
		stmt, err := db.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("sqlite: open %s: prepare %q: %w", s.path, query, err)
		}
		*dst = stmt
		st.all = append(st.all, stmt)
		return nil
	}
	type prepared struct {
		db    *sql.DB
		dst   **sql.Stmt
		query string
	}
	list := []prepared{
		{s.write, &st.createSession, `INSERT INTO sessions (` + sessionColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`},
		{s.write, &st.updateSession, "UPDATE sessions " + updateSessionSet + " WHERE id = ?4"},
		{s.write, &st.appendEntry, appendEntrySQL},
		// A write statement takes the write lock before it reads, so its
		// fence check holds until it commits, for other processes too. Each
		// takes the parameters of its unfenced twin, then the token.
		{s.write, &st.updateSessionFenced, "UPDATE sessions " + updateSessionSet + " WHERE id = ?4 AND " + fenceCond(4, 6)},
		{s.write, &st.appendEntryFenced, appendEntrySQL + " HAVING " + fenceCond(1, 14)},
		{s.write, &st.upsertKVFenced, `INSERT INTO kv (session_id, key, value, rev, deleted)
			SELECT ?1, ?2, ?3, ?4, ?5 WHERE ` + fenceCond(1, 6) + `
			ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, rev = excluded.rev, deleted = excluded.deleted
			WHERE excluded.rev > kv.rev`},
		// The WHERE keeps a key's rev from going down: an entry at or below
		// the stored rev changes nothing.
		{s.write, &st.upsertKV, `INSERT INTO kv (session_id, key, value, rev, deleted) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, rev = excluded.rev, deleted = excluded.deleted
			WHERE excluded.rev > kv.rev`},
		{s.write, &st.writeExists, "SELECT 1 FROM sessions WHERE id = ?"},
		{s.write, &st.checkFence, "SELECT " + fenceCond(1, 2)},
		{s.write, &st.getLease, "SELECT token, node, expires FROM leases WHERE session_id = ?"},
		{s.write, &st.putLease, `INSERT INTO leases (session_id, token, node, expires) VALUES (?, ?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET token = excluded.token, node = excluded.node, expires = excluded.expires`},
		{s.write, &st.renewLease, `UPDATE leases SET expires = ? WHERE session_id = ? AND token = ? AND node <> ''
			RETURNING token, node, expires`},
		{s.write, &st.releaseLease, "UPDATE leases SET node = '', expires = ? WHERE session_id = ? AND token = ? AND node <> ''"},
		{s.read, &st.getSession, "SELECT " + sessionColumns + " FROM sessions WHERE id = ?"},
		{s.read, &st.readExists, "SELECT 1 FROM sessions WHERE id = ?"},
		{s.read, &st.transcript, `SELECT role, text, tool_call_id, tool_name, tool_args, tool_result, is_error, via, at, turn_id, prompt_id, attachment_ids
			FROM transcript WHERE session_id = ? ORDER BY seq`},
		{s.read, &st.loadKV, "SELECT key, value, rev, deleted FROM kv WHERE session_id = ? ORDER BY key"},
	}
	for bits := range st.list {
		list = append(list, prepared{s.read, &st.list[bits], listSQL(bits)})
	}
	for bits := range st.count {
		list = append(list, prepared{s.read, &st.count[bits], countSQL(bits)})
	}
	for _, p := range list {
		if err := prep(p.db, p.dst, p.query); err != nil {
			return err
		}
	}
	return nil
}

func (st *statements) close() error {
	var first error
	for _, stmt := range st.all {
		if err := stmt.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
