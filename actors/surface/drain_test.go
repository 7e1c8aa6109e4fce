package surface_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

// A domain asked to drain (its session is stopping) refuses what comes
// next as not done, lets the snapshot writes in flight land, answers their
// commands with their results, and only then says it is drained.
func TestDrainFinishesTheWritesInFlight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, dir, sqlite.WithLogger(slog.New(slog.DiscardHandler)), sqlite.WithBusyTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateSession(ctx, store.Session{ID: "s", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	// The writes wait for the lock (retried within the window) rather than
	// fail.
	w := store.NewWriter(st, 2, slog.New(slog.DiscardHandler), store.WithRetryWindow(30*time.Second), store.WithStallAfter(30*time.Second))
	defer w.Close()
	h := startDomain(t, surface.Config{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative, Native: counter(), Writer: w,
		Logger: slog.New(slog.DiscardHandler)})
	if r := result(t, h.send("add")); n(t, r) != 1 {
		t.Fatalf("first command: %v", r)
	}

	// One client sends everything, so that the answers arrive in order.
	answers := make(chan any, 16)
	client := h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *pb.RunCommand, *surface.Drain:
			ctx.Request(h.domain, m)
		case *pb.CommandResult, *surface.Drained:
			answers <- m
		}
	}))
	release := testkit.LockSQLite(t, filepath.Join(dir, sqlite.FileName))
	for range 3 {
		h.sys.Root.Send(client, &pb.RunCommand{Domain: "counter", Action: "add"})
	}
	refusal := pb.Err(codes.ShuttingDown, "the daemon is shutting down")
	h.sys.Root.Send(client, &surface.Drain{Refusal: refusal})
	h.sys.Root.Send(client, &pb.RunCommand{Domain: "counter", Action: "add"})
	next := func() any {
		t.Helper()
		select {
		case a := <-answers:
			return a
		case <-time.After(30 * time.Second):
			t.Fatal("no answer")
			return nil
		}
	}
	// The command after the drain is refused while the writes wait.
	if r, ok := next().(*pb.CommandResult); !ok || r.GetRefused().GetCode() != codes.ShuttingDown {
		t.Fatalf("the command after the drain: %v, want refused shutting_down", r)
	}
	release()
	for i := 2; i <= 4; i++ {
		r, ok := next().(*pb.CommandResult)
		if !ok || n(t, r) != i {
			t.Fatalf("the command in flight at the drain: %v, want ok %d", r, i)
		}
	}
	if d, ok := next().(*surface.Drained); !ok || d.Domain != "counter" {
		t.Fatalf("after the writes: %v, want drained", d)
	}
	kv, err := st.LoadKV(ctx, "s")
	if err != nil || len(kv) != 1 || string(kv[0].Value) != `{"N":4}` {
		t.Fatalf("stored %v %v", kv, err)
	}
}
