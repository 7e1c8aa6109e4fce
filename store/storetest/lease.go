package storetest

import (
	"context"
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

// The lease cases: every store of the conformance suite is a store.Leaser.

func leaser(t testing.TB, s store.Store) store.Leaser {
	t.Helper()
	l, ok := s.(store.Leaser)
	if !ok {
		t.Fatalf("%T does not implement store.Leaser", s)
	}
	return l
}

// clockSlack is how far a lease's Expires may be from the test's own
// reckoning: the store may keep time by another clock (a database server's),
// and a slow machine adds its delays. It still catches a unit mistake.
const clockSlack = 5 * time.Second

func checkExpiry(t testing.TB, what string, got time.Time, before, after time.Time, ttl time.Duration) {
	t.Helper()
	lo, hi := before.Add(ttl-clockSlack), after.Add(ttl+clockSlack)
	if got.Before(lo) || got.After(hi) || got.Location() != time.UTC {
		t.Errorf("%s: Expires = %v, want about now+%v (between %v and %v), in UTC", what, got, ttl, lo, hi)
	}
}

func testLeaseLifecycle(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)

	before := time.Now()
	a, err := ls.AcquireLease(ctx, "lease-1", "node-a", time.Minute)
	must(t, err)
	checkExpiry(t, "acquire", a.Expires, before, time.Now(), time.Minute)
	if a.Token <= 0 || a.Node != "node-a" {
		t.Fatalf("acquire: %+v, want a positive token for node-a", a)
	}
	// The holder acquiring again renews, with the same token.
	before = time.Now()
	again, err := ls.AcquireLease(ctx, "lease-1", "node-a", 2*time.Minute)
	must(t, err)
	checkExpiry(t, "acquire by the holder", again.Expires, before, time.Now(), 2*time.Minute)
	if again.Token != a.Token || again.Node != "node-a" || !again.Expires.After(a.Expires) {
		t.Errorf("acquire by the holder: %+v, want token %d extended past %v", again, a.Token, a.Expires)
	}

	held, err := ls.AcquireLease(ctx, "lease-1", "node-b", time.Minute)
	if !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("acquire of a held lease: %+v, %v; want ErrLeaseHeld", held, err)
	}
	if !strings.Contains(err.Error(), "node-a") {
		t.Errorf("ErrLeaseHeld %q does not name the holder", err)
	}
	if held.Node != "node-a" || held.Token != 0 || !held.Expires.Equal(again.Expires) {
		t.Errorf("ErrLeaseHeld came with %+v, want the holder node-a, token 0, expiry %v", held, again.Expires)
	}

	before = time.Now()
	r, err := ls.RenewLease(ctx, "lease-1", a.Token, 3*time.Minute)
	must(t, err)
	checkExpiry(t, "renew", r.Expires, before, time.Now(), 3*time.Minute)
	if r.Token != a.Token || r.Node != "node-a" {
		t.Errorf("renew: %+v, want token %d of node-a", r, a.Token)
	}
	for _, token := range []int64{a.Token + 1, a.Token - 1, 0, -1, math.MaxInt64} {
		if got, err := ls.RenewLease(ctx, "lease-1", token, time.Minute); !errors.Is(err, store.ErrFenced) {
			t.Errorf("renew with token %d (current %d): %+v, %v; want ErrFenced", token, a.Token, got, err)
		}
		must(t, ls.ReleaseLease(ctx, "lease-1", token)) // not current: a no-op
	}
	if _, err := ls.AcquireLease(ctx, "lease-1", "node-b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("a release with a wrong token freed the lease: acquire: %v", err)
	}

	must(t, ls.ReleaseLease(ctx, "lease-1", a.Token))
	if _, err := ls.RenewLease(ctx, "lease-1", a.Token, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Errorf("renew of a released lease: %v, want ErrFenced", err)
	}
	must(t, ls.ReleaseLease(ctx, "lease-1", a.Token)) // twice: a no-op

	b, err := ls.AcquireLease(ctx, "lease-1", "node-b", time.Minute)
	must(t, err)
	if b.Token <= a.Token || b.Node != "node-b" {
		t.Errorf("acquire after release: %+v, want node-b with a token above %d", b, a.Token)
	}
	if _, err := ls.AcquireLease(ctx, "lease-1", "node-a", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("acquire by the previous holder: %v, want ErrLeaseHeld", err)
	}
	// The holder releasing and acquiring again gets a new token too.
	must(t, ls.ReleaseLease(ctx, "lease-1", b.Token))
	b2, err := ls.AcquireLease(ctx, "lease-1", "node-b", time.Minute)
	must(t, err)
	if b2.Token <= b.Token {
		t.Errorf("acquire after own release: token %d, want above %d", b2.Token, b.Token)
	}

	// Leases are per session, and need no stored session.
	other, err := ls.AcquireLease(ctx, "lease-2", "node-a", time.Minute)
	must(t, err)
	if other.Node != "node-a" || other.Token <= 0 {
		t.Errorf("lease of another session: %+v", other)
	}
	if _, err := s.GetSession(ctx, "lease-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a lease created a session: %v", err)
	}
}

