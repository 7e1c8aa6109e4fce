package acpgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store/memstore"
)

// daemon is a real daemon in this process: the runtime, the browser gateway
// and the ACP mount behind the guard, on a real listener on 127.0.0.1:0.
type daemon struct {
	t      testing.TB
	url    string // http://127.0.0.1:port
	acp    string // url + "/acp"
	token  string
	rt     *surfaced.Runtime
	srv    *acpgw.Server
	gw     *gateway.Server
	events *eventLog
	addr   string
	mu     sync.Mutex
	hs     *http.Server
}

type dopt struct {
	cfg     surfaced.Config
	acp     acpgw.Options
	guard   guard.Config
	workDir string
}

type option func(*dopt)

func withAgents(a ...surfaced.AgentSpec) option { return func(o *dopt) { o.cfg.Agents = a } }
func withACP(f func(*acpgw.Options)) option     { return func(o *dopt) { f(&o.acp) } }
func withGuard(f func(*guard.Config)) option    { return func(o *dopt) { f(&o.guard) } }
func withLimits(l surfaced.Limits) option       { return func(o *dopt) { o.cfg.Limits = l } }
func withQuotas(q surfaced.Quotas) option       { return func(o *dopt) { o.cfg.Quotas = q } }

func quietLogger() *slog.Logger {
	if os.Getenv("ACPGW_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

const testToken = "launch-token-xxxxxxxxxxxxxxxx"

func startDaemon(t testing.TB, opts ...option) *daemon {
	t.Helper()
	o := &dopt{}
	for _, f := range opts {
		f(o)
	}
	if o.cfg.Store == nil {
		o.cfg.Store = memstore.New()
	}
	if len(o.cfg.Agents) == 0 {
		o.cfg.Agents = []surfaced.AgentSpec{{Name: "fake", Title: "Fake", Argv: testkit.FakeAgent(t)}}
	}
	o.cfg.Logger = quietLogger()
	rt, err := surfaced.New(o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gc := o.guard
	gc.Addr = ln.Addr().String()
	gc.Logger = o.cfg.Logger
	if gc.Token == "" && !gc.NoAuth && gc.TokensFile == "" {
		gc.Token = testToken
	}
	g, err := guard.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	ao := o.acp
	ao.Runtime = rt
	ao.Revoker = g
	ao.Logger = o.cfg.Logger
	srv := acpgw.New(ao)
	gw := gateway.New(gateway.Options{Runtime: rt, Guard: g, Logger: o.cfg.Logger,
		Mounts: map[string]http.Handler{srv.Path(): srv.Handler()}, CORSMounts: []string{srv.Path()}})
	d := &daemon{t: t, url: "http://" + ln.Addr().String(), token: gc.Token, rt: rt, srv: srv, gw: gw, addr: ln.Addr().String()}
	d.acp = d.url + srv.Path()
	d.events = newEventLog(rt)
	d.serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
		_ = rt.Shutdown(ctx)
		gw.Close(ctx)
		srv.Close(ctx)
		d.mu.Lock()
		hs := d.hs
		d.mu.Unlock()
		if hs != nil {
			_ = hs.Shutdown(ctx)
			hs.Close()
		}
		g.Close()
		d.events.stop()
	})
	return d
}

func (d *daemon) serve(ln net.Listener) {
	hs := &http.Server{Handler: d.gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	d.mu.Lock()
	d.hs = hs
	d.mu.Unlock()
	go hs.Serve(ln)
}

// outage closes the listener and every HTTP connection: to a client the
// daemon is gone. The runtime and the mount live on.
func (d *daemon) outage() {
	d.mu.Lock()
	hs := d.hs
	d.hs = nil
	d.mu.Unlock()
	hs.Close()
}

// restore listens again on the same address.
func (d *daemon) restore() {
	d.t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ {
		if ln, err = net.Listen("tcp", d.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		d.t.Fatal(err)
	}
	d.serve(ln)
}

// eventLog records the daemon's bus events.
type eventLog struct {
	mu    sync.Mutex
	all   []any
	ch    chan any
	unsub func()
}

func newEventLog(rt *surfaced.Runtime) *eventLog {
	l := &eventLog{ch: make(chan any, 10000)}
	l.unsub = rt.Subscribe(func(ev any) {
		switch ev.(type) {
		case acpgw.ConnectionOpened, acpgw.ConnectionClosed, acpgw.SessionAttached:
			l.mu.Lock()
			l.all = append(l.all, ev)
			l.mu.Unlock()
			select {
			case l.ch <- ev:
			default:
			}
		}
	})
	return l
}

func (l *eventLog) stop() { l.unsub() }

func (l *eventLog) wait(t testing.TB, what string, pred func(any) bool) any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-l.ch:
			if pred(ev) {
				return ev
			}
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("timed out waiting for %s; events: %+v", what, l.all)
			return nil
		}
	}
}

// ---------------------------------------------------------------------------
// A raw Streamable HTTP client, for the transport's own rules.

type client struct {
	d       *daemon
	t       testing.TB
	token   string
	agent   string
	connID  string
	nextID  atomic.Int64
	conn    *testkit.SSE
	streams map[string]*testkit.SSE
	mu      sync.Mutex
}

func (d *daemon) client() *client {
	return &client{d: d, t: d.t, token: d.token, streams: map[string]*testkit.SSE{}}
}

