// Package storetest is the conformance suite of store.Store: every
// implementation runs Run (and RunDurable when its data outlives a Close),
// so that they all behave the same.
package storetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// Run runs the conformance suite. open returns a new, empty store for one
// subtest; Run closes it when the subtest ends. The store must implement
// store.Leaser too.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateGet", testCreateGet},
		{"CreateDefaults", testCreateDefaults},
		{"InvalidArguments", testInvalidArguments},
		{"Update", testUpdate},
		{"ListOwnerAndFilters", testListOwnerAndFilters},
		{"ListOrderAndPaging", testListOrderAndPaging},
		{"ListLimits", testListLimits},
		{"ListStableUnderUpdates", testListStableUnderUpdates},
		{"ListConcurrentUpdates", testListConcurrentUpdates},
		{"ListBadCursor", testListBadCursor},
		{"Count", testCount},
		{"CountAfterUpdates", testCountAfterUpdates},
		{"CountConcurrentUpdates", testCountConcurrentUpdates},
		{"IDsReserved", testIDsReserved},
		{"IDsReservedFenced", testIDsReservedFenced},
		{"IDsReservedConcurrent", testIDsReservedConcurrent},
		{"Transcript", testTranscript},
		{"TranscriptLargeText", testTranscriptLargeText},
		{"TranscriptIsolation", testTranscriptIsolation},
		{"TranscriptBadBatchWritesNothing", testTranscriptBadBatch},
		{"KV", testKV},
		{"KVTombstones", testKVTombstones},
		{"KVBatchOrder", testKVBatchOrder},
		{"KVBytesIdentical", testKVBytesIdentical},
		{"KVIsolation", testKVIsolation},
		{"KVBadBatchWritesNothing", testKVBadBatch},
		{"KVConcurrentRevs", testKVConcurrentRevs},
		{"KVBatchOfSessions", testKVBatchOfSessions},
		{"Concurrency", testConcurrency},
		{"CanceledContext", testCanceledContext},
		{"OddBytes", testOddBytes},
		{"Close", testClose},
		{"LeaseLifecycle", testLeaseLifecycle},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseInvalidArguments", testLeaseInvalidArguments},
		{"LeaseConcurrentAcquire", testLeaseConcurrentAcquire},
		{"FencedWrites", testFencedWrites},
		{"FenceRacesTakeover", testFenceRacesTakeover},
		{"DeleteSession", testDeleteSession},
		{"EndedSessions", testEndedSessions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

// RunDurable checks that a store keeps everything across a Close and a new
// open of the same storage, as a daemon restart does. newStorage makes fresh,
// empty storage and returns a function that opens it; RunDurable calls that
// function several times, closing each store before opening the next.
func RunDurable(t *testing.T, newStorage func(t *testing.T) (open func(t *testing.T) store.Store)) {
	ctx := context.Background()
	open := newStorage(t)

	s := open(t)
	sessions := []store.Session{
		{ID: "dur-1", Owner: "alice", Agent: "pi", Title: "one", Cwd: "/src/a", Status: "ready", Created: ms(1_700_000_000_000), Updated: ms(1_700_000_000_500),
			IDsReserved: 64},
		{ID: "dur-2", Owner: "alice", Agent: "pi", Title: "two", Cwd: "/src/b", Status: "ended", Created: ms(1_700_000_001_000), Updated: ms(1_700_000_002_000)},
		{ID: "dur-3", Owner: "bob", Agent: "hello", Title: "three", Cwd: "/", Status: "idle", Created: ms(1_700_000_003_000), Updated: ms(1_700_000_003_000)},
	}
	for _, sess := range sessions {
		must(t, s.CreateSession(ctx, sess))
	}
	entries := sampleEntries(5)
	must(t, s.AppendTranscript(ctx, "dur-1", 0, entries[:3]))
	must(t, s.AppendTranscript(ctx, "dur-1", 0, entries[3:]))
	kvs := []store.KV{
		{Key: "surface:canvas", Value: []byte(`{"shapes": [1, 2, 3]}`), Rev: 7},
		{Key: "canvas.model", Value: []byte(`"big"`), Rev: 2},
		{Key: "gone", Rev: 9, Deleted: true},
	}
	must(t, s.PutKV(ctx, "dur-1", 0, kvs))
	title := "renamed"
	must(t, s.UpdateSession(ctx, "dur-2", 0, store.SessionUpdate{Title: &title, IDsReserved: ptr(uint64(math.MaxInt64))}))
	sessions[1], _ = s.GetSession(ctx, "dur-2")
	if sessions[1].IDsReserved != math.MaxInt64 {
		t.Errorf("dur-2 has %d ids reserved, want %d", sessions[1].IDsReserved, int64(math.MaxInt64))
	}
	held, err := leaser(t, s).AcquireLease(ctx, "dur-1", "node-a", time.Hour)
	must(t, err)
	released, err := leaser(t, s).AcquireLease(ctx, "dur-2", "node-a", time.Hour)
	must(t, err)
	must(t, leaser(t, s).ReleaseLease(ctx, "dur-2", released.Token))
	must(t, s.Close())

	s = open(t)
	for _, want := range sessions {
		got, err := s.GetSession(ctx, want.ID)
		must(t, err)
		equalSession(t, got, want)
	}
	page, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice"})
	must(t, err)
	if ids := idsOf(page); !slices.Equal(ids, []string{"dur-2", "dur-1"}) {
		t.Errorf("after reopen, list = %v, want [dur-2 dur-1]", ids)
	}
	checkCounts(t, s, "after reopen", []countCase{
		{store.CountQuery{Owner: "alice"}, 2},
		{store.CountQuery{Owner: "alice", ExcludeEnded: true}, 1},
		{store.CountQuery{Owner: "bob", Agent: "hello", ExcludeEnded: true}, 1},
	})
	got, err := s.Transcript(ctx, "dur-1")
	must(t, err)
	equalEntries(t, got, entries)
	gotKV, err := s.LoadKV(ctx, "dur-1")
	must(t, err)
	equalKVs(t, gotKV, sortedKVs(kvs))

	// Leases and their tokens survive too.
	if _, err := leaser(t, s).AcquireLease(ctx, "dur-1", "node-b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("after reopen, acquire of a held lease: %v, want ErrLeaseHeld", err)
	}
	if l, err := leaser(t, s).RenewLease(ctx, "dur-1", held.Token, time.Hour); err != nil || l.Node != "node-a" {
		t.Errorf("after reopen, renew of the held lease: %+v, %v", l, err)
	}
	if l, err := leaser(t, s).AcquireLease(ctx, "dur-2", "node-b", time.Hour); err != nil || l.Token <= released.Token {
		t.Errorf("after reopen, acquire of a released lease: %+v, %v; want a token above %d", l, err, released.Token)
	}
	if err := s.UpdateSession(ctx, "dur-2", store.Fence(released.Token), store.SessionUpdate{}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("after reopen, a write under a released token: %v, want ErrFenced", err)
	}

	// Reserved ids continue from the stored value: never lower.
	must(t, s.UpdateSession(ctx, "dur-1", store.Fence(held.Token), store.SessionUpdate{IDsReserved: ptr(uint64(63))}))
	if got, err := s.GetSession(ctx, "dur-1"); err != nil || got.IDsReserved != 64 {
		t.Errorf("after reopen, a lower reservation: %d ids reserved (%v), want 64 kept", got.IDsReserved, err)
	}
	must(t, s.UpdateSession(ctx, "dur-1", store.Fence(held.Token), store.SessionUpdate{IDsReserved: ptr(uint64(128))}))

	// Revs and sequence numbers continue where they were.
	must(t, s.PutKV(ctx, "dur-1", 0, []store.KV{
		{Key: "surface:canvas", Value: []byte(`{"stale":true}`), Rev: 7},
		{Key: "gone", Value: []byte(`"back"`), Rev: 9},
		{Key: "canvas.model", Value: []byte(`"small"`), Rev: 3},
	}))
	more := sampleEntries(2)
	must(t, s.AppendTranscript(ctx, "dur-1", store.Fence(held.Token), more))
	must(t, s.Close())

	s = open(t)
	defer s.Close()
	if got, err := s.GetSession(ctx, "dur-1"); err != nil || got.IDsReserved != 128 {
		t.Errorf("after the second reopen: %d ids reserved (%v), want 128", got.IDsReserved, err)
	}
	got, err = s.Transcript(ctx, "dur-1")
	must(t, err)
	equalEntries(t, got, append(slices.Clone(entries), more...))
	gotKV, err = s.LoadKV(ctx, "dur-1")
	must(t, err)
	equalKVs(t, gotKV, []store.KV{
		{Key: "canvas.model", Value: []byte(`"small"`), Rev: 3},
		{Key: "gone", Rev: 9, Deleted: true},
		{Key: "surface:canvas", Value: []byte(`{"shapes": [1, 2, 3]}`), Rev: 7},
	})
}

func testCreateGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	// A time zone other than UTC and sub-millisecond digits, both dropped.
	zone := time.FixedZone("UTC+5", 5*3600)
	created := time.Date(2025, 3, 1, 12, 30, 45, 123_456_789, zone)
	want := store.Session{ID: "s-1", Owner: "alice", Agent: "pi", Title: "Fix the tests", Cwd: "/home/alice/src",
		Status: "starting", Created: created, Updated: created.Add(2 * time.Second)}
	must(t, s.CreateSession(ctx, want))

	got, err := s.GetSession(ctx, "s-1")
	must(t, err)
	want.Created = time.Date(2025, 3, 1, 7, 30, 45, 123_000_000, time.UTC)
	want.Updated = time.Date(2025, 3, 1, 7, 30, 47, 123_000_000, time.UTC)
	equalSession(t, got, want)
	if got.Created.Location() != time.UTC || got.Updated.Location() != time.UTC {
		t.Errorf("times are in %v and %v, want UTC", got.Created.Location(), got.Updated.Location())
	}

	dup := store.Session{ID: "s-1", Owner: "mallory", Title: "taken over"}
	if err := s.CreateSession(ctx, dup); !errors.Is(err, store.ErrExists) {
		t.Errorf("create with a taken id: err = %v, want ErrExists", err)
	}
	got, err = s.GetSession(ctx, "s-1")
	must(t, err)
	equalSession(t, got, want)

	if _, err := s.GetSession(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get unknown id: err = %v, want ErrNotFound", err)
	}

	// The longest id is accepted; ids are opaque bytes.
	long := strings.Repeat("x", store.MaxSessionIDLen)
	for _, id := range []string{long, "with space/and:colon", "ünïcødé", "a"} {
		must(t, s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}))
		got, err := s.GetSession(ctx, id)
		must(t, err)
		if got.ID != id {
			t.Errorf("id %q came back as %q", id, got.ID)
		}
	}
}