// waitExpired polls until node acquires sessionID, which must fail with
// ErrLeaseHeld until then, and returns the lease.
func waitAcquire(t *testing.T, ls store.Leaser, sessionID, node string, ttl time.Duration) store.Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := ls.AcquireLease(context.Background(), sessionID, node, ttl)
		if err == nil {
			return l
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("acquire %s by %s: %v", sessionID, node, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("acquire %s by %s: still held after 10s: %v", sessionID, node, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLeaseExpiry(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)
	const ttl = 100 * time.Millisecond

	start := time.Now()
	a, err := ls.AcquireLease(ctx, "exp", "node-a", ttl)
	must(t, err)
	b := waitAcquire(t, ls, "exp", "node-b", time.Minute)
	// Milliseconds are truncated: the lease may end up to 1 ms early.
	if elapsed := time.Since(start); elapsed < ttl-2*time.Millisecond {
		t.Errorf("node-b took over after %v, before the %v lease expired", elapsed, ttl)
	}
	if b.Token <= a.Token || b.Node != "node-b" {
		t.Errorf("takeover after expiry: %+v, want node-b with a token above %d", b, a.Token)
	}
	if _, err := ls.RenewLease(ctx, "exp", a.Token, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Errorf("renew after a takeover: %v, want ErrFenced", err)
	}
	must(t, ls.ReleaseLease(ctx, "exp", a.Token))
	if _, err := ls.AcquireLease(ctx, "exp", "node-a", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("the old holder's release freed the new lease: acquire: %v", err)
	}

	// The holder acquiring again after its own lease expired gets a new
	// token: a write queued under the old one must not pass.
	c, err := ls.AcquireLease(ctx, "exp-own", "node-c", 20*time.Millisecond)
	must(t, err)
	time.Sleep(60 * time.Millisecond)
	c2, err := ls.AcquireLease(ctx, "exp-own", "node-c", time.Minute)
	must(t, err)
	if c2.Token <= c.Token {
		t.Errorf("acquire after own expiry: token %d, want above %d", c2.Token, c.Token)
	}

	// An expired lease nobody took over is still current: it renews with
	// its token, and then holds off others again.
	d, err := ls.AcquireLease(ctx, "exp-renew", "node-d", 20*time.Millisecond)
	must(t, err)
	time.Sleep(60 * time.Millisecond)
	d2, err := ls.RenewLease(ctx, "exp-renew", d.Token, time.Minute)
	must(t, err)
	if d2.Token != d.Token {
		t.Errorf("renew of an expired lease: token %d, want %d", d2.Token, d.Token)
	}
	if _, err := ls.AcquireLease(ctx, "exp-renew", "node-e", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("acquire after the holder renewed: %v, want ErrLeaseHeld", err)
	}
}

// sessionState is everything a write can change of a session.
type sessionState struct {
	sess       store.Session
	kv         []store.KV
	transcript []store.Entry
}

func stateOf(t testing.TB, s store.Store, id string) sessionState {
	t.Helper()
	ctx := context.Background()
	var st sessionState
	var err error
	st.sess, err = s.GetSession(ctx, id)
	must(t, err)
	st.kv, err = s.LoadKV(ctx, id)
	must(t, err)
	st.transcript, err = s.Transcript(ctx, id)
	must(t, err)
	return st
}

func equalState(t testing.TB, what string, got, want sessionState) {
	t.Helper()
	r := &recorder{TB: t}
	equalSession(r, got.sess, want.sess)
	equalKVs(r, got.kv, want.kv)
	equalEntries(r, got.transcript, want.transcript)
	if len(r.errs) > 0 {
		t.Errorf("%s:\n%s", what, strings.Join(r.errs, "\n"))
	}
}

// recorder keeps the errors of the equal* helpers, to report them with
// what was compared.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// writeCalls are the fenced write methods, each with a write under fence
// that changes the session if it lands; i makes each call's change new.
var writeCalls = []struct {
	name  string
	write func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error
}{
	{"PutKV", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.PutKV(ctx, id, fence, []store.KV{{Key: "k", Value: []byte(fmt.Sprint(i)), Rev: uint64(i)}})
	}},
	{"PutKV empty", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.PutKV(ctx, id, fence, nil)
	}},
	{"PutKV batch", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.PutKV(ctx, id, fence, []store.KV{{Key: "b", Value: []byte(fmt.Sprint(i)), Rev: uint64(i)}, {Key: "k", Value: []byte(fmt.Sprint(i)), Rev: uint64(i)}})
	}},
	{"AppendTranscript", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.AppendTranscript(ctx, id, fence, []store.Entry{{Role: "user", Text: fmt.Sprint(i), At: ms(int64(i))}})
	}},
	{"AppendTranscript batch", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.AppendTranscript(ctx, id, fence, []store.Entry{{Role: "user", Text: fmt.Sprint(i), At: ms(int64(i))}, {Role: "assistant", At: ms(int64(i))}})
	}},
	{"AppendTranscript empty", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.AppendTranscript(ctx, id, fence, nil)
	}},
	{"UpdateSession", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		title := fmt.Sprint(i)
		return s.UpdateSession(ctx, id, fence, store.SessionUpdate{Title: &title})
	}},
	{"UpdateSession empty", func(ctx context.Context, s store.Store, id string, fence store.Fence, i int) error {
		return s.UpdateSession(ctx, id, fence, store.SessionUpdate{})
	}},
}

func testFencedWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)
	must(t, s.CreateSession(ctx, store.Session{ID: "fw", Owner: "alice"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "fw-unleased", Owner: "alice"}))

	a, err := ls.AcquireLease(ctx, "fw", "node-a", time.Minute)
	must(t, err)
	i := 0
	for _, c := range writeCalls {
		i++
		if err := c.write(ctx, s, "fw", store.Fence(a.Token), i); err != nil {
			t.Errorf("%s under the current token: %v", c.name, err)
		}
	}

	// node-b takes over; node-a's writes must fail and change nothing.
	must(t, ls.ReleaseLease(ctx, "fw", a.Token))
	b, err := ls.AcquireLease(ctx, "fw", "node-b", time.Minute)
	must(t, err)
	want := stateOf(t, s, "fw")
	// The zero Fence is no fence: it is not among them (see below).
	stale := map[string]struct {
		id    string
		token int64
	}{
		"the previous token":       {"fw", a.Token},
		"a token never issued":     {"fw", b.Token + 1000},
		"a session without lease":  {"fw-unleased", a.Token},
		"an unknown session":       {"fw-nope", a.Token},
		"a negative token":         {"fw", -b.Token},
		"a token one below":        {"fw", b.Token - 1},
		"the new token, elsewhere": {"fw-unleased", b.Token},
	}
	for name, f := range stale {
		for _, c := range writeCalls {
			i++
			if err := c.write(ctx, s, f.id, store.Fence(f.token), i); !errors.Is(err, store.ErrFenced) {
				t.Errorf("%s on %s fenced with %s: err = %v, want ErrFenced", c.name, f.id, name, err)
			}
		}
	}
	equalState(t, "after fenced writes", stateOf(t, s, "fw"), want)
	if got, err := s.LoadKV(ctx, "fw-unleased"); err != nil || len(got) != 0 {
		t.Errorf("a fenced write landed on a session without lease: %v, %v", got, err)
	}

	// Bad arguments are refused as such before any fence check.
	if err := s.PutKV(ctx, "fw", store.Fence(a.Token), []store.KV{{Key: "k", Value: []byte("{"), Rev: 99}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad PutKV under a stale fence: err = %v, want ErrInvalid", err)
	}

	// The new holder writes; unfenced writes (the zero Fence) are not
	// checked, though another node holds the lease.
	wantTitle, wantRev, wantEntries := "", uint64(0), len(want.transcript)
	for _, c := range writeCalls {
		for _, fence := range []store.Fence{store.Fence(b.Token), 0} {
			i++
			if err := c.write(ctx, s, "fw", fence, i); err != nil {
				t.Errorf("%s (fence %d) by the new holder: %v", c.name, fence, err)
			}
			switch c.name {
			case "PutKV", "PutKV batch":
				wantRev = uint64(i)
			case "AppendTranscript":
				wantEntries++
			case "AppendTranscript batch":
				wantEntries += 2
			case "UpdateSession":
				wantTitle = fmt.Sprint(i)
			}
		}
	}
	got := stateOf(t, s, "fw")
	if got.sess.Title != wantTitle || len(got.transcript) != wantEntries || len(got.kv) != 2 || got.kv[1].Rev != wantRev {
		t.Errorf("writes by the new holder: title %q, %d entries, kv %v; want title %q, %d entries, rev %d",
			got.sess.Title, len(got.transcript), got.kv, wantTitle, wantEntries, wantRev)
	}

	// A released token fences too.
	must(t, ls.ReleaseLease(ctx, "fw", b.Token))
	want = stateOf(t, s, "fw")
	for _, c := range writeCalls {
		i++
		if err := c.write(ctx, s, "fw", store.Fence(b.Token), i); !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s under a released token: err = %v, want ErrFenced", c.name, err)
		}
	}
	equalState(t, "after writes under a released token", stateOf(t, s, "fw"), want)

	// A current token on a session that does not exist: not found.
	g, err := ls.AcquireLease(ctx, "fw-ghost", "node-a", time.Minute)
	must(t, err)
	for _, c := range writeCalls {
		i++
		if err := c.write(ctx, s, "fw-ghost", store.Fence(g.Token), i); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s on an unknown session under its lease: err = %v, want ErrNotFound", c.name, err)
		}
	}
}