func (c *client) header(sessionID string) http.Header {
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	if c.connID != "" {
		h.Set(acpgw.HeaderConnectionID, c.connID)
	}
	if sessionID != "" {
		h.Set(acpgw.HeaderSessionID, sessionID)
	}
	if c.agent != "" {
		h.Set(acpgw.HeaderAgent, c.agent)
	}
	return h
}

// send POSTs a raw body with headers; it returns the status, the body and
// the response headers.
func (d *daemon) send(t testing.TB, method string, body []byte, h http.Header) (int, string, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, d.acp, r)
	for k, v := range h {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, d.acp, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// initialize opens the connection and its connection stream.
func (c *client) initialize() map[string]any {
	c.t.Helper()
	st, body, h := c.d.send(c.t, "POST", mustJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw-test", "version": "1"}}}), c.header(""))
	if st != http.StatusOK {
		c.t.Fatalf("initialize: %d %s", st, body)
	}
	c.connID = h.Get(acpgw.HeaderConnectionID)
	if c.connID == "" {
		c.t.Fatalf("initialize: no %s header", acpgw.HeaderConnectionID)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		c.t.Fatal(err)
	}
	c.conn = testkit.OpenSSE(c.t, c.d.acp, c.header(""))
	return res
}

// stream opens (once) the session's stream.
func (c *client) stream(sessionID string) *testkit.SSE {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streams[sessionID]; s != nil {
		return s
	}
	s := testkit.OpenSSE(c.t, c.d.acp, c.header(sessionID))
	c.streams[sessionID] = s
	return s
}

// request POSTs a request (202 expected) and returns its id.
func (c *client) request(method string, params any, sessionID string) int64 {
	c.t.Helper()
	id := c.nextID.Add(1)
	st, body, _ := c.d.send(c.t, "POST", mustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}), c.header(sessionID))
	if st != http.StatusAccepted {
		c.t.Fatalf("%s: %d %s", method, st, body)
	}
	return id
}

func (c *client) notify(method string, params any, sessionID string) {
	c.t.Helper()
	st, body, _ := c.d.send(c.t, "POST", mustJSON(map[string]any{"jsonrpc": "2.0", "method": method, "params": params}), c.header(sessionID))
	if st != http.StatusAccepted {
		c.t.Fatalf("%s: %d %s", method, st, body)
	}
}

// response waits on a stream for the response to id.
func (c *client) response(s *testkit.SSE, id int64) map[string]any {
	c.t.Helper()
	ev := s.Wait(c.t, 15*time.Second, fmt.Sprintf("response %d", id), func(e testkit.Event) bool {
		v, ok := e.Data["id"].(float64)
		_, isReq := e.Data["method"]
		return ok && int64(v) == id && !isReq
	})
	return ev.Data
}

// call sends a connection-scoped request and waits for its answer on the
// connection stream.
func (c *client) call(method string, params any) map[string]any {
	c.t.Helper()
	return c.response(c.conn, c.request(method, params, ""))
}

// newSession creates a session and opens its stream.
func (c *client) newSession(cwd string) string {
	c.t.Helper()
	res := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	r, ok := res["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("session/new: %v", res)
	}
	sid := r["sessionId"].(string)
	c.stream(sid)
	return sid
}

// prompt sends a text prompt; the answer comes on the session stream.
func (c *client) prompt(sid, text string) int64 {
	c.t.Helper()
	c.stream(sid)
	return c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}, sid)
}

// startSlowTurn starts the fake agent's slow turn (40 chunks, 25 ms apart)
// on sid and waits for its first update; it returns the session stream and
// the prompt's id.
func (c *client) startSlowTurn(sid string) (*testkit.SSE, int64) {
	c.t.Helper()
	s := c.stream(sid)
	id := c.prompt(sid, "slow")
	s.Wait(c.t, 10*time.Second, "the first chunk", func(e testkit.Event) bool { return e.Data["method"] == "session/update" })
	return s, id
}

// updates returns the session/update kinds and texts received on s before
// the response to id, and the response.
func (c *client) turn(sid string, id int64) (texts string, kinds []string, resp map[string]any) {
	c.t.Helper()
	s := c.stream(sid)
	var b strings.Builder
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				c.t.Fatalf("session stream closed: %v", s.Err)
			}
			if ev.Data["method"] == "session/update" {
				u := ev.Data["params"].(map[string]any)["update"].(map[string]any)
				k := u["sessionUpdate"].(string)
				kinds = append(kinds, k)
				if k == "agent_message_chunk" {
					b.WriteString(u["content"].(map[string]any)["text"].(string))
				}
				continue
			}
			if v, ok := ev.Data["id"].(float64); ok && int64(v) == id {
				if _, isReq := ev.Data["method"]; !isReq {
					return b.String(), kinds, ev.Data
				}
			}
		case <-deadline:
			c.t.Fatalf("no answer to prompt %d; got %v", id, kinds)
		}
	}
}

func stopReason(resp map[string]any) string {
	r, _ := resp["result"].(map[string]any)
	s, _ := r["stopReason"].(string)
	return s
}

func rpcError(resp map[string]any) (int, string, map[string]any) {
	e, ok := resp["error"].(map[string]any)
	if !ok {
		return 0, "", nil
	}
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	data, _ := e["data"].(map[string]any)
	return int(code), msg, data
}

func tempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
