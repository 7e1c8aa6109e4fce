package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/surfaced/surfaced/store"
)

// createAtVersion makes schema in the test database as an earlier build
// left it: migrations 1 to version, applied by the migration code (this
// build's queries do not run on an old schema). It returns a pool, for the
// caller to fill in the old schema's terms.
func createAtVersion(t *testing.T, dsn, schema string, version int) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	old := &Store{pool: pool, schema: schema, target: "test", log: quietLogger()}
	if err := old.migrate(context.Background(), migrations[:version]); err != nil {
		pool.Close()
		t.Fatal(err)
	}
	return pool
}

// TestUpgradeFromEachVersion opens, with this build, a schema that each
// earlier version left, with sessions, a transcript and KV entries in it:
// everything reads back as it was, with no ids reserved; counting and
// reserving ids work on it; and a second open applies nothing.
func TestUpgradeFromEachVersion(t *testing.T) {
	dsn := testDSN(t)
	for version := 1; version < len(migrations); version++ {
		t.Run(fmt.Sprint("from-v", version), func(t *testing.T) {
			ctx := context.Background()
			schema := newSchema()
			pool := createAtVersion(t, dsn, schema, version)
			q := pgx.Identifier{schema}.Sanitize()
			// Only the columns of version 1, which every version has.
			for _, sql := range []string{
				`INSERT INTO ` + q + `.sessions (id, owner, agent, title, cwd, status, created, updated, transcript_len) VALUES
					('live', 'alice', 'pi', 'a title', '/src', 'ready', 1000, 2000, 1),
					('over', 'alice', 'pi', '', '/', 'ended', 1000, 3000, 0),
					('bobs', 'bob', 'hello', '', '/', 'idle', 5, 6, 0)`,
				`INSERT INTO ` + q + `.transcript (session_id, seq, role, text, tool_call_id, tool_name, is_error, via, at, turn_id, prompt_id)
					VALUES ('live', 1, 'user', 'hello', '', '', false, 'browser', 1500, 1, 1)`,
				`INSERT INTO ` + q + `.kv (session_id, key, value, rev, deleted) VALUES ('live', 'surface:x', '{"a":1}', 3, false)`,
			} {
				if _, err := pool.Exec(ctx, sql); err != nil {
					pool.Close()
					t.Fatal(err)
				}
			}
			pool.Close()

			s := mustOpen(t, dsn, WithSchema(schema))
			if v := queryInt(t, s, "SELECT max(version) FROM "+q+".migrations"); v != len(migrations) {
				t.Fatalf("schema version %d after opening, want %d", v, len(migrations))
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
			// The transcript continues after the old entries.
			if err := s.AppendTranscript(ctx, "live", 0, []store.Entry{{Role: "assistant", Text: "hi"}}); err != nil {
				t.Fatal(err)
			}
			s.Close()

			s = mustOpen(t, dsn, WithSchema(schema))
			defer s.Close()
			if n := queryInt(t, s, "SELECT count(*) FROM "+q+".migrations"); n != len(migrations) {
				t.Errorf("%d migrations recorded after opening again, want %d", n, len(migrations))
			}
			if got, err := s.GetSession(ctx, "live"); err != nil || got.IDsReserved != 50 {
				t.Errorf("after opening again: %d ids reserved (%v), want 50", got.IDsReserved, err)
			}
			if tr, err := s.Transcript(ctx, "live"); err != nil || len(tr) != 2 || tr[1].Text != "hi" {
				t.Errorf("transcript after appending: %+v, %v", tr, err)
			}
		})
	}
}
