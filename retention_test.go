package surfaced_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

// Ended sessions go, artifacts and all, once they have been ended for the
// retention; live ones and younger ended ones stay. The sweep runs on the
// runtime's clock, which the test moves.
func TestEndedRetention(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Now())
	h := newHarness(t, st, func(c *surfaced.Config) {
		c.Clock = clk
		c.EndedRetention = time.Hour
	})
	ctx := context.Background()
	ended, live := h.create(""), h.create("")
	put := func(id, text string) artifact.Artifact {
		a, err := h.rt.Artifacts().Put(ctx, id, strings.NewReader(text), artifact.PutOptions{MediaType: "text/plain", Size: -1})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	doomed := put(ended, "the same bytes")
	kept := put(live, "the same bytes")
	only := put(ended, "bytes of the ended session alone")
	if r := h.req(ended, &pb.Stop{Caller: me, Reason: "stopped"}).(*pb.StopResult); !r.GetOk() {
		t.Fatalf("stop: %v", r)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		s, err := st.GetSession(ctx, ended)
		return err == nil && s.Status == store.StatusEnded
	}, "the session ended in the store")

	// Every quarter of the retention the janitor looks; the session goes
	// on the first look after it has been ended an hour.
	step := func() {
		t.Helper()
		ran := h.rt.JanitorRan()
		clk.Advance(15 * time.Minute)
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the janitor did not run")
		}
	}
	for range 4 { // an hour: not yet an hour after it ended (a few ms later)
		step()
		if _, err := st.GetSession(ctx, ended); err != nil {
			t.Fatalf("after %s the ended session is gone already: %v", clk.Now().Sub(time.Now()), err)
		}
	}
	step()
	if _, err := st.GetSession(ctx, ended); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an hour and a quarter after it ended, the session is still there: %v", err)
	}
	for _, a := range []artifact.Artifact{doomed, only} {
		if _, err := h.rt.Artifacts().Lookup(ctx, a.ID); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("artifact %s of the deleted session: %v", a.ID, err)
		}
	}
	if _, err := st.Transcript(ctx, ended); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("transcript of the deleted session: %v", err)
	}
	// The live session and its artifact (the same bytes) are whole.
	if _, err := st.GetSession(ctx, live); err != nil {
		t.Errorf("the live session: %v", err)
	}
	_, r, err := h.rt.Artifacts().Open(ctx, kept.ID)
	if err != nil {
		t.Fatalf("the live session's artifact: %v", err)
	}
	r.Close()
	// Nothing of the deleted session is left for the sweep either.
	if n, err := st.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after the purge = %d, %v; want 0", n, err)
	}
}
