package applied

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func entry(key string, rev uint64, at time.Time) Entry {
	return Entry{Key: key, Fingerprint: Fingerprint("increment", nil), At: at.UnixMilli(), Rev: rev, OK: true,
		Data: json.RawMessage(fmt.Sprintf(`{"count":%d}`, rev))}
}

func TestWindow(t *testing.T) {
	m := New("demo", Limits{Window: time.Minute})
	if _, err := m.Remember(t0, entry("k1", 2, t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remember(t0.Add(30*time.Second), entry("k2", 3, t0.Add(30*time.Second))); err != nil {
		t.Fatal(err)
	}
	if e, ok := m.Lookup(t0.Add(59*time.Second), "k1"); !ok || e.Rev != 2 || string(e.Data) != `{"count":2}` {
		t.Fatalf("inside the window: %+v %v", e, ok)
	}
	if _, ok := m.Lookup(t0.Add(61*time.Second), "k1"); ok {
		t.Fatalf("k1 remembered past the window")
	}
	if _, ok := m.Lookup(t0.Add(61*time.Second), "k2"); !ok {
		t.Fatalf("k2 forgotten inside its window")
	}
	if m.Len() != 1 {
		t.Fatalf("%d entries after k1 expired", m.Len())
	}
}

func TestCountBound(t *testing.T) {
	m := New("demo", Limits{Keys: 4})
	for i := uint64(1); i <= 10; i++ {
		if _, err := m.Remember(t0, entry(fmt.Sprint("k", i), i, t0)); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != 4 {
		t.Fatalf("%d entries, bound 4", m.Len())
	}
	for i := 1; i <= 10; i++ {
		_, ok := m.Lookup(t0, fmt.Sprint("k", i))
		if want := i > 6; ok != want {
			t.Fatalf("k%d remembered: %v, want %v (the newest four)", i, ok, want)
		}
	}
}

func TestByteBound(t *testing.T) {
	const bound = 16 << 10
	m := New("demo", Limits{Bytes: bound, Keys: 1000})
	data := json.RawMessage(`"` + strings.Repeat("x", 900) + `"`) // under Bytes/16
	for i := uint64(1); i <= 100; i++ {
		e := entry(fmt.Sprint("k", i), i, t0)
		e.Data = data
		if _, err := m.Remember(t0, e); err != nil {
			t.Fatal(err)
		}
		if m.Bytes() > bound {
			t.Fatalf("%d bytes after %d entries, bound %d", m.Bytes(), i, bound)
		}
	}
	if _, ok := m.Lookup(t0, "k100"); !ok {
		t.Fatalf("the newest entry is not remembered")
	}
	if _, ok := m.Lookup(t0, "k1"); ok {
		t.Fatalf("the oldest entry outlived the byte bound")
	}
	// A result too large to keep is remembered without its data: the
	// command still happened, and a retry must not run it again.
	big := entry("big", 101, t0)
	big.Data = json.RawMessage(`"` + strings.Repeat("y", bound/8) + `"`)
	row, err := m.Remember(t0, big)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := m.Lookup(t0, "big")
	if !ok || !e.DataOmitted || e.Data != nil || !e.OK || e.Rev != 101 {
		t.Fatalf("a large result: %+v %v", e, ok)
	}
	if len(row.Value) > 1024 {
		t.Fatalf("the row of a large result is %d bytes", len(row.Value))
	}
}

func TestForget(t *testing.T) {
	m := New("demo", Limits{})
	if _, err := m.Remember(t0, entry("k1", 2, t0)); err != nil {
		t.Fatal(err)
	}
	m.Forget("k1")
	if _, ok := m.Lookup(t0, "k1"); ok || m.Len() != 0 || m.Bytes() != 0 {
		t.Fatalf("after Forget: len %d bytes %d", m.Len(), m.Bytes())
	}
	m.Forget("nothing") // no-op
}

// The rows written with the snapshots bring the memory back in another
// activation (another node): same results, same bounds, nothing else.
func TestPersistenceRoundTrip(t *testing.T) {
	lim := Limits{Keys: 8, Window: time.Hour}
	m := New("demo", lim)
	rows := map[string]store.KV{} // the store: one row per key, raise-only revs
	put := func(r store.KV) {
		if old, ok := rows[r.Key]; ok && old.Rev >= r.Rev {
			return
		}
		rows[r.Key] = r
	}
	for i := uint64(2); i <= 21; i++ {
		e := entry(fmt.Sprint("k", i), i, t0.Add(time.Duration(i)*time.Second))
		if i == 5 {
			e.OK, e.Data, e.Code, e.Message = false, nil, "nope", "failed on purpose"
		}
		r, err := m.Remember(t0.Add(time.Duration(i)*time.Second), e)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := DomainOf(r.Key); !ok || d != "demo" || r.Rev != i {
			t.Fatalf("row %q rev %d for rev %d", r.Key, r.Rev, i)
		}
		put(r)
	}
	if len(rows) != lim.Keys {
		t.Fatalf("%d rows in the store, want one per slot (%d)", len(rows), lim.Keys)
	}
	var load []store.KV
	for _, r := range rows {
		load = append(load, r)
	}
	// Rows of another domain, a broken row and a tombstone are skipped.
	load = append(load,
		store.KV{Key: RowKey("other", 1), Value: []byte(`{"key":"o1","rev":1}`), Rev: 1},
		store.KV{Key: RowKey("demo", 99), Value: []byte(`not json`), Rev: 99},
		store.KV{Key: RowKey("demo", 98), Deleted: true, Rev: 98})
	m2 := New("demo", lim)
	m2.Load(t0.Add(30*time.Second), load)
	if m2.Len() != m.Len() {
		t.Fatalf("loaded %d entries, had %d", m2.Len(), m.Len())
	}
	for i := uint64(2); i <= 21; i++ {
		key := fmt.Sprint("k", i)
		want, had := m.Lookup(t0.Add(30*time.Second), key)
		got, ok := m2.Lookup(t0.Add(30*time.Second), key)
		if ok != had || ok && (got.Rev != want.Rev || string(got.Data) != string(want.Data) || got.OK != want.OK || got.Fingerprint != want.Fingerprint) {
			t.Fatalf("%s: loaded %+v %v, had %+v %v", key, got, ok, want, had)
		}
	}
	if _, ok := m2.Lookup(t0, "o1"); ok {
		t.Fatalf("another domain's row was loaded")
	}
	// The window applies to what is loaded.
	m3 := New("demo", Limits{Keys: 8, Window: time.Minute})
	m3.Load(t0.Add(time.Minute+17*time.Second), load)
	for i := uint64(2); i <= 21; i++ {
		_, ok := m3.Lookup(t0.Add(time.Minute+17*time.Second), fmt.Sprint("k", i))
		if want := i >= 17; ok != want {
			t.Fatalf("k%d after loading past part of the window: %v, want %v", i, ok, want)
		}
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		key    string
		domain string
		ok     bool
	}{
		{RowKey("demo", 3), "demo", true},
		{RowKey("a:b", 12), "a:b", true},
		{RowKey("", 0), "", true},
		{"surface:demo", "", false},
		{KeyPrefix + "x:demo", "", false},
		{KeyPrefix + ":demo", "", false},
		{KeyPrefix + "12", "", false},
	} {
		d, ok := DomainOf(tc.key)
		if d != tc.domain || ok != tc.ok {
			t.Errorf("DomainOf(%q) = %q %v, want %q %v", tc.key, d, ok, tc.domain, tc.ok)
		}
	}
	if Fingerprint("increment", []byte(`{"by":1}`)) == Fingerprint("increment", []byte(`{"by":2}`)) ||
		Fingerprint("a", []byte("bc")) == Fingerprint("ab", []byte("c")) {
		t.Fatalf("fingerprints collide")
	}
}

// A slot holds one result in the store, so in the memory too; Row rewrites
// a slot as the memory has it, a tombstone when it holds nothing.
func TestSlotRows(t *testing.T) {
	m := New("demo", Limits{Keys: 4})
	if _, err := m.Remember(t0, entry("k3", 3, t0)); err != nil {
		t.Fatal(err)
	}
	row, err := m.Remember(t0, entry("k7", 7, t0))
	if err != nil {
		t.Fatal(err)
	}
	if row.Key != RowKey("demo", 3) {
		t.Fatalf("k7's row %q, want slot 3's", row.Key)
	}
	if _, ok := m.Lookup(t0, "k3"); ok {
		t.Fatalf("k3 remembered after k7's row overwrote its slot")
	}
	r, err := m.Row(3, 9)
	if err != nil || r.Deleted || r.Rev != 9 || r.Key != RowKey("demo", 3) {
		t.Fatalf("slot 3 rewritten: %+v %v", r, err)
	}
	var e Entry
	if err := json.Unmarshal(r.Value, &e); err != nil || e.Key != "k7" || e.Rev != 7 {
		t.Fatalf("slot 3 rewritten with %s (%v), want k7's result at rev 7", r.Value, err)
	}
	m.Forget("k7")
	if r, err := m.Row(3, 10); err != nil || !r.Deleted || r.Rev != 10 || r.Value != nil {
		t.Fatalf("an empty slot rewritten: %+v %v, want a tombstone at rev 10", r, err)
	}
	// A tombstone loads as nothing.
	m2 := New("demo", Limits{Keys: 4})
	m2.Load(t0, []store.KV{{Key: RowKey("demo", 3), Rev: 10, Deleted: true}})
	if m2.Len() != 0 {
		t.Fatalf("%d entries loaded", m2.Len())
	}
}
