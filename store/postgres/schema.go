package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migration brings the schema from version-1 to version. Migrations only go
// forward; each runs in one transaction with the row that records it. In
// sql, {s} stands for the quoted schema name.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the schema history, oldest first. Append; never edit a
// migration that has shipped.
var migrations = []migration{
	{version: 1, name: "sessions, transcript, kv, leases", sql: `
CREATE TABLE {s}.migrations (
	version integer PRIMARY KEY,
	name    text NOT NULL,
	applied bigint NOT NULL -- unix ms
);

-- Times are unix milliseconds, UTC. Strings other than ids are bytea: they
-- may hold NUL and invalid UTF-8, which text refuses.
CREATE TABLE {s}.sessions (
	id             text COLLATE "C" PRIMARY KEY,
	owner          bytea NOT NULL,
	agent          bytea NOT NULL,
	title          bytea NOT NULL,
	cwd            bytea NOT NULL,
	status         bytea NOT NULL,
	created        bigint NOT NULL,
	updated        bigint NOT NULL,
	-- The number of transcript entries: appending takes the next seqs from
	-- it, under the row lock of the UPDATE, so that concurrent appends to a
	-- session queue instead of colliding on seq.
	transcript_len bigint NOT NULL DEFAULT 0
);

-- ListSessions: one owner, newest updated first, id breaking ties; the
-- keyset cursor (updated, id) seeks into this index.
CREATE INDEX sessions_by_owner_updated ON {s}.sessions (owner, updated DESC, id DESC);

CREATE TABLE {s}.transcript (
	session_id   text COLLATE "C" NOT NULL REFERENCES {s}.sessions (id),
	seq          bigint NOT NULL, -- 1, 2, ... per session
	role         bytea NOT NULL,
	text         bytea NOT NULL,
	tool_call_id bytea NOT NULL,
	tool_name    bytea NOT NULL,
	tool_args    bytea,           -- JSON or NULL
	tool_result  bytea,           -- JSON or NULL
	is_error     boolean NOT NULL,
	via          bytea NOT NULL,
	at           bigint NOT NULL,
	turn_id      bigint NOT NULL,
	prompt_id    bigint NOT NULL,
	PRIMARY KEY (session_id, seq)
);

CREATE TABLE {s}.kv (
	session_id text COLLATE "C" NOT NULL REFERENCES {s}.sessions (id),
	key        bytea NOT NULL,
	value      bytea,             -- JSON; NULL for a tombstone
	rev        bigint NOT NULL,
	deleted    boolean NOT NULL,
	PRIMARY KEY (session_id, key)
);

-- One row per session ever leased, kept after release so that the next
-- token continues above it. No foreign key: a lease may precede its session.
CREATE TABLE {s}.leases (
	session_id text COLLATE "C" PRIMARY KEY,
	token      bigint NOT NULL,           -- the current (last issued) fencing token
	node       text COLLATE "C" NOT NULL, -- the holder; '' once released
	expires    bigint NOT NULL            -- unix ms by the server's clock; the release time once released
);
`},
	{version: 2, name: "live session count index", sql: `
-- CountSessions with ExcludeEnded (the quota, counted at every session
-- creation): only the sessions that have not ended are in this index, so
-- the count reads none of the owner's ended sessions, however many pile
-- up. The planner uses a partial index only for a query whose WHERE implies
-- this condition: countSQL writes it the same way, with the same constant.
-- Counts of every status use sessions_by_owner_updated by owner, as
-- filtered listings do; a full index for them would be one more for
-- ListSessions to choose, and it would choose it over the ordered walk.
-- Built in the migration's transaction (CREATE INDEX CONCURRENTLY cannot
-- run in one), so writes to sessions wait while it builds.
CREATE INDEX sessions_live_by_owner_agent ON {s}.sessions (owner, agent, status) WHERE status <> 'ended'::bytea;
`},
	{version: 3, name: "reserved session ids", sql: `
-- Session.IDsReserved: every turn or prompt id handed out is at most this.
-- A constant default: no table rewrite.
ALTER TABLE {s}.sessions ADD COLUMN ids_reserved bigint NOT NULL DEFAULT 0;
`},
	{version: 4, name: "artifacts, signing keys, attachments, ended sessions", sql: `
-- The bytes of artifacts, in chunks, so that any node serves any artifact
-- and nothing is ever whole in memory. A blob is written chunk by chunk
-- (each its own statement: no connection is held while the client sends
-- the next one); sha256 is '' until the last chunk is in. Blobs that no
-- artifact names are orphans, which the sweep deletes after a grace.
CREATE TABLE {s}.artifact_blobs (
	blob_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sha256     text COLLATE "C" NOT NULL, -- lowercase hex; '' while being written
	size       bigint NOT NULL,
	chunk_size integer NOT NULL,
	created    bigint NOT NULL            -- unix ms by the server's clock: when it was written
);
-- A commit shares the copy of equal bytes another artifact names.
CREATE INDEX artifact_blobs_by_sha256 ON {s}.artifact_blobs (sha256);

CREATE TABLE {s}.artifact_chunks (
	blob_id bigint NOT NULL REFERENCES {s}.artifact_blobs (blob_id) ON DELETE CASCADE,
	seq     integer NOT NULL, -- 0, 1, ...: bytes seq*chunk_size and on
	data    bytea NOT NULL,
	PRIMARY KEY (blob_id, seq)
);
-- Out of line and uncompressed: the bytes are mostly compressed already
-- (images, video, archives), and TOAST would spend CPU on them for nothing.
ALTER TABLE {s}.artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE {s}.artifacts (
	id           text COLLATE "C" PRIMARY KEY,
	session_id   text COLLATE "C" NOT NULL REFERENCES {s}.sessions (id),
	media_type   bytea NOT NULL,
	size         bigint NOT NULL,
	sha256       text COLLATE "C" NOT NULL,
	blob_id      bigint NOT NULL REFERENCES {s}.artifact_blobs (blob_id),
	name         bytea NOT NULL,
	derived_from text COLLATE "C" NOT NULL, -- '' when none
	meta         bytea,                     -- JSON or NULL
	created      bigint NOT NULL
);
-- ListArtifacts: one session, newest first, id breaking ties.
CREATE INDEX artifacts_by_session_created ON {s}.artifacts (session_id, created DESC, id DESC);
-- Whether any artifact still names a blob (deletes, the sweep).
CREATE INDEX artifacts_by_blob ON {s}.artifacts (blob_id);

-- The keys of signed artifact URLs: one current (verify_until 0), and the
-- ones it replaced while their grace lasts.
CREATE TABLE {s}.artifact_keys (
	id           bigint PRIMARY KEY,
	secret       bytea NOT NULL,
	created      bigint NOT NULL,
	verify_until bigint NOT NULL -- unix ms by the server's clock; 0 for the current key
);

-- The artifacts a user entry's prompt attached: a JSON array of ids, or NULL.
ALTER TABLE {s}.transcript ADD COLUMN attachment_ids bytea;

-- EndedSessions (the retention sweep): only the ended sessions.
CREATE INDEX sessions_ended_by_updated ON {s}.sessions (updated, id) WHERE status = 'ended'::bytea;
`},
}