func testCreateDefaults(t *testing.T, s store.Store) {
	ctx := context.Background()
	before := time.Now().Truncate(time.Millisecond)
	must(t, s.CreateSession(ctx, store.Session{ID: "d", Owner: "alice"}))
	after := time.Now()
	got, err := s.GetSession(ctx, "d")
	must(t, err)
	if got.Created.Before(before) || got.Created.After(after) {
		t.Errorf("zero Created became %v, want now (between %v and %v)", got.Created, before, after)
	}
	if !got.Updated.Equal(got.Created) {
		t.Errorf("zero Updated became %v, want Created %v", got.Updated, got.Created)
	}
}

func testInvalidArguments(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "ok", Owner: "alice"}))
	badIDs := map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", store.MaxSessionIDLen+1),
		"not utf8": "a\xffb",
		"nul":      "a\x00b",
	}
	for name, id := range badIDs {
		calls := map[string]error{
			"CreateSession":    s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}),
			"UpdateSession":    s.UpdateSession(ctx, id, 0, store.SessionUpdate{}),
			"AppendTranscript": s.AppendTranscript(ctx, id, 0, []store.Entry{{Role: "user", Text: "x"}}),
			"PutKV":            s.PutKV(ctx, id, 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}),
		}
		_, calls["GetSession"] = s.GetSession(ctx, id)
		_, calls["Transcript"] = s.Transcript(ctx, id)
		_, calls["LoadKV"] = s.LoadKV(ctx, id)
		for call, err := range calls {
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s with %s id: err = %v, want ErrInvalid", call, name, err)
			}
		}
	}
	if err := s.CreateSession(ctx, store.Session{ID: "no-owner"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("create without owner: err = %v, want ErrInvalid", err)
	}
	if _, err := s.GetSession(ctx, "no-owner"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused session was stored: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ListSessions(ctx, store.ListQuery{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("list without owner: err = %v, want ErrInvalid", err)
	}
	if _, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("list with negative limit: err = %v, want ErrInvalid", err)
	}
	for _, q := range []store.CountQuery{{}, {Agent: "pi"}, {Agent: "pi", ExcludeEnded: true}} {
		if n, err := s.CountSessions(ctx, q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("count %+v without owner: %d, %v; want ErrInvalid", q, n, err)
		}
	}
	badKV := map[string]store.KV{
		"no key":       {Value: []byte("1"), Rev: 1},
		"rev too high": {Key: "k", Value: []byte("1"), Rev: math.MaxInt64 + 1},
		"not JSON":     {Key: "k", Value: []byte("{nope"), Rev: 1},
		"nil value":    {Key: "k", Rev: 1},
	}
	for name, kv := range badKV {
		if err := s.PutKV(ctx, "ok", 0, []store.KV{kv}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutKV %s: err = %v, want ErrInvalid", name, err)
		}
	}
	badEntries := map[string]store.Entry{
		"tool args not JSON":   {Role: "tool", ToolArgs: []byte("{")},
		"tool result not JSON": {Role: "tool", ToolResult: []byte("nope")},
		"turn id too high":     {Role: "user", TurnID: math.MaxInt64 + 1},
		"prompt id too high":   {Role: "user", PromptID: math.MaxInt64 + 1},
	}
	for name, e := range badEntries {
		if err := s.AppendTranscript(ctx, "ok", 0, []store.Entry{e}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AppendTranscript %s: err = %v, want ErrInvalid", name, err)
		}
	}
	kv, err := s.LoadKV(ctx, "ok")
	must(t, err)
	tr, err := s.Transcript(ctx, "ok")
	must(t, err)
	if len(kv) != 0 || len(tr) != 0 {
		t.Errorf("refused writes left %d kv entries and %d transcript entries", len(kv), len(tr))
	}
	// The highest rev a store can hold is accepted.
	must(t, s.PutKV(ctx, "ok", 0, []store.KV{{Key: "max", Value: []byte("1"), Rev: math.MaxInt64}}))
	kv, err = s.LoadKV(ctx, "ok")
	must(t, err)
	if len(kv) != 1 || kv[0].Rev != math.MaxInt64 {
		t.Errorf("rev MaxInt64 came back as %+v", kv)
	}
	maxIDs := []store.Entry{{Role: "user", TurnID: math.MaxInt64, PromptID: math.MaxInt64, At: ms(1)}}
	must(t, s.AppendTranscript(ctx, "ok", 0, maxIDs))
	tr, err = s.Transcript(ctx, "ok")
	must(t, err)
	equalEntries(t, tr, maxIDs)
}

func testUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := ms(time.Now().Add(-time.Hour).UnixMilli())
	must(t, s.CreateSession(ctx, store.Session{ID: "u", Owner: "alice", Title: "old", Status: "starting", Created: created}))

	prev := created
	title, status := "new title", "ready"
	steps := []struct {
		name string
		u    store.SessionUpdate
		want func(*store.Session)
	}{
		{"title", store.SessionUpdate{Title: &title}, func(s *store.Session) { s.Title = title }},
		{"status", store.SessionUpdate{Status: &status}, func(s *store.Session) { s.Status = status }},
		{"none", store.SessionUpdate{}, func(*store.Session) {}},
		{"both", store.SessionUpdate{Title: ptr(""), Status: ptr("ended")}, func(s *store.Session) { s.Title, s.Status = "", "ended" }},
	}
	want, err := s.GetSession(ctx, "u")
	must(t, err)
	for _, st := range steps {
		// Several updates inside one millisecond must still move Updated.
		for range 3 {
			must(t, s.UpdateSession(ctx, "u", 0, st.u))
			got, err := s.GetSession(ctx, "u")
			must(t, err)
			st.want(&want)
			want.Updated = got.Updated
			equalSession(t, got, want)
			if !got.Updated.After(prev) {
				t.Errorf("update %s: Updated %v did not move past %v", st.name, got.Updated, prev)
			}
			prev = got.Updated
		}
	}

	// A session whose Updated is ahead of the clock still moves forward.
	future := ms(time.Now().Add(time.Hour).UnixMilli())
	must(t, s.CreateSession(ctx, store.Session{ID: "future", Owner: "alice", Created: created, Updated: future}))
	must(t, s.UpdateSession(ctx, "future", 0, store.SessionUpdate{}))
	got, err := s.GetSession(ctx, "future")
	must(t, err)
	if want := future.Add(time.Millisecond); !got.Updated.Equal(want) {
		t.Errorf("Updated ahead of the clock: got %v, want %v", got.Updated, want)
	}

	if err := s.UpdateSession(ctx, "nope", 0, store.SessionUpdate{Title: &title}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update unknown id: err = %v, want ErrNotFound", err)
	}
}

func testListOwnerAndFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := int64(1_750_000_000_000)
	for i, sp := range []struct{ id, owner, agent, cwd string }{
		{"a1", "alice", "pi", "/x"},
		{"a2", "alice", "hello", "/x"},
		{"a3", "alice", "pi", "/y"},
		{"b1", "bob", "pi", "/x"},
		{"b2", "bob", "pi", "/y"},
	} {
		must(t, s.CreateSession(ctx, store.Session{ID: sp.id, Owner: sp.owner, Agent: sp.agent, Cwd: sp.cwd,
			Created: ms(base), Updated: ms(base + int64(i))}))
	}
	for _, tc := range []struct {
		q    store.ListQuery
		want []string
	}{
		{store.ListQuery{Owner: "alice"}, []string{"a3", "a2", "a1"}},
		{store.ListQuery{Owner: "bob"}, []string{"b2", "b1"}},
		{store.ListQuery{Owner: "carol"}, nil},
		{store.ListQuery{Owner: "alice", Agent: "pi"}, []string{"a3", "a1"}},
		{store.ListQuery{Owner: "alice", Cwd: "/x"}, []string{"a2", "a1"}},
		{store.ListQuery{Owner: "alice", Agent: "pi", Cwd: "/x"}, []string{"a1"}},
		{store.ListQuery{Owner: "bob", Agent: "hello"}, nil},
	} {
		got, next, err := s.ListSessions(ctx, tc.q)
		must(t, err)
		if ids := idsOf(got); !slices.Equal(ids, tc.want) {
			t.Errorf("list %+v = %v, want %v", tc.q, ids, tc.want)
		}
		if next != "" {
			t.Errorf("list %+v: next cursor %q on the only page", tc.q, next)
		}
	}
	got, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Agent: "hello"})
	must(t, err)
	want, err := s.GetSession(ctx, "a2")
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("list alice/hello: %d sessions, want 1", len(got))
	}
	equalSession(t, got[0], want)
}

func testListOrderAndPaging(t *testing.T, s store.Store) {
	ctx := context.Background()
	// 23 sessions on 5 distinct times, so that most of them tie on Updated.
	var want []store.Session
	for i := range 23 {
		sess := store.Session{ID: fmt.Sprintf("p%02d", (i*7)%23), Owner: "alice", Agent: "pi",
			Created: ms(1_000), Updated: ms(1_000 + int64(i%5))}
		must(t, s.CreateSession(ctx, sess))
		want = append(want, sess)
	}
	must(t, s.CreateSession(ctx, store.Session{ID: "other", Owner: "bob", Updated: ms(1_002)}))
	slices.SortFunc(want, func(a, b store.Session) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	for _, limit := range []int{1, 4, 5, 22, 23, 24} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			page, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: limit, Cursor: cursor})
			must(t, err)
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			if next != "" && len(page) != limit {
				t.Errorf("limit %d: short page of %d with a next cursor", limit, len(page))
			}
			got = append(got, idsOf(page)...)
			if next == "" {
				break
			}
			cursor = next
		}
		if ids := idsOf(want); !slices.Equal(got, ids) {
			t.Errorf("limit %d: pages gave\n%v\nwant\n%v", limit, got, ids)
		}
	}
}

func testListLimits(t *testing.T, s store.Store) {
	ctx := context.Background()
	n := store.MaxListLimit + 1
	for i := range n {
		must(t, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("l%04d", i), Owner: "alice", Updated: ms(int64(10_000 + i))}))
	}
	page, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice"})
	must(t, err)
	if len(page) != store.DefaultListLimit || next == "" {
		t.Errorf("limit 0: %d sessions, next %q; want %d and a cursor", len(page), next, store.DefaultListLimit)
	}
	page, next, err = s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 10_000})
	must(t, err)
	if len(page) != store.MaxListLimit || next == "" {
		t.Errorf("limit 10000: %d sessions, next %q; want %d and a cursor", len(page), next, store.MaxListLimit)
	}
	page, next, err = s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 10_000, Cursor: next})
	must(t, err)
	if len(page) != 1 || next != "" || page[0].ID != "l0000" {
		t.Errorf("last page: %v next %q; want [l0000] and no cursor", idsOf(page), next)
	}
}

// testListStableUnderUpdates pages through sessions while, between pages,
// sessions both already seen and not yet seen are updated.
func testListStableUnderUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 40
	for i := range n {
		must(t, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("st%02d", i), Owner: "alice",
			Created: ms(5_000), Updated: ms(5_000 + int64(i/3))}))
	}
	seen := map[string]int{}
	updated := map[string]bool{}
	cursor := ""
	title := "touched"
	for page := 0; ; page++ {
		if page > n {
			t.Fatal("paging does not end")
		}
		got, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 7, Cursor: cursor})
		must(t, err)
		if len(got) == 0 {
			t.Fatalf("page %d is empty", page)
		}
		for _, sess := range got {
			seen[sess.ID]++
		}
		// One session of this page and one far ahead of it move to the front.
		for _, id := range []string{got[0].ID, fmt.Sprintf("st%02d", (page*5)%n)} {
			must(t, s.UpdateSession(ctx, id, 0, store.SessionUpdate{Title: &title}))
			updated[id] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for i := range n {
		id := fmt.Sprintf("st%02d", i)
		switch {
		case seen[id] > 1:
			t.Errorf("%s listed %d times", id, seen[id])
		case seen[id] == 0 && !updated[id]:
			t.Errorf("%s was not updated and was skipped", id)
		}
	}
}

