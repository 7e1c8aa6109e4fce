// Package applied is a surface domain's memory of the commands it applied:
// the result of each keyed command that changed the domain's state, by the
// command's idempotency key, so that a retry of the command (a client's, or
// the cluster directory's after a node died) is answered with what happened
// to it instead of running again.
//
// The memory is kept for a window and bounded in count and bytes. It is
// durable with the snapshot: the write of the snapshot a keyed command
// produced carries the command's entry as a KV row of its own, in the same
// store write, so that both land or neither. The row's key is the domain's
// slot rev mod Keys, so a domain never has more than Keys rows, each
// overwritten in turn; an activation on another node loads them back.
package applied

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/surfaced/surfaced/internal/plainjson"
	"github.com/surfaced/surfaced/store"
)

// Defaults of Limits.
const (
	DefaultWindow = 10 * time.Minute
	DefaultKeys   = 256
	DefaultBytes  = 256 << 10
)

// Limits bound a domain's memory. Zero values take the defaults.
type Limits struct {
	// Window is how long a result is remembered.
	Window time.Duration
	// Keys is how many results are remembered at most (and how many rows
	// the domain keeps in the store).
	Keys int
	// Bytes bounds the remembered results (keys, data, messages). A result
	// whose data alone is over Bytes/16 is remembered without its data.
	Bytes int
}

// WithDefaults fills in the zero values.
func (l Limits) WithDefaults() Limits {
	if l.Window <= 0 {
		l.Window = DefaultWindow
	}
	if l.Keys <= 0 {
		l.Keys = DefaultKeys
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultBytes
	}
	return l
}

// KeyPrefix prefixes the KV rows of the memory: the daemon's own namespace,
// which neither clients nor agents may write.
const KeyPrefix = "surfaced:applied:"

// RowKey is the KV key of a domain's slot.
func RowKey(domain string, slot int) string {
	return KeyPrefix + strconv.Itoa(slot) + ":" + domain
}

// DomainOf returns the domain of a memory row's key.
func DomainOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", false
	}
	slot, domain, ok := strings.Cut(rest, ":")
	if !ok || slot == "" || strings.Trim(slot, "0123456789") != "" {
		return "", false
	}
	return domain, true
}

// Fingerprint identifies a command's action and args: a key sent again with
// another command is not a retry.
func Fingerprint(action string, args []byte) string {
	h := fnv.New64a()
	h.Write([]byte(action))
	h.Write([]byte{0})
	h.Write(args)
	return strconv.FormatUint(h.Sum64(), 16)
}

// Entry is one remembered result.
type Entry struct {
	Key         string          `json:"key"`
	Fingerprint string          `json:"fp"`
	At          int64           `json:"at"` // unix ms, when it was applied
	Rev         uint64          `json:"rev"`
	OK          bool            `json:"ok"`
	Data        json.RawMessage `json:"data,omitempty"`
	DataOmitted bool            `json:"dataOmitted,omitempty"`
	Code        string          `json:"code,omitempty"`
	Message     string          `json:"message,omitempty"`
}

func (e *Entry) size() int {
	return len(e.Key) + len(e.Fingerprint) + len(e.Data) + len(e.Code) + len(e.Message) + 64
}

// Memory is one domain's memory. It is not safe for concurrent use: its
// domain actor owns it.
type Memory struct {
	domain string
	lim    Limits
	byKey  map[string]*Entry
	bySlot map[int]*Entry // the entry whose row holds each slot
	order  []*Entry       // oldest first
	bytes  int
}

// New returns an empty memory for domain.
func New(domain string, lim Limits) *Memory {
	return &Memory{domain: domain, lim: lim.WithDefaults(), byKey: map[string]*Entry{}, bySlot: map[int]*Entry{}}
}

// Len is how many results are remembered.
func (m *Memory) Len() int { return len(m.order) }

// Bytes is the size of what is remembered, as the bound counts it.
func (m *Memory) Bytes() int { return m.bytes }