// testFenceRacesTakeover has a node write under its lease as fast as it can
// while another node takes the session over at expiry. Whatever the
// interleaving, nothing may land after the takeover: the state the new
// holder reads right after acquiring stays the state once the old writer has
// been fenced. A store that checks the fence apart from the write fails it.
func testFenceRacesTakeover(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)
	for round := range 3 {
		id := fmt.Sprintf("race-%d", round)
		must(t, s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}))
		a, err := ls.AcquireLease(ctx, id, "node-a", 50*time.Millisecond)
		must(t, err)

		stop := make(chan struct{})
		type result struct {
			writes int
			err    error
		}
		done := make(chan result, 1)
		go func() {
			fence := store.Fence(a.Token)
			for i := 1; ; i++ {
				select {
				case <-stop:
					done <- result{i - 1, errors.New("still writing long after the takeover")}
					return
				default:
				}
				c := writeCalls[(i-1)%len(writeCalls)]
				if err := c.write(ctx, s, id, fence, i); err != nil {
					done <- result{i - 1, err}
					return
				}
			}
		}()
		b := waitAcquire(t, ls, id, "node-b", time.Minute)
		want := stateOf(t, s, id)
		var res result
		select {
		case res = <-done:
		case <-time.After(5 * time.Second):
			close(stop)
			res = <-done
		}
		if !errors.Is(res.err, store.ErrFenced) {
			t.Fatalf("round %d: node-a's writes stopped with %v, want ErrFenced", round, res.err)
		}
		equalState(t, fmt.Sprintf("round %d: after node-a was fenced (%d writes landed; token %d → %d)", round, res.writes, a.Token, b.Token),
			stateOf(t, s, id), want)
		if res.writes == 0 {
			t.Logf("round %d: node-a wrote nothing before the takeover", round)
		}
	}
}

