package storetest

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// The Session.IDsReserved cases.

func reservedOf(t *testing.T, s store.Store, id string) uint64 {
	t.Helper()
	got, err := s.GetSession(context.Background(), id)
	must(t, err)
	return got.IDsReserved
}

func testIDsReserved(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "ids", Owner: "alice", Title: "t", Status: "ready"}))
	if got := reservedOf(t, s, "ids"); got != 0 {
		t.Errorf("a new session has %d ids reserved, want 0", got)
	}
	must(t, s.CreateSession(ctx, store.Session{ID: "ids-100", Owner: "alice", IDsReserved: 100}))
	if got := reservedOf(t, s, "ids-100"); got != 100 {
		t.Errorf("created with 100 ids reserved, got %d", got)
	}

	// Each step: the update, and the value it must leave. Updated moves
	// forward at every step, whether the reservation moved or not.
	prev, err := s.GetSession(ctx, "ids")
	must(t, err)
	title := "renamed"
	steps := []struct {
		name string
		u    store.SessionUpdate
		want uint64
	}{
		{"raise", store.SessionUpdate{IDsReserved: ptr(uint64(64))}, 64},
		{"same", store.SessionUpdate{IDsReserved: ptr(uint64(64))}, 64},
		{"lower: kept", store.SessionUpdate{IDsReserved: ptr(uint64(10))}, 64},
		{"zero: kept", store.SessionUpdate{IDsReserved: ptr(uint64(0))}, 64},
		{"nil: kept", store.SessionUpdate{Title: &title}, 64},
		{"empty: kept", store.SessionUpdate{}, 64},
		{"raise with a status", store.SessionUpdate{IDsReserved: ptr(uint64(128)), Status: ptr("idle")}, 128},
		{"lower with a title: the title lands", store.SessionUpdate{IDsReserved: ptr(uint64(1)), Title: ptr("lower")}, 128},
		{"the most a store holds", store.SessionUpdate{IDsReserved: ptr(uint64(math.MaxInt64))}, math.MaxInt64},
		{"and it stays", store.SessionUpdate{IDsReserved: ptr(uint64(math.MaxInt64 - 1))}, math.MaxInt64},
	}
	want := prev
	for _, st := range steps {
		must(t, s.UpdateSession(ctx, "ids", 0, st.u))
		got, err := s.GetSession(ctx, "ids")
		must(t, err)
		if st.u.Title != nil {
			want.Title = *st.u.Title
		}
		if st.u.Status != nil {
			want.Status = *st.u.Status
		}
		want.IDsReserved, want.Updated = st.want, got.Updated
		equalSession(t, got, want)
		if !got.Updated.After(prev.Updated) {
			t.Errorf("%s: Updated %v did not move past %v", st.name, got.Updated, prev.Updated)
		}
		prev = got
	}

	// Out of range: refused whole, nothing of the update lands.
	for _, bad := range []uint64{math.MaxInt64 + 1, math.MaxUint64} {
		if err := s.UpdateSession(ctx, "ids-100", 0, store.SessionUpdate{IDsReserved: &bad, Title: ptr("no")}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("update to %d ids reserved: err = %v, want ErrInvalid", bad, err)
		}
		if err := s.CreateSession(ctx, store.Session{ID: "ids-bad", Owner: "alice", IDsReserved: bad}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("create with %d ids reserved: err = %v, want ErrInvalid", bad, err)
		}
	}
	if got, err := s.GetSession(ctx, "ids-100"); err != nil || got.IDsReserved != 100 || got.Title != "" {
		t.Errorf("after refused updates: %+v, %v; want 100 ids reserved and no title", got, err)
	}
	if _, err := s.GetSession(ctx, "ids-bad"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused session was stored: %v", err)
	}
	if err := s.UpdateSession(ctx, "nope", 0, store.SessionUpdate{IDsReserved: ptr(uint64(1))}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("reserve ids of an unknown session: err = %v, want ErrNotFound", err)
	}

	// Listings carry it too.
	page, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice"})
	must(t, err)
	got := map[string]uint64{}
	for _, p := range page {
		got[p.ID] = p.IDsReserved
	}
	if got["ids"] != math.MaxInt64 || got["ids-100"] != 100 {
		t.Errorf("listed ids reserved: %v", got)
	}
}

// testIDsReservedFenced checks that a reservation is a fenced write like
// the others: under a stale fence it fails and changes nothing.
func testIDsReservedFenced(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)
	must(t, s.CreateSession(ctx, store.Session{ID: "idf", Owner: "alice"}))
	a, err := ls.AcquireLease(ctx, "idf", "node-a", time.Minute)
	must(t, err)
	must(t, s.UpdateSession(ctx, "idf", store.Fence(a.Token), store.SessionUpdate{IDsReserved: ptr(uint64(32))}))
	must(t, ls.ReleaseLease(ctx, "idf", a.Token))
	b, err := ls.AcquireLease(ctx, "idf", "node-b", time.Minute)
	must(t, err)
	if err := s.UpdateSession(ctx, "idf", store.Fence(a.Token), store.SessionUpdate{IDsReserved: ptr(uint64(64))}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("reserve under the previous token: err = %v, want ErrFenced", err)
	}
	if got := reservedOf(t, s, "idf"); got != 32 {
		t.Errorf("after a fenced reservation: %d ids reserved, want 32", got)
	}
	must(t, s.UpdateSession(ctx, "idf", store.Fence(b.Token), store.SessionUpdate{IDsReserved: ptr(uint64(96))}))
	if got := reservedOf(t, s, "idf"); got != 96 {
		t.Errorf("after the new holder's reservation: %d ids reserved, want 96", got)
	}
}

// testIDsReservedConcurrent has writers raise one session's reservation
// with interleaved values, upwards and downwards; whatever the
// interleaving, the highest must stay.
func testIDsReservedConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "idc", Owner: "alice"}))
	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				n := uint64(i*writers + w + 1)
				if w%2 == 1 {
					n = uint64((perWriter-1-i)*writers + w + 1)
				}
				if err := s.UpdateSession(ctx, "idc", 0, store.SessionUpdate{IDsReserved: &n}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := reservedOf(t, s, "idc"), uint64(writers*perWriter); got != want {
		t.Errorf("after concurrent reservations: %d ids reserved, want the highest, %d", got, want)
	}
}