// testListConcurrentUpdates pages while another goroutine keeps updating
// a subset of the sessions.
func testListConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 200
	for i := range n {
		must(t, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("c%03d", i), Owner: "alice", Updated: ms(9_000 + int64(i))}))
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("updater: %v", err)
		}
	}()
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			// Only even sessions are ever updated.
			if err := s.UpdateSession(ctx, fmt.Sprintf("c%03d", (i*2)%n), 0, store.SessionUpdate{}); err != nil {
				done <- err
				return
			}
		}
	}()
	seen := map[string]int{}
	for round := range 5 {
		clear(seen)
		cursor := ""
		for page := 0; ; page++ {
			if page > n {
				t.Fatal("paging does not end")
			}
			got, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 9, Cursor: cursor})
			must(t, err)
			for _, sess := range got {
				seen[sess.ID]++
			}
			if next == "" {
				break
			}
			cursor = next
		}
		for i := range n {
			id := fmt.Sprintf("c%03d", i)
			if seen[id] > 1 {
				t.Errorf("round %d: %s listed %d times", round, id, seen[id])
			}
			if i%2 == 1 && seen[id] != 1 {
				t.Errorf("round %d: %s, never updated, listed %d times", round, id, seen[id])
			}
		}
	}
}

func testListBadCursor(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 3 {
		must(t, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("bc%d", i), Owner: "alice"}))
	}
	_, good, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 1})
	must(t, err)
	if good == "" {
		t.Fatal("no cursor for a first page of 1 out of 3")
	}
	b64 := base64.RawURLEncoding.EncodeToString
	for name, c := range map[string]string{
		"not base64":      "%%%not base64%%%",
		"padded base64":   good + "==",
		"truncated":       good[:len(good)/2],
		"extended":        good + "QUFB",
		"random":          b64([]byte("\x00\x01garbage\xff")),
		"json":            b64([]byte(`{"updated":1,"id":"bc1"}`)),
		"empty id":        b64([]byte("s1:123:")),
		"id too long":     b64([]byte("s1:123:" + strings.Repeat("x", store.MaxSessionIDLen+1))),
		"number too long": b64([]byte("s1:99999999999999999999999:bc1")),
		"whitespace":      " " + good,
	} {
		page, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Cursor: c})
		if !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %s (%q): err = %v (page %v, next %q), want ErrBadCursor", name, c, err, idsOf(page), next)
			continue
		}
		if !strings.Contains(err.Error(), "cursor") {
			t.Errorf("cursor %s: error %q does not say what is wrong", name, err)
		}
	}
}

// countCase is a count and the number it must give.
type countCase struct {
	q    store.CountQuery
	want int
}

// checkCounts runs every case of counts.
func checkCounts(t testing.TB, s store.Store, what string, counts []countCase) {
	t.Helper()
	for _, c := range counts {
		n, err := s.CountSessions(context.Background(), c.q)
		if err != nil {
			t.Errorf("%s: count %+v: %v", what, c.q, err)
		} else if n != c.want {
			t.Errorf("%s: count %+v = %d, want %d", what, c.q, n, c.want)
		}
	}
}

func testCount(t *testing.T, s store.Store) {
	ctx := context.Background()
	// Only the exact status "ended" is ended: other statuses, the empty
	// one, other cases and near misses are live.
	for _, sp := range []struct{ id, owner, agent, status string }{
		{"a1", "alice", "pi", "ready"},
		{"a2", "alice", "pi", store.StatusEnded},
		{"a3", "alice", "pi", "idle"},
		{"a4", "alice", "hello", "starting"},
		{"a5", "alice", "hello", store.StatusEnded},
		{"a6", "alice", "hello", "error"},
		{"a7", "alice", "", ""},
		{"a8", "alice", "pi", "Ended"},
		{"a9", "alice", "pi", "ended "},
		{"b1", "bob", "pi", "ready"},
		{"b2", "bob", "pi", store.StatusEnded},
		{"b3", "bob", "hello", "ready"},
		// Owners and agents are compared whole, byte for byte.
		{"c1", "alice2", "pi", "ready"},
		{"c2", "Alice", "pi", "ready"},
		{"c3", "alice", "pi2", "ready"},
	} {
		must(t, s.CreateSession(ctx, store.Session{ID: sp.id, Owner: sp.owner, Agent: sp.agent, Status: sp.status}))
	}
	checkCounts(t, s, "created", []countCase{
		{store.CountQuery{Owner: "alice"}, 10},
		{store.CountQuery{Owner: "alice", ExcludeEnded: true}, 8},
		{store.CountQuery{Owner: "alice", Agent: "pi"}, 5},
		{store.CountQuery{Owner: "alice", Agent: "pi", ExcludeEnded: true}, 4},
		{store.CountQuery{Owner: "alice", Agent: "hello"}, 3},
		{store.CountQuery{Owner: "alice", Agent: "hello", ExcludeEnded: true}, 2},
		{store.CountQuery{Owner: "alice", Agent: "pi2"}, 1},
		{store.CountQuery{Owner: "alice", Agent: "nope"}, 0},
		{store.CountQuery{Owner: "bob"}, 3},
		{store.CountQuery{Owner: "bob", ExcludeEnded: true}, 2},
		{store.CountQuery{Owner: "bob", Agent: "pi"}, 2},
		{store.CountQuery{Owner: "bob", Agent: "pi", ExcludeEnded: true}, 1},
		{store.CountQuery{Owner: "alice2"}, 1},
		{store.CountQuery{Owner: "Alice"}, 1},
		{store.CountQuery{Owner: "carol"}, 0},
		{store.CountQuery{Owner: "carol", ExcludeEnded: true}, 0},
		{store.CountQuery{Owner: "alic"}, 0},
	})

	// A count agrees with the listing of the same sessions.
	page, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Agent: "pi"})
	must(t, err)
	live := 0
	for _, sess := range page {
		if sess.Status != store.StatusEnded {
			live++
		}
	}
	if n, err := s.CountSessions(ctx, store.CountQuery{Owner: "alice", Agent: "pi", ExcludeEnded: true}); err != nil || n != live {
		t.Errorf("count of alice's live pi sessions: %d, %v; the listing has %d", n, err, live)
	}

	// Transcript and KV writes change no count.
	must(t, s.AppendTranscript(ctx, "a1", 0, sampleEntries(3)))
	must(t, s.PutKV(ctx, "a2", 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}))
	checkCounts(t, s, "after transcript and kv writes", []countCase{
		{store.CountQuery{Owner: "alice"}, 10},
		{store.CountQuery{Owner: "alice", ExcludeEnded: true}, 8},
	})
}

// testCountAfterUpdates moves sessions in and out of "ended", as the
// session actor does, and counts after each step: the counts of other
// owners never move.
func testCountAfterUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, sp := range []struct{ id, owner, agent string }{
		{"u1", "alice", "pi"}, {"u2", "alice", "pi"}, {"u3", "alice", "hello"},
		{"v1", "bob", "pi"}, {"v2", "bob", "hello"},
	} {
		must(t, s.CreateSession(ctx, store.Session{ID: sp.id, Owner: sp.owner, Agent: sp.agent, Status: "starting"}))
	}
	bob := []countCase{
		{store.CountQuery{Owner: "bob"}, 2},
		{store.CountQuery{Owner: "bob", ExcludeEnded: true}, 2},
		{store.CountQuery{Owner: "bob", Agent: "pi", ExcludeEnded: true}, 1},
	}
	status := func(id, st string) {
		t.Helper()
		must(t, s.UpdateSession(ctx, id, 0, store.SessionUpdate{Status: &st}))
	}
	type step struct {
		name                            string
		do                              func()
		all, live, piAll, piLive, hello int
	}
	for _, st := range []step{
		{"created", func() {}, 3, 3, 2, 2, 1},
		{"ready", func() { status("u1", "ready") }, 3, 3, 2, 2, 1},
		{"u1 ended", func() { status("u1", store.StatusEnded) }, 3, 2, 2, 1, 1},
		{"u1 ended again", func() { status("u1", store.StatusEnded) }, 3, 2, 2, 1, 1},
		{"title only", func() { must(t, s.UpdateSession(ctx, "u1", 0, store.SessionUpdate{Title: ptr("t")})) }, 3, 2, 2, 1, 1},
		{"u3 ended", func() { status("u3", store.StatusEnded) }, 3, 1, 2, 1, 0},
		{"u1 back to idle", func() { status("u1", "idle") }, 3, 2, 2, 2, 0},
		{"u2 ended", func() { status("u2", store.StatusEnded) }, 3, 1, 2, 1, 0},
		{"empty update", func() { must(t, s.UpdateSession(ctx, "u2", 0, store.SessionUpdate{})) }, 3, 1, 2, 1, 0},
		{"created ended", func() {
			must(t, s.CreateSession(ctx, store.Session{ID: "u4", Owner: "alice", Agent: "pi", Status: store.StatusEnded}))
		}, 4, 1, 3, 1, 0},
		{"created live", func() {
			must(t, s.CreateSession(ctx, store.Session{ID: "u5", Owner: "alice", Agent: "hello", Status: "starting"}))
		}, 5, 2, 3, 1, 1},
		{"bob's ended", func() { status("v1", store.StatusEnded); status("v1", "ready") }, 5, 2, 3, 1, 1},
	} {
		st.do()
		checkCounts(t, s, st.name, append([]countCase{
			{store.CountQuery{Owner: "alice"}, st.all},
			{store.CountQuery{Owner: "alice", ExcludeEnded: true}, st.live},
			{store.CountQuery{Owner: "alice", Agent: "pi"}, st.piAll},
			{store.CountQuery{Owner: "alice", Agent: "pi", ExcludeEnded: true}, st.piLive},
			{store.CountQuery{Owner: "alice", Agent: "hello", ExcludeEnded: true}, st.hello},
		}, bob...))
	}
}

