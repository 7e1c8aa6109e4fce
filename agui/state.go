package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wI2L/jsondiff"

	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// State is a session's state as an AG-UI client sees it, one document:
//
//	{"entries":  {"<key>": {"value": <JSON>, "rev": N}, ...},
//	 "surfaces": {"<domain>": {"available": bool, "hosted": "native"|"agent",
//	              "commands": ["…"]}, ...}}
//
// entries is exactly what GET /api/sessions/{id}/state answers as its
// entries: every KV key that is not deleted, each surface's snapshot
// (surface:<domain>) among them. surfaces are the registered domains and
// whether each takes commands now.
//
// A run keeps one State: the snapshot it began with (STATE_SNAPSHOT), then
// the changes its frames bring, each rendered as the RFC 6902 JSON Patch
// that takes the document from the previous rev of a key to the new one
// (STATE_DELTA). The zero value is an empty state.
type State struct {
	entries  map[string]stateEntry
	deleted  map[string]uint64 // tombstones' revs: an older write is not news
	surfaces map[string]surfaceState
}

type stateEntry struct {
	value json.RawMessage
	rev   uint64
}

type surfaceState struct {
	available bool
	hosted    string
	commands  []string
}

// NewState is the state a session answered GetState with.
func NewState(r *pb.StateEntries) *State {
	s := &State{}
	for _, e := range r.GetEntries() {
		if e.GetDeleted() {
			s.tombstone(e.GetKey(), e.GetRev())
			continue
		}
		s.set(e.GetKey(), e.GetValue(), e.GetRev())
	}
	s.surfaces = surfacesOf(r.GetSurfaces())
	return s
}

func (s *State) set(key string, value []byte, rev uint64) {
	if s.entries == nil {
		s.entries = map[string]stateEntry{}
	}
	s.entries[key] = stateEntry{value: json.RawMessage(value), rev: rev}
	delete(s.deleted, key)
}

func (s *State) tombstone(key string, rev uint64) {
	if s.deleted == nil {
		s.deleted = map[string]uint64{}
	}
	s.deleted[key] = rev
	delete(s.entries, key)
}

func surfacesOf(in []*pb.SurfaceInfo) map[string]surfaceState {
	out := make(map[string]surfaceState, len(in))
	for _, d := range in {
		cmds := slices.Clone(d.GetCommands())
		if cmds == nil {
			cmds = []string{}
		}
		out[d.GetDomain()] = surfaceState{available: d.GetAvailable(), hosted: d.GetHosted(), commands: cmds}
	}
	return out
}