// Lookup returns the result remembered for key, if it is within the window
// at now.
func (m *Memory) Lookup(now time.Time, key string) (Entry, bool) {
	m.expire(now)
	e, ok := m.byKey[key]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Remember records e (applied at e.At) and returns the KV row that must be
// written with the snapshot of e.Rev.
func (m *Memory) Remember(now time.Time, e Entry) (store.KV, error) {
	if len(e.Data) > m.lim.Bytes/16 {
		e.Data, e.DataOmitted = nil, true
	}
	value, err := plainjson.Marshal(e)
	if err != nil {
		return store.KV{}, fmt.Errorf("applied: encode the result of %q: %w", e.Key, err)
	}
	m.add(&e)
	m.expire(now)
	return store.KV{Key: RowKey(m.domain, m.Slot(e.Rev)), Value: value, Rev: e.Rev}, nil
}

// Slot is the slot of the row of a result applied at rev.
func (m *Memory) Slot(rev uint64) int { return int(rev % uint64(m.lim.Keys)) }

// Row returns slot's row as the memory has it, to be written at rev: the
// result remembered in the slot, or a tombstone when none is. A domain
// rewrites the slot of a result it forgot whose write may have landed (its
// outcome was unknown), so that the store never remembers a command the
// domain's state does not hold.
func (m *Memory) Row(slot int, rev uint64) (store.KV, error) {
	key := RowKey(m.domain, slot)
	if e, ok := m.bySlot[slot]; ok {
		value, err := plainjson.Marshal(e)
		if err != nil {
			return store.KV{}, fmt.Errorf("applied: encode the result of %q: %w", e.Key, err)
		}
		return store.KV{Key: key, Value: value, Rev: rev}, nil
	}
	return store.KV{Key: key, Rev: rev, Deleted: true}, nil
}

// Forget drops the result remembered for key: its write failed, so the
// command did not happen.
func (m *Memory) Forget(key string) {
	e, ok := m.byKey[key]
	if !ok {
		return
	}
	m.unindex(e)
	// The oldest (a slot reused) and the newest (a rollback) are the
	// common cases; the scan is for the rest.
	switch n := len(m.order); {
	case n > 0 && m.order[0] == e:
		m.order[0] = nil
		m.order = m.order[1:]
	case n > 0 && m.order[n-1] == e:
		m.order[n-1] = nil
		m.order = m.order[:n-1]
	default:
		m.order = slices.DeleteFunc(m.order, func(x *Entry) bool { return x == e })
	}
}

// unindex removes e from the indexes and the byte count.
func (m *Memory) unindex(e *Entry) {
	delete(m.byKey, e.Key)
	if m.bySlot[m.Slot(e.Rev)] == e {
		delete(m.bySlot, m.Slot(e.Rev))
	}
	m.bytes -= e.size()
}

// Load restores the memory from the domain's rows as the store returned
// them; rows that do not parse or are past the window are skipped.
func (m *Memory) Load(now time.Time, rows []store.KV) {
	var entries []*Entry
	for _, r := range rows {
		if r.Deleted {
			continue
		}
		if d, ok := DomainOf(r.Key); !ok || d != m.domain {
			continue
		}
		var e Entry
		if json.Unmarshal(r.Value, &e) != nil || e.Key == "" {
			continue
		}
		entries = append(entries, &e)
	}
	slices.SortFunc(entries, func(a, b *Entry) int { return cmpUint(a.Rev, b.Rev) })
	for _, e := range entries {
		m.add(e)
	}
	m.expire(now)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *Memory) add(e *Entry) {
	m.Forget(e.Key)
	// The row of e overwrites its slot's: what the slot held is gone from
	// the store, so it is gone from the memory too.
	slot := m.Slot(e.Rev)
	if x, ok := m.bySlot[slot]; ok {
		m.Forget(x.Key)
	}
	m.byKey[e.Key] = e
	m.bySlot[slot] = e
	m.order = append(m.order, e)
	m.bytes += e.size()
	for len(m.order) > m.lim.Keys || m.bytes > m.lim.Bytes && len(m.order) > 1 {
		m.dropOldest()
	}
}

// expire drops what is past the window.
func (m *Memory) expire(now time.Time) {
	cutoff := now.Add(-m.lim.Window).UnixMilli()
	for len(m.order) > 0 && m.order[0].At < cutoff {
		m.dropOldest()
	}
}

func (m *Memory) dropOldest() {
	e := m.order[0]
	m.order[0] = nil
	m.order = m.order[1:]
	m.unindex(e)
}
