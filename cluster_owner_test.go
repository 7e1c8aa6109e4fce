//go:build !race

// In-process cluster test: see cluster_rejoin_test.go for why it runs
// without the race detector.

package surfaced

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/surfaced/surfaced/actors/session"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// In a cluster too, a request for a stored session reaches its grain only
// for its owner: a foreign or missing id activates nothing on any node, and
// a session woken by a request counts against the node's sessions_total.
func TestInProcessClusterForeignIDActivatesNothing(t *testing.T) {
	st := memstore.New()
	agent := test.NewInMemAgent()
	rt := startClusterNode(t, st, agent, "owner-test", func(c *Config) { c.Quotas = Quotas{SessionsTotal: 1} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stored := func() string {
		now := time.Now()
		id := session.NewID()
		if err := st.CreateSession(ctx, store.Session{ID: id, Owner: "alice", Agent: "fake", Cwd: t.TempDir(),
			Status: session.StatusIdle, Created: now, Updated: now}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	s1, s2 := stored(), stored()
	bob := &pb.GetSummary{Caller: &pb.Caller{Subject: "bob"}}
	for _, id := range []string{s1, "aaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		if _, err := rt.Request(ctx, id, bob); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("bob asking for %s: %v", id, err)
		}
	}
	if live := rt.LiveSessions(); len(live) != 0 {
		t.Fatalf("bob's requests activated %v", live)
	}
	alice := &pb.GetSummary{Caller: &pb.Caller{Subject: "alice"}}
	if res, err := rt.Request(ctx, s1, alice); err != nil || res.(*pb.SessionSummary).GetError() != nil {
		t.Fatalf("alice wakes her session: %v %v", res, err)
	}
	// Live now: bob still gets not found.
	if _, err := rt.Request(ctx, s1, bob); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("bob asking for a live session of alice's: %v", err)
	}
	if _, err := rt.Request(ctx, s2, alice); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("waking a second session with sessions_total 1: %v", err)
	}
}
