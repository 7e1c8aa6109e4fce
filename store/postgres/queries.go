package postgres

import (
	"strconv"
	"strings"

	"github.com/surfaced/surfaced/store"
)

// nowMS is the database server's current time in unix milliseconds. now()
// is the start of the transaction: one value for a whole statement.
const nowMS = "floor(extract(epoch FROM now()) * 1000)::bigint"

// queries is the SQL of the store, with its schema filled in. pgx prepares
// each text once per connection and reuses it.
type queries struct {
	createSession, getSession, exists                     string
	updateSession, updateSessionFenced                    string
	appendTranscript, appendTranscriptFenced, checkFenced string
	transcript                                            string
	putKV, putKVFenced, putKVMany, loadKV                 string
	acquireLease, renewLease, releaseLease                string
	list                                                  [8]string // indexed by the list* bits
	count                                                 [4]string // indexed by the count* bits
}

const sessionColumns = "id, owner, agent, title, cwd, status, created, updated, ids_reserved"

// The bits of a listing's filters, indexing queries.list.
const (
	listByAgent = 1 << iota
	listByCwd
	listAfterCursor
)

// The bits of a count's filters, indexing queries.count.
const (
	countByAgent = 1 << iota
	countExcludeEnded
)

// notEnded is the condition of the sessions that have not ended, as the
// partial index sessions_live_by_owner_agent has it: a constant, not a
// parameter, so that the planner can prove that the index holds every row
// the count wants (with a parameter, a generic plan could not).
const notEnded = "status <> '" + store.StatusEnded + "'::bytea"

// countSQL is the count query with the filters in bits; its parameters are
// owner, then agent if counted by agent.
func countSQL(bits int) string {
	q := "SELECT count(*) FROM {s}.sessions WHERE owner = $1"
	if bits&countByAgent != 0 {
		q += " AND agent = $2"
	}
	if bits&countExcludeEnded != 0 {
		q += " AND " + notEnded
	}
	return q
}

// fenceCTE selects the session's lease row if token ($fence) is current,
// and share-locks it: AcquireLease's update of the row waits for the
// statement's transaction to end, and a statement that comes after the
// update finds the new token. $1 is the session id.
func fenceCTE(param string) string {
	return "fence AS (SELECT 1 FROM {s}.leases WHERE session_id = $1 AND token = " + param + " AND node <> '' FOR SHARE)"
}

// Each write returns (fence ok, session found) so that a write that wrote
// nothing tells why, in the same statement and snapshot.

// updateSessionSet sets $2 title, $3 status and $4 ids reserved unless NULL
// ($1 is the id); updated moves forward even when the clock has not, and
// ids_reserved never goes down (greatest ignores a NULL).
const updateSessionSet = `SET title = coalesce($2, title), status = coalesce($3, status),
	updated = greatest(` + nowMS + `, updated + 1), ids_reserved = greatest(ids_reserved, $4)`

const appendSelect = `INSERT INTO {s}.transcript
		(session_id, seq, role, text, tool_call_id, tool_name, tool_args, tool_result, is_error, via, at, turn_id, prompt_id, attachment_ids)
	SELECT $1, base.n + e.ord, e.role, e.text, e.tool_call_id, e.tool_name, e.tool_args, e.tool_result, e.is_error, e.via,
		coalesce(e.at, ` + nowMS + `), e.turn_id, e.prompt_id, e.attachment_ids
	FROM base, unnest($3::bytea[], $4::bytea[], $5::bytea[], $6::bytea[], $7::bytea[], $8::bytea[], $9::bool[], $10::bytea[],
		$11::int8[], $12::int8[], $13::int8[], $14::bytea[])
		WITH ORDINALITY AS e(role, text, tool_call_id, tool_name, tool_args, tool_result, is_error, via, at, turn_id, prompt_id, attachment_ids, ord)`

