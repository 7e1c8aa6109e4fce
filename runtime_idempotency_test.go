package surfaced_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

func keyed(domain, action, key string, args string) *pb.RunCommand {
	return &pb.RunCommand{Caller: me, Domain: domain, Action: action, IdempotencyKey: key, Args: []byte(args)}
}

// A retry that arrives while the first attempt is still under way (queued
// behind another command of the domain) shares its answer: the command runs
// once.
func TestRetryDuringFirstAttemptSharesItsAnswer(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create("")
	c, _ := h.subscribe(id, "")
	h.waitReady(c)
	h.req(id, &pb.GetSummary{Caller: me})
	pid := h.rt.Local().Lookup(id)
	root := h.rt.System().Root
	// One sender, one mailbox: the slow command is in flight at the agent
	// while both attempts of the keyed one arrive.
	slow := root.RequestFuture(pid, keyed("demo", "sleep", "", `{"ms":300}`), 10*time.Second)
	first := root.RequestFuture(pid, keyed("demo", "increment", "client:k", ""), 10*time.Second)
	retry := root.RequestFuture(pid, keyed("demo", "increment", "client:k", ""), 10*time.Second)
	for _, f := range []interface{ Result() (any, error) }{slow, first, retry} {
		if _, err := f.Result(); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := first.Result()
	b, _ := retry.Result()
	r1, r2 := a.(*pb.CommandResult), b.(*pb.CommandResult)
	if !r1.GetOk() || string(r1.GetData()) != `{"count":1}` || r1.GetReplayed() {
		t.Fatalf("first attempt: %v", r1)
	}
	if !r2.GetReplayed() || !proto.Equal(withoutReplayed(r2), r1) {
		t.Fatalf("retry: %v, first: %v", r2, r1)
	}
	if r := h.cmd(id, "demo", "increment", nil); string(r.GetData()) != `{"count":2}` {
		t.Fatalf("the keyed command ran twice: %v", r)
	}
}

func withoutReplayed(r *pb.CommandResult) *pb.CommandResult {
	r = proto.Clone(r).(*pb.CommandResult)
	r.Replayed = false
	return r
}

// The memory of applied commands is stored with the snapshots: after a
// daemon restart (or on another node) a retry is answered with the original
// result.
func TestAppliedCommandsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	open := func() store.Store {
		st, err := sqlite.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st1 := open()
	h1 := newHarness(t, st1)
	id := h1.create("")
	r1 := h1.req(id, keyed("demo", "increment", "client:k1", "")).(*pb.CommandResult)
	h1.req(id, keyed("demo", "increment", "client:k2", ""))
	if !r1.GetOk() || r1.GetRev() != 2 {
		t.Fatalf("first: %v", r1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h1.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st1.Close()

	st2 := open()
	t.Cleanup(func() { st2.Close() })
	// The memory's rows are no state a client sees.
	kvs, err := st2.LoadKV(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, e := range kvs {
		if len(e.Key) > 9 && e.Key[:9] == "surfaced:" {
			rows++
		}
	}
	if rows != 2 {
		t.Fatalf("%d rows of applied commands in the store, want 2: %v", rows, kvs)
	}
	h2 := newHarness(t, st2)
	again := h2.req(id, keyed("demo", "increment", "client:k1", "")).(*pb.CommandResult)
	if !again.GetReplayed() || !proto.Equal(withoutReplayed(again), r1) {
		t.Fatalf("a retry after the restart: %v, first answer %v", again, r1)
	}
	st := h2.req(id, &pb.GetState{Caller: me}).(*pb.StateEntries)
	for _, e := range st.GetEntries() {
		if e.GetKey() != "surface:demo" {
			t.Fatalf("a client sees the key %q", e.GetKey())
		}
		var v struct{ Count int }
		if json.Unmarshal(e.GetValue(), &v) != nil || v.Count != 2 || e.GetRev() != 3 {
			t.Fatalf("state after the retry: %s rev %d (want count 2, rev 3)", e.GetValue(), e.GetRev())
		}
	}
	// An agent may not write the daemon's keys.
	c, _ := h2.subscribe(id, "")
	h2.prompt(id, `state surfaced:applied:1:demo {"key":"forged"}`)
	c.Wait(t, 5*time.Second, "refused", func(f testkit.Frame) bool { return f.Kind == "diagnostic" && f.Data["code"] == "state_refused" })
}
