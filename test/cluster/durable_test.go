package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The daemon's promise under store faults: a command answered ok, and a
// prompt answered 202, are in the store and survive a crash (SIGKILL); a
// command or prompt refused (store_unavailable) did not happen; an answer
// of unknown outcome (504, or no answer) may go either way. Each test
// injects the real fault while commands stream, kills the daemon, restarts
// it and reads the restored state.

// outcome of one request, as a client sees it.
type outcome int

const (
	acked outcome = iota
	refused
	unknown
)

// stream runs one kind of request on a session every pause until stopped,
// and records what each got.
type stream struct {
	name  string
	mu    sync.Mutex
	seen  []result
	stop  chan struct{}
	done  chan struct{}
	retry bool // a refusal carried Retry-After
}

type result struct {
	outcome outcome
	count   int    // a command's acknowledged count
	prompt  uint64 // an accepted prompt's id
	text    string // a prompt's text
	code    string // why not acknowledged
}

func (s *stream) add(r result) {
	s.mu.Lock()
	s.seen = append(s.seen, r)
	s.mu.Unlock()
}

func (s *stream) results() []result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]result(nil), s.seen...)
}

func (s *stream) count(o outcome) int {
	n := 0
	for _, r := range s.results() {
		if r.outcome == o {
			n++
		}
	}
	return n
}

func (s *stream) end() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// call is one request with its status, JSON body and headers; err is a
// request that got no answer (a killed daemon, a timeout).
func call(nd *node, method, path string, body any) (int, map[string]any, http.Header, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, nd.base+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 45 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, resp.Header, nil
}

func errorCode(out map[string]any) string {
	if e, ok := out["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// classify turns an answer into an outcome: 503 store_unavailable (and a
// command's own failure, ok:false) did not happen; 504 and no answer at
// all are unknown; anything else unexpected is unknown too, and logged.
func classify(t testing.TB, st int, out map[string]any, err error) result {
	switch {
	case err != nil:
		return result{outcome: unknown, code: "no answer: " + err.Error()}
	case st == http.StatusServiceUnavailable && errorCode(out) == "store_unavailable":
		return result{outcome: refused, code: "store_unavailable"}
	case st == http.StatusGatewayTimeout && errorCode(out) == "outcome_unknown":
		return result{outcome: unknown, code: "outcome_unknown"}
	}
	t.Logf("unexpected answer %d %v", st, out)
	return result{outcome: unknown, code: fmt.Sprintf("%d %s", st, errorCode(out))}
}

// commands increments a domain of the session through nd() every pause.
func commands(t testing.TB, nd func() *node, id, domain, action string, pause time.Duration) *stream {
	s := &stream{name: domain, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(pause):
			}
			n := nd()
			if n == nil || n.dead() {
				continue
			}
			st, out, h, err := call(n, "POST", "/api/sessions/"+id+"/surfaces/"+domain+"/"+action, nil)
			if err == nil && st == http.StatusOK {
				if out["ok"] == true {
					data, _ := out["data"].(map[string]any)
					c, _ := data["count"].(float64)
					s.add(result{outcome: acked, count: int(c)})
				} else {
					// The command ran and failed (the agent was not there, ...):
					// nothing changed.
					s.add(result{outcome: refused, code: errorCode(out)})
				}
				continue
			}
			r := classify(t, st, out, err)
			if r.code == "store_unavailable" && h.Get("Retry-After") != "" {
				s.mu.Lock()
				s.retry = true
				s.mu.Unlock()
			}
			s.add(r)
		}
	}()
	return s
}

// prompts sends a prompt with a text of its own through nd() every pause.
func prompts(t testing.TB, nd func() *node, id string, pause time.Duration) *stream {
	s := &stream{name: "prompts", stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-time.After(pause):
			}
			n := nd()
			if n == nil || n.dead() {
				continue
			}
			text := fmt.Sprintf("prompt number %d", i)
			st, out, _, err := call(n, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": text})
			if err == nil && st == http.StatusAccepted {
				pid, _ := out["promptId"].(float64)
				s.add(result{outcome: acked, prompt: uint64(pid), text: text})
				continue
			}
			if err == nil && st == http.StatusTooManyRequests {
				s.add(result{outcome: refused, text: text, code: errorCode(out)}) // inbox full: not taken
				continue
			}
			r := classify(t, st, out, err)
			r.text = text
			s.add(r)
		}
	}()
	return s
}