// The entries of a batch are reduced to the one that wins per key (the
// highest rev; of equal ones the first, as writing them in order would keep)
// since one INSERT cannot update a row twice, and go in key order so that
// concurrent batches lock their rows in the same order.
const putSelect = `INSERT INTO {s}.kv AS kv (session_id, key, value, rev, deleted)
	SELECT $1, e.key, e.value, e.rev, e.deleted FROM sess, (
		SELECT DISTINCT ON (key) key, value, rev, deleted
		FROM unnest($2::bytea[], $3::bytea[], $4::int8[], $5::bool[]) WITH ORDINALITY AS u(key, value, rev, deleted, ord)
		ORDER BY key, rev DESC, ord) e
	ORDER BY e.key
	ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, rev = excluded.rev, deleted = excluded.deleted
	WHERE excluded.rev > kv.rev`

func newQueries(schema string) queries {
	q := queries{
		createSession: `INSERT INTO {s}.sessions (` + sessionColumns + `)
			VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, ` + nowMS + `), coalesce($8, $7, ` + nowMS + `), $9)
			ON CONFLICT (id) DO NOTHING`,
		getSession: "SELECT " + sessionColumns + " FROM {s}.sessions WHERE id = $1",
		exists:     "SELECT 1 FROM {s}.sessions WHERE id = $1",

		updateSession: "UPDATE {s}.sessions " + updateSessionSet + " WHERE id = $1",
		updateSessionFenced: "WITH " + fenceCTE("$5") + `,
			u AS (UPDATE {s}.sessions ` + updateSessionSet + ` WHERE id = $1 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
			SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM u)`,

		// $2 is the number of entries.
		appendTranscript: `WITH base AS (UPDATE {s}.sessions SET transcript_len = transcript_len + $2 WHERE id = $1
				RETURNING transcript_len - $2 AS n),
			ins AS (` + appendSelect + `)
			SELECT true, EXISTS (SELECT 1 FROM base)`,
		appendTranscriptFenced: "WITH " + fenceCTE("$15") + `,
			base AS (UPDATE {s}.sessions SET transcript_len = transcript_len + $2 WHERE id = $1 AND EXISTS (SELECT 1 FROM fence)
				RETURNING transcript_len - $2 AS n),
			ins AS (` + appendSelect + `)
			SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM base)`,
		// A write of nothing under a fence.
		checkFenced: "WITH " + fenceCTE("$2") + `
			SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM {s}.sessions WHERE id = $1)`,
		transcript: `SELECT role, text, tool_call_id, tool_name, tool_args, tool_result, is_error, via, at, turn_id, prompt_id, attachment_ids
			FROM {s}.transcript WHERE session_id = $1 ORDER BY seq`,

		// The session is key-share locked before any KV row (see the
		// package's lock order): a purge that holds the session's row never
		// waits for a KV row this statement holds.
		putKV: `WITH sess AS (SELECT id FROM {s}.sessions WHERE id = $1 FOR KEY SHARE),
			ins AS (` + putSelect + `)
			SELECT true, EXISTS (SELECT 1 FROM sess)`,
		putKVFenced: "WITH " + fenceCTE("$6") + `,
			sess AS (SELECT id FROM {s}.sessions WHERE id = $1 AND EXISTS (SELECT 1 FROM fence)),
			ins AS (` + putSelect + `)
			SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM sess)`,
		// The unfenced items of a PutKVBatch in one statement: the entries of
		// every session, reduced as putSelect does, written for the sessions
		// that exist (their ids come back).
		putKVMany: `WITH e AS (
				SELECT DISTINCT ON (session_id, key) session_id, key, value, rev, deleted
				FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::int8[], $5::bool[])
					WITH ORDINALITY AS u(session_id, key, value, rev, deleted, ord)
				ORDER BY session_id, key, rev DESC, ord),
			sess AS (SELECT id FROM {s}.sessions WHERE id IN (SELECT session_id FROM e) ORDER BY id FOR KEY SHARE),
			ins AS (INSERT INTO {s}.kv AS kv (session_id, key, value, rev, deleted)
				SELECT e.session_id, e.key, e.value, e.rev, e.deleted FROM e JOIN sess ON sess.id = e.session_id
				ORDER BY e.session_id, e.key
				ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, rev = excluded.rev, deleted = excluded.deleted
				WHERE excluded.rev > kv.rev)
			SELECT id FROM sess`,
		loadKV: "SELECT key, value, rev, deleted FROM {s}.kv WHERE session_id = $1 ORDER BY key",

		// The holder renews with its token; a free, released or expired
		// lease gets the next token; a lease held by another node is left
		// alone, and then the second SELECT names its holder and says whether
		// it holds it in the statement's snapshot. $3 is the ttl in ms.
		acquireLease: `WITH up AS (
				INSERT INTO {s}.leases AS l (session_id, token, node, expires) VALUES ($1, 1, $2, ` + nowMS + ` + $3)
				ON CONFLICT (session_id) DO UPDATE SET
					token = CASE WHEN l.node = excluded.node AND l.expires > ` + nowMS + ` THEN l.token ELSE l.token + 1 END,
					node = excluded.node, expires = excluded.expires
				WHERE l.node = excluded.node OR l.node = '' OR l.expires <= ` + nowMS + `
				RETURNING l.token, l.node, l.expires)
			SELECT token, node, expires, true, true FROM up
			UNION ALL
			SELECT 0, node, expires, false, node <> '' AND expires > ` + nowMS + `
			FROM {s}.leases WHERE session_id = $1 AND NOT EXISTS (SELECT 1 FROM up)`,
		renewLease: `UPDATE {s}.leases SET expires = ` + nowMS + ` + $3
			WHERE session_id = $1 AND token = $2 AND node <> '' RETURNING token, node, expires`,
		releaseLease: `UPDATE {s}.leases SET node = '', expires = ` + nowMS + `
			WHERE session_id = $1 AND token = $2 AND node <> ''`,
	}
	for bits := range q.list {
		q.list[bits] = listSQL(bits)
	}
	for bits := range q.count {
		q.count[bits] = strings.ReplaceAll(countSQL(bits), "{s}", schema)
	}
	for _, p := range []*string{&q.createSession, &q.getSession, &q.exists, &q.updateSession, &q.updateSessionFenced,
		&q.appendTranscript, &q.appendTranscriptFenced, &q.checkFenced, &q.transcript, &q.putKV, &q.putKVFenced, &q.putKVMany, &q.loadKV,
		&q.acquireLease, &q.renewLease, &q.releaseLease} {
		*p = strings.ReplaceAll(*p, "{s}", schema)
	}
	for i := range q.list {
		q.list[i] = strings.ReplaceAll(q.list[i], "{s}", schema)
	}
	return q
}

// listSQL is the listing query with the filters in bits; its parameters are
// owner, then agent, cwd, cursor updated and id as present, then the limit.
func listSQL(bits int) string {
	var where strings.Builder
	n := 1
	param := func() string {
		n++
		return "$" + strconv.Itoa(n)
	}
	where.WriteString("owner = $1")
	if bits&listByAgent != 0 {
		where.WriteString(" AND agent = " + param())
	}
	if bits&listByCwd != 0 {
		where.WriteString(" AND cwd = " + param())
	}
	if bits&listAfterCursor != 0 {
		// A row comparison, which PostgreSQL turns into a seek in
		// sessions_by_owner_updated.
		u := param()
		where.WriteString(" AND (updated, id) < (" + u + ", " + param() + ")")
	}
	return "SELECT " + sessionColumns + " FROM {s}.sessions WHERE " + where.String() +
		" ORDER BY updated DESC, id DESC LIMIT " + param()
}

// replaceSchema fills the quoted schema name into sql's {s}.
func replaceSchema(sql, schema string) string { return strings.ReplaceAll(sql, "{s}", schema) }
