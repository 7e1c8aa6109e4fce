// Package kv is a session's key-value state — preferences, the agent's keys
// and the surface snapshots its domain actors commit — with its durability
// rule: a write becomes visible (its frame, its answer, the agent's notice)
// only once the store has it, in the order writes were made; a write the
// store refused never becomes visible, and neither does any write made after
// it (they were made on top of it). Every change of a key raises its rev by
// exactly one, as clients see it; after a write whose outcome is unknown
// (it may have landed) the key's next write goes above that rev, so that
// the store never skips it for the one that landed late.
//
// The table's writes are one chain in the store's writer (store.Op.Chain):
// Epoch is the chain's epoch, which moves on when writes are refused, so
// that the writer does not write the ones still queued on top of them.
//
// A Table belongs to the session actor: one goroutine at a time, no locks.
package kv

import (
	"encoding/json"
	"sort"

	"github.com/surfaced/surfaced/store"
)

// Entry is a key's value and rev; a deleted key is a tombstone that keeps
// its rev, so that the key's next write continues above it.
type Entry struct {
	Value   json.RawMessage
	Rev     uint64
	Deleted bool
}

// Write is a write waiting for the store.
type Write struct {
	Seq     uint64
	Key     string
	Value   json.RawMessage // nil when Deleted
	Rev     uint64
	Deleted bool
	// Reply is the caller's note on whom to answer once the write is
	// released or refused (the table does not look at it).
	Reply any
	done  bool
}

// KV is the write as the store takes it.
func (w *Write) KV() store.KV {
	return store.KV{Key: w.Key, Value: w.Value, Rev: w.Rev, Deleted: w.Deleted}
}

// Table is a session's KV. The zero value is not usable; use New.
type Table struct {
	durable map[string]Entry
	pending []*Write
	seq     uint64
	epoch   uint64
	floor   map[string]uint64 // per key, the highest rev that may have landed unknown
}

// New returns an empty table whose writes start at the chain's epoch first
// (the store writer's EpochBase: the session's previous activation on this
// node wrote the same chain).
func New(first uint64) *Table {
	return &Table{durable: map[string]Entry{}, floor: map[string]uint64{}, epoch: first}
}

// Epoch is the epoch of the table's writes in the store writer's chain.
func (t *Table) Epoch() uint64 { return t.epoch }

// Burn records that key's write at rev may have landed without the table
// knowing (its outcome is unknown): the key's next write goes above rev.
func (t *Table) Burn(key string, rev uint64) {
	t.floor[key] = max(t.floor[key], rev)
}

// Load sets the durable state read from the store (tombstones included).
func (t *Table) Load(entries []store.KV) {
	for _, e := range entries {
		t.durable[e.Key] = Entry{Value: e.Value, Rev: e.Rev, Deleted: e.Deleted}
	}
}

// Get returns the key's newest entry, pending writes included: what the next
// write builds on.
func (t *Table) Get(key string) (Entry, bool) {
	for i := len(t.pending) - 1; i >= 0; i-- {
		if w := t.pending[i]; w.Key == key {
			return Entry{Value: w.Value, Rev: w.Rev, Deleted: w.Deleted}, true
		}
	}
	return t.Durable(key)
}

// Durable returns the key's entry as the store has it.
func (t *Table) Durable(key string) (Entry, bool) {
	e, ok := t.durable[key]
	return e, ok
}

// Keys returns the durable keys, sorted (tombstones included).
func (t *Table) Keys() []string {
	keys := make([]string, 0, len(t.durable))
	for k := range t.durable {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Set makes a write of key at its next rev and keeps it pending until
// Persisted says how its store write went. A delete keeps no value.
func (t *Table) Set(key string, value json.RawMessage, deleted bool, reply any) *Write {
	cur, _ := t.Get(key)
	if deleted {
		value = nil
	}
	t.seq++
	w := &Write{Seq: t.seq, Key: key, Value: value, Rev: max(cur.Rev, t.floor[key]) + 1, Deleted: deleted, Reply: reply}
	t.pending = append(t.pending, w)
	return w
}

// Pending is the number of writes waiting for the store.
func (t *Table) Pending() int { return len(t.pending) }

// Persisted records the store's answer for write seq. On success it
// returns the writes now released, in order (this one and the ones after it
// that were already done wait for the ones before them). On failure this
// write and every pending write after it are refused and returned, in order:
// the table is back to what the store has, plus the earlier pending writes,
// and its epoch moves on. An answer for a write no longer pending (refused
// already) changes nothing.
func (t *Table) Persisted(seq uint64, err error) (released, refused []*Write) {
	i := t.index(seq)
	if i < 0 {
		return nil, nil
	}
	if err != nil {
		refused = append(refused, t.pending[i:]...)
		clear(t.pending[i:])
		t.pending = t.pending[:i]
		t.epoch++
		return nil, refused
	}
	t.pending[i].done = true
	n := 0
	for n < len(t.pending) && t.pending[n].done {
		w := t.pending[n]
		t.durable[w.Key] = Entry{Value: w.Value, Rev: w.Rev, Deleted: w.Deleted}
		released = append(released, w)
		n++
	}
	if n > 0 {
		rest := copy(t.pending, t.pending[n:])
		clear(t.pending[rest:])
		t.pending = t.pending[:rest]
	}
	return released, nil
}

// RefuseAll refuses every pending write (the session lost its lease: none of
// them may be acknowledged) and returns them in order.
func (t *Table) RefuseAll() []*Write {
	out := t.pending
	t.pending = nil
	if len(out) > 0 {
		t.epoch++
	}
	return out
}

func (t *Table) index(seq uint64) int {
	for i, w := range t.pending {
		if w.Seq == seq {
			return i
		}
	}
	return -1
}

// Commit records a value another writer made durable (a surface domain
// actor's snapshot). It reports false for a rev not above the one held (a
// stale or repeated commit), which changes nothing.
func (t *Table) Commit(key string, value json.RawMessage, rev uint64, deleted bool) bool {
	if cur, ok := t.durable[key]; ok && rev <= cur.Rev {
		return false
	}
	if deleted {
		value = nil
	}
	t.durable[key] = Entry{Value: value, Rev: rev, Deleted: deleted}
	return true
}
