package surfaced_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
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
			t.Fatalf("after %s the ended session is gone already: %v", time.Until(clk.Now()), err)
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

// The daemon sweeps orphaned bytes on its own: a file a put left under its
// final name without a record (the process died between the two steps)
// is deleted by the janitor once it is older than the sweep's grace, and
// nothing an artifact names is touched.
func TestOrphanSweep(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Now())
	h := newHarness(t, st, func(c *surfaced.Config) { c.Clock = clk })
	ctx := context.Background()
	kept, err := h.rt.Artifacts().Put(ctx, h.create(""), strings.NewReader("named bytes"), artifact.PutOptions{MediaType: "text/plain", Size: -1})
	if err != nil {
		t.Fatal(err)
	}
	// What a crash between the bytes and the record leaves: the file under
	// its SHA-256, no record naming it. One old, one young.
	orphan := func(content string, age time.Duration) string {
		sum := sha256.Sum256([]byte(content))
		sha := hex.EncodeToString(sum[:])
		p := filepath.Join(dir, "artifacts", "blobs", sha[:2], sha)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := orphan("left by a crash two hours ago", 2*time.Hour)
	young := orphan("left by a crash a minute ago", time.Minute)
	keptPath := filepath.Join(dir, "artifacts", "blobs", kept.SHA256[:2], kept.SHA256)
	if err := os.Chtimes(keptPath, time.Now().Add(-3*time.Hour), time.Now().Add(-3*time.Hour)); err != nil {
		t.Fatal(err)
	}

	ran := h.rt.JanitorRan()
	clk.Advance(15 * time.Minute)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the janitor did not run")
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old orphan is still there: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("the young orphan (a put in flight, perhaps) went: %v", err)
	}
	_, r, err := h.rt.Artifacts().Open(ctx, kept.ID)
	if err != nil {
		t.Fatalf("the named bytes: %v", err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "named bytes" {
		t.Errorf("the named bytes read %q", b)
	}
}
