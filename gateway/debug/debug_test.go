package debug_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// dev starts a daemon with the inspector (--dev) and the slow domain, whose
// commands take slow (20 ms when 0); its ended sessions' actors go after
// 200 ms. opts add to that.
func dev(t *testing.T, slow time.Duration, opts ...daemon.Option) *daemon.Daemon {
	return daemon.Start(t, append([]daemon.Option{daemon.Dev()}, plain(slow, opts...)...)...)
}

// plain is dev's setup without the inspector.
func plain(slow time.Duration, opts ...daemon.Option) []daemon.Option {
	if slow == 0 {
		slow = 20 * time.Millisecond
	}
	return append([]daemon.Option{daemon.SlowDomain(slow), daemon.Limits(surfaced.Limits{EndedLinger: 200 * time.Millisecond})}, opts...)
}

// Every actor of a session is listed with the documented fields, and only those.
func TestActorsListsEveryActorOfASession(t *testing.T) {
	d := dev(t, 0)
	id := d.Create(nil)
	var rep inspect.Report
	testkit.Eventually(t, 10*time.Second, func() bool {
		rep = d.Actors("?session=" + id)
		return daemon.Find(rep, "session", "") != nil && daemon.Find(rep, "surface", daemon.SlowDomainName) != nil &&
			daemon.Find(rep, "agentproc", "") != nil
	}, "session, surface and agentproc actors")
	if rep.Node != "test-node" {
		t.Fatalf("node: %q", rep.Node)
	}
	s := daemon.Find(rep, "surface", daemon.SlowDomainName)
	if !strings.HasPrefix(s.ID, "session-"+id) || s.Session != id || s.Started.IsZero() {
		t.Fatalf("surface entry: %+v", s)
	}

	// The exact JSON shape docs/inspector.md gives.
	_, raw := d.Do("GET", "/debug/actors?session="+id, nil)
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(generic); !slices.Equal(keys, []string{"actors", "node"}) {
		t.Fatalf("top-level keys: %v", keys)
	}
	required := []string{"id", "kind", "session", "depth", "posted", "processed", "p50_us", "p99_us", "started"}
	optional := []string{"domain", "current", "current_for_ms"}
	for _, a := range generic["actors"].([]any) {
		m := a.(map[string]any)
		for _, k := range required {
			if _, ok := m[k]; !ok {
				t.Errorf("entry lacks %q: %v", k, m)
			}
		}
		for k := range m {
			if !slices.Contains(required, k) && !slices.Contains(optional, k) {
				t.Errorf("entry has an undocumented field %q: %v", k, m)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, m["started"].(string)); err != nil {
			t.Errorf("started: %v", err)
		}
	}

	// A browser stream adds its gateway actor; closing it removes it.
	sse := testkit.OpenSSE(t, d.URL+"/api/sessions/"+id+"/events", d.Auth())
	testkit.Eventually(t, 5*time.Second, func() bool {
		return daemon.Find(d.Actors("?kind=sse&session="+id), "sse", "") != nil
	}, "the sse actor")
	sse.Close()
	testkit.Eventually(t, 5*time.Second, func() bool {
		return len(d.Actors("?kind=sse&session="+id).Actors) == 0
	}, "the sse actor gone")
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The main job: a slow domain flooded with commands shows its queue rising,
// then draining; its entries disappear when the session ends.
func TestSlowDomainFloodShowsDepthAndEntriesGoAtEnd(t *testing.T) {
	d := dev(t, 0)
	id := d.Create(nil)
	testkit.Eventually(t, 10*time.Second, func() bool {
		return daemon.Find(d.Actors("?session="+id), "surface", daemon.SlowDomainName) != nil
	}, "the slow domain")
	const n = 60
	wait := d.Flood(id, n)

	var deepest inspect.Actor
	var busy *inspect.Actor // a snapshot that caught a command running
	testkit.Eventually(t, 10*time.Second, func() bool {
		rep := d.Actors("?kind=surface&sort=depth&session=" + id)
		a := daemon.Find(rep, "surface", daemon.SlowDomainName)
		if a == nil {
			return false
		}
		if a.Posted < a.Processed+uint64(a.Depth) {
			t.Fatalf("posted %d < processed %d + depth %d", a.Posted, a.Processed, a.Depth)
		}
		if a.Depth > deepest.Depth {
			deepest = *a
		}
		if a.Current != "" && busy == nil {
			busy = a
		}
		return deepest.Depth >= 10 && busy != nil
	}, "depth ≥ 10 on the slow domain, handling a command")
	if busy.Current != "*surfacedv1.RunCommand" || busy.CurrentForMS == nil {
		t.Errorf("a flooded domain is handling a command: %+v", busy)
	}
	// sort=depth: deepest first (the flood queues in the session actor too,
	// on its way to the domain).
	if rep := d.Actors("?sort=depth"); !slices.IsSortedFunc(rep.Actors, func(a, b inspect.Actor) int { return b.Depth - a.Depth }) {
		t.Errorf("sort=depth: %+v", rep.Actors)
	}

	if ok := wait(); ok != n {
		t.Fatalf("%d of %d commands succeeded", ok, n)
	}
	// The last answer may leave before the domain's mailbox run that sent
	// it has ended (the inspector counts a message once its run ends).
	var a *inspect.Actor
	testkit.Eventually(t, 10*time.Second, func() bool {
		a = daemon.Find(d.Actors("?session="+id), "surface", daemon.SlowDomainName)
		return a != nil && a.Depth == 0 && a.Processed >= n && a.Current == ""
	}, "the slow domain drained and idle")
	// Each command slept 20 ms: the window says so (p50 is lower: the
	// domain also handles its store's write acknowledgements, which are fast).
	if a.P50US <= 0 || a.P99US < 15_000 || a.P99US < a.P50US {
		t.Fatalf("latency window: p50 %d µs, p99 %d µs", a.P50US, a.P99US)
	}
	// sort=latency: slowest first.
	key := func(a inspect.Actor) int64 {
		if a.CurrentForMS != nil && *a.CurrentForMS*1000 > a.P99US {
			return *a.CurrentForMS * 1000
		}
		return a.P99US
	}
	if rep := d.Actors("?sort=latency"); !slices.IsSortedFunc(rep.Actors, func(a, b inspect.Actor) int { return int(key(b) - key(a)) }) {
		t.Fatalf("sort=latency: %+v", rep.Actors)
	}

	if st, raw := d.Do("DELETE", "/api/sessions/"+id, nil); st != http.StatusOK {
		t.Fatalf("delete: %d %s", st, raw)
	}
	// Domain and agent stop at once; the ended session's actor after its linger.
	testkit.Eventually(t, 5*time.Second, func() bool {
		return len(d.Actors("?session="+id).Actors) == 0
	}, "every entry of the session gone")
}

func TestStreamSendsSnapshotsAndEndsOnShutdown(t *testing.T) {
	d := dev(t, 0)
	id := d.Create(nil)
	s := testkit.OpenSSE(t, d.URL+"/debug/actors/stream?session="+id, d.Auth())
	if ct := s.Resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	first := s.Wait(t, 5*time.Second, "first snapshot", testkit.IsKind("actors"))
	if first.Data["node"] != "test-node" {
		t.Fatalf("first event: %s", first.Raw)
	}
	start := time.Now()
	// Live: the next events follow about once a second and see the session's actors.
	s.Wait(t, 5*time.Second, "a snapshot with the slow domain", func(e testkit.Event) bool {
		if e.Kind != "actors" {
			return false
		}
		for _, a := range e.Data["actors"].([]any) {
			if a.(map[string]any)["domain"] == daemon.SlowDomainName {
				return true
			}
		}
		return false
	})
	s.Wait(t, 3*time.Second, "another snapshot", testkit.IsKind("actors"))
	if el := time.Since(start); el < 700*time.Millisecond {
		t.Fatalf("two snapshots after %s: not once a second", el)
	}
	d.Debug.Close()
	end := s.Wait(t, 3*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "shutdown" {
		t.Fatalf("end: %s", end.Raw)
	}
	select {
	case <-s.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the stream stayed open after end")
	}
	// New streams are refused once closed.
	if _, st, _ := testkit.TryOpenSSE(d.URL+"/debug/actors/stream", d.Auth()); st != http.StatusServiceUnavailable {
		t.Fatalf("stream after Close: %d", st)
	}
}

func TestBadQueriesAreRefused(t *testing.T) {
	d := dev(t, 0)
	cases := []struct {
		query, field, msg string
	}{
		{"?kind=sesion", "kind", `kind must be one of session, surface, agentproc, sse, ws, acp, not "sesion"`},
		{"?sort=size", "sort", `sort must be depth or latency, not "size"`},
		{"?session=a%0Ab", "session", "session is not a session id"},
		{"?sesion=abc", "sesion", `unknown query parameter "sesion"; the parameters are kind, session and sort`},
		{"?sort=depth&sort=latency", "sort", "the query parameter sort is given more than once"},
	}
	for _, path := range []string{"/debug/actors", "/debug/actors/stream"} {
		for _, c := range cases {
			st, raw := d.Do("GET", path+c.query, nil)
			var e struct {
				Error struct {
					Code, Message string
					Fields        []string
				}
			}
			_ = json.Unmarshal(raw, &e)
			if st != http.StatusBadRequest || e.Error.Code != "invalid_field" || e.Error.Message != c.msg ||
				!slices.Equal(e.Error.Fields, []string{c.field}) {
				t.Errorf("%s%s: %d %s", path, c.query, st, raw)
			}
		}
	}
	if st, raw := d.Do("POST", "/debug/actors", "{}"); st != http.StatusMethodNotAllowed || !strings.Contains(string(raw), "method_not_allowed") {
		t.Errorf("POST: %d %s", st, raw)
	}
	for _, p := range []string{"/debug/nope", "/debug/actors/nope", "/debug/pprof/", "/debug/pprof/heap"} {
		if st, raw := d.Do("GET", p, nil); st != http.StatusNotFound || !strings.Contains(string(raw), "no_route") {
			t.Errorf("%s: %d %s (pprof lives only on --pprof-addr)", p, st, raw)
		}
	}
}

func TestPageAndAssets(t *testing.T) {
	d := dev(t, 0)
	st, raw := d.Do("GET", "/debug/", nil)
	if st != http.StatusOK || !strings.Contains(string(raw), `<script src="inspector.js">`) {
		t.Fatalf("page: %d %.200s", st, raw)
	}
	if strings.Contains(string(raw), "http://") || strings.Contains(string(raw), "https://") {
		t.Fatal("the page loads something from elsewhere")
	}
	for path, ct := range map[string]string{
		"/debug/":              "text/html; charset=utf-8",
		"/debug/index.html":    "text/html; charset=utf-8",
		"/debug/inspector.js":  "text/javascript; charset=utf-8",
		"/debug/inspector.css": "text/css; charset=utf-8",
	} {
		req, _ := http.NewRequest("GET", d.URL+path, nil)
		req.Header = d.Auth()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ct ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: %d %q %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Security-Policy"))
		}
	}
	// /debug redirects to /debug/ (the page's links are relative).
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", d.URL+"/debug", nil)
	req.Header = d.Auth()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/debug/" {
		t.Fatalf("/debug: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// The debug endpoints sit behind the same gates as the API.
func TestGatesApply(t *testing.T) {
	d := dev(t, 0)
	noAuth := http.Header{"Authorization": {""}}
	for _, p := range []string{"/debug/actors", "/debug/actors/stream", "/debug/", "/debug/inspector.js"} {
		if st, raw := d.Do("GET", p, nil, noAuth); st != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d %s", p, st, raw)
		}
		if st, raw := d.Do("GET", p, nil, http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}); st != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d %s", p, st, raw)
		}
		if st, raw := d.Do("GET", p, nil, http.Header{"Host": {"evil.example"}}); st != http.StatusForbidden || !strings.Contains(string(raw), "host_not_allowed") {
			t.Errorf("%s with a foreign Host: %d %s", p, st, raw)
		}
		if st, raw := d.Do("GET", p, nil, http.Header{"Origin": {"http://evil.example"}}); st != http.StatusForbidden || !strings.Contains(string(raw), "origin_not_allowed") {
			t.Errorf("%s from a foreign Origin: %d %s", p, st, raw)
		}
	}
	// The daemon's own origin passes (the page's EventSource sends it).
	if st, raw := d.Do("GET", "/debug/actors", nil, http.Header{"Origin": {d.URL}}); st != http.StatusOK {
		t.Errorf("own origin: %d %s", st, raw)
	}
	// Query tokens are not API authentication.
	if st, _ := d.Do("GET", "/debug/actors?token="+d.Token, nil, noAuth); st != http.StatusUnauthorized {
		t.Errorf("token in the query: %d", st)
	}
}

// Without --dev there is no inspector: /debug/* answers 404 and nothing is wrapped.
func TestWithoutDevEverythingIs404(t *testing.T) {
	d := daemon.Start(t, plain(0)...)
	d.Create(nil)
	for _, p := range []string{"/debug/actors", "/debug/actors/stream", "/debug/", "/debug"} {
		if st, raw := d.Do("GET", p, nil); st != http.StatusNotFound {
			t.Errorf("%s: %d %s", p, st, raw)
		}
	}
	if d.Inspector != nil {
		t.Fatal("an inspector without dev")
	}
	// No inspector metrics either.
	_, raw := d.Do("GET", "/metrics", nil)
	if strings.Contains(string(raw), "surfaced_actor_") {
		t.Fatal("inspector metrics without dev")
	}
}

func TestMetricsPerKindAreExported(t *testing.T) {
	d := dev(t, 0)
	id := d.Create(nil)
	testkit.Eventually(t, 10*time.Second, func() bool {
		return daemon.Find(d.Actors("?session="+id), "surface", daemon.SlowDomainName) != nil
	}, "the slow domain")
	if ok := d.Flood(id, 5)(); ok != 5 {
		t.Fatalf("%d of 5 commands", ok)
	}
	_, raw := d.Do("GET", "/metrics", nil)
	text := string(raw)
	for _, want := range []string{
		`surfaced_actor_mailbox_depth_count{kind="surface"}`,
		`surfaced_actor_handling_seconds_count{kind="surface"} `,
		`surfaced_actor_handling_seconds_count{kind="session"}`,
		`surfaced_actors{kind="agentproc"} 1`,
		`surfaced_actor_dead_letters_total`,
		`surfaced_actor_restarts_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A stream ends with end{revoked} when its token leaves the tokens file.
func TestStreamEndsWhenTheTokenIsRevoked(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"})
	d := dev(t, 0, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }))
	s := testkit.OpenSSE(t, d.URL+"/debug/actors/stream", http.Header{"Authorization": {"Bearer alice-token-0123456789abcdef"}})
	s.Wait(t, 5*time.Second, "first snapshot", testkit.IsKind("actors"))
	daemon.WriteTokens(t, tokens, map[string]string{"bob": "bob-token-0123456789abcdef"})
	end := s.Wait(t, 5*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "revoked" {
		t.Fatalf("end: %s", end.Raw)
	}
}
