package signin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// bearerAuth adds a bearer token to every request (the MCP client's).
type bearerAuth struct{ token string }

func (b bearerAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAccessOnEveryRoute: an agent a caller may not use is one that does
// not exist for it, on every route that lists agents or creates sessions:
// the HTTP API, ACP (its agent list and session/new), MCP (list_agents
// and create_session) and AG-UI (a thread's first run). demo is for the staff group and for carol by name;
// other is open to everyone.
func TestAccessOnEveryRoute(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	fake := testkit.FakeAgent(t)
	carol := subjectOf(op, "carol")
	d, _ := bearerDaemon(t, op, clk, time.Hour,
		daemon.Agents(surfaced.AgentSpec{Name: "demo", Argv: fake}, surfaced.AgentSpec{Name: "other", Argv: fake}),
		daemon.Config(func(c *surfaced.Config) {
			c.Access = identity.NewAccess(map[string]identity.Rule{"demo": {Subjects: []string{carol}, Groups: []string{"staff"}}})
		}))
	token := func(name string, groups ...string) string {
		c := claims(op, clk.Now(), map[string]any{"sub": name + "-id", "groups": groups})
		if groups == nil {
			delete(c, "groups")
		}
		return op.Mint(c)
	}
	alice, bob, carolTok := token("alice", "staff"), token("bob"), token("carol", "contractors")
	cwd := daemon.TempDir(t)

	for _, c := range []struct {
		name  string
		token string
		demo  bool
	}{{"alice (group staff)", alice, true}, {"bob (no group)", bob, false}, {"carol (by name)", carolTok, true}} {
		t.Run(c.name, func(t *testing.T) {
			// HTTP: the list.
			a := do(t, http.MethodGet, d.URL+"/api/agents", c.token, "")
			var list struct{ Agents []struct{ Name string } }
			_ = json.Unmarshal(a.body, &list)
			var names []string
			for _, ag := range list.Agents {
				names = append(names, ag.Name)
			}
			if want := wantAgents(c.demo); a.status != http.StatusOK || !slices.Equal(names, want) {
				t.Fatalf("GET /api/agents: %d %q, want %q", a.status, names, want)
			}
			// HTTP: creating a session of demo, next to one of an agent that
			// does not exist.
			demo := do(t, http.MethodPost, d.URL+"/api/sessions", c.token, `{"agent":"demo"}`)
			none := do(t, http.MethodPost, d.URL+"/api/sessions", c.token, `{"agent":"nosuch"}`)
			if c.demo {
				if demo.status != http.StatusCreated {
					t.Fatalf("POST /api/sessions demo: %d %s", demo.status, demo.body)
				}
			} else if demo.status != none.status || demo.errorCode(t) != codes.InvalidAgent ||
				strings.ReplaceAll(string(demo.body), "demo", "nosuch") != string(none.body) {
				t.Fatalf("POST /api/sessions demo: %d %s; an agent that does not exist: %d %s", demo.status, demo.body, none.status, none.body)
			}
			if a := do(t, http.MethodPost, d.URL+"/api/sessions", c.token, `{"agent":"other"}`); a.status != http.StatusCreated {
				t.Fatalf("POST /api/sessions other: %d %s", a.status, a.body)
			}

			// ACP: the agent named at initialize, and the list in the error
			// without one.
			acp := d.ACPClient()
			acp.Token, acp.Agent = c.token, "demo"
			acp.Initialize()
			res := acp.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
			acpNone := d.ACPClient()
			acpNone.Token, acpNone.Agent = c.token, "nosuch"
			acpNone.Initialize()
			resNone := acpNone.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
			if c.demo {
				if res["result"] == nil {
					t.Fatalf("ACP session/new demo: %v", res)
				}
			} else {
				code, msg, data := daemon.RPCError(res)
				codeNone, msgNone, dataNone := daemon.RPCError(resNone)
				if code != codeNone || strings.ReplaceAll(msg, "demo", "nosuch") != msgNone || !slices.Equal(anyStrings(data["agents"]), anyStrings(dataNone["agents"])) ||
					slices.Contains(anyStrings(data["agents"]), "demo") {
					t.Fatalf("ACP session/new demo: %v; nosuch: %v", res, resNone)
				}
			}
			// Without an agent named: two agents to choose from are listed;
			// one is the default.
			listing := d.ACPClient()
			listing.Token = c.token
			listing.Initialize()
			res = listing.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
			if c.demo {
				if _, _, data := daemon.RPCError(res); !slices.Equal(anyStrings(data["agents"]), wantAgents(true)) {
					t.Fatalf("ACP's agent list: %v", res)
				}
			} else if res["result"] == nil {
				t.Fatalf("ACP session/new with the one agent bob may use: %v", res)
			}

			// AG-UI: a thread's first run creates its session (a run that
			// prompts nothing: the state).
			run := func(agent string) answer {
				return do(t, http.MethodPost, d.URL+"/ag-ui/"+agent, c.token, `{"threadId":"access","runId":"r1","messages":[]}`)
			}
			aguiDemo, aguiNone := run("demo"), run("nosuch")
			if c.demo {
				if aguiDemo.status != http.StatusOK || !strings.Contains(string(aguiDemo.body), `"type":"RUN_FINISHED"`) {
					t.Fatalf("POST /ag-ui/demo: %d %s", aguiDemo.status, aguiDemo.body)
				}
			} else if aguiDemo.status != http.StatusNotFound || aguiDemo.errorCode(t) != codes.UnknownAgent ||
				strings.ReplaceAll(string(aguiDemo.body), "demo", "nosuch") != string(aguiNone.body) {
				t.Fatalf("POST /ag-ui/demo: %d %s; an agent that does not exist: %d %s", aguiDemo.status, aguiDemo.body, aguiNone.status, aguiNone.body)
			}

			// MCP: list_agents and create_session.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "access-test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.MCPURL, HTTPClient: &http.Client{Transport: bearerAuth{c.token}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_agents"})
			if err != nil || r.IsError {
				t.Fatalf("list_agents: %v %+v", err, r)
			}
			out, _ := json.Marshal(r.StructuredContent)
			if strings.Contains(string(out), `"demo"`) != c.demo || !strings.Contains(string(out), `"other"`) {
				t.Fatalf("MCP list_agents: %s", out)
			}
			r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_session", Arguments: map[string]any{"agent": "demo", "cwd": cwd}})
			if err != nil {
				t.Fatal(err)
			}
			rNone, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_session", Arguments: map[string]any{"agent": "nosuch", "cwd": cwd}})
			if c.demo != !r.IsError {
				t.Fatalf("MCP create_session demo: %+v", r.Content)
			}
			if !c.demo && toolText(r) != strings.ReplaceAll(toolText(rNone), "nosuch", "demo") {
				t.Fatalf("MCP create_session demo: %q; nosuch: %q", toolText(r), toolText(rNone))
			}
		})
	}
}

func wantAgents(demo bool) []string {
	if demo {
		return []string{"demo", "other"}
	}
	return []string{"other"}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