// AppendJSON appends the document.
func (s *State) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"entries":{`...)
	for i, k := range sortedKeys(s.entries) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendEntry(dst, s.entries[k])
	}
	dst = append(dst, `},"surfaces":{`...)
	for i, d := range sortedKeys(s.surfaces) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, d)
		dst = append(dst, ':')
		dst = appendSurface(dst, s.surfaces[d])
	}
	return append(dst, `}}`...)
}

func appendEntry(dst []byte, e stateEntry) []byte {
	dst = append(dst, `{"value":`...)
	dst = append(dst, e.value...)
	dst = append(dst, `,"rev":`...)
	dst = strconv.AppendUint(dst, e.rev, 10)
	return append(dst, '}')
}

func appendSurface(dst []byte, d surfaceState) []byte {
	dst = append(dst, `{"available":`...)
	dst = strconv.AppendBool(dst, d.available)
	dst = append(dst, `,"hosted":`...)
	dst = appendString(dst, d.hosted)
	dst = append(dst, `,"commands":`...)
	return append(appendStrings(dst, d.commands), '}')
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Pointer is the JSON Pointer (RFC 6901) of a document's member named by
// tokens: each token's "~" escaped as "~0" and "/" as "~1".
func Pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		for i := 0; i < len(t); i++ {
			switch t[i] {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(t[i])
			}
		}
	}
	return b.String()
}

// patch collects the operations of one STATE_DELTA.
type patch struct{ ops []byte }

func (p *patch) op(typ, path string, value []byte) {
	if len(p.ops) > 0 {
		p.ops = append(p.ops, ',')
	}
	p.ops = append(p.ops, `{"op":"`...)
	p.ops = append(p.ops, typ...)
	p.ops = append(p.ops, `","path":`...)
	p.ops = appendString(p.ops, path)
	if value != nil {
		p.ops = append(p.ops, `,"value":`...)
		p.ops = append(p.ops, value...)
	}
	p.ops = append(p.ops, '}')
}

// json is the patch document, or nil when it has no operation.
func (p *patch) json() []byte {
	if len(p.ops) == 0 {
		return nil
	}
	return append(append([]byte{'['}, p.ops...), ']')
}

// ApplyState takes a key's change into the document and returns the JSON
// Patch that makes the same change to the document a client holds, or nil
// when the document has it already (a rev it has, or an older one).
func (s *State) ApplyState(ev *pb.StateEvent) ([]byte, error) {
	key, rev := ev.GetKey(), ev.GetRev()
	old, had := s.entries[key]
	if had && rev <= old.rev {
		return nil, nil
	}
	if t, gone := s.deleted[key]; gone && rev <= t {
		return nil, nil
	}
	var p patch
	path := Pointer("entries", key)
	switch {
	case ev.GetDeleted():
		s.tombstone(key, rev)
		if !had {
			return nil, nil
		}
		p.op("remove", path, nil)
	case !had:
		s.set(key, ev.GetValue(), rev)
		p.op("add", path, appendEntry(nil, s.entries[key]))
	default:
		if err := diff(&p, path+"/value", old.value, ev.GetValue()); err != nil {
			return nil, fmt.Errorf("agui: the new value of %q: %w", key, err)
		}
		s.set(key, ev.GetValue(), rev)
		p.op("replace", path+"/rev", strconv.AppendUint(nil, rev, 10))
	}
	return p.json(), nil
}

// ApplyStatus takes the domains a status frame lists into the document and
// returns the JSON Patch of what changed (nil: nothing).
func (s *State) ApplyStatus(ev *pb.StatusEvent) []byte {
	next := surfacesOf(ev.GetSurfaces())
	var p patch
	for _, d := range sortedKeys(s.surfaces) {
		if _, ok := next[d]; !ok {
			p.op("remove", Pointer("surfaces", d), nil)
		}
	}
	for _, d := range sortedKeys(next) {
		was, ok := s.surfaces[d]
		now := next[d]
		switch {
		case !ok:
			p.op("add", Pointer("surfaces", d), appendSurface(nil, now))
		case was.hosted != now.hosted || !slices.Equal(was.commands, now.commands):
			p.op("replace", Pointer("surfaces", d), appendSurface(nil, now))
		case was.available != now.available:
			p.op("replace", Pointer("surfaces", d, "available"), strconv.AppendBool(nil, now.available))
		}
	}
	s.surfaces = next
	return p.json()
}

// diff appends to p the operations that turn the JSON value from into to,
// at prefix: fine-grained (a counter's field replaced, an item appended to
// a list), computed by jsondiff. Numbers are compared as written, so that
// no integer loses digits on the way (a float64 would).
func diff(p *patch, prefix string, from, to []byte) error {
	ops, err := jsondiff.CompareJSON(from, to, jsondiff.UnmarshalFunc(unmarshalNumbers))
	if err != nil {
		return err
	}
	for _, o := range ops {
		var value []byte
		switch o.Type {
		case jsondiff.OperationAdd, jsondiff.OperationReplace, jsondiff.OperationTest:
			if value, err = marshal(o.Value); err != nil {
				return err
			}
		case jsondiff.OperationRemove:
		default:
			// Move and copy are made only by options not used here.
			return fmt.Errorf("unexpected %s operation", o.Type)
		}
		p.op(o.Type, prefix+o.Path, value)
	}
	return nil
}

// marshal writes a value as JSON.stringify would (no HTML escaping).
func marshal(v any) ([]byte, error) { return plainjson.Marshal(v) }

func unmarshalNumbers(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}