// testLeaseConcurrentAcquire has many nodes race for one session, round
// after round: exactly one wins each round, with a token above the last.
func testLeaseConcurrentAcquire(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)
	const nodes, rounds = 8, 15
	last := int64(0)
	for round := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		leases := make([]store.Lease, nodes)
		errs := make([]error, nodes)
		for n := range nodes {
			wg.Go(func() {
				<-start
				leases[n], errs[n] = ls.AcquireLease(ctx, "contended", fmt.Sprintf("node-%d", n), time.Minute)
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		for n, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, n)
			case !errors.Is(err, store.ErrLeaseHeld):
				t.Fatalf("round %d: node-%d: %v", round, n, err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly one", round, len(winners), winners)
		}
		w := leases[winners[0]]
		if w.Token <= last || w.Node != fmt.Sprintf("node-%d", winners[0]) {
			t.Fatalf("round %d: winner %+v, want its own node and a token above %d", round, w, last)
		}
		for n, l := range leases {
			if errs[n] != nil && l.Node != w.Node {
				t.Errorf("round %d: node-%d was told the holder is %q, not %q", round, n, l.Node, w.Node)
			}
		}
		last = w.Token
		must(t, ls.ReleaseLease(ctx, "contended", w.Token))
	}
}

func testLeaseInvalidArguments(t *testing.T, s store.Store) {
	ctx := context.Background()
	ls := leaser(t, s)
	for name, id := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", store.MaxSessionIDLen+1),
		"not utf8": "a\xffb",
		"nul":      "a\x00b",
	} {
		_, acqErr := ls.AcquireLease(ctx, id, "node", time.Minute)
		_, renErr := ls.RenewLease(ctx, id, 1, time.Minute)
		relErr := ls.ReleaseLease(ctx, id, 1)
		for call, err := range map[string]error{"AcquireLease": acqErr, "RenewLease": renErr, "ReleaseLease": relErr} {
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s with %s session id: err = %v, want ErrInvalid", call, name, err)
			}
		}
	}
	for name, node := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("n", store.MaxNodeLen+1),
		"not utf8": "n\xff",
		"nul":      "n\x00",
	} {
		if _, err := ls.AcquireLease(ctx, "inv", node, time.Minute); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AcquireLease with %s node: err = %v, want ErrInvalid", name, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		if _, err := ls.AcquireLease(ctx, "inv", "node", ttl); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AcquireLease with ttl %v: err = %v, want ErrInvalid", ttl, err)
		}
		if _, err := ls.RenewLease(ctx, "inv", 1, ttl); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RenewLease with ttl %v: err = %v, want ErrInvalid", ttl, err)
		}
	}
	// Nothing was claimed by the refused calls.
	l, err := ls.AcquireLease(ctx, "inv", "other", time.Minute)
	must(t, err)
	if l.Node != "other" {
		t.Errorf("after refused acquires, the lease is %+v", l)
	}
	// The longest node name is accepted.
	long := strings.Repeat("n", store.MaxNodeLen)
	l, err = ls.AcquireLease(ctx, "inv-long", long, time.Minute)
	must(t, err)
	if l.Node != long {
		t.Errorf("a %d-byte node name came back as %q", len(long), l.Node)
	}
}

