package surfaced

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLeaseConflicts(t *testing.T) {
	const ttl = 6 * time.Second
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	self := "10.0.0.3:7900"
	all := []string{"10.0.0.1:7900", "10.0.0.2:7900", self}

	// observation: at this node's time, the lease of session held by holder
	// until expires (the store's time).
	type obs struct {
		at      time.Duration
		session string
		holder  string
		expires time.Duration
	}
	// every other member holding s1 for long, seen from this node in a
	// cluster of two.
	other := "10.0.0.1:7900"
	heldLong := []obs{
		{0, "s1", other + "#a", 5 * time.Second},
		{7 * time.Second, "s1", other + "#a", 12 * time.Second},
		{13 * time.Second, "s1", other + "#a", 18 * time.Second},
	}
	cases := []struct {
		name string
		view []string
		obs  []obs
		now  time.Duration
		// places is where each member's own view places the session it is
		// asked about; a member missing does not answer.
		places map[string]string
		want   bool
		why    string
	}{
		{
			name: "a dead node's lease: never renewed, it expires and the session moves here",
			view: []string{self},
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{time.Second, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{4 * time.Second, "s1", "10.0.0.1:7900#a", 5 * time.Second},
			},
			now: 4 * time.Second,
		},
		{
			name: "a holder missing from a view of one, renewing: this node is cut off",
			view: []string{self},
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{2 * time.Second, "s1", "10.0.0.1:7900#a", 7 * time.Second},
			},
			now:  2 * time.Second,
			want: true,
			why:  "10.0.0.1:7900",
		},
		{
			name: "the larger part sees a live holder outside its view: the other side leaves, not this one",
			view: []string{"10.0.0.1:7900", self},
			obs: []obs{
				{0, "s1", "10.0.0.2:7900#b", 5 * time.Second},
				{2 * time.Second, "s1", "10.0.0.2:7900#b", 7 * time.Second},
				{30 * time.Second, "s1", "10.0.0.2:7900#b", 35 * time.Second},
			},
			now: 30 * time.Second,
		},
		{
			name: "two live holders outside a view of two: most of the cluster is elsewhere",
			view: []string{"10.0.0.4:7900", self},
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{0, "s2", "10.0.0.2:7900#b", 5 * time.Second},
				{2 * time.Second, "s1", "10.0.0.1:7900#a", 7 * time.Second},
				{2 * time.Second, "s2", "10.0.0.2:7900#b", 7 * time.Second},
			},
			now:  2 * time.Second,
			want: true,
		},
		{
			name: "a live holder in view, briefly: a hand-over",
			view: all,
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{2 * time.Second, "s1", "10.0.0.1:7900#a", 7 * time.Second},
				{9 * time.Second, "s1", "10.0.0.1:7900#a", 14 * time.Second},
			},
			now: 9 * time.Second,
		},
		{
			name: "one live holder in view for long: two views converging slowly, either may be stale",
			view: all,
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{7 * time.Second, "s1", "10.0.0.1:7900#a", 12 * time.Second},
				{13 * time.Second, "s1", "10.0.0.1:7900#a", 18 * time.Second},
			},
			now: 13 * time.Second,
		},
		{
			name: "every other member in view holds a session placed here, for long: this node is the odd one out",
			view: all,
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{time.Second, "s2", "10.0.0.2:7900#b", 6 * time.Second},
				{7 * time.Second, "s1", "10.0.0.1:7900#a", 12 * time.Second},
				{8 * time.Second, "s2", "10.0.0.2:7900#b", 13 * time.Second},
				{13 * time.Second, "s1", "10.0.0.1:7900#a", 18 * time.Second},
				{14 * time.Second, "s2", "10.0.0.2:7900#b", 19 * time.Second},
			},
			now:    14 * time.Second,
			places: map[string]string{"10.0.0.1:7900": "10.0.0.1:7900"},
			want:   true,
			why:    "s2",
		},
		{
			name:   "every other member holds one for long, and one of them places its session here: a stray, not this node",
			view:   all,
			obs:    []obs{{0, "s1", "10.0.0.1:7900#a", 5 * time.Second}, {time.Second, "s2", "10.0.0.2:7900#b", 6 * time.Second}, {7 * time.Second, "s1", "10.0.0.1:7900#a", 12 * time.Second}, {8 * time.Second, "s2", "10.0.0.2:7900#b", 13 * time.Second}, {13 * time.Second, "s1", "10.0.0.1:7900#a", 18 * time.Second}, {14 * time.Second, "s2", "10.0.0.2:7900#b", 19 * time.Second}},
			now:    14 * time.Second,
			places: map[string]string{"10.0.0.1:7900": "10.0.0.2:7900", "10.0.0.2:7900": self},
		},
		{
			name:   "two nodes: the other holds a session placed here for long, and its own view places it here too: its activation is a stray; this node stays",
			view:   []string{other, self},
			obs:    heldLong,
			now:    13 * time.Second,
			places: map[string]string{other: self},
			why:    "stray",
		},
		{
			name:   "two nodes: the other holds it and places it on itself: it does not see this node (it blocked it); this node is out of step",
			view:   []string{other, self},
			obs:    heldLong,
			now:    13 * time.Second,
			places: map[string]string{other: other},
			want:   true,
			why:    "placed on " + other,
		},
		{
			name: "two nodes: the other holds it and does not answer: no proof that this node is in step",
			view: []string{other, self},
			obs:  heldLong,
			now:  13 * time.Second,
			want: true,
			why:  "no answer",
		},
		{
			name: "every other member holds one, but not yet for two leases",
			view: all,
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{time.Second, "s2", "10.0.0.2:7900#b", 6 * time.Second},
				{7 * time.Second, "s1", "10.0.0.1:7900#a", 12 * time.Second},
				{8 * time.Second, "s2", "10.0.0.2:7900#b", 13 * time.Second},
			},
			now: 8 * time.Second,
		},
		{
			name: "an earlier member at this node's own address is not a live node",
			view: []string{self},
			obs: []obs{
				{0, "s1", self + "#old", 5 * time.Second},
				{2 * time.Second, "s1", self + "#old", 7 * time.Second},
			},
			now: 2 * time.Second,
		},
		{
			name: "conflicts long past are forgotten",
			view: []string{self},
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{2 * time.Second, "s1", "10.0.0.1:7900#a", 7 * time.Second},
			},
			now: 2*time.Second + 19*time.Second,
		},
		{
			name: "a new holder starts over: one renewal by each is no proof",
			view: []string{self},
			obs: []obs{
				{0, "s1", "10.0.0.1:7900#a", 5 * time.Second},
				{6 * time.Second, "s1", "10.0.0.2:7900#b", 11 * time.Second},
			},
			now: 6 * time.Second,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newLeaseConflicts(ttl)
			for _, o := range tc.obs {
				c.observe(at(o.at), o.session, o.holder, at(o.expires))
			}
			ask := func(addr, session string) (string, error) {
				if owner, ok := tc.places[addr]; ok {
					return owner, nil
				}
				return "", errors.New("no answer")
			}
			got, why := c.outOfStep(at(tc.now), self, tc.view, ask)
			if got != tc.want {
				t.Fatalf("out of step = %v (%s), want %v", got, why, tc.want)
			}
			if !got && tc.why == "" && why != "" && !strings.Contains(why, "stray") {
				t.Fatalf("in step, with why %q", why)
			}
			if tc.why != "" && !strings.Contains(why, tc.why) {
				t.Fatalf("why %q does not name %q", why, tc.why)
			}
		})
	}
}
