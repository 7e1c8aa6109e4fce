package delivery

import "testing"

// A subject's streams count against its cap, per cap; a slot given back
// can be taken again; other subjects are not counted.
func TestSlots(t *testing.T) {
	s := NewSlots(func(cap string) int {
		if cap == CapWebSockets {
			return 1
		}
		return 2
	})
	for i, c := range []struct {
		subject, cap string
		ok           bool
	}{
		{"alice", CapEventStreams, true},
		{"alice", CapEventStreams, true},
		{"alice", CapEventStreams, false},
		{"alice", CapWebSockets, true},
		{"alice", CapWebSockets, false},
		{"bob", CapEventStreams, true},
	} {
		if _, ok := s.Take(c.subject, c.cap); ok != c.ok {
			t.Fatalf("take %d (%s %s): %v", i, c.subject, c.cap, ok)
		}
	}
	s.Give("alice", CapEventStreams)
	if limit, ok := s.Take("alice", CapEventStreams); !ok || limit != 2 {
		t.Fatalf("after a give: %d %v", limit, ok)
	}
}