// states writes a KV key of the session through nd() every pause, the
// value counting up; an acknowledged write records its value and rev.
func states(t testing.TB, nd func() *node, id, key string, pause time.Duration) *stream {
	s := &stream{name: "state " + key, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for i := 1; ; i++ {
			select {
			case <-s.stop:
				return
			case <-time.After(pause):
			}
			n := nd()
			if n == nil || n.dead() {
				continue
			}
			st, out, _, err := call(n, "POST", "/api/sessions/"+id+"/state", map[string]any{"key": key, "value": i})
			if err == nil && st == http.StatusOK {
				rev, _ := out["rev"].(float64)
				s.add(result{outcome: acked, count: int(rev), prompt: uint64(i)})
				continue
			}
			r := classify(t, st, out, err)
			r.prompt = uint64(i)
			s.add(r)
		}
	}()
	return s
}

// checkState holds the acknowledged writes of a key against the value and
// rev restored after the crash: each acknowledged rev one above the last
// (but for unknown outcomes between), and the restored value the last
// acknowledged one or, after unknown outcomes, one of those.
func checkState(t testing.TB, s *stream, nd *node, id, key string) {
	t.Helper()
	var out struct {
		Entries map[string]struct {
			Value json.RawMessage `json:"value"`
			Rev   int             `json:"rev"`
		} `json:"entries"`
	}
	if st, err := nd.get("/api/sessions/"+id+"/state", &out); st != 200 || err != nil {
		t.Fatalf("state: %d %v", st, err)
	}
	e := out.Entries[key]
	var value uint64
	_ = json.Unmarshal(e.Value, &value)
	lastRev, lastValue, unknownSince := 0, uint64(0), []uint64{}
	for _, r := range s.results() {
		switch r.outcome {
		case acked:
			if lastRev != 0 && (r.count < lastRev+1 || r.count > lastRev+1+len(unknownSince)) {
				t.Errorf("%s: acknowledged rev %d after %d with %d unknown outcomes between", s.name, r.count, lastRev, len(unknownSince))
			}
			lastRev, lastValue, unknownSince = r.count, r.prompt, nil
		case unknown:
			unknownSince = append(unknownSince, r.prompt)
		}
	}
	if e.Rev < lastRev || e.Rev > lastRev+len(unknownSince) {
		t.Errorf("%s: restored rev %d; the last acknowledged was %d, with %d unknown outcomes after it", s.name, e.Rev, lastRev, len(unknownSince))
	}
	if value != lastValue && !slices.Contains(unknownSince, value) {
		t.Errorf("%s: restored value %d; the last acknowledged was %d (unknown since: %v)", s.name, value, lastValue, unknownSince)
	}
	t.Logf("%s: %d acknowledged, %d refused, %d unknown; restored %d at rev %d", s.name, s.count(acked), s.count(refused), s.count(unknown), value, e.Rev)
	if s.count(acked) == 0 || s.count(refused) == 0 {
		t.Errorf("%s: %d acknowledged and %d refused: the test did not see both", s.name, s.count(acked), s.count(refused))
	}
}

// checkCommands holds the acknowledged increments of one client against
// the count restored after the crash: each acknowledged count is one above
// the one before, but for unknown outcomes in between that landed; none
// that was refused landed; nothing acknowledged is missing.
func checkCommands(t testing.TB, s *stream, final int) {
	t.Helper()
	rs := s.results()
	last, unknownSince, acks, unknowns := 0, 0, 0, 0
	for _, r := range rs {
		switch r.outcome {
		case acked:
			acks++
			if d := r.count - last; d < 1 || d > 1+unknownSince {
				t.Errorf("%s: acknowledged count %d after %d with %d unknown outcomes between: a refused command landed, or an acknowledged one was lost",
					s.name, r.count, last, unknownSince)
			}
			last, unknownSince = r.count, 0
		case unknown:
			unknowns++
			unknownSince++
		}
	}
	if final < last || final > last+unknownSince {
		t.Errorf("%s: restored count %d; the last acknowledged was %d, with %d unknown outcomes after it", s.name, final, last, unknownSince)
	}
	t.Logf("%s: %d acknowledged, %d refused, %d unknown; restored count %d", s.name, acks, s.count(refused), unknowns, final)
	if acks == 0 || s.count(refused) == 0 {
		t.Errorf("%s: %d acknowledged and %d refused: the test did not see both", s.name, acks, s.count(refused))
	}
}

