package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/surfaced/surfaced/store"
)

// testLogger sends the store's log to the test's output.
func testLogger(t testing.TB) Option {
	return WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))
}

func mustOpen(t testing.TB, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, append([]Option{testLogger(t)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// populate makes a database in dir with enough rows to span many pages,
// closes it and returns the path of its file.
func populate(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	s := mustOpen(t, dir)
	for i := range 200 {
		id := fmt.Sprintf("pop-%03d", i)
		if err := s.CreateSession(ctx, store.Session{ID: id, Owner: "alice", Title: strings.Repeat("t", 100)}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutKV(ctx, id, 0, []store.KV{{Key: "k", Value: []byte(`"` + strings.Repeat("v", 500) + `"`), Rev: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WAL left after Close: %v", err)
	}
	return path
}

func TestOpenCreatesDirAndFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "data")
	s := mustOpen(t, dir)
	defer s.Close()
	want := filepath.Join(dir, FileName)
	if s.Path() != want {
		t.Errorf("Path() = %q, want %q", s.Path(), want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("database file: %v, %v", fi, err)
	}
}

func TestOpenOddDirName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "with space?and%20percent#hash&amp")
	s := mustOpen(t, dir)
	defer s.Close()
	if err := s.CreateSession(context.Background(), store.Session{ID: "x", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatalf("database not at the path asked for: %v", err)
	}
}

func TestOpenEmptyDir(t *testing.T) {
	if _, err := Open(context.Background(), ""); err == nil {
		t.Fatal("Open with an empty directory succeeded")
	}
}

func TestSettings(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	pragma := func(db *sql.DB, name string) string {
		t.Helper()
		var v string
		if err := db.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			t.Fatalf("PRAGMA %s: %v", name, err)
		}
		return v
	}
	for _, db := range []*sql.DB{s.write, s.read} {
		for name, want := range map[string]string{
			"journal_mode":   "wal",
			"synchronous":    "1", // NORMAL
			"foreign_keys":   "1",
			"busy_timeout":   "5000",
			"application_id": fmt.Sprint(applicationID),
		} {
			if got := pragma(db, name); got != want {
				t.Errorf("PRAGMA %s = %s, want %s", name, got, want)
			}
		}
	}
	if got := pragma(s.write, "journal_size_limit"); got != "67108864" {
		t.Errorf("writer journal_size_limit = %s", got)
	}
	if got := pragma(s.write, "query_only"); got != "0" {
		t.Errorf("writer query_only = %s", got)
	}
	if got := pragma(s.read, "query_only"); got != "1" {
		t.Errorf("reader query_only = %s", got)
	}
	if _, err := s.read.ExecContext(ctx, "DELETE FROM sessions"); err == nil {
		t.Error("the read pool accepted a write")
	}
	if s.write.Stats().MaxOpenConnections != 1 {
		t.Errorf("writer pool allows %d connections", s.write.Stats().MaxOpenConnections)
	}
}

// queryPlan returns the steps of SQLite's plan for query with args.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.write.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(steps, "; ")
}

// checkCountPlans checks that each count query searches an index by
// owner: the partial index of the sessions that have not ended, which
// covers the query, when it excludes ended ones; else
// sessions_by_owner_updated, which covers it unless it counts by agent.
func checkCountPlans(t *testing.T, s *Store) {
	t.Helper()
	for bits := range s.st.count {
		args := []any{"owner"}
		if bits&countByAgent != 0 {
			args = append(args, "agent")
		}
		p := queryPlan(t, s, countSQL(bits), args...)
		want := "SEARCH sessions USING COVERING INDEX sessions_by_owner_updated (owner=?)"
		switch bits {
		case countByAgent:
			want = "SEARCH sessions USING INDEX sessions_by_owner_updated (owner=?)"
		case countExcludeEnded:
			want = "SEARCH sessions USING COVERING INDEX sessions_live_by_owner_agent (owner=?)"
		case countExcludeEnded | countByAgent:
			want = "SEARCH sessions USING COVERING INDEX sessions_live_by_owner_agent (owner=? AND agent=?)"
		}
		if p != want {
			t.Errorf("count %02b: plan %q, want %q", bits, p, want)
		}
	}
}

func TestQueryPlans(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	plan := func(query string, args ...any) string {
		t.Helper()
		return queryPlan(t, s, query, args...)
	}
	for bits := range 8 {
		args := []any{"owner"}
		for range bits & listByAgent {
			args = append(args, "agent")
		}
		if bits&listByCwd != 0 {
			args = append(args, "/cwd")
		}
		if bits&listAfterCursor != 0 {
			args = append(args, 1, "id")
		}
		p := plan(listSQL(bits), append(args, 10)...)
		if !strings.Contains(p, "USING INDEX sessions_by_owner_updated") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("listing %03b does not walk the index in order: %s", bits, p)
		}
	}
	checkCountPlans(t, s)
	p := plan(appendEntrySQL, "id", "user", "", "", "", nil, nil, false, "", 0, 0, 0, nil)
	if !strings.Contains(p, "SEARCH transcript USING") || strings.Contains(p, "SCAN") {
		t.Errorf("appending scans the transcript: %s", p)
	}
	p = plan("SELECT id FROM sessions WHERE status = 'ended' AND updated < ? ORDER BY updated, id LIMIT ?", 1, 10)
	if !strings.Contains(p, "sessions_ended_by_updated") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("EndedSessions does not walk its index: %s", p)
	}
	p = plan("SELECT "+artifactColumns+artifactFrom+" WHERE a.session_id = ? AND (a.created, a.id) < (?, ?) ORDER BY a.created DESC, a.id DESC LIMIT ?", "s", 1, "x", 10)
	if !strings.Contains(p, "artifacts_by_session_created") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("ListArtifacts does not walk its index in order: %s", p)
	}
	p = plan("SELECT 1 FROM artifacts WHERE sha256 = ? LIMIT 1", "x")
	if !strings.Contains(p, "artifacts_by_sha256") {
		t.Errorf("whether a file is named is not an index search: %s", p)
	}
}

