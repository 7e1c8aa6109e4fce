package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

// TestHelloAgent builds the agent and drives the binary over real pipes.
func TestHelloAgent(t *testing.T) {
	bin := agentkittest.Build(t, ".")

	t.Run("ready without surfaces", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		first := p.Next()
		if first.String() != `{"type":"agent_ready","protocol":"surfaced/1","name":"hello"}` {
			t.Errorf("first line %s", first)
		}
		p.Send(agentproc.SimpleCommand{ID: "c", Type: agentproc.CmdGetCommands})
		var r agentproc.Response
		p.AwaitResponse("c").Decode(t, &r)
		if !r.Success || string(r.Data) != `{"commands":[]}` {
			t.Errorf("get_commands %+v %s", r, r.Data)
		}
		p.SendRaw(`{"type":"surface_dispatch","id":"d","domain":"demo","action":"increment","args":null,"state":{},"rev":1}`)
		res := p.Await(agentproc.TypeSurfaceDispatchResult, nil)
		if !strings.Contains(res.String(), `"code":"surface_not_registered"`) {
			t.Errorf("dispatch to a missing domain: %s", res)
		}
	})

	t.Run("echo tool call", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		p.Await(agentproc.TypeAgentReady, nil)
		p.Send(agentproc.PromptCommand{ID: "p", Type: agentproc.CmdPrompt, Message: "echo: hi"})
		var r agentproc.Response
		p.AwaitResponse("p").Decode(t, &r)
		if !r.Success {
			t.Fatalf("prompt %+v", r)
		}
		var start, end agentproc.Event
		p.Await(agentproc.EventToolExecutionStart, nil).Decode(t, &start)
		if start.ToolName != "echo" || start.ToolCallID == "" || string(start.Args) != `{"text":"hi"}` {
			t.Errorf("tool_execution_start %+v args %s", start, start.Args)
		}
		p.Await(agentproc.EventToolExecutionEnd, nil).Decode(t, &end)
		if end.ToolCallID != start.ToolCallID || end.IsError || string(end.Result) != `{"content":[{"type":"text","text":"hi"}]}` {
			t.Errorf("tool_execution_end %+v result %s", end, end.Result)
		}
		var ev agentproc.Event
		p.Await(agentproc.EventAgentEnd, nil).Decode(t, &ev)
		last := ev.Messages[len(ev.Messages)-1]
		if last.Role != "assistant" || !strings.Contains(last.Text(), "The echo tool answered: hi.") {
			t.Errorf("final %+v %q", last, last.Text())
		}
	})

	t.Run("no increment tool", func(t *testing.T) {
		p := agentkittest.Start(t, bin)
		p.Await(agentproc.TypeAgentReady, nil)
		p.Send(agentproc.PromptCommand{ID: "p", Type: agentproc.CmdPrompt, Message: "increment please"})
		var ev agentproc.Event
		p.Await(agentproc.EventAgentEnd, nil).Decode(t, &ev)
		if got := ev.Messages[len(ev.Messages)-1].Text(); !strings.Contains(got, "no increment tool") {
			t.Errorf("reply %q", got)
		}
		for _, l := range p.Seen {
			if l.Type == agentproc.TypeSurfaceCommand || l.Type == agentproc.EventToolExecutionStart {
				t.Errorf("unexpected %s", l)
			}
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
		GoBuild                  string `json:"go_build"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "hello" || m.Title != "Hello" || m.Description == "" || len(m.Command) != 1 || m.GoBuild != "." {
		t.Errorf("manifest %+v", m)
	}
}
