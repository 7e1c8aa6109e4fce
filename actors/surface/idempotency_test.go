package surface_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

func (h *domainHarness) sendKeyed(action, key string) *actor.Future {
	return h.sys.Root.RequestFuture(h.domain, &pb.RunCommand{Domain: "counter", Action: action, IdempotencyKey: key}, 30*time.Second)
}

// The memory of applied commands follows the store, not the domain's hopes:
// while another process holds the SQLite store's write lock, a retry of a
// command applied before is answered with its result (it was applied), even
// pipelined behind writes that fail; the keyed commands the store refused
// are not remembered, so their retries run once the lock is gone; and a
// domain started again from the store (snapshot and memory rows) answers
// the retries of what it applied with their results.
func TestDomainRemembersOnlyWhatTheStoreHas(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, dir, sqlite.WithLogger(slog.New(slog.DiscardHandler)), sqlite.WithBusyTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(st, 2, slog.New(slog.DiscardHandler), store.WithRetryWindow(time.Second),
		store.WithStallAfter(100*time.Millisecond), store.WithProbe(50*time.Millisecond, 200*time.Millisecond, time.Second))
	defer w.Close()
	cfg := surface.Config{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative, Native: counter(), Writer: w,
		Logger: slog.New(slog.DiscardHandler)}
	h := startDomain(t, cfg)

	first := result(t, h.sendKeyed("add", "k1"))
	if n(t, first) != 1 || first.GetReplayed() {
		t.Fatalf("first command: %v", first)
	}

	release := testkit.LockSQLite(t, filepath.Join(dir, sqlite.FileName))
	// Writes in flight that will fail, and the retry of k1 right behind them.
	var refused []*actor.Future
	for _, k := range []string{"a", "b", "c"} {
		refused = append(refused, h.sendKeyed("add", k))
	}
	retry := h.sendKeyed("add", "k1")
	for i, f := range refused {
		if r := result(t, f); r.GetOk() || r.GetRefused().GetCode() != agentproc.CodeStoreUnavailable {
			t.Fatalf("command %d under the lock: %v, want refused store_unavailable", i, r)
		}
	}
	if r := result(t, retry); !r.GetOk() || !r.GetReplayed() || n(t, r) != 1 || r.GetRev() != first.GetRev() {
		t.Fatalf("a retry of an applied command while writes fail: %v, want its result (count 1, rev %d, replayed)", r, first.GetRev())
	}
	release()

	// The refused commands did not happen: their retries run, once.
	want := 2
	for _, k := range []string{"a", "b", "c"} {
		var r *pb.CommandResult
		for deadline := time.Now().Add(30 * time.Second); ; {
			if r = result(t, h.sendKeyed("add", k)); r.GetOk() {
				break
			}
			if r.GetRefused().GetCode() != agentproc.CodeStoreUnavailable || time.Now().After(deadline) {
				t.Fatalf("the retry of %s after the lock: %v", k, r)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r.GetReplayed() || n(t, r) != want {
			t.Fatalf("the retry of %s after the lock: %v, want it run (count %d)", k, r, want)
		}
		want++
	}
	lastRev := result(t, h.sendKeyed("add", "c")).GetRev()

	// Started again from the store: snapshot and memory rows.
	kvs, err := st.LoadKV(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stored, cfg.Applied = nil, nil
	for _, kv := range kvs {
		if _, ok := surface.IsAppliedKey(kv.Key); ok {
			cfg.Applied = append(cfg.Applied, kv)
		} else {
			cfg.Stored = &kv
		}
	}
	if cfg.Stored == nil || len(cfg.Applied) != 4 {
		t.Fatalf("stored %v: want the snapshot and 4 remembered commands", kvs)
	}
	again := startDomain(t, cfg)
	for i, k := range []string{"k1", "a", "b", "c"} {
		if r := result(t, again.sendKeyed("add", k)); !r.GetReplayed() || n(t, r) != i+1 {
			t.Fatalf("the retry of %s after a restart: %v, want its result (count %d, replayed)", k, r, i+1)
		}
	}
	if r := result(t, again.sendKeyed("add", "new")); r.GetReplayed() || n(t, r) != 5 || r.GetRev() != lastRev+1 {
		t.Fatalf("a new command after the restart: %v, want count 5 at rev %d", r, lastRev+1)
	}
}
