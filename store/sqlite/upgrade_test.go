package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// createAtVersion makes a database in dir with the schema an earlier build
// left: migrations 1 to version, applied by the migration code (this
// build's statements do not prepare on an old schema). It returns the
// writer connection, for the caller to fill in the old schema's terms.
func createAtVersion(t *testing.T, dir string, version int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, FileName), config{busyTimeout: time.Second, synchronous: "NORMAL"}, false))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	old := &Store{path: dir, write: db, log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if err := old.migrate(context.Background(), 0, migrations[:version]); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestUpgradeFromEachVersion opens, with this build, a database that each
// earlier schema version left, with sessions, a transcript and KV entries
// in it: everything reads back as it was, with no ids reserved; counting
// and reserving ids work on it; and a second open applies nothing.
func TestUpgradeFromEachVersion(t *testing.T) {
	for version := 1; version < len(migrations); version++ {
		t.Run(fmt.Sprint("from-v", version), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			db := createAtVersion(t, dir, version)
			// Only the columns of version 1, which every version has.
			for _, q := range []string{
				`INSERT INTO sessions (id, owner, agent, title, cwd, status, created, updated) VALUES
					('live', 'alice', 'pi', 'a title', '/src', 'ready', 1000, 2000),
					('over', 'alice', 'pi', '', '/', 'ended', 1000, 3000),
					('bobs', 'bob', 'hello', '', '/', 'idle', 5, 6)`,
				`INSERT INTO transcript (session_id, seq, role, text, tool_call_id, tool_name, is_error, via, at)
					VALUES ('live', 1, 'user', 'hello', '', '', 0, 'browser', 1500)`,
				`INSERT INTO kv (session_id, key, value, rev, deleted) VALUES ('live', 'surface:x', CAST('{"a":1}' AS BLOB), 3, 0)`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			s := mustOpen(t, dir)
			var applied int
			if err := s.write.QueryRowContext(ctx, "SELECT max(version) FROM schema_migrations").Scan(&applied); err != nil || applied != len(migrations) {
				t.Fatalf("schema version %d (%v) after opening, want %d", applied, err, len(migrations))
			}
			got, err := s.GetSession(ctx, "live")
			want := store.Session{ID: "live", Owner: "alice", Agent: "pi", Title: "a title", Cwd: "/src", Status: "ready",
				Created: fromMillis(1000), Updated: fromMillis(2000)}
			if err != nil || got != want {
				t.Errorf("session after upgrading:\n got %+v (%v)\nwant %+v", got, err, want)
			}
			tr, err := s.Transcript(ctx, "live")
			if err != nil || len(tr) != 1 || tr[0].Text != "hello" || !tr[0].At.Equal(fromMillis(1500)) {
				t.Errorf("transcript after upgrading: %+v, %v", tr, err)
			}
			kv, err := s.LoadKV(ctx, "live")
			if err != nil || len(kv) != 1 || kv[0].Rev != 3 || string(kv[0].Value) != `{"a":1}` {
				t.Errorf("kv after upgrading: %+v, %v", kv, err)
			}
			for q, want := range map[store.CountQuery]int{
				{Owner: "alice"}:                                  2,
				{Owner: "alice", ExcludeEnded: true}:              1,
				{Owner: "alice", Agent: "pi", ExcludeEnded: true}: 1,
				{Owner: "bob", ExcludeEnded: true}:                1,
			} {
				if n, err := s.CountSessions(ctx, q); err != nil || n != want {
					t.Errorf("count %+v after upgrading: %d, %v; want %d", q, n, err, want)
				}
			}
			for _, n := range []uint64{50, 20} {
				if err := s.UpdateSession(ctx, "live", 0, store.SessionUpdate{IDsReserved: &n}); err != nil {
					t.Fatal(err)
				}
			}
			page, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, p := range page {
				listed = append(listed, fmt.Sprintf("%s:%d", p.ID, p.IDsReserved))
			}
			if want := []string{"live:50", "over:0"}; !slices.Equal(listed, want) {
				t.Errorf("listed after reserving: %v, want %v", listed, want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s = mustOpen(t, dir)
			defer s.Close()
			var versions int
			if err := s.write.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&versions); err != nil || versions != len(migrations) {
				t.Errorf("%d migrations recorded (%v) after opening again, want %d", versions, err, len(migrations))
			}
			if got, err := s.GetSession(ctx, "live"); err != nil || got.IDsReserved != 50 {
				t.Errorf("after opening again: %d ids reserved (%v), want 50", got.IDsReserved, err)
			}
		})
	}
}
