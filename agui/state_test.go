package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// applyPatch is an RFC 6902 applier for the tests (add, remove, replace),
// independent of the code under test: a client's side.
func applyPatch(doc any, patch []byte) (any, error) {
	var ops []struct {
		Op    string           `json:"op"`
		Path  string           `json:"path"`
		Value *json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	for _, o := range ops {
		var v any
		if o.Value != nil {
			d := json.NewDecoder(bytes.NewReader(*o.Value))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return nil, err
			}
		}
		var err error
		if doc, err = applyOp(doc, tokens(o.Path), o.Op, v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.Op, o.Path, err)
		}
	}
	return doc, nil
}

func tokens(path string) []string {
	if path == "" {
		return nil
	}
	parts := strings.Split(path[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts
}

func applyOp(doc any, toks []string, op string, v any) (any, error) {
	if len(toks) == 0 {
		if op == "remove" {
			return nil, nil
		}
		return v, nil
	}
	switch d := doc.(type) {
	case map[string]any:
		k := toks[0]
		if len(toks) > 1 {
			child, ok := d[k]
			if !ok {
				return nil, fmt.Errorf("no member %q", k)
			}
			nc, err := applyOp(child, toks[1:], op, v)
			d[k] = nc
			return d, err
		}
		_, ok := d[k]
		switch op {
		case "add":
			d[k] = v
		case "replace":
			if !ok {
				return nil, fmt.Errorf("replace of a missing member %q", k)
			}
			d[k] = v
		case "remove":
			if !ok {
				return nil, fmt.Errorf("remove of a missing member %q", k)
			}
			delete(d, k)
		}
		return d, nil
	case []any:
		if len(toks) == 1 && op == "add" && toks[0] == "-" {
			return append(d, v), nil
		}
		i, err := strconv.Atoi(toks[0])
		if err != nil || i < 0 || i > len(d) || (i == len(d) && !(op == "add" && len(toks) == 1)) {
			return nil, fmt.Errorf("bad index %q of %d", toks[0], len(d))
		}
		if len(toks) > 1 {
			nc, err := applyOp(d[i], toks[1:], op, v)
			d[i] = nc
			return d, err
		}
		switch op {
		case "add":
			return append(d[:i], append([]any{v}, d[i:]...)...), nil
		case "replace":
			d[i] = v
			return d, nil
		case "remove":
			return append(d[:i], d[i+1:]...), nil
		}
	}
	return nil, fmt.Errorf("no container at %q", toks[0])
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// randomValue is a random JSON value, nested to depth.
func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(8); {
	case depth <= 0 || n < 3:
		switch r.IntN(5) {
		case 0:
			return json.Number(strconv.FormatInt(r.Int64N(1<<62)-1<<61, 10)) // beyond a float64's integers
		case 1:
			return []string{"a", "b/c", "d~e", "", "ü <&>"}[r.IntN(5)]
		case 2:
			return r.IntN(2) == 0
		case 3:
			return nil
		default:
			return json.Number(strconv.Itoa(r.IntN(10)))
		}
	case n < 5:
		out := make([]any, r.IntN(4))
		for i := range out {
			out[i] = randomValue(r, depth-1)
		}
		return out
	default:
		out := map[string]any{}
		for range r.IntN(4) {
			out[[]string{"count", "log", "a/b", "~x", "k"}[r.IntN(5)]] = randomValue(r, depth-1)
		}
		return out
	}
}

// Every change of a key, rendered as a patch and applied to the document a
// client holds, gives the State's own document: many random changes of
// random values (big integers, keys that need escaping, type changes,
// deletions and re-creations, stale and repeated revs).
func TestStatePatchesReachTheSameDocument(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := NewState(&pb.StateEntries{})
	client := decodeNumbers(t, s.AppendJSON(nil))
	keys := []string{"surface:demo", "ui/theme", "a~b", "plain"}
	revs := map[string]uint64{}
	for i := range 2000 {
		k := keys[r.IntN(len(keys))]
		ev := &pb.StateEvent{Key: k}
		switch x := r.IntN(10); {
		case x == 0:
			ev.Deleted = true
			revs[k]++
			ev.Rev = revs[k]
		case x == 1 && revs[k] > 0:
			// A stale frame: a rev the document has.
			ev.Rev = revs[k]
			ev.Value = []byte(`"stale"`)
		default:
			revs[k]++
			ev.Rev = revs[k]
			ev.Value, _ = json.Marshal(randomValue(r, 3))
		}
		p, err := s.ApplyState(ev)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if p != nil {
			if client, err = applyPatch(client, p); err != nil {
				t.Fatalf("step %d: the patch %s does not apply: %v", i, p, err)
			}
		}
		if want := decodeNumbers(t, s.AppendJSON(nil)); !reflect.DeepEqual(client, want) {
			t.Fatalf("step %d (%s rev %d): the client has\n%v\nthe state is\n%s", i, k, ev.Rev, client, s.AppendJSON(nil))
		}
	}
}

func TestStateDeltas(t *testing.T) {
	s := NewState(&pb.StateEntries{
		Entries:  []*pb.KVEntry{{Key: "surface:demo", Value: []byte(`{"count":3,"log":["a"]}`), Rev: 4}, {Key: "gone", Rev: 9, Deleted: true}},
		Surfaces: []*pb.SurfaceInfo{{Domain: "demo", Commands: []string{"increment"}, Hosted: "agent", Available: true}},
	})
	if got := string(s.AppendJSON(nil)); got != `{"entries":{"surface:demo":{"value":{"count":3,"log":["a"]},"rev":4}},"surfaces":{"demo":{"available":true,"hosted":"agent","commands":["increment"]}}}` {
		t.Fatalf("snapshot %s", got)
	}
	for _, c := range []struct {
		ev   *pb.StateEvent
		want string
	}{
		{&pb.StateEvent{Key: "surface:demo", Value: []byte(`{"count":4,"log":["a","b"]}`), Rev: 5},
			`[{"op":"replace","path":"/entries/surface:demo/value/count","value":4},{"op":"add","path":"/entries/surface:demo/value/log/-","value":"b"},{"op":"replace","path":"/entries/surface:demo/rev","value":5}]`},
		{&pb.StateEvent{Key: "surface:demo", Value: []byte(`{"count":1}`), Rev: 5}, ""}, // a rev it has
		{&pb.StateEvent{Key: "gone", Value: []byte(`1`), Rev: 8}, ""},                   // older than its tombstone
		{&pb.StateEvent{Key: "ui/theme", Value: []byte(`"dark"`), Rev: 1}, `[{"op":"add","path":"/entries/ui~1theme","value":{"value":"dark","rev":1}}]`},
		{&pb.StateEvent{Key: "ui/theme", Deleted: true, Rev: 2}, `[{"op":"remove","path":"/entries/ui~1theme"}]`},
		{&pb.StateEvent{Key: "big", Value: []byte(`9007199254740993`), Rev: 1}, `[{"op":"add","path":"/entries/big","value":{"value":9007199254740993,"rev":1}}]`},
		{&pb.StateEvent{Key: "big", Value: []byte(`9007199254740995`), Rev: 2}, `[{"op":"replace","path":"/entries/big/value","value":9007199254740995},{"op":"replace","path":"/entries/big/rev","value":2}]`},
	} {
		p, err := s.ApplyState(c.ev)
		if err != nil || string(p) != c.want {
			t.Fatalf("%s rev %d: %s %v, want %s", c.ev.Key, c.ev.Rev, p, err, c.want)
		}
	}
	for _, c := range []struct {
		surfaces []*pb.SurfaceInfo
		want     string
	}{
		{[]*pb.SurfaceInfo{{Domain: "demo", Commands: []string{"increment"}, Hosted: "agent"}}, `[{"op":"replace","path":"/surfaces/demo/available","value":false}]`},
		{[]*pb.SurfaceInfo{{Domain: "demo", Commands: []string{"increment"}, Hosted: "agent"}}, ""},
		{[]*pb.SurfaceInfo{{Domain: "demo", Commands: []string{"echo", "increment"}, Hosted: "agent", Available: true}, {Domain: "notes", Hosted: "native", Available: true}},
			`[{"op":"replace","path":"/surfaces/demo","value":{"available":true,"hosted":"agent","commands":["echo","increment"]}},{"op":"add","path":"/surfaces/notes","value":{"available":true,"hosted":"native","commands":[]}}]`},
		{nil, `[{"op":"remove","path":"/surfaces/demo"},{"op":"remove","path":"/surfaces/notes"}]`},
	} {
		if p := s.ApplyStatus(&pb.StatusEvent{Surfaces: c.surfaces}); string(p) != c.want {
			t.Fatalf("status %v: %s, want %s", c.surfaces, p, c.want)
		}
	}
}

func TestPointer(t *testing.T) {
	for in, want := range map[string]string{"a": "/a", "a/b": "/a~1b", "~": "/~0", "~1": "/~01", "": "/"} {
		if got := Pointer(in); got != want {
			t.Errorf("Pointer(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Pointer("entries", "surface:demo", "value"); got != "/entries/surface:demo/value" {
		t.Errorf("Pointer: %q", got)
	}
}