// badOpen checks that Open refuses dir with an error naming the database
// file and containing every one of want, and that it left the file as it was.
func badOpen(t *testing.T, dir string, want ...string) {
	t.Helper()
	path := filepath.Join(dir, FileName)
	before, beforeErr := readRegular(path)
	s, err := Open(context.Background(), dir, testLogger(t))
	if err == nil {
		s.Close()
		t.Fatalf("Open succeeded")
	}
	t.Logf("Open: %v", err)
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	after, afterErr := readRegular(path)
	if !bytes.Equal(before, after) || (beforeErr == nil) != (afterErr == nil) {
		t.Errorf("Open changed the file it refused (%d bytes, %v → %d bytes, %v)", len(before), beforeErr, len(after), afterErr)
	}
}

func TestOpenBadFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, path string) // makes a bad file from a good one at path
		want  []string
	}{
		{"garbage", func(t *testing.T, path string) {
			writeFile(t, path, bytes.Repeat([]byte("this is not a database\n"), 500))
		}, []string{"not an SQLite database"}},
		{"garbage tiny", func(t *testing.T, path string) {
			writeFile(t, path, []byte("hello"))
		}, []string{"truncated", "5 bytes"}},
		{"header cut", func(t *testing.T, path string) { truncate(t, path, 60) }, []string{"truncated", "60 bytes"}},
		{"cut inside a page", func(t *testing.T, path string) { truncate(t, path, size(t, path)/2+100) }, []string{"truncated", "whole number"}},
		{"cut at a page boundary", func(t *testing.T, path string) { truncate(t, path, size(t, path)/4096/2*4096) }, []string{"truncated", "the header says"}},
		{"only the first page", func(t *testing.T, path string) { truncate(t, path, 4096) }, []string{"truncated"}},
		{"bad page size", func(t *testing.T, path string) { overwrite(t, path, 16, []byte{0x03, 0x00}) }, []string{"page size 768"}},
		{"garbled pages", func(t *testing.T, path string) {
			overwrite(t, path, 3*4096, bytes.Repeat([]byte{0xA5}, 4*4096))
		}, []string{"corrupt"}},
		{"garbled schema page", func(t *testing.T, path string) {
			overwrite(t, path, 100, bytes.Repeat([]byte{0x5A}, 4096-100))
		}, []string{"corrupt"}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, []string{"is a directory"}},
		{"fifo", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a regular file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := populate(t, dir)
			tc.spoil(t, path)
			badOpen(t, dir, tc.want...)
		})
	}
}

func TestOpenNotSurfacedDatabase(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	badOpen(t, dir, "not a surfaced database")
}

func TestOpenMissingVersionTable(t *testing.T) {
	dir := t.TempDir()
	path := populate(t, dir)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DROP TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	badOpen(t, dir, "schema_migrations table is missing")
}

func TestOpenDataDirIsAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	writeFile(t, dir, []byte("not a directory"))
	_, err := Open(context.Background(), dir, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Open with a file as data directory: %v", err)
	}
}

