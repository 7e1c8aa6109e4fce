package pitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store/memstore"
)

// wait bounds every wait on the real pi (node starts in ~2 s; slower under -race).
const wait = 45 * time.Second

// daemon is a runtime with the browser gateway and the ACP mount (/acp) on
// 127.0.0.1.
type daemon struct {
	t     testing.TB
	url   string
	token string
	rt    *surfaced.Runtime
}

func testLogger() *slog.Logger {
	if os.Getenv("PITEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startDaemon(t testing.TB, limits surfaced.Limits, agents ...surfaced.AgentSpec) *daemon {
	t.Helper()
	return startDaemonWith(t, limits, gateway.Limits{}, agents...)
}

// startDaemonWith is startDaemon with the gateway's limits.
func startDaemonWith(t testing.TB, limits surfaced.Limits, gw gateway.Limits, agents ...surfaced.AgentSpec) *daemon {
	t.Helper()
	rt, err := surfaced.New(surfaced.Config{Store: memstore.New(), Agents: agents, Limits: limits, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	token := "pitest-token-" + strings.Repeat("x", 20)
	g, err := guard.New(guard.Config{Addr: ln.Addr().String(), Token: token, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	acp := acpgw.New(acpgw.Options{Runtime: rt, Revoker: g, Logger: testLogger()})
	srv := gateway.New(gateway.Options{Runtime: rt, Guard: g, Logger: testLogger(), Limits: gw,
		Mounts: map[string]http.Handler{acp.Path(): acp.Handler()}, CORSMounts: []string{acp.Path()}})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		_ = rt.Shutdown(ctx)
		acp.Close(ctx)
		_ = hs.Shutdown(ctx)
		hs.Close()
		g.Close()
	})
	return &daemon{t: t, url: "http://" + ln.Addr().String(), token: token, rt: rt}
}

func (d *daemon) auth() http.Header { return http.Header{"Authorization": {"Bearer " + d.token}} }

// do sends a JSON request and decodes the JSON answer.
func (d *daemon) do(method, path string, body any) (int, map[string]any) {
	d.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.url+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range d.auth() {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if json.Unmarshal(raw, &out) != nil {
		out = map[string]any{"_raw": string(raw)}
	}
	return resp.StatusCode, out
}

// create makes a session in cwd (a fresh temporary directory when empty).
func (d *daemon) create(cwd string) string {
	d.t.Helper()
	if cwd == "" {
		cwd = d.t.TempDir()
	}
	st, out := d.do("POST", "/api/sessions", map[string]any{"cwd": cwd})
	if st != http.StatusCreated {
		d.t.Fatalf("create session: %d %v", st, out)
	}
	return out["sessionId"].(string)
}

func (d *daemon) sse(id string) *testkit.SSE {
	d.t.Helper()
	return testkit.OpenSSE(d.t, d.url+"/api/sessions/"+id+"/events", d.auth())
}

// prompt posts a prompt and returns whether it was queued.
func (d *daemon) prompt(id, text string, images ...map[string]string) bool {
	d.t.Helper()
	body := map[string]any{"message": text}
	if len(images) > 0 {
		body["images"] = images
	}
	st, out := d.do("POST", "/api/sessions/"+id+"/prompt", body)
	if st != http.StatusAccepted {
		d.t.Fatalf("prompt %q: %d %v", text, st, out)
	}
	q, _ := out["queued"].(bool)
	return q
}

// ready waits for the session to be ready on s.
func ready(t testing.TB, s *testkit.SSE) {
	t.Helper()
	s.Wait(t, wait, "session ready", testkit.IsStatus("ready"))
}

// turn collects the chat chunks of one turn: from its start to its finish.
type turn struct {
	start  testkit.Event
	chunks []testkit.Event
	finish testkit.Event
	other  []testkit.Event // non-chat events seen meanwhile
}

func (tr *turn) stopReason() string {
	md, _ := tr.finish.Data["messageMetadata"].(map[string]any)
	s, _ := md["stopReason"].(string)
	return s
}

// text joins the text deltas of the turn.
func (tr *turn) text() string { return tr.join("text-delta") }

// reasoning joins the reasoning deltas of the turn.
func (tr *turn) reasoning() string { return tr.join("reasoning-delta") }

func (tr *turn) join(typ string) string {
	var b strings.Builder
	for _, c := range tr.chunks {
		if c.Data["type"] == typ {
			b.WriteString(c.Data["delta"].(string))
		}
	}
	return b.String()
}

// of returns the chunks of a type.
func (tr *turn) of(typ string) []testkit.Event {
	var out []testkit.Event
	for _, c := range tr.chunks {
		if c.Data["type"] == typ {
			out = append(out, c)
		}
	}
	return out
}

// nextTurn reads s until a turn has started and finished.
func nextTurn(t testing.TB, s *testkit.SSE) *turn {
	t.Helper()
	tr := &turn{}
	tr.start = s.Wait(t, wait, "a turn start", testkit.IsChat("start"))
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				t.Fatalf("stream closed during the turn (err %v)", s.Err)
			}
			if ev.Kind != "chat" {
				tr.other = append(tr.other, ev)
				continue
			}
			if ev.Data["type"] == "finish" {
				tr.finish = ev
				return tr
			}
			tr.chunks = append(tr.chunks, ev)
		case <-deadline:
			t.Fatalf("turn did not finish within %s; chunks: %v", wait, tr.chunks)
		}
	}
}

// model starts a scripted model server for the test.
func model(t testing.TB, script llmstub.Script) *llmstub.Server {
	t.Helper()
	srv, err := llmstub.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
