package mcpgw_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// The official Go SDK's client (github.com/modelcontextprotocol/go-sdk,
// the version go.mod pins) against a real daemon, in both protocol
// versions it speaks: 2026-07-28 (its default: stateless, subscriptions on
// a subscriptions/listen request) and 2025-11-25 (initialize, a stateful
// session, notifications on the GET stream).

const (
	stateless = "2026-07-28"
	stateful  = "2025-11-25"
)

var versions = []string{stateless, stateful}

// bearer adds the token to every request of the SDK's transport.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// client is a connected Go SDK client and what it heard.
type client struct {
	*mcp.ClientSession
	mu       sync.Mutex
	updated  []string
	progress []string
	changed  chan string
	stepped  chan string
}

func (c *client) updates() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.updated...)
}

func connect(t *testing.T, d *daemon.Daemon, token, path, version string) *client {
	t.Helper()
	c := &client{changed: make(chan string, 100), stepped: make(chan string, 1000)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "surfaced-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updated = append(c.updated, r.Params.URI)
			c.mu.Unlock()
			c.changed <- r.Params.URI
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, r.Params.Message)
			c.mu.Unlock()
			select {
			case c.stepped <- r.Params.Message:
			default:
			}
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: d.URL + path, DisableStandaloneSSE: false,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s (%s): %v", path, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	c.ClientSession = cs
	return c
}

// call calls a tool and decodes its structured content.
func (c *client) call(t *testing.T, name string, args any) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return structured(t, res), res
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func ready(t testing.TB, d *daemon.Daemon, id string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool {
		_, out := d.JSON("GET", "/api/sessions/"+id, nil)
		return out["status"] == "ready"
	}, "the session ready")
}

func TestGoSDK(t *testing.T) {
	d := daemon.Start(t, daemon.Agents(fakeAgent(t, "-schemas")))
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			c := connect(t, d, d.Token, "/mcp", v)
			tools, err := c.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			for _, want := range []string{"list_agents", "list_sessions", "create_session", "get_session", "prompt", "abort", "run_command", "read_snapshot", "answer_dialog"} {
				if !strings.Contains(strings.Join(names, ","), want) {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			out, _ := c.call(t, "create_session", map[string]any{"title": "from mcp " + v})
			id, _ := out["sessionId"].(string)
			if id == "" {
				t.Fatalf("create_session: %v", out)
			}
			ready(t, d, id)
			browser := d.SSE(id, "")
			defer browser.Close()
			browser.Wait(t, 10*time.Second, "the first snapshot", testkit.IsState("surface:demo", 1))

			// A command through MCP: its result and the new rev; the browser sees it.
			out, res := c.call(t, "run_command", map[string]any{"sessionId": id, "domain": "demo", "action": "increment"})
			if res.IsError || out["rev"] != 2.0 || out["ok"] != true {
				t.Fatalf("run_command: %v", out)
			}
			browser.Wait(t, 10*time.Second, "the browser sees rev 2", testkit.IsState("surface:demo", 2))

			// Subscribe; a browser's button press is heard.
			uri := "surfaced://sessions/" + id + "/surfaces/demo"
			if err := c.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			st, body := d.Do("POST", "/api/sessions/"+id+"/surfaces/demo/increment", map[string]any{})
			if st != http.StatusOK {
				t.Fatalf("browser command: %d %s", st, body)
			}
			waitUpdate(t, c, uri)
			rr, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatal(err)
			}
			if got := rr.Contents[0]; !strings.Contains(got.Text, `"count":2`) || got.Meta["rev"] != 3.0 {
				t.Errorf("read %s: %s %v", uri, got.Text, got.Meta)
			}
			// Its own command is heard too (whoever made the rev).
			c.call(t, "run_command", map[string]any{"sessionId": id, "domain": "demo", "action": "increment"})
			waitUpdate(t, c, uri)
			if err := c.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatalf("unsubscribe: %v", err)
			}

			// read_snapshot and get_session.
			out, _ = c.call(t, "read_snapshot", map[string]any{"sessionId": id, "domain": "demo"})
			if out["rev"] != 4.0 {
				t.Errorf("read_snapshot: %v", out)
			}
			out, _ = c.call(t, "get_session", map[string]any{"sessionId": id})
			if out["status"] != "ready" || len(out["surfaces"].([]any)) != 1 {
				t.Errorf("get_session: %v", out)
			}
		})
	}
}

func waitUpdate(t *testing.T, c *client, uri string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-c.changed:
			if got == uri {
				return
			}
		case <-timeout:
			t.Fatalf("no notifications/resources/updated for %s (heard %v)", uri, c.updates())
		}
	}
}

// fakeAgent is the scriptable test agent with flags.
func fakeAgent(t *testing.T, flags ...string) daemonAgent {
	return daemonAgent{Name: "fake", Title: "Fake", Argv: testkit.FakeAgent(t, flags...)}
}

