package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

// TestSurfaceDemoAgent builds the agent and drives the binary over real pipes
// the way the daemon does.
func TestSurfaceDemoAgent(t *testing.T) {
	bin := agentkittest.Build(t, ".")

	t.Run("agent_ready first", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		first := p.Next()
		var r agentproc.AgentReady
		first.Decode(t, &r)
		if r.Type != agentproc.TypeAgentReady || r.Protocol != "surfaced/1" || r.Name != "surface-demo" || len(r.Surfaces) != 1 {
			t.Fatalf("first line %s", first)
		}
		s := r.Surfaces[0]
		if s.Domain != "demo" || strings.Join(s.Commands, ",") != "echo,increment" {
			t.Errorf("surface %+v", s)
		}
		if string(s.InitialState) != `{"count":0,"log":[]}` {
			t.Errorf("initialState %s", s.InitialState)
		}
		p.Send(agentproc.SimpleCommand{ID: "c", Type: agentproc.CmdGetCommands})
		var resp agentproc.Response
		p.AwaitResponse("c").Decode(t, &resp)
		if !resp.Success || !strings.Contains(string(resp.Data), `"name":"surface:demo"`) {
			t.Errorf("get_commands %+v", resp)
		}
	})

	t.Run("dispatches", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		p.Await(agentproc.TypeAgentReady, nil)
		dispatch := func(id, action, args, state string) agentproc.SurfaceDispatchResult {
			t.Helper()
			p.SendRaw(`{"type":"surface_dispatch","id":"` + id + `","domain":"demo","action":"` + action +
				`","args":` + args + `,"state":` + state + `,"rev":3}`)
			var res agentproc.SurfaceDispatchResult
			p.Await(agentproc.TypeSurfaceDispatchResult, func(l agentkittest.Line) bool { return l.Map()["id"] == id }).Decode(t, &res)
			return res
		}

		res := dispatch("d1", "increment", "null", `{"count":0,"log":[]}`)
		if string(res.Result) != `{"ok":true,"data":{"count":1}}` || string(res.State) != `{"count":1,"log":[]}` {
			t.Errorf("increment: result %s state %s", res.Result, res.State)
		}
		res = dispatch("d2", "echo", `{"text":"hi"}`, `{"count":5,"log":["a"]}`)
		if string(res.Result) != `{"ok":true,"data":{"echoed":"hi","size":2}}` || string(res.State) != `{"count":5,"log":["a","hi"]}` {
			t.Errorf("echo: result %s state %s", res.Result, res.State)
		}
		res = dispatch("d3", "echo", `{"text":7}`, `{"count":5,"log":[]}`)
		if !strings.Contains(string(res.Result), `"code":"invalid_args"`) || res.State != nil {
			t.Errorf("echo with bad args: result %s state %s", res.Result, res.State)
		}
		res = dispatch("d4", "explode", `{}`, `{"count":0,"log":[]}`)
		if !strings.Contains(string(res.Result), `"ok":false`) || !strings.Contains(string(res.Result), `"code":"unknown_action"`) || res.State != nil {
			t.Errorf("unknown action: result %s state %s", res.Result, res.State)
		}
	})

	t.Run("chat increment moves the counter", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		p.Await(agentproc.TypeAgentReady, nil)
		d := newFakeDomain(t, p, `{"count":0,"log":[]}`)
		// The UI button first: count 1.
		d.uiCommand("increment")
		// Then the chat.
		p.Send(agentproc.PromptCommand{ID: "p1", Type: agentproc.CmdPrompt, Message: "please increment"})
		p.AwaitResponse("p1")
		d.serveAgentCommand()
		msgs := awaitAgentEnd(t, p)
		last := msgs[len(msgs)-1]
		if last.Role != "assistant" || last.StopReason != "stop" || !strings.Contains(last.Text(), "count = 2") {
			t.Errorf("final message %+v %q", last, last.Text())
		}
		if string(d.state) != `{"count":2,"log":[]}` || d.rev != 2 {
			t.Errorf("domain state %s rev %d", d.state, d.rev)
		}
	})

	t.Run("chat through an OpenAI-compatible server", func(t *testing.T) {
		srv := agentkittest.NewOpenAIServer(t, func(r agentkittest.ChatRequest) agentkittest.Reply {
			if r.LastRole() == "tool" {
				var text string
				_ = json.Unmarshal(r.Messages[len(r.Messages)-1].Content, &text)
				return agentkittest.Reply{Events: agentkittest.TextEvents("The counter ", "says "+text+".")}
			}
			return agentkittest.Reply{Events: agentkittest.ToolCallEvents("call_a", "increment", `{`, `}`)}
		})
		p := agentkittest.Start(t, bin,
			agentkit.EnvLLMBaseURL+"="+srv.URL, agentkit.EnvLLMModel+"=demo-llm", agentkit.EnvLLMAPIKey+"=sk-demo")
		p.Await(agentproc.TypeAgentReady, nil)
		d := newFakeDomain(t, p, `{"count":10,"log":[]}`)
		p.Send(agentproc.PromptCommand{ID: "p1", Type: agentproc.CmdPrompt, Message: "bump it"})
		d.serveAgentCommand()
		msgs := awaitAgentEnd(t, p)
		if got := msgs[len(msgs)-1].Text(); got != "The counter says count = 11." {
			t.Errorf("reply %q", got)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || reqs[0].Model != "demo-llm" || reqs[0].Authorization != "Bearer sk-demo" ||
			len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Function.Name != "increment" {
			t.Errorf("requests %+v", reqs)
		}
		p.Send(agentproc.SimpleCommand{ID: "s", Type: agentproc.CmdGetState})
		var resp agentproc.Response
		p.AwaitResponse("s").Decode(t, &resp)
		if !strings.Contains(string(resp.Data), `"provider":"openai-compatible"`) {
			t.Errorf("get_state %s", resp.Data)
		}
	})

	t.Run("crash exits with code 3", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		p.Await(agentproc.TypeAgentReady, nil)
		p.Send(agentproc.PromptCommand{ID: "p1", Type: agentproc.CmdPrompt, Message: "crash"})
		p.EOF()
		code, err := p.Wait(ctx(t))
		if err != nil || code != 3 {
			t.Errorf("exit %d, %v", code, err)
		}
	})

	t.Run("stdin EOF ends the agent cleanly", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		p.Await(agentproc.TypeAgentReady, nil)
		if err := p.CloseStdin(); err != nil {
			t.Fatal(err)
		}
		p.EOF()
		code, err := p.Wait(ctx(t))
		if err != nil || code != 0 {
			t.Errorf("exit %d, %v; stderr:\n%s", code, err, p.Stderr())
		}
	})
}