// TestOpenEmptyFile: an empty file holds nothing to lose and is what a
// crash right after creating the database leaves; Open makes it a database.
func TestOpenEmptyFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, FileName), nil)
	s := mustOpen(t, dir)
	defer s.Close()
	if err := s.CreateSession(context.Background(), store.Session{ID: "x", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUncheckpointedWAL: a daemon killed before its WAL was checkpointed
// leaves the latest writes only in the WAL; Open must replay them, and not
// mistake the short database file for a truncated one.
func TestOpenUncheckpointedWAL(t *testing.T) {
	dir := t.TempDir()
	path := populate(t, dir)
	s := mustOpen(t, dir)
	ctx := context.Background()
	// Keep the WAL from being checkpointed so the new pages live only there.
	if _, err := s.write.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("wal-%03d", i), Owner: "bob", Title: strings.Repeat("w", 300)}); err != nil {
			t.Fatal(err)
		}
	}
	// Copy the files as a crash would leave them: the database file and its WAL,
	// without the checkpoint that Close would run.
	crashed := t.TempDir()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(crashed, FileName+suffix), b)
	}
	s.Close()
	if size(t, filepath.Join(crashed, FileName+"-wal")) == 0 {
		t.Fatal("the WAL copy is empty; the test does not test anything")
	}
	s2 := mustOpen(t, crashed)
	defer s2.Close()
	page, _, err := s2.ListSessions(ctx, store.ListQuery{Owner: "bob", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 300 {
		t.Errorf("after recovery from the WAL, %d of 300 sessions", len(page))
	}
}

// testMigration is a later schema version, as a future build would have it.
var testMigration = migration{version: len(migrations) + 1, name: "test: pinned sessions", sql: `
ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_pinned ON sessions (owner, pinned);
`}

func TestMigrateForward(t *testing.T) {
	dir := t.TempDir()
	populate(t, dir)
	v2 := append(append([]migration(nil), migrations...), testMigration)
	s := mustOpen(t, dir, func(c *config) { c.migrations = v2 })
	ctx := context.Background()
	var versions, pinned int
	if err := s.write.QueryRowContext(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&versions, new(int)); err != nil {
		t.Fatal(err)
	}
	if err := s.write.QueryRowContext(ctx, "SELECT count(*) FROM sessions WHERE pinned = 0").Scan(&pinned); err != nil {
		t.Fatalf("migration %d not applied: %v", testMigration.version, err)
	}
	if versions != testMigration.version || pinned != 200 {
		t.Errorf("after migrating: %d versions recorded, %d sessions with the new column; want %d and 200", versions, pinned, testMigration.version)
	}
	kv, err := s.LoadKV(ctx, "pop-007")
	if err != nil || len(kv) != 1 {
		t.Errorf("data after migrating: %v, %v", kv, err)
	}
	s.Close()

	// Opening again applies nothing.
	s = mustOpen(t, dir, func(c *config) { c.migrations = v2 })
	s.Close()

	// This build's schema is older than the file's: refuse, change nothing.
	badOpen(t, dir, fmt.Sprintf("schema version %d is newer than this build knows (%d)", testMigration.version, len(migrations)))
}

// TestMigrateCountIndex upgrades a database made before the live session
// count index (version 3): the migration adds it, the sessions that were
// there are counted right, and the counts use it.
func TestMigrateCountIndex(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// Written in version 3's terms: this build's statements need later
	// columns.
	db := createAtVersion(t, dir, 3)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	const insert = "INSERT INTO sessions (id, owner, agent, title, cwd, status, created, updated) VALUES (?, ?, ?, '', '', ?, 1, 1)"
	for i := range 30 {
		status := []string{"ready", store.StatusEnded, "idle"}[i%3]
		agent := []string{"pi", "hello"}[i%2]
		exec(insert, fmt.Sprint("old-", i), "alice", agent, status)
	}
	// One ends after it was stored, one comes back.
	ended, ready := store.StatusEnded, "ready"
	exec("UPDATE sessions SET status = ? WHERE id = 'old-0'", ended)
	exec("UPDATE sessions SET status = ? WHERE id = 'old-1'", ready)
	exec(insert, "bob-1", "bob", "pi", "ready")
	hasIndex := func(db *sql.DB) bool {
		t.Helper()
		var n int
		if err := db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'sessions_live_by_owner_agent'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if hasIndex(db) {
		t.Fatal("version 3 has the count index")
	}
	db.Close()

	s := mustOpen(t, dir)
	defer s.Close()
	var version int
	if err := s.write.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("schema version %d (%v), want %d", version, err, len(migrations))
	}
	if !hasIndex(s.write) {
		t.Error("no count index after the upgrade")
	}
	// Of alice's 30: i%3 == 1 ended (10), then old-0 ended and old-1 back.
	for _, c := range []struct {
		q    store.CountQuery
		want int
	}{
		{store.CountQuery{Owner: "alice"}, 30},
		{store.CountQuery{Owner: "alice", ExcludeEnded: true}, 20},
		{store.CountQuery{Owner: "alice", Agent: "pi"}, 15},
		{store.CountQuery{Owner: "alice", Agent: "pi", ExcludeEnded: true}, 9},
		{store.CountQuery{Owner: "alice", Agent: "hello", ExcludeEnded: true}, 11},
		{store.CountQuery{Owner: "bob", ExcludeEnded: true}, 1},
	} {
		if n, err := s.CountSessions(ctx, c.q); err != nil || n != c.want {
			t.Errorf("after the upgrade, count %+v = %d, %v; want %d", c.q, n, err, c.want)
		}
	}
	checkCountPlans(t, s)
	// The index is kept up to date from then on.
	if err := s.UpdateSession(ctx, "old-1", 0, store.SessionUpdate{Status: &ended}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountSessions(ctx, store.CountQuery{Owner: "alice", ExcludeEnded: true}); err != nil || n != 19 {
		t.Errorf("after ending one more, %d live, %v; want 19", n, err)
	}
}

func TestMigrationFailureKeepsOldSchema(t *testing.T) {
	dir := t.TempDir()
	populate(t, dir)
	broken := migration{version: len(migrations) + 1, name: "test: broken", sql: `
ALTER TABLE sessions ADD COLUMN half INTEGER;
THIS IS NOT SQL;
`}
	_, err := Open(context.Background(), dir, testLogger(t), func(c *config) {
		c.migrations = append(append([]migration(nil), migrations...), broken)
	})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("migration %d", broken.version)) {
		t.Fatalf("Open with a failing migration: %v", err)
	}
	// The half-applied migration was rolled back: the version before, no new column.
	s := mustOpen(t, dir)
	defer s.Close()
	var version int
	if err := s.write.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("schema version %d (%v), want %d", version, err, len(migrations))
	}
	if _, err := s.write.Exec("SELECT half FROM sessions"); err == nil {
		t.Error("the failed migration's column is there")
	}
}

