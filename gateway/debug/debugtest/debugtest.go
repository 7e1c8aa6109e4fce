// Package debugtest starts a real daemon in process for the inspector's
// tests (the debug endpoints' and `surfaced inspect`'s): the runtime on a
// memory store with the fake agent and a deliberately slow native domain,
// the gateway behind the real guard on 127.0.0.1:0, and, in dev mode, the
// inspector wired the way cmd/surfaced wires it.
package debugtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/debug"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store/memstore"
)

// SlowDomain is the name of the slow native domain; its one command is "work".
const SlowDomain = "slow"

// Options configure Start.
type Options struct {
	// Dev mounts the inspector (the daemon's --dev).
	Dev bool
	// SlowDelay is how long each "work" command of the slow domain sleeps (20 ms).
	SlowDelay time.Duration
	// Guard adjusts the guard's config (Addr is set by Start; a token is
	// set unless the config has one, a tokens file or NoAuth).
	Guard func(*guard.Config)
	// Limits of the sessions; EndedLinger defaults to 200 ms here so that
	// an ended session's actor goes quickly.
	Limits surfaced.Limits
}

// Daemon is a running in-process daemon.
type Daemon struct {
	t         testing.TB
	URL       string // http://127.0.0.1:port
	Token     string
	Runtime   *surfaced.Runtime
	Inspector *inspect.Inspector // nil unless Dev
	Debug     *debug.Handler     // nil unless Dev
	Guard     *guard.Guard
}

// Start starts a daemon; it stops at the end of the test.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	if o.SlowDelay <= 0 {
		o.SlowDelay = 20 * time.Millisecond
	}
	if o.Limits.EndedLinger == 0 {
		o.Limits.EndedLinger = 200 * time.Millisecond
	}
	delay := o.SlowDelay
	slow := surface.Define(SlowDomain, struct{ N int }{}, map[string]surface.Command[struct{ N int }]{
		"work": func(ctx *surface.Ctx[struct{ N int }], _ json.RawMessage) (any, error) {
			time.Sleep(delay)
			ctx.SetState(func(s struct{ N int }) struct{ N int } { s.N++; return s })
			return nil, nil
		},
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := surfaced.Config{
		Store:   memstore.New(),
		Agents:  []surfaced.AgentSpec{{Name: "fake", Title: "Fake", Argv: testkit.FakeAgent(t)}},
		Domains: []surfaced.DomainBinding{{Domain: slow}},
		Limits:  o.Limits,
		Logger:  quiet,
		NodeID:  "test-node",
	}
	d := &Daemon{t: t}
	if o.Dev {
		d.Inspector = inspect.New(inspect.Options{})
		cfg.Props = d.Inspector.Props
	}
	rt, err := surfaced.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.Runtime = rt
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var gc guard.Config
	if o.Guard != nil {
		o.Guard(&gc)
	}
	gc.Addr = ln.Addr().String()
	gc.Logger = quiet
	if gc.Token == "" && !gc.NoAuth && gc.TokensFile == "" {
		gc.Token = "debug-test-token-" + strings.Repeat("x", 16)
	}
	g, err := guard.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	d.Guard = g
	d.Token = gc.Token
	opts := gateway.Options{Runtime: rt, Guard: g, Logger: quiet}
	var stopDead func()
	if o.Dev {
		if err := d.Inspector.Register(rt.Registry()); err != nil {
			t.Fatal(err)
		}
		stopDead = d.Inspector.WatchDeadLetters(rt.System())
		d.Debug = debug.New(debug.Options{Inspector: d.Inspector, Node: rt.NodeID(), Guard: g, Logger: quiet})
		opts.Props = d.Inspector.GatewayProps
		opts.Mounts = map[string]http.Handler{debug.Prefix: d.Debug}
	}
	srv := gateway.New(opts)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if d.Debug != nil {
		hs.RegisterOnShutdown(d.Debug.Close)
	}
	go func() { _ = hs.Serve(ln) }()
	d.URL = "http://" + ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		_ = rt.Shutdown(ctx)
		srv.Close(ctx)
		_ = hs.Shutdown(ctx)
		hs.Close()
		g.Close()
		if stopDead != nil {
			stopDead()
		}
	})
	return d
}

// Auth is the bearer header of the daemon's token.
func (d *Daemon) Auth() http.Header {
	return http.Header{"Authorization": {"Bearer " + d.Token}}
}

// Do sends a request with the token; body may be nil, a string (raw JSON)
// or a value. Headers in hdr replace the defaults ("Host" sets the Host; an
// empty value deletes the header). It returns the status and the raw body.
func (d *Daemon) Do(method, path string, body any, hdr ...http.Header) (int, []byte) {
	d.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, d.URL+path, r)
	if err != nil {
		d.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range d.Auth() {
		req.Header[k] = v
	}
	for _, h := range hdr {
		for k, v := range h {
			switch {
			case k == "Host":
				req.Host = v[0]
			case len(v) == 0 || v[0] == "":
				req.Header.Del(k)
			default:
				req.Header[k] = v
			}
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// Create creates a session and returns its id.
func (d *Daemon) Create() string {
	d.t.Helper()
	st, raw := d.Do("POST", "/api/sessions", map[string]any{})
	if st != http.StatusCreated {
		d.t.Fatalf("create session: %d %s", st, raw)
	}
	var out struct{ SessionID string }
	if err := json.Unmarshal(raw, &out); err != nil || out.SessionID == "" {
		d.t.Fatalf("create session: %s", raw)
	}
	return out.SessionID
}

// Actors fetches /debug/actors with the query (e.g. "?session=...") and
// fails the test unless it answers 200 with a report.
func (d *Daemon) Actors(query string) inspect.Report {
	d.t.Helper()
	st, raw := d.Do("GET", debug.Prefix+"/actors"+query, nil)
	if st != http.StatusOK {
		d.t.Fatalf("GET /debug/actors%s: %d %s", query, st, raw)
	}
	var rep inspect.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		d.t.Fatalf("GET /debug/actors%s: %v: %s", query, err, raw)
	}
	return rep
}

// Flood sends n "work" commands to the slow domain of a session at once,
// over HTTP, and returns a function that waits for all their answers and
// returns how many succeeded.
func (d *Daemon) Flood(session string, n int) (wait func() int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	client := &http.Client{Timeout: 60 * time.Second}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+session+"/surfaces/"+SlowDomain+"/work", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+d.Token)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"ok":true`)) {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	return func() int {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return ok
	}
}

// Eventually polls cond every 20 ms until it holds, failing the test after
// timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Find returns the actor of the report with kind (and domain, when not
// empty), or nil.
func Find(rep inspect.Report, kind, domain string) *inspect.Actor {
	for i := range rep.Actors {
		a := &rep.Actors[i]
		if a.Kind == kind && (domain == "" || a.Domain == domain) {
			return a
		}
	}
	return nil
}
