package surface_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
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

// landsUnknown is a real store whose KV writes, while armed, land and then
// answer that their outcome is unknown: what a connection lost with the
// commit in flight does.
type landsUnknown struct {
	store.Store
	armed atomic.Bool
}

func (s *landsUnknown) PutKV(ctx context.Context, sessionID string, fence store.Fence, entries []store.KV) error {
	if err := s.Store.PutKV(ctx, sessionID, fence, entries); err != nil || !s.armed.Load() {
		return err
	}
	return fmt.Errorf("put kv: the connection was lost with the commit in flight: %w", store.ErrOutcomeUnknown)
}

// A command whose write landed but was answered as of unknown outcome is
// forgotten by the domain, which rolls back; the store must not remember it
// either once the domain has moved on without it: the next write rewrites
// its row's slot, so a retry after a restart from the store runs the
// command (its change is not in the state) instead of answering ok.
func TestDomainRewritesTheRowOfAnUnknownWrite(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, t.TempDir(), sqlite.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &landsUnknown{Store: sq}
	if err := st.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(st, 2, slog.New(slog.DiscardHandler), store.WithRetryWindow(200*time.Millisecond),
		store.WithProbe(20*time.Millisecond, 100*time.Millisecond, time.Second))
	defer w.Close()
	cfg := surface.Config{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative, Native: counter(), Writer: w,
		Logger: slog.New(slog.DiscardHandler)}
	h := startDomain(t, cfg)
	if r := result(t, h.sendKeyed("add", "k1")); n(t, r) != 1 {
		t.Fatalf("k1: %v", r)
	}

	st.armed.Store(true)
	if r := result(t, h.sendKeyed("add", "k2")); r.GetRefused().GetCode() != agentproc.CodeOutcomeUnknown {
		t.Fatalf("k2 under the fault: %v, want refused outcome_unknown", r)
	}
	st.armed.Store(false)
	testkit.Eventually(t, 10*time.Second, w.Available, "the store to be available again")
	r := result(t, h.sendKeyed("add", "k3"))
	if n(t, r) != 2 {
		t.Fatalf("k3 after the fault: %v, want count 2 (k2 was rolled back)", r)
	}

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
	again := startDomain(t, cfg)
	if r := result(t, again.sendKeyed("add", "k2")); r.GetReplayed() || n(t, r) != 3 {
		t.Fatalf("k2 sent again after a restart from the store: %v, want it run (count 3), not replayed", r)
	}
	if r := result(t, again.sendKeyed("add", "k3")); !r.GetReplayed() || n(t, r) != 2 {
		t.Fatalf("k3 sent again after a restart: %v, want its result (count 2, replayed)", r)
	}
}