// TestOpenPermissionDenied runs Open as an unprivileged user on files it may
// not use. Root ignores file modes, so as root the test runs its helper in a
// child process with the uid and gid of nobody.
func TestOpenPermissionDenied(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in the helper process")
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) // dir holds a good database
		want  string
	}{
		{"file not readable", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, FileName), 0o200) }, "permission denied"},
		{"file read-only", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, FileName), 0o444) }, "permission denied"},
		{"directory not searchable", func(t *testing.T, dir string) { chmod(t, dir, 0o600) }, "permission denied"},
		{"directory read-only", func(t *testing.T, dir string) {
			chmod(t, filepath.Join(dir, FileName), 0o666)
			chmod(t, dir, 0o555)
		}, "cannot read or write"},
	}
	root := os.Geteuid() == 0
	var exe string
	if root {
		exe = copyTestBinary(t)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			openUp(t, base)
			dir := filepath.Join(base, "data")
			path := populate(t, dir)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			chmod(t, dir, 0o755)
			tc.setup(t, dir)
			t.Cleanup(func() { os.Chmod(dir, 0o700) })

			var msg string
			if root {
				msg = openAsNobody(t, exe, dir)
			} else {
				s, err := Open(context.Background(), dir, testLogger(t))
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded")
				}
				msg = err.Error()
			}
			t.Logf("Open: %s", msg)
			if !strings.Contains(msg, filepath.Join(dir, FileName)) || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not name the file and say %q", msg, tc.want)
			}
			chmod(t, dir, 0o700)
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(before, after) {
				t.Errorf("the refused file changed (%v)", err)
			}
		})
	}
}

const helperEnv = "SURFACED_SQLITE_OPEN_HELPER_DIR"

// TestOpenHelper is the child process of TestOpenPermissionDenied: it opens
// the directory it is given and prints the error.
func TestOpenHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("only run by TestOpenPermissionDenied")
	}
	s, err := Open(context.Background(), dir, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err == nil {
		s.Close()
		fmt.Println("OPEN-RESULT: opened")
		return
	}
	fmt.Println("OPEN-RESULT: " + err.Error())
}

func copyTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	openUp(t, dir)
	exe := filepath.Join(dir, "sqlite.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func openAsNobody(t *testing.T, exe, dir string) string {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestOpenHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if msg, ok := strings.CutPrefix(line, "OPEN-RESULT: "); ok {
			msg = strings.TrimSpace(msg)
			if msg == "opened" {
				t.Fatal("Open succeeded as nobody")
			}
			return msg
		}
	}
	t.Fatalf("helper printed no result:\n%s", out)
	return ""
}

// readRegular reads the file at path if it is a regular one (a FIFO would
// block the reader).
func readRegular(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s", path, fi.Mode().Type())
	}
	return os.ReadFile(path)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// openUp lets every user reach dir: t.TempDir makes it and its parent 0700.
func openUp(t *testing.T, dir string) {
	t.Helper()
	chmod(t, filepath.Dir(dir), 0o755)
	chmod(t, dir, 0o755)
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
