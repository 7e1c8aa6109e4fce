package surfaced

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// leaseConflicts is what this node learns from the activations it refused
// because another node held the session's lease, and what it concludes from
// them: whether this node is out of step with the cluster (its view of the
// members disagrees with the others', so the cluster places sessions here
// that live nodes hold).
//
// A conflict alone proves nothing: a node that died leaves leases behind
// until they expire, and a hand-over during rebalancing takes a moment. A
// holder that renews the lease while this node keeps being asked for the
// session is alive, though; the lease's expiry moving forward (by the
// store's clock) is the proof, whatever the clocks of the nodes say. Two
// views that disagree see the same conflict from both sides, so a node acts
// only when it is the odd one out:
//
//   - live holders missing from this node's view, at least as many as the
//     members it sees: most of the cluster is outside its view (the node
//     was frozen or cut off and blocked the others, as they blocked it). A
//     node in the larger part does not act: the smaller part leaves;
//   - every other member it sees holds, alive, the lease of a session the
//     cluster places here, each for longer than two lease lifetimes, and
//     none of them places that session here in its own view (asked, it
//     names another owner, or does not answer): this node disagrees with
//     all of them (they blocked it, it did not block them). One member
//     disagreeing (two views converging slowly while a node restarts) is
//     not enough: either could be the stale one. A holder whose own view
//     places the session here agrees with this node: its activation is a
//     stray (a request that raced a topology change placed it there), which
//     gives itself up (actors/session/lease.go), and the node that is out
//     of step, if any, is the holder. On a cluster of two, where "every
//     other member" is one, this is what keeps the innocent owner from
//     rejoining for nothing.
//
// The zero value is not usable: use newLeaseConflicts.
type leaseConflicts struct {
	ttl time.Duration

	mu   sync.Mutex
	seen map[string]*leaseConflict // by session id
}

// leaseConflict is the lease of one session, held elsewhere, as this node
// saw it.
type leaseConflict struct {
	holder                    string    // the holder's node name: address#member
	firstAt, lastAt           time.Time // when this node saw it (its clock)
	firstExpires, lastExpires time.Time // the lease's expiry (the store's clock)
}

func newLeaseConflicts(ttl time.Duration) *leaseConflicts {
	return &leaseConflicts{ttl: ttl, seen: map[string]*leaseConflict{}}
}

// forget is how long a conflict is kept after it was last seen: longer than
// the lifetime of a lease, so that a renewal can be seen.
func (c *leaseConflicts) forget() time.Duration { return max(3*c.ttl, 10*time.Second) }

// observe records that the cluster placed session here while holder held its
// lease until expires.
func (c *leaseConflicts) observe(now time.Time, session, holder string, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.seen[session]
	if e == nil || e.holder != holder || now.Sub(e.lastAt) > c.forget() {
		e = &leaseConflict{holder: holder, firstAt: now, firstExpires: expires, lastExpires: expires}
		c.seen[session] = e
	}
	e.lastAt = now
	if expires.After(e.lastExpires) {
		e.lastExpires = expires
	}
}

// alive: the holder renewed the lease since this node first saw it.
func (e *leaseConflict) alive() bool { return e.lastExpires.After(e.firstExpires) }

// placement asks the member at addr where its own view of the members
// places session: the owner's address, or an error when it does not
// answer.
type placement func(addr, session string) (owner string, err error)

// outOfStep reports whether the conflicts seen say that this node (at address
// self, seeing the members at the addresses view) is out of step with the
// cluster, and why. It asks holders where they place their sessions (see
// leaseConflicts) only when every other member holds one; when one of them
// places its session here, the node is in step, and why says so.
func (c *leaseConflicts) outOfStep(now time.Time, self string, view []string, ask placement) (bool, string) {
	inView, ok, why := c.judge(now, self, view)
	if ok || len(inView) == 0 {
		return ok, why
	}
	// Every other member holds a session placed here: does any of them
	// place it here too? Asked outside the lock, at once.
	members := sorted(inView)
	owners := make([]string, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owners[i], errs[i] = ask(m, inView[m])
		}()
	}
	wg.Wait()
	var held []string
	for i, m := range members {
		if errs[i] == nil && owners[i] == self {
			// It agrees that the session belongs here: its activation is a
			// stray, and this node is not the one out of step.
			return false, fmt.Sprintf("%s holds the lease of session %s, which its own view places here too: its activation is a stray, which gives itself up",
				m, inView[m])
		}
		seen := "no answer"
		if errs[i] == nil {
			seen = "placed on " + owners[i]
			if owners[i] == "" {
				seen = "placed nowhere"
			}
		}
		held = append(held, fmt.Sprintf("%s (session %s, which its own view has %s)", m, inView[m], seen))
	}
	return true, fmt.Sprintf("every other member this node sees has held, for more than two leases, the lease of a session the cluster places here, and none places it here: %s",
		strings.Join(held, ", "))
}

// judge applies the rules that need no question: out of step (and why)
// when most of the cluster is outside this node's view; otherwise, when
// every other member in view holds a session placed here for long, those
// members and their sessions, for outOfStep to ask; else nothing.
func (c *leaseConflicts) judge(now time.Time, self string, view []string) (inViewHeld map[string]string, out bool, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	outside := map[string]bool{}
	inView := map[string]string{} // member -> a session it holds for long
	for id, e := range c.seen {
		if now.Sub(e.lastAt) > c.forget() {
			delete(c.seen, id)
			continue
		}
		addr, _, _ := strings.Cut(e.holder, "#")
		if !e.alive() || addr == self {
			continue // a dead holder's lease expires; this node's own earlier member is gone
		}
		switch {
		case !slices.Contains(view, addr):
			outside[addr] = true
		case e.lastAt.Sub(e.firstAt) > 2*c.ttl:
			inView[addr] = id
		}
	}
	if len(outside) > 0 && len(outside) >= len(view) {
		return nil, true, fmt.Sprintf("live nodes missing from this node's view hold the leases of sessions placed here (%s), and this node sees only %d member(s)",
			strings.Join(sorted(outside), ", "), len(view))
	}
	others := 0
	for _, m := range view {
		if m == self {
			continue
		}
		others++
		if _, ok := inView[m]; !ok {
			return nil, false, ""
		}
	}
	if others == 0 {
		return nil, false, ""
	}
	return inView, false, ""
}

func sorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
