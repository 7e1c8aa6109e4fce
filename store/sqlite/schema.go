package sqlite

import (
	"context"
	"fmt"
	"time"
)

// migration brings the schema from version-1 to version. Migrations only go
// forward; each runs in one transaction with the row that records it.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the schema history, oldest first. Append; never edit a
// migration that has shipped.
var migrations = []migration{
	{version: 1, name: "sessions, transcript, kv", sql: `
PRAGMA application_id = 1936877156; -- 0x73726664, "srfd"

CREATE TABLE schema_migrations (
	version INTEGER PRIMARY KEY,
	name    TEXT NOT NULL,
	applied INTEGER NOT NULL -- unix ms
) STRICT;

-- Times are unix milliseconds, UTC.
CREATE TABLE sessions (
	id      TEXT PRIMARY KEY,
	owner   TEXT NOT NULL,
	agent   TEXT NOT NULL,
	title   TEXT NOT NULL,
	cwd     TEXT NOT NULL,
	status  TEXT NOT NULL,
	created INTEGER NOT NULL,
	updated INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- ListSessions: one owner, newest updated first, id breaking ties; the
-- keyset cursor (updated, id) seeks into this index.
CREATE INDEX sessions_by_owner_updated ON sessions (owner, updated DESC, id DESC);

CREATE TABLE transcript (
	session_id   TEXT NOT NULL REFERENCES sessions (id),
	seq          INTEGER NOT NULL, -- 1, 2, ... per session
	role         TEXT NOT NULL,
	text         TEXT NOT NULL,
	tool_call_id TEXT NOT NULL,
	tool_name    TEXT NOT NULL,
	tool_args    BLOB,             -- JSON or NULL
	tool_result  BLOB,             -- JSON or NULL
	is_error     INTEGER NOT NULL,
	via          TEXT NOT NULL,
	at           INTEGER NOT NULL,
	PRIMARY KEY (session_id, seq)
) STRICT;

CREATE TABLE kv (
	session_id TEXT NOT NULL REFERENCES sessions (id),
	key        TEXT NOT NULL,
	value      BLOB,              -- JSON; NULL for a tombstone
	rev        INTEGER NOT NULL,
	deleted    INTEGER NOT NULL,
	PRIMARY KEY (session_id, key)
) STRICT;
`},
	{version: 2, name: "transcript turn and prompt ids", sql: `
ALTER TABLE transcript ADD COLUMN turn_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transcript ADD COLUMN prompt_id INTEGER NOT NULL DEFAULT 0;
`},
	{version: 3, name: "session leases", sql: `
-- One row per session ever leased, kept after release so that the next
-- token continues above it. No foreign key: a lease may precede its session.
CREATE TABLE leases (
	session_id TEXT PRIMARY KEY,
	token      INTEGER NOT NULL, -- the current (last issued) fencing token
	node       TEXT NOT NULL,    -- the holder; '' once released
	expires    INTEGER NOT NULL  -- unix ms; the release time once released
) STRICT, WITHOUT ROWID;
`},
	{version: 4, name: "live session count index", sql: `
-- CountSessions with ExcludeEnded (the quota, counted at every session
-- creation): only the sessions that have not ended are in this index, so
-- the count reads none of the owner's ended sessions, however many pile
-- up. SQLite uses a partial index only for a query whose WHERE holds this
-- condition as written (countSQL writes it the same way), and checks the
-- condition on the index alone only if status is in it. Counts of every
-- status search sessions_by_owner_updated by owner, as filtered listings
-- do; an index for them would be one more for ListSessions to choose.
CREATE INDEX sessions_live_by_owner_agent ON sessions (owner, agent, status) WHERE status <> 'ended';
`},
	{version: 5, name: "reserved session ids", sql: `
-- Session.IDsReserved: every turn or prompt id handed out is at most this.
ALTER TABLE sessions ADD COLUMN ids_reserved INTEGER NOT NULL DEFAULT 0;
`},
	{version: 6, name: "artifacts, signing keys, attachments, ended sessions", sql: `
-- Artifacts: the records are here, the bytes in files under
-- <data_dir>/artifacts/blobs, one file per SHA-256, shared by the artifacts
-- with the same bytes.
CREATE TABLE artifacts (
	id           TEXT NOT NULL PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions (id),
	media_type   TEXT NOT NULL,
	size         INTEGER NOT NULL,
	sha256       TEXT NOT NULL,    -- lowercase hex: the name of the bytes' file
	name         TEXT NOT NULL,
	derived_from TEXT NOT NULL,    -- '' when none
	meta         BLOB,             -- JSON or NULL
	created      INTEGER NOT NULL  -- unix ms
) STRICT;

-- ListArtifacts: one session, newest first, id breaking ties; the keyset
-- cursor (created, id) seeks into this index.
CREATE INDEX artifacts_by_session_created ON artifacts (session_id, created DESC, id DESC);
-- Whether any artifact still names a file (deletes, the sweep).
CREATE INDEX artifacts_by_sha256 ON artifacts (sha256);

-- The keys of signed artifact URLs: one current (verify_until 0), and the
-- ones it replaced while their grace lasts.
CREATE TABLE artifact_keys (
	id           INTEGER PRIMARY KEY,
	secret       BLOB NOT NULL,
	created      INTEGER NOT NULL, -- unix ms
	verify_until INTEGER NOT NULL  -- unix ms; 0 for the current key
) STRICT;

-- The artifacts a user entry's prompt attached: a JSON array of ids, or NULL.
ALTER TABLE transcript ADD COLUMN attachment_ids TEXT;

-- EndedSessions (the retention sweep): only the ended sessions, oldest
-- update first.
CREATE INDEX sessions_ended_by_updated ON sessions (updated, id) WHERE status = 'ended';
`},
}

// migrate brings the schema from version current to the last in ms.
func (s *Store) migrate(ctx context.Context, current int, ms []migration) error {
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if err := s.apply(ctx, m); err != nil {
			return err
		}
		s.log.Info("sqlite schema migrated", "version", m.version, "name", m.name)
	}
	return nil
}

func (s *Store) apply(ctx context.Context, m migration) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: migration %d: %w", s.path, m.version, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("sqlite: open %s: migration %d (%s): %w", s.path, m.version, m.name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)",
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("sqlite: open %s: migration %d (%s): %w", s.path, m.version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: open %s: migration %d (%s): commit: %w", s.path, m.version, m.name, err)
	}
	return nil
}