// TestPromptProgressAndCancel: a prompt streams progress and answers the
// turn's text; a cancelled prompt aborts its turn.
func TestPromptProgressAndCancel(t *testing.T) {
	d := daemon.Start(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			c := connect(t, d, d.Token, "/mcp", v)
			id := d.Create(nil)
			ready(t, d, id)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "prompt", Arguments: map[string]any{"sessionId": id, "message": "slow"},
				Meta: mcp.Meta{"progressToken": "p1"}})
			if err != nil {
				t.Fatal(err)
			}
			out := structured(t, res)
			if res.IsError || out["stopReason"] != "end_turn" || !strings.Contains(out["text"].(string), "chunk") {
				t.Fatalf("prompt: %v", out)
			}
			c.mu.Lock()
			steps := len(c.progress)
			c.mu.Unlock()
			if steps < 10 {
				t.Errorf("only %d progress notifications for a streamed turn", steps)
			}

			// Cancel mid-turn: the turn ends aborted.
			browser := d.SSE(id, "")
			defer browser.Close()
			cctx, ccancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := c.CallTool(cctx, &mcp.CallToolParams{Name: "prompt", Arguments: map[string]any{"sessionId": id, "message": "hang"},
					Meta: mcp.Meta{"progressToken": "p2"}})
				done <- err
			}()
			browser.Wait(t, 10*time.Second, "the turn streams", testkit.IsChat("text-delta"))
			ccancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call: %v", err)
			}
			browser.Wait(t, 10*time.Second, "the turn aborted", testkit.IsChat("abort"))
		})
	}
}

// TestDialogAnsweredOverMCP: the prompt reports the agent's dialog as
// progress; answer_dialog answers it, and the turn goes on.
func TestDialogAnsweredOverMCP(t *testing.T) {
	d := daemon.Start(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			c := connect(t, d, d.Token, "/mcp", v)
			id := d.Create(nil)
			ready(t, d, id)
			type answered struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan answered, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "prompt", Arguments: map[string]any{"sessionId": id, "message": "ask"},
					Meta: mcp.Meta{"progressToken": "d1"}})
				done <- answered{res, err}
			}()
			var dialogID string
			testkit.Eventually(t, 10*time.Second, func() bool {
				out, _ := c.call(t, "get_session", map[string]any{"sessionId": id})
				ds, _ := out["dialogs"].([]any)
				if len(ds) == 1 {
					dialogID, _ = ds[0].(map[string]any)["id"].(string)
				}
				return dialogID != ""
			}, "the pending dialog listed")
			out, res := c.call(t, "answer_dialog", map[string]any{"sessionId": id, "dialogId": dialogID, "confirmed": true})
			if res.IsError {
				t.Fatalf("answer_dialog: %v", out)
			}
			a := <-done
			if a.err != nil {
				t.Fatal(a.err)
			}
			out = structured(t, a.res)
			if !strings.Contains(out["text"].(string), "true") {
				t.Errorf("the turn after the answer: %v", out)
			}
			c.mu.Lock()
			progress := strings.Join(c.progress, "\n")
			c.mu.Unlock()
			if !strings.Contains(progress, "dialog "+dialogID) {
				t.Errorf("no progress told of the dialog: %s", progress)
			}
			// Answering it again: the dialog is gone.
			out, res = c.call(t, "answer_dialog", map[string]any{"sessionId": id, "dialogId": dialogID, "confirmed": true})
			if !res.IsError {
				t.Errorf("a second answer: %v", out)
			}
		})
	}
}

const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef01"
)

func twoSubjects(t *testing.T) daemon.Option {
	path := t.TempDir() + "/tokens.json"
	daemon.WriteTokens(t, path, map[string]string{"alice": aliceToken, "bob": bobToken})
	return daemon.Guard(func(g *guard.Config) { g.TokensFile = path })
}

// TestOwnership: another subject's session answers as a missing one, in
// every tool, resource and subscription.
func TestOwnership(t *testing.T) {
	d := daemon.Start(t, twoSubjects(t))
	alice := d.As(aliceToken)
	id := alice.Create(nil)
	ready(t, alice, id)
	missing := strings.Repeat("a", len(id)) // well formed, and nobody's
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			bob := connect(t, d, bobToken, "/mcp", v)
			for _, tc := range []struct {
				tool string
				args map[string]any
			}{
				{"get_session", map[string]any{}},
				{"run_command", map[string]any{"domain": "demo", "action": "increment"}},
				{"read_snapshot", map[string]any{"domain": "demo"}},
				{"prompt", map[string]any{"message": "hi"}},
				{"abort", map[string]any{}},
				{"answer_dialog", map[string]any{"dialogId": "x", "confirmed": true}},
			} {
				var answers []string
				for _, sid := range []string{id, missing} {
					args := map[string]any{"sessionId": sid}
					for k, v := range tc.args {
						args[k] = v
					}
					out, res := bob.call(t, tc.tool, args)
					if !res.IsError || errCode(out) != "not_found" {
						t.Errorf("%s on %s: %v", tc.tool, sid, out)
					}
					msg := strings.ReplaceAll(res.Content[0].(*mcp.TextContent).Text, sid, "ID")
					answers = append(answers, msg)
				}
				if answers[0] != answers[1] {
					t.Errorf("%s: foreign %q, missing %q", tc.tool, answers[0], answers[1])
				}
			}
			for _, sid := range []string{id, missing} {
				uri := "surfaced://sessions/" + sid + "/surfaces/demo"
				_, err := bob.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("read %s: %v", sid, err)
				}
				if v == stateful {
					// (2026-07-28's Subscribe opens its listen request in the
					// background and reports nothing: TestListenRefused.)
					err = bob.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri})
					if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
						t.Errorf("subscribe %s: %v", sid, err)
					}
				}
			}
			// Alice's session is untouched.
			_, out := alice.JSON("GET", "/api/sessions/"+id+"/state", nil)
			if st := out["entries"].(map[string]any)["surface:demo"].(map[string]any); st["rev"] != 1.0 {
				t.Errorf("alice's demo: %v", st)
			}
		})
	}
}

type daemonAgent = surfaced.AgentSpec
