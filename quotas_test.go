package surfaced_test

import (
	"context"
	"errors"
	"testing"

	"github.com/surfaced/surfaced"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func withQuotas(q surfaced.Quotas) opt { return func(c *surfaced.Config) { c.Quotas = q } }

// CreateSession enforces the quotas: a subject's open sessions (ended ones
// do not count, other subjects' neither) and the sessions on this node.
func TestCreateSessionQuotas(t *testing.T) {
	h := newHarness(t, nil, withQuotas(surfaced.Quotas{SessionsPerSubject: 2, SessionsTotal: 4}))
	ctx := context.Background()
	create := func(owner string) (string, error) {
		return h.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: owner})
	}
	first, err := create(owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create(owner); err != nil {
		t.Fatal(err)
	}
	_, err = create(owner)
	var qe *surfaced.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, surfaced.ErrTooManySessions) || qe.Scope != surfaced.QuotaSubject || qe.Count != 2 || qe.Limit != 2 {
		t.Fatalf("third session of one subject: %v", err)
	}
	// An ended session frees its place.
	if r := h.req(first, &pb.Stop{Caller: me, Reason: "stopped"}).(*pb.StopResult); r.GetError() != nil {
		t.Fatal(r.GetError())
	}
	if _, err := create(owner); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	// Another subject has its own count, but the node's total holds for all
	// (the ended session's actor lingers a while: it still counts there).
	if _, err := create("bob"); err != nil {
		t.Fatalf("bob's first: %v", err)
	}
	_, err = create("carol")
	if !errors.As(err, &qe) || qe.Scope != surfaced.QuotaTotal || qe.Limit != 4 {
		t.Fatalf("past the total: %v", err)
	}
}
