package postgres

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surfaced/surfaced/store"
)

// badOpen checks that Open fails within limit with an error containing
// every one of want and not the password of dsn.
func badOpen(t *testing.T, dsn string, limit time.Duration, want []string, opts ...Option) {
	t.Helper()
	start := time.Now()
	s, err := Open(context.Background(), dsn, append([]Option{testLogger(t)}, opts...)...)
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded")
	}
	t.Logf("Open: %v (%v)", err, took.Round(time.Millisecond))
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if u, perr := url.Parse(dsn); perr == nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(err.Error(), pw) {
			t.Errorf("error %q shows the password", err)
		}
	}
	if took > limit {
		t.Errorf("Open took %v to fail, more than %v", took, limit)
	}
}

// withPassword returns dsn with another password.
func withPassword(t *testing.T, dsn, pw string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

func withDatabase(t *testing.T, dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}

func TestOpenErrors(t *testing.T) {
	dsn := testDSN(t)
	t.Run("wrong password", func(t *testing.T) {
		badOpen(t, withPassword(t, dsn, "not-the-password"), 10*time.Second, []string{"refused the credentials", "pgtest@127.0.0.1:"})
	})
	t.Run("unknown user", func(t *testing.T) {
		u, _ := url.Parse(dsn)
		u.User = url.UserPassword("mallory", "x")
		badOpen(t, u.String(), 10*time.Second, []string{"refused the credentials", "mallory@"})
	})
	t.Run("no such database", func(t *testing.T) {
		badOpen(t, withDatabase(t, dsn, "nope"), 10*time.Second, []string{"database does not exist", "/nope"})
	})
	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		badOpen(t, "postgres://u:secret-pw@"+addr+"/db?sslmode=disable", 5*time.Second, []string{"cannot reach the server", addr})
	})
	t.Run("server never answers", func(t *testing.T) {
		// A listener that accepts and says nothing, as a hung server or a
		// black-holing firewall on the way would.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// The accept loop is in wg while it runs, so that it may add the
		// connections to wg.
		var wg sync.WaitGroup
		defer func() {
			l.Close()
			wg.Wait()
		}()
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				wg.Go(func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(10 * time.Second))
					c.Read(make([]byte, 1024)) // the startup message; never answered
					var b [1]byte
					c.Read(b[:]) // until the client gives up
				})
			}
		})
		target := "postgres://u:secret-pw@" + l.Addr().String() + "/db?sslmode=disable"
		badOpen(t, target, 3*time.Second, []string{"no answer from the server", "300ms"}, WithConnectTimeout(300*time.Millisecond))
		// The DSN's connect_timeout wins over the option.
		badOpen(t, target+"&connect_timeout=1", 4*time.Second, []string{"no answer from the server", "1s"}, WithConnectTimeout(time.Hour))
	})
	t.Run("malformed DSN", func(t *testing.T) {
		badOpen(t, "postgres://u:pw@127.0.0.1:notaport/db", time.Second, []string{"malformed DSN"})
	})
	t.Run("bad schema name", func(t *testing.T) {
		badOpen(t, dsn, time.Second, []string{"schema name"}, WithSchema(""))
		badOpen(t, dsn, time.Second, []string{"schema name"}, WithSchema(strings.Repeat("s", 64)))
	})
}