func TestManifest(t *testing.T) {
	b, err := os.ReadFile("agent.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name, Title, Description string
		Command                  []string
		GoBuild                  string            `json:"go_build"`
		Panels                   map[string]string `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "demo" || m.Title != "Surface demo" || m.Description == "" || len(m.Command) != 1 || m.GoBuild != "." ||
		m.Panels["demo"] != "ui/demo.js" {
		t.Errorf("manifest %+v", m)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return c
}

func awaitAgentEnd(t *testing.T, p *agentkittest.Proc) []agentproc.AgentMessage {
	t.Helper()
	var ev agentproc.Event
	p.Await(agentproc.EventAgentEnd, nil).Decode(t, &ev)
	return ev.Messages
}

// fakeDomain plays the daemon's domain actor for "demo": the lone writer of
// the state, which it sends along with every dispatch.
type fakeDomain struct {
	t     *testing.T
	p     *agentkittest.Proc
	state json.RawMessage
	rev   uint64
	n     int
}

func newFakeDomain(t *testing.T, p *agentkittest.Proc, initial string) *fakeDomain {
	return &fakeDomain{t: t, p: p, state: json.RawMessage(initial)}
}

// run dispatches action to the agent and commits the state it returns.
func (d *fakeDomain) run(action string, args json.RawMessage) agentproc.Result {
	d.t.Helper()
	d.n++
	id := "disp-" + string(rune('a'+d.n))
	d.p.Send(agentproc.SurfaceDispatch{Type: agentproc.TypeSurfaceDispatch, ID: id, Domain: "demo", Action: action,
		Args: args, State: d.state, Rev: d.rev})
	var res agentproc.SurfaceDispatchResult
	d.p.Await(agentproc.TypeSurfaceDispatchResult, func(l agentkittest.Line) bool { return l.Map()["id"] == id }).Decode(d.t, &res)
	if res.State != nil {
		d.state = res.State
		d.rev++
	}
	var r agentproc.Result
	if err := json.Unmarshal(res.Result, &r); err != nil {
		d.t.Fatal(err)
	}
	return r
}

// uiCommand is a command from the browser.
func (d *fakeDomain) uiCommand(action string) {
	d.t.Helper()
	if r := d.run(action, nil); !r.OK {
		d.t.Fatalf("%s failed: %+v", action, r.Error)
	}
}

// serveAgentCommand waits for the agent's surface_command, runs it through
// the domain (a dispatch back to the agent) and answers it.
func (d *fakeDomain) serveAgentCommand() {
	d.t.Helper()
	var c agentproc.SurfaceCommand
	d.p.Await(agentproc.TypeSurfaceCommand, nil).Decode(d.t, &c)
	if c.Domain != "demo" || c.Action != "increment" {
		d.t.Fatalf("surface_command %+v", c)
	}
	r := d.run(c.Action, c.Args)
	d.p.Send(agentproc.SurfaceCommandResult{Type: agentproc.TypeSurfaceCommandResult, ID: c.ID, OK: r.OK, Data: r.Data, Error: r.Error})
}

// The demo in Node (examples/node-agent) and inside pi
// (examples/pi-surface-demo) ship this agent's panel, byte for byte: one
// panel, three agents behind it.
func TestTheOtherDemosShipThisPanel(t *testing.T) {
	for _, name := range []string{"demo.js", "demo.css"} {
		want, err := os.ReadFile("ui/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range []string{"../node-agent/ui/", "../pi-surface-demo/ui/"} {
			got, err := os.ReadFile(other + name)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("%s%s differs from ui/%s: copy it over", other, name, name)
			}
		}
	}
}