// migrate brings the schema up to the last of ms. Each migration runs in a
// transaction that first takes the schema's advisory lock and reads the
// version again: of several daemons starting at once, one applies it and
// the others, let in after its commit, find it applied.
func (s *Store) migrate(ctx context.Context, ms []migration) error {
	latest := ms[len(ms)-1].version
	quoted := pgx.Identifier{s.schema}.Sanitize()
	for _, m := range ms {
		applied, err := s.apply(ctx, m, latest, quoted)
		if err != nil {
			return err
		}
		if applied {
			s.log.Info("postgres schema migrated", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// apply runs m unless the schema already has it, and reports whether it did.
func (s *Store) apply(ctx context.Context, m migration, latest int, quoted string) (applied bool, err error) {
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("postgres: open %s: schema %q: migration %d (%s): %w", s.target, s.schema, m.version, m.name, err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey(s.schema)); err != nil {
		return fail(fmt.Errorf("take the migration lock: %w", err))
	}
	version, schemaExists, err := s.schemaVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	if version > latest {
		return false, fmt.Errorf("postgres: open %s: schema %q is at version %d, newer than this build knows (%d): use a newer surfaced or another schema",
			s.target, s.schema, version, latest)
	}
	if version >= m.version {
		return false, nil
	}
	if version != m.version-1 {
		return fail(fmt.Errorf("the schema is at version %d, not %d", version, m.version-1))
	}
	if !schemaExists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
			return fail(fmt.Errorf("create the schema: %w", err))
		}
	}
	if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{s}", quoted)); err != nil {
		return fail(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+quoted+".migrations (version, name, applied) VALUES ($1, $2, "+nowMS+")",
		m.version, m.name); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	return true, nil
}

// schemaVersion reads the version of the store's schema: 0 when the schema
// or its tables do not exist yet, else the last migration applied. A schema
// that holds tables but no migrations table is somebody else's.
func (s *Store) schemaVersion(ctx context.Context, tx pgx.Tx) (version int, schemaExists bool, err error) {
	var hasMigrations bool
	var relations int
	err = tx.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'migrations' AND c.relkind = 'r'),
		(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f'))`, s.schema).
		Scan(&schemaExists, &hasMigrations, &relations)
	if err != nil {
		return 0, false, fmt.Errorf("postgres: open %s: read the schema: %w", s.target, err)
	}
	switch {
	case !schemaExists:
		return 0, false, nil
	case !hasMigrations && relations == 0:
		return 0, true, nil
	case !hasMigrations:
		return 0, true, fmt.Errorf("postgres: open %s: schema %q holds %d tables or views but no migrations table: not a surfaced schema (choose another with WithSchema)",
			s.target, s.schema, relations)
	}
	var v *int
	if err := tx.QueryRow(ctx, "SELECT max(version) FROM "+pgx.Identifier{s.schema, "migrations"}.Sanitize()).Scan(&v); err != nil {
		return 0, true, fmt.Errorf("postgres: open %s: read the schema version: %w", s.target, err)
	}
	if v == nil {
		return 0, true, fmt.Errorf("postgres: open %s: schema %q is damaged: its migrations table is empty", s.target, s.schema)
	}
	return *v, true, nil
}