// testCountConcurrentUpdates counts while other goroutines end and revive
// sessions: every count is a number the sessions could have had, and once
// the writers stop, the count is exact.
func testCountConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 20
	for i := range n {
		must(t, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("cc%02d", i), Owner: "alice", Agent: "pi", Status: "ready"}))
	}
	must(t, s.CreateSession(ctx, store.Session{ID: "other", Owner: "bob", Agent: "pi", Status: "ready"}))
	var wg sync.WaitGroup
	const rounds = 10
	for w := range 4 {
		wg.Go(func() {
			for r := range rounds {
				for i := w; i < n; i += 4 {
					st := store.StatusEnded
					if r%2 == 1 {
						st = "ready"
					}
					if err := s.UpdateSession(ctx, fmt.Sprintf("cc%02d", i), 0, store.SessionUpdate{Status: &st}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			live, err := s.CountSessions(ctx, store.CountQuery{Owner: "alice", ExcludeEnded: true})
			if err != nil {
				t.Error(err)
				return
			}
			all, err := s.CountSessions(ctx, store.CountQuery{Owner: "alice", Agent: "pi"})
			if err != nil {
				t.Error(err)
				return
			}
			if live < 0 || live > n || all != n {
				t.Errorf("while sessions end and revive: %d live of %d, want 0 to %d of %d", live, all, n, n)
				return
			}
		}
	})
	wg.Wait()
	// The last round (odd) left every session ready.
	checkCounts(t, s, "after the writers", []countCase{
		{store.CountQuery{Owner: "alice", ExcludeEnded: true}, n},
		{store.CountQuery{Owner: "bob", ExcludeEnded: true}, 1},
	})
}

func sampleEntries(n int) []store.Entry {
	base := time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)
	var out []store.Entry
	for i := range n {
		e := store.Entry{Role: "assistant", Text: fmt.Sprintf("entry %d: %s", i, strings.Repeat("é", i)), Via: "agent",
			TurnID: uint64(i/3 + 1), At: base.Add(time.Duration(i)*time.Second + 250*time.Millisecond)}
		switch i % 3 {
		case 1:
			e.Role, e.Via, e.PromptID = "user", "browser", uint64(i+100)
			if i%4 == 1 {
				e.AttachmentIDs = []string{"att_first", fmt.Sprintf("att_%d", i)}
			}
		case 2:
			e.Role, e.Text = "tool", ""
			e.ToolCallID, e.ToolName = fmt.Sprintf("call-%d", i), "bash"
			e.ToolArgs = []byte(fmt.Sprintf(`{"command": "echo %d",  "timeout":null}`, i))
			e.ToolResult = []byte(`{"stdout":"ok\n", "code": 0}`)
			e.IsError = i%2 == 0
		}
		out = append(out, e)
	}
	return out
}

func testTranscript(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "t", Owner: "alice"}))
	got, err := s.Transcript(ctx, "t")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("new session has %d transcript entries", len(got))
	}
	want := sampleEntries(12)
	for _, batch := range [][2]int{{0, 3}, {3, 4}, {4, 4}, {4, 12}} {
		must(t, s.AppendTranscript(ctx, "t", 0, want[batch[0]:batch[1]]))
	}
	must(t, s.AppendTranscript(ctx, "t", 0, nil))
	got, err = s.Transcript(ctx, "t")
	must(t, err)
	equalEntries(t, got, want)

	// The caller's slices are not kept: changing them later changes nothing.
	args := []byte(`{"a":1}`)
	must(t, s.AppendTranscript(ctx, "t", 0, []store.Entry{{Role: "tool", ToolArgs: args, At: want[0].At}}))
	copy(args, `{"b":2}`)
	got, err = s.Transcript(ctx, "t")
	must(t, err)
	if last := got[len(got)-1]; string(last.ToolArgs) != `{"a":1}` {
		t.Errorf("stored tool args changed with the caller's slice: %s", last.ToolArgs)
	}
	got[len(got)-1].ToolArgs[1] = 'X'
	again, err := s.Transcript(ctx, "t")
	must(t, err)
	if last := again[len(again)-1]; string(last.ToolArgs) != `{"a":1}` {
		t.Errorf("stored tool args changed with a returned slice: %s", last.ToolArgs)
	}

	// Zero At means now.
	before := time.Now().Truncate(time.Millisecond)
	must(t, s.AppendTranscript(ctx, "t", 0, []store.Entry{{Role: "user", Text: "now"}}))
	got, err = s.Transcript(ctx, "t")
	must(t, err)
	if at := got[len(got)-1].At; at.Before(before) || at.After(time.Now()) || at.Location() != time.UTC {
		t.Errorf("zero At became %v, want now in UTC", at)
	}

	if err := s.AppendTranscript(ctx, "nope", 0, want[:1]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append to unknown session: err = %v, want ErrNotFound", err)
	}
	if err := s.AppendTranscript(ctx, "nope", 0, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append nothing to unknown session: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Transcript(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("transcript of unknown session: err = %v, want ErrNotFound", err)
	}
}

func testTranscriptLargeText(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "big", Owner: "alice"}))
	var b strings.Builder
	for i := 0; b.Len() < 8<<20; i++ {
		fmt.Fprintf(&b, "line %d — ünïcødé, tabs\tand \"quotes\"\n", i)
	}
	big := b.String()
	result := []byte(`{"out":"` + strings.Repeat("x", 2<<20) + `"}`)
	want := []store.Entry{
		{Role: "assistant", Text: big, Via: "agent", At: ms(1)},
		{Role: "tool", ToolCallID: "c", ToolName: "read", ToolResult: result, At: ms(2)},
		{Role: "user", Text: "small", Via: "acp", At: ms(3)},
	}
	must(t, s.AppendTranscript(ctx, "big", 0, want))
	got, err := s.Transcript(ctx, "big")
	must(t, err)
	equalEntries(t, got, want)
}

func testTranscriptIsolation(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, id := range []string{"iso-a", "iso-b", "iso-c"} {
		must(t, s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}))
	}
	all := sampleEntries(10)
	var wantA, wantB []store.Entry
	for i, e := range all {
		if i%3 == 0 {
			must(t, s.AppendTranscript(ctx, "iso-b", 0, []store.Entry{e}))
			wantB = append(wantB, e)
		} else {
			must(t, s.AppendTranscript(ctx, "iso-a", 0, []store.Entry{e}))
			wantA = append(wantA, e)
		}
	}
	got, err := s.Transcript(ctx, "iso-a")
	must(t, err)
	equalEntries(t, got, wantA)
	got, err = s.Transcript(ctx, "iso-b")
	must(t, err)
	equalEntries(t, got, wantB)
	got, err = s.Transcript(ctx, "iso-c")
	must(t, err)
	equalEntries(t, got, nil)
}

func testTranscriptBadBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "tb", Owner: "alice"}))
	good := sampleEntries(3)
	must(t, s.AppendTranscript(ctx, "tb", 0, good[:1]))
	batch := append(slices.Clone(good[1:]), store.Entry{Role: "tool", ToolResult: []byte(`{"half":`)})
	if err := s.AppendTranscript(ctx, "tb", 0, batch); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("batch with a bad entry: err = %v, want ErrInvalid", err)
	}
	got, err := s.Transcript(ctx, "tb")
	must(t, err)
	equalEntries(t, got, good[:1])
}

func testKV(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "kv", Owner: "alice"}))
	got, err := s.LoadKV(ctx, "kv")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("new session has kv %+v", got)
	}
	must(t, s.PutKV(ctx, "kv", 0, []store.KV{
		{Key: "surface:canvas", Value: []byte(`{"v":1}`), Rev: 1},
		{Key: "canvas.model", Value: []byte(`"a"`), Rev: 10},
	}))
	steps := []struct {
		put  store.KV
		want store.KV // what LoadKV then has for the key
	}{
		{store.KV{Key: "surface:canvas", Value: []byte(`{"v":2}`), Rev: 2}, store.KV{Key: "surface:canvas", Value: []byte(`{"v":2}`), Rev: 2}},
		{store.KV{Key: "surface:canvas", Value: []byte(`{"v":"same rev"}`), Rev: 2}, store.KV{Key: "surface:canvas", Value: []byte(`{"v":2}`), Rev: 2}},
		{store.KV{Key: "surface:canvas", Value: []byte(`{"v":"lower"}`), Rev: 1}, store.KV{Key: "surface:canvas", Value: []byte(`{"v":2}`), Rev: 2}},
		{store.KV{Key: "surface:canvas", Value: []byte(`{"v":100}`), Rev: 100}, store.KV{Key: "surface:canvas", Value: []byte(`{"v":100}`), Rev: 100}},
		{store.KV{Key: "canvas.model", Value: []byte(`"b"`), Rev: 0}, store.KV{Key: "canvas.model", Value: []byte(`"a"`), Rev: 10}},
		{store.KV{Key: "new", Value: []byte(`null`), Rev: 0}, store.KV{Key: "new", Value: []byte(`null`), Rev: 0}},
		{store.KV{Key: "new", Value: []byte(`1`), Rev: 0}, store.KV{Key: "new", Value: []byte(`null`), Rev: 0}},
	}
	for _, st := range steps {
		must(t, s.PutKV(ctx, "kv", 0, []store.KV{st.put}))
		got, err := s.LoadKV(ctx, "kv")
		must(t, err)
		i := slices.IndexFunc(got, func(e store.KV) bool { return e.Key == st.want.Key })
		if i < 0 {
			t.Errorf("after put %+v: key %q missing", st.put, st.want.Key)
			continue
		}
		equalKV(t, got[i], st.want)
	}
	got, err = s.LoadKV(ctx, "kv")
	must(t, err)
	if keys := keysOf(got); !slices.Equal(keys, []string{"canvas.model", "new", "surface:canvas"}) {
		t.Errorf("LoadKV keys = %v, want them sorted", keys)
	}

	if err := s.PutKV(ctx, "nope", 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("put to unknown session: err = %v, want ErrNotFound", err)
	}
	if err := s.PutKV(ctx, "nope", 0, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("put nothing to unknown session: err = %v, want ErrNotFound", err)
	}
	if _, err := s.LoadKV(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("load unknown session: err = %v, want ErrNotFound", err)
	}
}

func testKVTombstones(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "tomb", Owner: "alice"}))
	must(t, s.PutKV(ctx, "tomb", 0, []store.KV{{Key: "k", Value: []byte(`"v"`), Rev: 3}}))
	steps := []struct {
		put  store.KV
		want store.KV
	}{
		// A tombstone's value is not kept, whatever the caller passed.
		{store.KV{Key: "k", Value: []byte(`"ignored"`), Rev: 5, Deleted: true}, store.KV{Key: "k", Rev: 5, Deleted: true}},
		{store.KV{Key: "k", Value: []byte(`"equal"`), Rev: 5}, store.KV{Key: "k", Rev: 5, Deleted: true}},
		{store.KV{Key: "k", Value: []byte(`"lower"`), Rev: 4}, store.KV{Key: "k", Rev: 5, Deleted: true}},
		{store.KV{Key: "k", Rev: 4, Deleted: true}, store.KV{Key: "k", Rev: 5, Deleted: true}},
		{store.KV{Key: "k", Value: []byte(`"back"`), Rev: 6}, store.KV{Key: "k", Value: []byte(`"back"`), Rev: 6}},
		{store.KV{Key: "k", Rev: 6, Deleted: true}, store.KV{Key: "k", Value: []byte(`"back"`), Rev: 6}},
		{store.KV{Key: "k", Rev: 7, Deleted: true}, store.KV{Key: "k", Rev: 7, Deleted: true}},
		{store.KV{Key: "k", Rev: 8, Deleted: true}, store.KV{Key: "k", Rev: 8, Deleted: true}},
		// A key never written can start as a tombstone.
		{store.KV{Key: "fresh", Rev: 2, Deleted: true}, store.KV{Key: "fresh", Rev: 2, Deleted: true}},
	}
	for _, st := range steps {
		must(t, s.PutKV(ctx, "tomb", 0, []store.KV{st.put}))
		got, err := s.LoadKV(ctx, "tomb")
		must(t, err)
		i := slices.IndexFunc(got, func(e store.KV) bool { return e.Key == st.want.Key })
		if i < 0 {
			t.Errorf("after put %+v: key %q missing; LoadKV must return tombstones", st.put, st.want.Key)
			continue
		}
		equalKV(t, got[i], st.want)
	}
}

func testKVBatchOrder(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "batch", Owner: "alice"}))
	must(t, s.PutKV(ctx, "batch", 0, []store.KV{
		{Key: "a", Value: []byte("1"), Rev: 1},
		{Key: "a", Value: []byte("3"), Rev: 3},
		{Key: "a", Value: []byte("2"), Rev: 2},
		{Key: "b", Value: []byte("1"), Rev: 1},
		{Key: "b", Rev: 2, Deleted: true},
		{Key: "c", Rev: 1, Deleted: true},
		{Key: "c", Value: []byte(`"c"`), Rev: 2},
	}))
	got, err := s.LoadKV(ctx, "batch")
	must(t, err)
	equalKVs(t, got, []store.KV{
		{Key: "a", Value: []byte("3"), Rev: 3},
		{Key: "b", Rev: 2, Deleted: true},
		{Key: "c", Value: []byte(`"c"`), Rev: 2},
	})
}