// testOddBytes writes strings that SQL text columns cannot all hold or
// order by bytes: NUL, invalid UTF-8, characters that sort differently in
// a language's collation. They come back byte for byte, and sort by bytes.
func testOddBytes(t *testing.T, s store.Store) {
	ctx := context.Background()
	odd := "a\x00b\xffc é"
	sess := store.Session{ID: "odd", Owner: odd, Agent: odd + "agent", Title: odd + "title", Cwd: odd + "cwd", Status: odd + "status",
		Created: ms(1_000), Updated: ms(2_000)}
	must(t, s.CreateSession(ctx, sess))
	got, err := s.GetSession(ctx, "odd")
	must(t, err)
	equalSession(t, got, sess)
	for _, q := range []store.ListQuery{
		{Owner: odd}, {Owner: odd, Agent: sess.Agent}, {Owner: odd, Cwd: sess.Cwd}, {Owner: odd, Agent: sess.Agent, Cwd: sess.Cwd},
	} {
		page, _, err := s.ListSessions(ctx, q)
		must(t, err)
		if len(page) != 1 {
			t.Errorf("list %+q: %v, want [odd]", []string{q.Owner, q.Agent, q.Cwd}, idsOf(page))
		} else {
			equalSession(t, page[0], sess)
		}
	}
	// What precedes a NUL is not the whole string.
	for _, q := range []store.ListQuery{{Owner: "a"}, {Owner: "a\x00b"}, {Owner: odd, Agent: odd}, {Owner: odd, Cwd: "a"}} {
		if page, _, err := s.ListSessions(ctx, q); err != nil || len(page) != 0 {
			t.Errorf("list %+q: %v, %v; want nothing", []string{q.Owner, q.Agent, q.Cwd}, idsOf(page), err)
		}
	}
	checkCounts(t, s, "odd bytes", []countCase{
		{store.CountQuery{Owner: odd}, 1},
		{store.CountQuery{Owner: odd, Agent: sess.Agent, ExcludeEnded: true}, 1},
		{store.CountQuery{Owner: "a"}, 0},
		{store.CountQuery{Owner: "a\x00b"}, 0},
		{store.CountQuery{Owner: odd, Agent: odd}, 0},
	})
	title, status := "\x00", "\xfe\xff"
	must(t, s.UpdateSession(ctx, "odd", 0, store.SessionUpdate{Title: &title, Status: &status}))
	got, err = s.GetSession(ctx, "odd")
	must(t, err)
	if got.Title != title || got.Status != status {
		t.Errorf("update to odd bytes: title %q, status %q", got.Title, got.Status)
	}

	entries := []store.Entry{{Role: odd, Text: odd + "\x00\x00", ToolCallID: odd, ToolName: odd, Via: odd, At: ms(5)},
		{Role: "assistant", Text: "\xff", At: ms(6)}}
	must(t, s.AppendTranscript(ctx, "odd", 0, entries))
	tr, err := s.Transcript(ctx, "odd")
	must(t, err)
	equalEntries(t, tr, entries)

	// Keys sort by bytes: not as a language would, and NUL first.
	keys := []string{"é", "z", "Z", "_", "a", "a\x00", "a\x00z", "a\xff", "a\xffb", "\x00", "\xff", "b", "A", "ab"}
	var put []store.KV
	for i, k := range keys {
		put = append(put, store.KV{Key: k, Value: []byte(fmt.Sprint(i)), Rev: 1})
	}
	must(t, s.PutKV(ctx, "odd", 0, put))
	kv, err := s.LoadKV(ctx, "odd")
	must(t, err)
	want := slices.Clone(keys)
	slices.Sort(want)
	if got := keysOf(kv); !slices.Equal(got, want) {
		t.Errorf("LoadKV keys = %q, want %q", got, want)
	}
	for _, e := range kv {
		if i := slices.Index(keys, e.Key); i < 0 || string(e.Value) != fmt.Sprint(i) {
			t.Errorf("key %q has value %s", e.Key, e.Value)
		}
	}

	// Session ids that tie on Updated list by bytes, descending.
	ids := []string{"é", "z", "Z", "_", "a", "ab", "A", "ü"}
	for _, id := range ids {
		must(t, s.CreateSession(ctx, store.Session{ID: id, Owner: "collate", Updated: ms(7_000)}))
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	for _, limit := range []int{2, 50} {
		var listed []string
		cursor := ""
		for range len(ids) {
			page, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "collate", Limit: limit, Cursor: cursor})
			must(t, err)
			listed = append(listed, idsOf(page)...)
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(listed, ids) {
			t.Errorf("limit %d: ids tied on Updated list as %q, want %q", limit, listed, ids)
		}
	}
}
