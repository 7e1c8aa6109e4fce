//go:build !race

// The pinned protoactor's cluster races with itself in one process (its
// gossiper reads the block list its member list writes, without a lock), so
// the in-process cluster tests run without the race detector: make test
// runs them in a pass of their own (-run InProcessCluster).

package surfaced

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// A request in flight when this node rejoins the cluster as a new member is
// asked again through the new member, not left to retry on the old one
// (gone) until its deadline. Here the request is in flight because the
// session's lease is held by a node that no longer exists: the grain refuses
// and the directory asks again until the lease expires.
func TestInProcessClusterRequestSurvivesRejoin(t *testing.T) {
	st := memstore.New()
	agent := test.NewInMemAgent()
	var logs logBuffer
	rt := startClusterNode(t, st, agent, "rejoin-test", func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ctx := context.Background()
	now := time.Now()
	id := session.NewID()
	if err := st.CreateSession(ctx, store.Session{ID: id, Owner: "alice", Agent: "fake", Cwd: t.TempDir(),
		Status: session.StatusIdle, Created: now, Updated: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, id, "127.0.0.1:1#gone", 3*time.Second); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		res any
		err error
		in  time.Duration
	}
	got := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		t0 := time.Now()
		res, err := rt.Request(ctx, id, &pb.GetSummary{Caller: &pb.Caller{System: true}})
		got <- answer{res, err, time.Since(t0)}
	}()
	// The barrier: the grain refused the request twice, so it was refused
	// and asked again; had a refusal ended it, it would have ended by now.
	const refused = "session lease held elsewhere; not activating here"
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Count(logs.String(), refused) >= 2 },
		"the request to be refused and asked again (%q twice in the log)", refused)
	select {
	case a := <-got:
		t.Fatalf("the request ended while the lease was held elsewhere: %v %v", a.res, a.err)
	default:
	}
	rt.swap.RLock()
	old := rt.node
	rt.swap.RUnlock()
	if err := rt.rejoin(rt.cfg.Cluster.withDefaults(), old); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("the request failed across the rejoin (after %s): %v", a.in, a.err)
	}
	if s, ok := a.res.(*pb.SessionSummary); !ok || s.GetSessionId() != id {
		t.Fatalf("answer %T %v", a.res, a.res)
	}
	t.Logf("answered after %s", a.in.Round(time.Millisecond))
}

// logBuffer is a log destination that the test reads while the runtime
// writes to it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