func testKVBytesIdentical(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "bytes", Owner: "alice"}))
	values := map[string]string{
		"spaces":   " {\n\t\"b\" : 2 ,\"a\":1 }\n ",
		"unicode":  `{"s":"ünïcødé \u00e9 \ud83d\ude00 😀"}`,
		"escapes":  `"\u0000\"\\\/\b\f\n\r\t"`,
		"number":   `1.50000000000000000001e+300`,
		"dupkeys":  `{"a":1,"a":2}`,
		"big":      `[` + strings.Repeat(`{"k":"0123456789abcdef"},`, 40_000) + `0]`,
		"false":    `false`,
		"emptyobj": `{}`,
	}
	var put []store.KV
	for k, v := range values {
		put = append(put, store.KV{Key: k, Value: []byte(v), Rev: 1})
	}
	must(t, s.PutKV(ctx, "bytes", 0, put))
	for _, e := range put {
		e.Value[0] = '#' // the store must not keep the caller's slice
	}
	got, err := s.LoadKV(ctx, "bytes")
	must(t, err)
	if len(got) != len(values) {
		t.Fatalf("LoadKV returned %d entries, want %d", len(got), len(values))
	}
	for _, e := range got {
		if string(e.Value) != values[e.Key] {
			t.Errorf("key %q: value came back as %.80q, want %.80q", e.Key, e.Value, values[e.Key])
		}
		e.Value[0] = '#' // nor share its own slice with the caller
	}
	again, err := s.LoadKV(ctx, "bytes")
	must(t, err)
	for _, e := range again {
		if string(e.Value) != values[e.Key] {
			t.Errorf("key %q changed through a returned slice", e.Key)
		}
	}
}

func testKVIsolation(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "ka", Owner: "alice"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "kb", Owner: "alice"}))
	must(t, s.PutKV(ctx, "ka", 0, []store.KV{{Key: "k", Value: []byte(`"a"`), Rev: 5}}))
	must(t, s.PutKV(ctx, "kb", 0, []store.KV{{Key: "k", Value: []byte(`"b"`), Rev: 1}}))
	a, err := s.LoadKV(ctx, "ka")
	must(t, err)
	b, err := s.LoadKV(ctx, "kb")
	must(t, err)
	equalKVs(t, a, []store.KV{{Key: "k", Value: []byte(`"a"`), Rev: 5}})
	equalKVs(t, b, []store.KV{{Key: "k", Value: []byte(`"b"`), Rev: 1}})
}

func testKVBadBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "kbad", Owner: "alice"}))
	must(t, s.PutKV(ctx, "kbad", 0, []store.KV{{Key: "a", Value: []byte("1"), Rev: 1}}))
	err := s.PutKV(ctx, "kbad", 0, []store.KV{
		{Key: "a", Value: []byte("2"), Rev: 2},
		{Key: "b", Value: []byte("2"), Rev: 2},
		{Key: "c", Value: []byte("not json"), Rev: 2},
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("batch with a bad value: err = %v, want ErrInvalid", err)
	}
	got, err := s.LoadKV(ctx, "kbad")
	must(t, err)
	equalKVs(t, got, []store.KV{{Key: "a", Value: []byte("1"), Rev: 1}})
}

// testKVBatchOfSessions: a store.Batcher writes several sessions' entries
// in one transaction; an item refused for what it is (a missing session, a
// stale fence, a bad entry) fails alone and writes nothing, the others
// land, a key's rev never goes down. Stores that are not Batchers skip it.
func testKVBatchOfSessions(t *testing.T, s store.Store) {
	b, ok := s.(store.Batcher)
	if !ok {
		t.Skipf("%T is not a store.Batcher", s)
	}
	ctx := context.Background()
	for _, id := range []string{"ba", "bb", "bc", "bd"} {
		must(t, s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}))
	}
	ls := leaser(t, s)
	old, err := ls.AcquireLease(ctx, "bc", "node-1", time.Minute)
	must(t, err)
	must(t, ls.ReleaseLease(ctx, "bc", old.Token))
	cur, err := ls.AcquireLease(ctx, "bd", "node-1", time.Minute)
	must(t, err)
	kv := func(key string, rev uint64) []store.KV {
		return []store.KV{{Key: key, Value: []byte(fmt.Sprint(rev)), Rev: rev}}
	}
	must(t, s.PutKV(ctx, "bb", 0, kv("z", 5)))
	errs, err := b.PutKVBatch(ctx, []store.KVBatch{
		{SessionID: "ba", Entries: append(kv("x", 1), kv("y", 1)...)},
		{SessionID: "missing", Entries: kv("x", 1)},
		{SessionID: "bb", Entries: append(kv("x", 1), kv("z", 4)...)},
		{SessionID: "bc", Fence: store.Fence(old.Token), Entries: kv("x", 1)},
		{SessionID: "bb", Entries: []store.KV{{Key: "", Rev: 2}}},
		{SessionID: "ba", Entries: kv("x", 2)},
		{SessionID: "bd", Fence: store.Fence(cur.Token), Entries: kv("x", 3)},
		{SessionID: "", Entries: kv("x", 1)},
		{SessionID: "missing", Fence: store.Fence(cur.Token)},
	})
	must(t, err)
	want := []error{nil, store.ErrNotFound, nil, store.ErrFenced, store.ErrInvalid, nil, nil, store.ErrInvalid, store.ErrFenced}
	if len(errs) != len(want) {
		t.Fatalf("%d item errors, want %d", len(errs), len(want))
	}
	for i, w := range want {
		if w == nil && errs[i] != nil || w != nil && !errors.Is(errs[i], w) {
			t.Errorf("item %d: %v, want %v", i, errs[i], w)
		}
	}
	for id, want := range map[string][]store.KV{
		"ba": {{Key: "x", Value: []byte("2"), Rev: 2}, {Key: "y", Value: []byte("1"), Rev: 1}},
		"bb": {{Key: "x", Value: []byte("1"), Rev: 1}, {Key: "z", Value: []byte("5"), Rev: 5}},
		"bc": nil,
		"bd": {{Key: "x", Value: []byte("3"), Rev: 3}},
	} {
		got, err := s.LoadKV(ctx, id)
		must(t, err)
		equalKVs(t, got, want)
	}
	// Nothing to write: no transaction, every item answered.
	errs, err = b.PutKVBatch(ctx, []store.KVBatch{{SessionID: "ba", Entries: []store.KV{{Key: "", Rev: 1}}}})
	must(t, err)
	if len(errs) != 1 || !errors.Is(errs[0], store.ErrInvalid) {
		t.Errorf("a batch of one bad item: %v", errs)
	}
}

// testKVConcurrentRevs has writers race on one key with interleaved revs;
// whatever the interleaving, the highest rev must win.
func testKVConcurrentRevs(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "race", Owner: "alice"}))
	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				rev := uint64(i*writers + w + 1)
				// Downward too: a late write-behind must not win.
				if w%2 == 1 {
					rev = uint64((perWriter-1-i)*writers + w + 1)
				}
				if err := s.PutKV(ctx, "race", 0, []store.KV{{Key: "k", Value: []byte(fmt.Sprint(rev)), Rev: rev}}); err != nil {
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
	got, err := s.LoadKV(ctx, "race")
	must(t, err)
	top := uint64(writers * perWriter)
	equalKVs(t, got, []store.KV{{Key: "k", Value: []byte(fmt.Sprint(top)), Rev: top}})
}