// checkPrompts holds the prompts against the transcript restored after the
// crash: every accepted prompt is there, with its id; no refused one is.
func checkPrompts(t testing.TB, s *stream, nd *node, id string) {
	t.Helper()
	var out struct {
		Messages []struct {
			Role     string `json:"role"`
			Text     string `json:"text"`
			PromptID uint64 `json:"promptId"`
		} `json:"messages"`
	}
	if st, err := nd.get("/api/sessions/"+id+"/messages", &out); st != 200 || err != nil {
		t.Fatalf("messages: %d %v", st, err)
	}
	users := map[string]uint64{}
	for _, m := range out.Messages {
		if m.Role == "user" {
			if _, dup := users[m.Text]; dup {
				t.Errorf("prompt %q twice in the transcript", m.Text)
			}
			users[m.Text] = m.PromptID
		}
	}
	var missing, present []string
	for _, r := range s.results() {
		pid, ok := users[r.text]
		switch {
		case r.outcome == acked && (!ok || pid != r.prompt):
			missing = append(missing, fmt.Sprintf("%q (prompt %d)", r.text, r.prompt))
		case r.outcome == refused && ok:
			present = append(present, r.text)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d prompts answered 202 are not in the transcript: %v", len(missing), missing)
	}
	if len(present) > 0 {
		t.Errorf("%d refused prompts are in the transcript: %v", len(present), present)
	}
	t.Logf("prompts: %d accepted, %d refused, %d unknown; %d in the transcript",
		s.count(acked), s.count(refused), s.count(unknown), len(users))
	if s.count(acked) == 0 || s.count(refused) == 0 {
		t.Errorf("prompts: %d accepted and %d refused: the test did not see both", s.count(acked), s.count(refused))
	}
}

// counts reads the restored counts of the session's domains.
func counts(t testing.TB, nd *node, id string) map[string]int {
	t.Helper()
	var out struct {
		Entries map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"entries"`
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		st, err := nd.get("/api/sessions/"+id+"/state", &out)
		return st == 200 && err == nil
	}, "the session's state through node %d", nd.i)
	c := map[string]int{}
	for k, e := range out.Entries {
		if d, ok := strings.CutPrefix(k, "surface:"); ok {
			var v struct {
				Count int `json:"count"`
			}
			if err := json.Unmarshal(e.Value, &v); err != nil {
				t.Fatalf("%s: %s: %v", k, e.Value, err)
			}
			c[d] = v.Count
		}
	}
	return c
}

// ready waits until the session's agent is ready and the domains are there.
func waitReady(t testing.TB, nd *node, id string, domains ...string) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, func() bool {
		var out struct {
			Status   string `json:"status"`
			Surfaces []struct {
				Domain    string `json:"domain"`
				Available bool   `json:"available"`
			} `json:"surfaces"`
		}
		if st, err := nd.get("/api/sessions/"+id, &out); st != 200 || err != nil || out.Status != "ready" {
			return false
		}
		have := map[string]bool{}
		for _, s := range out.Surfaces {
			have[s.Domain] = s.Available
		}
		for _, d := range domains {
			if !have[d] {
				return false
			}
		}
		return true
	}, "session %s ready with %v", id, domains)
}

// readyz is the node's readiness: its status and error code.
func readyz(nd *node) (int, string, string) {
	st, out, h, err := call(nd, "GET", "/readyz", nil)
	if err != nil {
		return 0, err.Error(), ""
	}
	return st, errorCode(out), h.Get("Retry-After")
}

func waitNotReady(t testing.TB, nd *node) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		st, code, retry := readyz(nd)
		return st == http.StatusServiceUnavailable && code == "store_unavailable" && retry != ""
	}, "/readyz 503 store_unavailable with Retry-After on node %d", nd.i)
}

func waitReadyz(t testing.TB, nd *node) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, func() bool {
		st, _, _ := readyz(nd)
		return st == http.StatusOK
	}, "/readyz 200 on node %d, without a restart", nd.i)
}

// hold keeps a fault in place for d while the streams run, and returns
// once each stream has had a refusal too.
func hold(t testing.TB, d time.Duration, streams ...*stream) {
	t.Helper()
	until := time.After(d)
	<-until
	for _, s := range streams {
		testkit.Eventually(t, 30*time.Second, func() bool { return s.count(refused) > 0 }, "a refusal in %s during the outage", s.name)
	}
}

// waitAcks waits until each stream has n more acknowledgements than now.
func waitAcks(t testing.TB, n int, streams ...*stream) {
	t.Helper()
	for _, s := range streams {
		want := s.count(acked) + n
		testkit.Eventually(t, 60*time.Second, func() bool { return s.count(acked) >= want }, "%d acknowledgements in %s", want, s.name)
	}
}

// outageServer is a PostgreSQL server of the test's own, to freeze and
// stop, with synchronous commit (a commit survives its immediate stop).
func outageServer(t *testing.T) (*pgtest.Server, string) {
	t.Helper()
	return pgtest.FaultServer(t, 2*time.Second)
}

// newDaemonEnv is one daemon (no cluster) of bin on a store: a DSN, or
// SQLite in dataDir.
func newDaemonEnv(t *testing.T, bin, dsn, dataDir string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("the durability tests start daemons and stop their store")
	}
	e := &env{t: t, bin: testkit.Build(t, bin), dsn: dsn, dataDir: dataDir, agent: testkit.FakeAgent(t)}
	t.Cleanup(func() {
		for _, nd := range e.nodes {
			nd.kill()
		}
		if t.Failed() {
			for _, nd := range e.nodes {
				t.Logf("---- daemon log ----\n%s", nd.tail(8000))
			}
		}
	})
	return e
}

// PostgreSQL frozen (SIGSTOP) and stopped (an immediate shutdown) for 10 s
// while a native and an agent-hosted domain take increments every 50 ms
// and artifacts are uploaded every 100 ms: /readyz says not ready, commands
// and uploads are refused (503 store_unavailable, never 500), and so are an
// artifact's delete and a session's purge, which did not happen; once the
// store is back the daemon is ready and acknowledges again without a
// restart. Then the fault again, the daemon killed (SIGKILL) during it, the
// store back, the daemon restarted: every acknowledged increment is in the
// restored state and every upload answered 201 is kept, no refused one is.
func TestAcknowledgedCommandsSurvivePostgresOutages(t *testing.T) {
	for _, fault := range []struct {
		name          string
		break_, mend_ func(srv *pgtest.Server) error
	}{
		{"frozen", (*pgtest.Server).Freeze, (*pgtest.Server).Thaw},
		{"stopped", (*pgtest.Server).StopImmediate, func(s *pgtest.Server) error { return s.Restart(context.Background()) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			srv, dsn := outageServer(t)
			e := newDaemonEnv(t, "./internal/testkit/counterd", dsn, "")
			daemon := e.start(0)
			id := daemon.create(t)
			other := daemon.create(t)
			waitReady(t, daemon, id, "demo", "counter")
			att := putArtifact(t, daemon, id, "kept")
			via := func() *node { return e.nodes[0] }
			native := commands(t, via, id, "counter", "add", 50*time.Millisecond)
			hosted := commands(t, via, id, "demo", "increment", 50*time.Millisecond)
			ups := uploads(t, via, id, 100*time.Millisecond)
			defer native.end()
			defer hosted.end()
			defer ups.end()
			waitAcks(t, 10, native, hosted, ups.stream)

			if err := fault.break_(srv); err != nil {
				t.Fatal(err)
			}
			waitNotReady(t, daemon)
			refusedWhileDown(t, daemon, id, att, other)
			hold(t, 10*time.Second, native, hosted, ups.stream)
			if err := fault.mend_(srv); err != nil {
				t.Fatal(err)
			}
			waitReadyz(t, daemon)
			waitAcks(t, 5, native, hosted, ups.stream)
			stillThere(t, daemon, id, att, other)
			for _, s := range []*stream{native, hosted} {
				if !s.retry {
					t.Errorf("%s: no refusal carried Retry-After", s.name)
				}
			}

			// The fault again, and a crash during it.
			if err := fault.break_(srv); err != nil {
				t.Fatal(err)
			}
			waitNotReady(t, daemon)
			daemon.kill9()
			native.end()
			hosted.end()
			ups.end()
			if err := fault.mend_(srv); err != nil {
				t.Fatal(err)
			}
			daemon = e.start(0)
			c := counts(t, daemon, id)
			checkCommands(t, native, c["counter"])
			checkCommands(t, hosted, c["demo"])
			checkUploads(t, ups, daemon, id)
			// The restored session goes on from there.
			waitReady(t, daemon, id, "demo", "counter")
			if st, out, _, err := call(daemon, "POST", "/api/sessions/"+id+"/surfaces/counter/add", nil); st != 200 || err != nil || out["ok"] != true {
				t.Fatalf("a command after the restart: %d %v %v", st, out, err)
			} else if got := int(out["data"].(map[string]any)["count"].(float64)); got != c["counter"]+1 {
				t.Fatalf("after the restart the count went to %d, want %d", got, c["counter"]+1)
			}
		})
	}
}

// Another process holds the SQLite store's write lock for 10 s while
// commands, prompts, state writes and uploads stream to the daemon
// (SQLITE_BUSY after the busy timeout): refused at once once the daemon
// knows (an artifact's delete and a session's purge too), /readyz 503,
// ready again after the lock is released without a restart; then the lock
// again and a crash during it: every acknowledged command, prompt answered
// 202 and upload answered 201 survives, nothing refused is there.
func TestAcknowledgedSurviveAnotherProcessHoldingSQLitesLock(t *testing.T) {
	dir := t.TempDir()
	e := newDaemonEnv(t, "./cmd/surfaced", "", dir)
	daemon := e.start(0)
	id := daemon.create(t)
	other := daemon.create(t)
	waitReady(t, daemon, id, "demo")
	att := putArtifact(t, daemon, id, "kept")
	via := func() *node { return e.nodes[0] }
	hosted := commands(t, via, id, "demo", "increment", 50*time.Millisecond)
	asks := prompts(t, via, id, 100*time.Millisecond)
	prefs := states(t, via, id, "ui.n", 100*time.Millisecond)
	ups := uploads(t, via, id, 100*time.Millisecond)
	defer hosted.end()
	defer asks.end()
	defer prefs.end()
	defer ups.end()
	waitAcks(t, 10, hosted, asks, prefs, ups.stream)

	db := filepath.Join(dir, "surfaced.db")
	release := testkit.LockSQLite(t, db)
	waitNotReady(t, daemon)
	refusedWhileDown(t, daemon, id, att, other)
	hold(t, 10*time.Second, hosted, asks, prefs, ups.stream)
	release()
	waitReadyz(t, daemon)
	waitAcks(t, 5, hosted, asks, prefs, ups.stream)
	stillThere(t, daemon, id, att, other)

	release = testkit.LockSQLite(t, db)
	waitNotReady(t, daemon)
	daemon.kill9()
	hosted.end()
	asks.end()
	prefs.end()
	ups.end()
	release()
	daemon = e.start(0)
	checkCommands(t, hosted, counts(t, daemon, id)["demo"])
	checkPrompts(t, asks, daemon, id)
	checkState(t, prefs, daemon, id, "ui.n")
	checkUploads(t, ups, daemon, id)
}

// The data directory's filesystem fills up while commands, prompts and
// uploads stream (SQLITE_FULL, ENOSPC for an artifact's file): nothing is
// acknowledged that is not kept, an upload is refused 503 store_unavailable
// (never 500), an artifact's delete and a session's purge too; the daemon
// is not ready until space is freed, then ready again without a restart;
// full again, a crash, space freed, a restart: every acknowledged command,
// prompt answered 202 and upload answered 201 survives. It mounts a small
// tmpfs (root only).
func TestAcknowledgedSurviveAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	e := newDaemonEnv(t, "./cmd/surfaced", "", dir)
	daemon := e.start(0)
	id := daemon.create(t)
	other := daemon.create(t)
	waitReady(t, daemon, id, "demo")
	att := putArtifact(t, daemon, id, "kept")
	via := func() *node { return e.nodes[0] }
	hosted := commands(t, via, id, "demo", "increment", 50*time.Millisecond)
	asks := prompts(t, via, id, 100*time.Millisecond)
	ups := uploads(t, via, id, 200*time.Millisecond)
	defer hosted.end()
	defer asks.end()
	defer ups.end()
	waitAcks(t, 10, hosted, asks, ups.stream)

	filler := filepath.Join(dir, "filler")
	fillUp(t, filler)
	waitNotReady(t, daemon)
	refusedWhileDown(t, daemon, id, att, other)
	hold(t, 3*time.Second, hosted, asks, ups.stream)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, daemon)
	waitAcks(t, 5, hosted, asks, ups.stream)
	stillThere(t, daemon, id, att, other)

	fillUp(t, filler)
	waitNotReady(t, daemon)
	daemon.kill9()
	hosted.end()
	asks.end()
	ups.end()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	daemon = e.start(0)
	checkCommands(t, hosted, counts(t, daemon, id)["demo"])
	checkPrompts(t, asks, daemon, id)
	checkUploads(t, ups, daemon, id)
}

// fillUp writes path until the filesystem is full.
func fillUp(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// Small writes may still find room in partly used blocks: fill those.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}