// exec runs sql on the test database outside any store.
func exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInt(t *testing.T, s *Store, sql string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// testMigration is a later schema version, as a future build would have it.
var testMigration = migration{version: len(migrations) + 1, name: "test: pinned sessions", sql: `
ALTER TABLE {s}.sessions ADD COLUMN pinned boolean NOT NULL DEFAULT false;
CREATE INDEX sessions_pinned ON {s}.sessions (owner, pinned);
`}

func TestMigrateForward(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	schema := newSchema()
	s := mustOpen(t, dsn, WithSchema(schema))
	for i := range 20 {
		if err := s.CreateSession(ctx, store.Session{ID: fmt.Sprint("m", i), Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	next := append(append([]migration(nil), migrations...), testMigration)
	s = mustOpen(t, dsn, WithSchema(schema), func(c *config) { c.migrations = next })
	if n := queryInt(t, s, "SELECT count(*) FROM "+schema+".migrations"); n != testMigration.version {
		t.Errorf("%d migrations recorded, want %d", n, testMigration.version)
	}
	if n := queryInt(t, s, "SELECT count(*) FROM "+schema+".sessions WHERE NOT pinned"); n != 20 {
		t.Errorf("%d sessions with the new column, want 20", n)
	}
	s.Close()
	s = mustOpen(t, dsn, WithSchema(schema), func(c *config) { c.migrations = next })
	s.Close()

	// This build's schema is older than the database's: refuse.
	badOpen(t, dsn, 10*time.Second, []string{fmt.Sprintf("at version %d, newer than this build knows (%d)", testMigration.version, len(migrations))},
		WithSchema(schema))
}

func TestMigrationFailureKeepsOldSchema(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema()
	mustOpen(t, dsn, WithSchema(schema)).Close()
	broken := migration{version: len(migrations) + 1, name: "test: broken", sql: `
ALTER TABLE {s}.sessions ADD COLUMN half integer;
THIS IS NOT SQL;
`}
	badOpen(t, dsn, 10*time.Second, []string{fmt.Sprintf("migration %d (test: broken)", broken.version), "syntax error"},
		WithSchema(schema), func(c *config) { c.migrations = append(append([]migration(nil), migrations...), broken) })
	s := mustOpen(t, dsn, WithSchema(schema))
	defer s.Close()
	if v := queryInt(t, s, "SELECT max(version) FROM "+schema+".migrations"); v != len(migrations) {
		t.Errorf("schema version %d, want %d", v, len(migrations))
	}
	if _, err := s.pool.Exec(context.Background(), "SELECT half FROM "+schema+".sessions"); err == nil {
		t.Error("the failed migration's column is there")
	}
}

// TestConcurrentOpen starts many stores on one new schema at once, as
// daemons starting together do: every one opens, and each migration is
// applied once.
func TestConcurrentOpen(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema()
	next := append(append([]migration(nil), migrations...), testMigration)
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(context.Background(), dsn, WithSchema(schema), testLogger(t), func(c *config) { c.migrations = next })
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	if got := queryInt(t, stores[0], "SELECT count(*) FROM "+schema+".migrations"); got != len(next) {
		t.Errorf("%d migrations recorded, want %d", got, len(next))
	}
	// They all work on the same data.
	ctx := context.Background()
	if err := stores[1].CreateSession(ctx, store.Session{ID: "x", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[n-1].GetSession(ctx, "x"); err != nil {
		t.Errorf("a session created through one store, read through another: %v", err)
	}
}

func TestSchemas(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	a, b := newSchema(), newSchema()
	sa, sb := mustOpen(t, dsn, WithSchema(a)), mustOpen(t, dsn, WithSchema(b))
	defer sa.Close()
	defer sb.Close()
	if err := sa.CreateSession(ctx, store.Session{ID: "only-a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.GetSession(ctx, "only-a"); err == nil {
		t.Error("a session of one schema is seen in another")
	}
	if sa.Schema() != a {
		t.Errorf("Schema() = %q, want %q", sa.Schema(), a)
	}

	// A schema made beforehand, empty (as an administrator may make it for
	// a role that cannot create schemas), is used as it is.
	pre := newSchema()
	exec(t, dsn, "CREATE SCHEMA "+pre)
	mustOpen(t, dsn, WithSchema(pre)).Close()

	// A name that needs quoting is quoted.
	odd := `Odd "schema"; DROP TABLE x`
	so := mustOpen(t, dsn, WithSchema(odd))
	defer so.Close()
	if err := so.CreateSession(ctx, store.Session{ID: "q", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}

	// Somebody else's schema is refused, and left as it is.
	other := newSchema()
	exec(t, dsn, "CREATE SCHEMA "+other+"; CREATE TABLE "+other+".sessions (id int)")
	badOpen(t, dsn, 10*time.Second, []string{"not a surfaced schema"}, WithSchema(other))
	exec(t, dsn, "SELECT id FROM "+other+".sessions")
}

// TestQueryPlans checks that listings use sessions_by_owner_updated, and
// walk it in order, with no sort, when they filter by owner alone, on a
// table of a realistic size and spread; and that a cursor is a seek in it.
func TestQueryPlans(t *testing.T) {
	dsn := testDSN(t)
	s := mustOpen(t, dsn, WithSchema(newSchema()))
	defer s.Close()
	ctx := context.Background()
	table := pgx.Identifier{s.schema, "sessions"}.Sanitize()
	// 20 owners of 500 sessions, half of each on another agent and cwd.
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+table+` (id, owner, agent, title, cwd, status, created, updated)
		SELECT 's' || i, convert_to('owner' || (i % 20), 'UTF8'), convert_to(CASE WHEN i / 20 % 2 = 0 THEN 'pi' ELSE 'other' END, 'UTF8'),
			'', convert_to(CASE WHEN i / 40 % 3 = 0 THEN '/cwd' ELSE '/x' END, 'UTF8'), '', i, i
		FROM generate_series(1, 10000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	for bits := range 8 {
		args := []any{[]byte("owner7")}
		if bits&listByAgent != 0 {
			args = append(args, []byte("pi"))
		}
		if bits&listByCwd != 0 {
			args = append(args, []byte("/cwd"))
		}
		if bits&listAfterCursor != 0 {
			args = append(args, int64(5000), "s5000")
		}
		args = append(args, store.DefaultListLimit+1)
		rows, err := s.pool.Query(ctx, "EXPLAIN "+s.q.list[bits], args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		p := strings.Join(plan, "\n")
		switch {
		case bits&(listByAgent|listByCwd) == 0 && (!strings.Contains(p, "Index Scan using sessions_by_owner_updated") || strings.Contains(p, "Sort")):
			t.Errorf("listing %03b does not walk the index in order:\n%s", bits, p)
		case !strings.Contains(p, "Index Scan on sessions_by_owner_updated") && !strings.Contains(p, "Index Scan using sessions_by_owner_updated"):
			// With a filter, an owner's few hundred sessions may be cheaper
			// to fetch by a bitmap and sort; but by the index.
			t.Errorf("listing %03b does not use the index:\n%s", bits, p)
		}
		if bits&listAfterCursor != 0 && !strings.Contains(p, "ROW(updated, id) < ROW(") {
			t.Errorf("listing %03b does not seek to the cursor:\n%s", bits, p)
		}
	}
}

// explain returns the plan of query with args.
func explain(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// checkCountPlans checks that each count query reads an index, never the
// whole table: the partial index of the sessions that have not ended when
// it excludes ended ones, else sessions_by_owner_updated.
func checkCountPlans(t *testing.T, s *Store, owner, agent string) {
	t.Helper()
	for bits := range s.q.count {
		args := []any{[]byte(owner)}
		index := "sessions_by_owner_updated"
		if bits&countExcludeEnded != 0 {
			index = "sessions_live_by_owner_agent"
		}
		if bits&countByAgent != 0 {
			args = append(args, []byte(agent))
		}
		p := explain(t, s, s.q.count[bits], args...)
		if strings.Contains(p, "Seq Scan") || !(strings.Contains(p, "using "+index) || strings.Contains(p, "on "+index)) {
			t.Errorf("count %02b does not read %s*:\n%s", bits, index, p)
		}
	}
}

// fillSessions inserts 20 owners of 500 sessions on two agents, six in
// seven of them ended (as they pile up over time), and makes the
// statistics and visibility map as autovacuum would.
func fillSessions(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	table := pgx.Identifier{s.schema, "sessions"}.Sanitize()
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+table+` (id, owner, agent, title, cwd, status, created, updated)
		SELECT 's' || i, convert_to('owner' || (i % 20), 'UTF8'), convert_to(CASE WHEN i / 20 % 2 = 0 THEN 'pi' ELSE 'other' END, 'UTF8'),
			'', '', convert_to(CASE WHEN i % 7 = 0 THEN 'ready' ELSE 'ended' END, 'UTF8'), i, i
		FROM generate_series(1, 10000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
}

// countOwner7 checks the counts of owner7 among fillSessions' sessions:
// i = 7 + 20k, live when i is a multiple of 7 too (i = 7 + 140k), on pi
// when i / 20 is even.
func countOwner7(t *testing.T, s *Store) {
	t.Helper()
	for _, c := range []struct {
		q    store.CountQuery
		want int
	}{
		{store.CountQuery{Owner: "owner7"}, 500},
		{store.CountQuery{Owner: "owner7", ExcludeEnded: true}, 72},
		{store.CountQuery{Owner: "owner7", Agent: "pi"}, 250},
		{store.CountQuery{Owner: "owner7", Agent: "pi", ExcludeEnded: true}, 36},
	} {
		if n, err := s.CountSessions(context.Background(), c.q); err != nil || n != c.want {
			t.Errorf("count %+v = %d, %v; want %d", c.q, n, err, c.want)
		}
	}
}

// TestCountQueryPlans checks the count queries on a table of a realistic
// size and spread, in a new schema and in one upgraded from version 1,
// before the live session count index.
func TestCountQueryPlans(t *testing.T) {
	dsn := testDSN(t)
	t.Run("new", func(t *testing.T) {
		s := mustOpen(t, dsn, WithSchema(newSchema()))
		defer s.Close()
		fillSessions(t, s)
		checkCountPlans(t, s, "owner7", "pi")
		countOwner7(t, s)
	})
	t.Run("upgraded", func(t *testing.T) {
		schema := newSchema()
		s := mustOpen(t, dsn, WithSchema(schema), func(c *config) { c.migrations = migrations[:1] })
		fillSessions(t, s)
		if n := queryInt(t, s, "SELECT count(*) FROM pg_indexes WHERE schemaname = '"+schema+"' AND indexname = 'sessions_live_by_owner_agent'"); n != 0 {
			t.Fatal("version 1 has the count index")
		}
		s.Close()

		s = mustOpen(t, dsn, WithSchema(schema))
		defer s.Close()
		if v := queryInt(t, s, "SELECT max(version) FROM "+schema+".migrations"); v != len(migrations) {
			t.Errorf("schema version %d, want %d", v, len(migrations))
		}
		if n := queryInt(t, s, "SELECT count(*) FROM pg_indexes WHERE schemaname = '"+schema+"' AND indexname = 'sessions_live_by_owner_agent'"); n != 1 {
			t.Error("no count index after the upgrade")
		}
		countOwner7(t, s)
		if _, err := s.pool.Exec(context.Background(), "ANALYZE "+schema+".sessions"); err != nil {
			t.Fatal(err)
		}
		checkCountPlans(t, s, "owner7", "pi")
		// The index is kept up to date from then on: s7 (live) and s47 (ended) are owner7's, on pi.
		ended, ready := store.StatusEnded, "ready"
		if err := s.UpdateSession(context.Background(), "s7", 0, store.SessionUpdate{Status: &ended}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateSession(context.Background(), "s47", 0, store.SessionUpdate{Status: &ready}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.CountSessions(context.Background(), store.CountQuery{Owner: "owner7", Agent: "pi", ExcludeEnded: true}); err != nil || n != 36 {
			t.Errorf("after ending s7 and reviving s47: %d live on pi, %v; want 36", n, err)
		}
		if n, err := s.CountSessions(context.Background(), store.CountQuery{Owner: "owner7", ExcludeEnded: true}); err != nil || n != 72 {
			t.Errorf("after ending s7 and reviving s47: %d live, %v; want 72", n, err)
		}
	})
}

// TestArtifactQueryPlans checks that artifact listings walk
// artifacts_by_session_created in order (a cursor seeks into it), and that
// EndedSessions reads the partial index of the ended sessions, on tables
// of a realistic size and spread.
func TestArtifactQueryPlans(t *testing.T) {
	dsn := testDSN(t)
	s := mustOpen(t, dsn, WithSchema(newSchema()))
	defer s.Close()
	ctx := context.Background()
	q := pgx.Identifier{s.schema}.Sanitize()
	for _, stmt := range []string{
		`INSERT INTO ` + q + `.sessions (id, owner, agent, title, cwd, status, created, updated)
			SELECT 's' || i, 'o', 'a', '', '', CASE WHEN i % 10 = 0 THEN 'ended'::bytea ELSE 'ready'::bytea END, i, i
			FROM generate_series(1, 5000) AS i`,
		`INSERT INTO ` + q + `.artifact_blobs (sha256, size, chunk_size, created) SELECT 'x' || i, 1, 1, 1 FROM generate_series(1, 2000) AS i`,
		`INSERT INTO ` + q + `.artifacts (id, session_id, media_type, size, sha256, blob_id, name, derived_from, meta, created)
			SELECT 'att_' || i, 's' || (i % 50 + 1), CASE WHEN i % 3 = 0 THEN 'image/png'::bytea ELSE 'text/plain'::bytea END,
				1, 'x', (SELECT min(blob_id) FROM ` + q + `.artifact_blobs) + i % 2000, '', '', NULL, i
			FROM generate_series(1, 20000) AS i`,
		"ANALYZE " + q + ".sessions",
		"ANALYZE " + q + ".artifacts",
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for bits := range 4 {
		args := []any{"s7"}
		if bits&listByMedia != 0 {
			args = append(args, []byte("image/"), []byte("image/"), []byte("image0"))
		}
		if bits&listAfter != 0 {
			args = append(args, int64(10000), "att_10000")
		}
		p := explain(t, s, s.aq.list[bits], append(args, store.DefaultListLimit+1)...)
		switch {
		case bits&listByMedia == 0 && (!strings.Contains(p, "artifacts_by_session_created") || strings.Contains(p, "Sort")):
			t.Errorf("artifact listing %02b does not walk its index in order:\n%s", bits, p)
		case !strings.Contains(p, "artifacts_by_session_created"):
			// Filtered, a session's few hundred artifacts may be cheaper to
			// fetch by a bitmap and sort; but by the index.
			t.Errorf("artifact listing %02b does not use its index:\n%s", bits, p)
		}
		if bits&listAfter != 0 && !strings.Contains(p, "ROW(created, id) < ROW(") {
			t.Errorf("artifact listing %02b does not seek to the cursor:\n%s", bits, p)
		}
	}
	if p := explain(t, s, s.aq.endedSessions, int64(4000), 50); !strings.Contains(p, "sessions_ended_by_updated") || strings.Contains(p, "Sort") {
		t.Errorf("EndedSessions does not walk its index:\n%s", p)
	}
	if p := explain(t, s, s.aq.named, int64(1)); !strings.Contains(p, "artifacts_by_blob") {
		t.Errorf("whether a blob is named is not an index search:\n%s", p)
	}
}
