package surface_test

import (
	"context"
	"encoding/json"
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

type count struct{ N int }

func counter() surface.Domain {
	return surface.Define("counter", count{}, map[string]surface.Command[count]{
		"add": func(ctx *surface.Ctx[count], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c count) count { c.N++; return c })
			return ctx.Get().N, nil
		},
	})
}

// domainHarness runs one domain actor under a parent that collects the
// snapshots it commits.
type domainHarness struct {
	sys     *actor.ActorSystem
	domain  *actor.PID
	commits chan *pb.StateCommitted
}

func startDomain(t *testing.T, cfg surface.Config) *domainHarness {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	h := &domainHarness{sys: sys, commits: make(chan *pb.StateCommitted, 1000)}
	spawned := make(chan *actor.PID, 1)
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			spawned <- ctx.Spawn(surface.Props(cfg))
		case *pb.StateCommitted:
			h.commits <- m
		}
	}))
	h.domain = <-spawned
	t.Cleanup(func() { _ = sys.Root.StopFuture(parent).Wait(); sys.Shutdown() })
	return h
}

func (h *domainHarness) send(action string) *actor.Future {
	return h.sys.Root.RequestFuture(h.domain, &pb.RunCommand{Domain: "counter", Action: action}, 30*time.Second)
}

func result(t *testing.T, f *actor.Future) *pb.CommandResult {
	t.Helper()
	res, err := f.Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*pb.CommandResult)
}

func n(t *testing.T, r *pb.CommandResult) int {
	t.Helper()
	var v int
	if !r.GetOk() || json.Unmarshal(r.GetData(), &v) != nil {
		t.Fatalf("not an ok count: %v", r)
	}
	return v
}

// Another process holds the SQLite store's write lock while commands come
// in, some pipelined on top of a write in flight: none of them is
// acknowledged, each is refused as not applied, and the domain is back at
// its last durable snapshot: once the lock is gone, the next increment
// continues from the last acknowledged count at the next rev, and a
// restart from the store finds the same.
func TestDomainRollsBackWhatTheStoreRefused(t *testing.T) {
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

	var lastRev uint64
	for i := 1; i <= 3; i++ {
		r := result(t, h.send("add"))
		if n(t, r) != i {
			t.Fatalf("count %d, want %d", n(t, r), i)
		}
		lastRev = r.GetRev()
	}

	release := testkit.LockSQLite(t, filepath.Join(dir, sqlite.FileName))
	var inFlight []*actor.Future
	for range 5 {
		inFlight = append(inFlight, h.send("add"))
	}
	for i, f := range inFlight {
		r := result(t, f)
		if r.GetOk() || r.GetRefused().GetCode() != agentproc.CodeStoreUnavailable {
			t.Fatalf("command %d under the lock: %v, want refused store_unavailable", i, r)
		}
	}
	if r := result(t, h.send("add")); r.GetRefused().GetCode() != agentproc.CodeStoreUnavailable {
		t.Fatalf("a command while the store is unavailable: %v, want refused at once", r)
	}
	release()

	var r *pb.CommandResult
	for deadline := time.Now().Add(30 * time.Second); ; {
		if r = result(t, h.send("add")); r.GetOk() {
			break
		}
		if r.GetRefused().GetCode() != agentproc.CodeStoreUnavailable || time.Now().After(deadline) {
			t.Fatalf("after the lock: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n(t, r) != 4 || r.GetRev() != lastRev+1 {
		t.Fatalf("first command after the outage: count %d rev %d, want 4 at rev %d", n(t, r), r.GetRev(), lastRev+1)
	}

	// Every snapshot published was durable, one rev after another, up to
	// the last command's.
	for prev := uint64(0); prev != r.GetRev(); {
		select {
		case c := <-h.commits:
			if prev != 0 && c.GetRev() != prev+1 {
				t.Fatalf("published rev %d after %d", c.GetRev(), prev)
			}
			prev = c.GetRev()
		case <-time.After(10 * time.Second):
			t.Fatalf("rev %d never published (last %d)", r.GetRev(), prev)
		}
	}

	kv, err := st.LoadKV(ctx, "s")
	if err != nil || len(kv) != 1 {
		t.Fatalf("stored %v %v", kv, err)
	}
	cfg.Stored = &kv[0]
	again := startDomain(t, cfg)
	if r := result(t, again.send("add")); n(t, r) != 5 || r.GetRev() != lastRev+2 {
		t.Fatalf("after a restart from the store: count %d rev %d, want 5 at rev %d", n(t, r), r.GetRev(), lastRev+2)
	}
}

// fencedWhileArmed is a real store whose KV writes, while armed, are
// refused as fenced: the session's lease moved to another node.
type fencedWhileArmed struct {
	store.Store
	armed atomic.Bool
}

func (s *fencedWhileArmed) PutKV(ctx context.Context, sessionID string, fence store.Fence, entries []store.KV) error {
	if s.armed.Load() {
		return fmt.Errorf("put kv: %w", store.ErrFenced)
	}
	return s.Store.PutKV(ctx, sessionID, fence, entries)
}

// A domain's chain of snapshots outlives its actor: when a write failed
// under the previous actor (the session moved away, and later came back
// to this node; or the agent restarted after a failed write), the next
// actor of the domain, on the same writer, writes its first command as any
// other, not refused as built on the failure it never saw.
func TestDomainWritesAfterItsPreviousActorsChainFailed(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, t.TempDir(), sqlite.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &fencedWhileArmed{Store: sq}
	if err := st.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(st, 2, slog.New(slog.DiscardHandler))
	defer w.Close()
	cfg := surface.Config{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative, Native: counter(), Writer: w,
		Logger: slog.New(slog.DiscardHandler)}
	first := startDomain(t, cfg)
	if r := result(t, first.send("add")); n(t, r) != 1 {
		t.Fatalf("first command: %v", r)
	}
	st.armed.Store(true)
	if r := result(t, first.send("add")); r.GetRefused().GetCode() != "session_moved" {
		t.Fatalf("a command whose write was fenced: %v, want refused session_moved", r)
	}
	st.armed.Store(false)

	kvs, err := st.LoadKV(ctx, "s")
	if err != nil || len(kvs) != 1 {
		t.Fatalf("stored %v %v", kvs, err)
	}
	cfg.Stored = &kvs[0]
	next := startDomain(t, cfg)
	if r := result(t, next.send("add")); !r.GetOk() || n(t, r) != 2 {
		t.Fatalf("the next actor's first command: %v, want count 2", r)
	}
}
