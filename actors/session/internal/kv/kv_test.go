package kv

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/surfaced/surfaced/store"
)

func val(s string) json.RawMessage { return json.RawMessage(s) }

func seqs(ws []*Write) []uint64 {
	out := []uint64{}
	for _, w := range ws {
		out = append(out, w.Seq)
	}
	return out
}

func eq(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRevsContinueFromTheStore(t *testing.T) {
	tb := New(0)
	tb.Load([]store.KV{{Key: "ui.theme", Value: val(`"dark"`), Rev: 4}, {Key: "ui.gone", Rev: 2, Deleted: true}})
	if w := tb.Set("ui.theme", val(`"light"`), false, nil); w.Rev != 5 {
		t.Fatalf("rev %d, want 5", w.Rev)
	}
	if w := tb.Set("ui.gone", val(`1`), false, nil); w.Rev != 3 {
		t.Fatalf("a tombstone's key continues: rev %d, want 3", w.Rev)
	}
	if w := tb.Set("ui.new", val(`1`), false, nil); w.Rev != 1 {
		t.Fatalf("new key rev %d, want 1", w.Rev)
	}
	// Pending writes build on each other.
	if w := tb.Set("ui.theme", nil, true, nil); w.Rev != 6 || w.Value != nil || !w.Deleted {
		t.Fatalf("delete %+v", w)
	}
	if e, _ := tb.Durable("ui.theme"); e.Rev != 4 {
		t.Fatalf("durable rev %d before the store answered, want 4", e.Rev)
	}
}

func TestReleasedInOrder(t *testing.T) {
	tb := New(0)
	a := tb.Set("a.x", val(`1`), false, "A")
	b := tb.Set("b.x", val(`2`), false, "B")
	c := tb.Set("a.x", val(`3`), false, "C")
	// b is durable first: it waits for a.
	if rel, ref := tb.Persisted(b.Seq, nil); len(rel) != 0 || len(ref) != 0 {
		t.Fatalf("released %v refused %v before a", seqs(rel), seqs(ref))
	}
	rel, _ := tb.Persisted(a.Seq, nil)
	if !eq(seqs(rel), []uint64{a.Seq, b.Seq}) {
		t.Fatalf("released %v, want a then b", seqs(rel))
	}
	if tb.Pending() != 1 {
		t.Fatalf("pending %d, want 1", tb.Pending())
	}
	rel, _ = tb.Persisted(c.Seq, nil)
	if !eq(seqs(rel), []uint64{c.Seq}) {
		t.Fatalf("released %v", seqs(rel))
	}
	if e, _ := tb.Durable("a.x"); string(e.Value) != "3" || e.Rev != 2 {
		t.Fatalf("durable %+v", e)
	}
}

func TestRefusedWriteRollsBackItAndLaterWrites(t *testing.T) {
	tb := New(0)
	tb.Load([]store.KV{{Key: "a.x", Value: val(`0`), Rev: 7}})
	a := tb.Set("a.x", val(`1`), false, nil)
	b := tb.Set("a.x", val(`2`), false, nil)
	c := tb.Set("b.x", val(`3`), false, nil)
	if rel, _ := tb.Persisted(a.Seq, nil); len(rel) != 1 {
		t.Fatal("a not released")
	}
	_, ref := tb.Persisted(b.Seq, errors.New("store down"))
	if !eq(seqs(ref), []uint64{b.Seq, c.Seq}) {
		t.Fatalf("refused %v, want b and c", seqs(ref))
	}
	if tb.Pending() != 0 {
		t.Fatalf("pending %d", tb.Pending())
	}
	// The table is what the store has: the next write continues from a.
	if e, _ := tb.Get("a.x"); e.Rev != 8 || string(e.Value) != "1" {
		t.Fatalf("after refusal %+v, want rev 8 value 1", e)
	}
	if _, ok := tb.Get("b.x"); ok {
		t.Fatal("b.x exists after its write was refused")
	}
	if tb.Epoch() != 1 {
		t.Fatalf("epoch %d after a refusal, want 1: the writes queued on top must not be written", tb.Epoch())
	}
	if w := tb.Set("a.x", val(`9`), false, nil); w.Rev != 9 {
		t.Fatalf("next rev %d, want 9 (no gap, no repeat)", w.Rev)
	}
	// A late answer for a refused write changes nothing.
	if rel, ref := tb.Persisted(c.Seq, nil); rel != nil || ref != nil {
		t.Fatal("late answer changed the table")
	}
}

// A write whose outcome is unknown may have landed: the key's next write
// goes above its rev (the store skips a rev it holds already), the others
// keep theirs.
func TestUnknownOutcomeBurnsTheRev(t *testing.T) {
	tb := New(0)
	tb.Load([]store.KV{{Key: "a.x", Value: val(`0`), Rev: 7}})
	a := tb.Set("a.x", val(`1`), false, nil)
	b := tb.Set("b.x", val(`1`), false, nil)
	tb.Burn(a.Key, a.Rev)
	if _, ref := tb.Persisted(a.Seq, errors.New("unknown")); !eq(seqs(ref), []uint64{a.Seq, b.Seq}) {
		t.Fatalf("refused %v", seqs(ref))
	}
	if e, _ := tb.Get("a.x"); e.Rev != 7 || string(e.Value) != "0" {
		t.Fatalf("after the unknown write %+v, want what the store surely has (rev 7)", e)
	}
	if w := tb.Set("a.x", val(`2`), false, nil); w.Rev != 9 {
		t.Fatalf("next rev %d, want 9: above the rev that may have landed", w.Rev)
	}
	if w := tb.Set("b.x", val(`2`), false, nil); w.Rev != 1 {
		t.Fatalf("b.x rev %d, want 1 (its write was never sent)", w.Rev)
	}
}

func TestRefuseAll(t *testing.T) {
	tb := New(0)
	tb.Set("a.x", val(`1`), false, nil)
	tb.Set("a.y", val(`1`), false, nil)
	if n := len(tb.RefuseAll()); n != 2 || tb.Pending() != 0 {
		t.Fatalf("refused %d, pending %d", n, tb.Pending())
	}
}

func TestCommit(t *testing.T) {
	tb := New(0)
	tb.Load([]store.KV{{Key: "surface:demo", Value: val(`{"n":1}`), Rev: 3}})
	if tb.Commit("surface:demo", val(`{"n":0}`), 3, false) {
		t.Fatal("a repeated rev was committed")
	}
	if !tb.Commit("surface:demo", val(`{"n":2}`), 4, false) {
		t.Fatal("rev 4 not committed")
	}
	if e, _ := tb.Get("surface:demo"); string(e.Value) != `{"n":2}` || e.Rev != 4 {
		t.Fatalf("%+v", e)
	}
	if !tb.Commit("surface:new", val(`{}`), 1, false) {
		t.Fatal("new key not committed")
	}
	if got := tb.Keys(); len(got) != 2 || got[0] != "surface:demo" {
		t.Fatalf("keys %v", got)
	}
}