// testConcurrency has many goroutines each drive their own session while
// all of them list and read; run it with -race.
func testConcurrency(t *testing.T, s store.Store) {
	ctx := context.Background()
	const workers, rounds = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("conc-%02d", w)
			err := func() error {
				if err := s.CreateSession(ctx, store.Session{ID: id, Owner: fmt.Sprintf("owner-%d", w%3), Agent: "pi"}); err != nil {
					return err
				}
				for r := range rounds {
					if err := s.AppendTranscript(ctx, id, 0, []store.Entry{
						{Role: "user", Text: fmt.Sprintf("%s/%d/a", id, r), At: ms(int64(r))},
						{Role: "assistant", Text: fmt.Sprintf("%s/%d/b", id, r), At: ms(int64(r))},
					}); err != nil {
						return err
					}
					if err := s.PutKV(ctx, id, 0, []store.KV{
						{Key: "shared.name", Value: []byte(fmt.Sprintf(`"%s"`, id)), Rev: uint64(r + 1)},
						{Key: fmt.Sprintf("own.%d", r%4), Value: []byte(fmt.Sprint(r)), Rev: uint64(r + 1)},
					}); err != nil {
						return err
					}
					status := fmt.Sprintf("round-%d", r)
					if err := s.UpdateSession(ctx, id, 0, store.SessionUpdate{Status: &status}); err != nil {
						return err
					}
					if _, _, err := s.ListSessions(ctx, store.ListQuery{Owner: fmt.Sprintf("owner-%d", r%3), Limit: 5}); err != nil {
						return err
					}
					if _, err := s.GetSession(ctx, fmt.Sprintf("conc-%02d", (w+r)%workers)); err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
				}
				return nil
			}()
			if err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for o := range 3 {
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > workers {
				t.Fatal("paging does not end")
			}
			page, next, err := s.ListSessions(ctx, store.ListQuery{Owner: fmt.Sprintf("owner-%d", o), Limit: 4, Cursor: cursor})
			must(t, err)
			total += len(page)
			if next == "" {
				break
			}
			cursor = next
		}
	}
	if total != workers {
		t.Errorf("listing all owners found %d sessions, want %d", total, workers)
	}
	for w := range workers {
		id := fmt.Sprintf("conc-%02d", w)
		sess, err := s.GetSession(ctx, id)
		must(t, err)
		if want := fmt.Sprintf("round-%d", rounds-1); sess.Status != want {
			t.Errorf("%s: status %q, want %q", id, sess.Status, want)
		}
		tr, err := s.Transcript(ctx, id)
		must(t, err)
		if len(tr) != 2*rounds {
			t.Fatalf("%s: %d transcript entries, want %d", id, len(tr), 2*rounds)
		}
		for i, e := range tr {
			if want := fmt.Sprintf("%s/%d/%c", id, i/2, "ab"[i%2]); e.Text != want {
				t.Fatalf("%s: entry %d is %q, want %q", id, i, e.Text, want)
			}
		}
		kv, err := s.LoadKV(ctx, id)
		must(t, err)
		want := []store.KV{
			{Key: "own.0", Value: []byte("24"), Rev: 25},
			{Key: "own.1", Value: []byte("21"), Rev: 22},
			{Key: "own.2", Value: []byte("22"), Rev: 23},
			{Key: "own.3", Value: []byte("23"), Rev: 24},
			{Key: "shared.name", Value: []byte(fmt.Sprintf(`"%s"`, id)), Rev: rounds},
		}
		equalKVs(t, kv, want)
	}
}

func testCanceledContext(t *testing.T, s store.Store) {
	must(t, s.CreateSession(context.Background(), store.Session{ID: "ctx", Owner: "alice"}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.PutKV(ctx, "ctx", 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutKV with a canceled context: err = %v, want context.Canceled", err)
	}
	if err := s.AppendTranscript(ctx, "ctx", 0, []store.Entry{{Role: "user"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendTranscript with a canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := s.GetSession(ctx, "ctx"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetSession with a canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := s.CountSessions(ctx, store.CountQuery{Owner: "alice"}); !errors.Is(err, context.Canceled) {
		t.Errorf("CountSessions with a canceled context: err = %v, want context.Canceled", err)
	}
	kv, err := s.LoadKV(context.Background(), "ctx")
	must(t, err)
	tr, err := s.Transcript(context.Background(), "ctx")
	must(t, err)
	if len(kv) != 0 || len(tr) != 0 {
		t.Errorf("canceled writes were kept: %d kv, %d transcript entries", len(kv), len(tr))
	}
}

func testClose(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "c", Owner: "alice"}))
	must(t, s.Close())
	_, getErr := s.GetSession(ctx, "c")
	_, _, listErr := s.ListSessions(ctx, store.ListQuery{Owner: "alice"})
	_, countErr := s.CountSessions(ctx, store.CountQuery{Owner: "alice"})
	_, trErr := s.Transcript(ctx, "c")
	_, kvErr := s.LoadKV(ctx, "c")
	_, acqErr := leaser(t, s).AcquireLease(ctx, "c", "node", time.Minute)
	_, renErr := leaser(t, s).RenewLease(ctx, "c", 1, time.Minute)
	_, endedErr := s.EndedSessions(ctx, time.Now(), 0)
	for name, err := range map[string]error{
		"DeleteSession":    s.DeleteSession(ctx, "c"),
		"EndedSessions":    endedErr,
		"CreateSession":    s.CreateSession(ctx, store.Session{ID: "d", Owner: "alice"}),
		"GetSession":       getErr,
		"UpdateSession":    s.UpdateSession(ctx, "c", 0, store.SessionUpdate{}),
		"ListSessions":     listErr,
		"CountSessions":    countErr,
		"AppendTranscript": s.AppendTranscript(ctx, "c", 0, []store.Entry{{Role: "user"}}),
		"Transcript":       trErr,
		"PutKV":            s.PutKV(ctx, "c", 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 1}}),
		"LoadKV":           kvErr,
		"AcquireLease":     acqErr,
		"RenewLease":       renErr,
		"ReleaseLease":     leaser(t, s).ReleaseLease(ctx, "c", 1),
	} {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// ms is the time at unix millisecond m, in UTC.
func ms(m int64) time.Time { return time.UnixMilli(m).UTC() }

func idsOf(ss []store.Session) []string {
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	return ids
}

func keysOf(kvs []store.KV) []string {
	var keys []string
	for _, e := range kvs {
		keys = append(keys, e.Key)
	}
	return keys
}

func sortedKVs(kvs []store.KV) []store.KV {
	out := slices.Clone(kvs)
	slices.SortFunc(out, func(a, b store.KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func equalSession(t testing.TB, got, want store.Session) {
	t.Helper()
	if got.ID != want.ID || got.Owner != want.Owner || got.Agent != want.Agent || got.Title != want.Title ||
		got.Cwd != want.Cwd || got.Status != want.Status || !got.Created.Equal(want.Created) || !got.Updated.Equal(want.Updated) ||
		got.IDsReserved != want.IDsReserved {
		t.Errorf("session\n got %+v\nwant %+v", got, want)
	}
}

func equalEntries(t testing.TB, got, want []store.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d transcript entries, want %d", len(got), len(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Role != w.Role || g.Text != w.Text || g.ToolCallID != w.ToolCallID || g.ToolName != w.ToolName ||
			!bytes.Equal(g.ToolArgs, w.ToolArgs) || !bytes.Equal(g.ToolResult, w.ToolResult) || g.IsError != w.IsError ||
			g.Via != w.Via || g.TurnID != w.TurnID || g.PromptID != w.PromptID || !slices.Equal(g.AttachmentIDs, w.AttachmentIDs) ||
			!g.At.Equal(w.At.Truncate(time.Millisecond)) || g.At.Location() != time.UTC {
			t.Errorf("transcript entry %d\n got %.200v\nwant %.200v", i, g, w)
		}
		if (g.ToolArgs == nil) != (len(w.ToolArgs) == 0) || (g.ToolResult == nil) != (len(w.ToolResult) == 0) {
			t.Errorf("transcript entry %d: absent JSON must come back nil: args %v, result %v", i, g.ToolArgs, g.ToolResult)
		}
	}
}

func equalKV(t testing.TB, got, want store.KV) {
	t.Helper()
	if got.Key != want.Key || got.Rev != want.Rev || got.Deleted != want.Deleted || !bytes.Equal(got.Value, want.Value) ||
		(got.Value == nil) != (want.Value == nil) {
		t.Errorf("kv\n got {Key:%q Value:%q Rev:%d Deleted:%v}\nwant {Key:%q Value:%q Rev:%d Deleted:%v}",
			got.Key, got.Value, got.Rev, got.Deleted, want.Key, want.Value, want.Rev, want.Deleted)
	}
}

func equalKVs(t testing.TB, got, want []store.KV) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d kv entries %v, want %d %v", len(got), keysOf(got), len(want), keysOf(want))
		return
	}
	for i := range got {
		equalKV(t, got[i], want[i])
	}
}
