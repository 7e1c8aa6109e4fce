package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store/memstore"
)

type daemon struct {
	t      testing.TB
	url    string
	token  string
	rt     *surfaced.Runtime
	srv    *gateway.Server
	hs     *http.Server
	tokens string // tokens file path, when used
}

type dopt struct {
	cfg    surfaced.Config
	limits gateway.Limits
	guard  guard.Config
}

type option func(*dopt)

func agents(a ...surfaced.AgentSpec) option { return func(o *dopt) { o.cfg.Agents = a } }
func gwLimits(l gateway.Limits) option      { return func(o *dopt) { o.limits = l } }
func sessLimits(l surfaced.Limits) option {
	return func(o *dopt) { o.cfg.Limits = l }
}
func quotas(q surfaced.Quotas) option       { return func(o *dopt) { o.cfg.Quotas = q } }
func guardCfg(f func(*guard.Config)) option { return func(o *dopt) { f(&o.guard) } }

func start(t testing.TB, opts ...option) *daemon {
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
	if gc.Token == "" && !gc.NoAuth && gc.TokensFile == "" {
		gc.Token = "launch-token-" + strings.Repeat("x", 16)
	}
	g, err := guard.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	srv := gateway.New(gateway.Options{Runtime: rt, Guard: g, Limits: o.limits})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	d := &daemon{t: t, url: "http://" + ln.Addr().String(), token: gc.Token, rt: rt, srv: srv, hs: hs, tokens: gc.TokensFile}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		_ = rt.Shutdown(ctx)
		srv.Close(ctx)
		_ = hs.Shutdown(ctx)
		hs.Close()
		g.Close()
	})
	return d
}

func (d *daemon) auth() http.Header {
	return http.Header{"Authorization": {"Bearer " + d.token}}
}

func (d *daemon) as(token string) *daemon {
	c := *d
	c.token = token
	return &c
}

// do sends a request; body may be nil, a string (sent raw as JSON) or a value.
func (d *daemon) do(method, path string, body any, hdr ...http.Header) (int, map[string]any) {
	d.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, d.url+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range d.auth() {
		req.Header[k] = v
	}
	for _, h := range hdr {
		for k, v := range h {
			if k == "Host" {
				req.Host = v[0]
				continue
			}
			if len(v) == 0 {
				req.Header.Del(k)
			} else {
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
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"_raw": string(raw)}
	}
	return resp.StatusCode, out
}

func (d *daemon) create(body any) string {
	d.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	st, out := d.do("POST", "/api/sessions", body)
	if st != http.StatusCreated {
		d.t.Fatalf("create: %d %v", st, out)
	}
	return out["sessionId"].(string)
}

func (d *daemon) sse(id, last string) *testkit.SSE {
	d.t.Helper()
	h := d.auth()
	if last != "" {
		h.Set("Last-Event-ID", last)
	}
	return testkit.OpenSSE(d.t, d.url+"/api/sessions/"+id+"/events", h)
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func writeTokens(t testing.TB, path string, entries map[string]string) {
	t.Helper()
	type tok struct {
		Subject string `json:"subject"`
		SHA256  string `json:"sha256"`
	}
	var list []tok
	for subject, token := range entries {
		list = append(list, tok{Subject: subject, SHA256: sha256hex(token)})
	}
	b, _ := json.Marshal(map[string]any{"tokens": list})
	tmp := filepath.Join(filepath.Dir(path), ".tokens.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

type gatewayLimits = gateway.Limits

func startTB(t testing.TB, opts ...option) *daemon { return start(t, opts...) }

func (d *daemon) createTB(t testing.TB) string { return d.create(nil) }

func (d *daemon) doTB(t testing.TB, method, path string, body any) (int, map[string]any) {
	return d.do(method, path, body)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestMain(m *testing.M) {
	if os.Getenv("SURFACED_IDLE_CLIENTS") != "" {
		idleClients()
	}
	os.Exit(m.Run())
}
