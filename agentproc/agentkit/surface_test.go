package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

type normState struct {
	N    int      `json:"n"`
	Tags []string `json:"tags"`
}

type normArgs struct {
	By   int    `json:"by"`
	Name string `json:"name"`
}

func normSurface() Surface[normState] {
	return Surface[normState]{
		Domain:  "norm",
		Initial: normState{N: 7, Tags: []string{"init"}},
		Commands: map[string]Command[normState]{
			"set": Func[normState](func(ctx *SurfaceCtx[normState], _ json.RawMessage) (any, error) {
				ctx.SetState(func(s normState) normState { s.N++; return s })
				return map[string]any{"n": ctx.Get().N, "rev": ctx.Rev}, nil
			}),
			"nothing": Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) { return nil, nil }),
			"coded": Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) {
				return nil, &Error{Code: "edit_failed", Message: "the edit did not apply"}
			}),
			"wrapped": Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) {
				return nil, fmt.Errorf("saving: %w", Errorf("quota", "%d of %d used", 10, 10))
			}),
			"plain": Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) {
				return nil, errors.New("disk on fire")
			}),
			"panics": Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) {
				panic("boom")
			}),
			"set-then-fail": Func[normState](func(ctx *SurfaceCtx[normState], _ json.RawMessage) (any, error) {
				ctx.SetState(func(s normState) normState { s.N = 1000; return s })
				return nil, errors.New("changed my mind")
			}),
			"unencodable": Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) {
				return map[string]any{"c": make(chan int)}, nil
			}),
			"typed": Typed(func(ctx *SurfaceCtx[normState], a normArgs) (any, error) {
				ctx.SetState(func(s normState) normState { s.N += a.By; s.Tags = append(s.Tags, a.Name); return s })
				return map[string]any{"n": ctx.Get().N, "args": a}, nil
			}),
			"echo-args": Func[normState](func(_ *SurfaceCtx[normState], args json.RawMessage) (any, error) {
				return args, nil
			}),
		},
	}
}

// TestDispatchNormalization covers every row of "Errors and reserved codes" and
// "Surface domains" in docs/agent-protocol.md as
// seen on the wire: a surface_dispatch in, a surface_dispatch_result out.
func TestDispatchNormalization(t *testing.T) {
	a, logs := newTestAgent(Options{})
	AddSurface(a, normSurface())
	h := start(t, a, logs)

	tests := []struct {
		name      string
		domain    string
		action    string
		args      string
		state     string
		wantOK    bool
		wantData  string // JSON, compared semantically; "" means absent
		wantCode  string
		wantMsg   string // exact message when set
		wantState string // JSON; "" means absent (unchanged)
	}{
		{name: "success with SetState", domain: "norm", action: "set", state: `{"n":1,"tags":[]}`,
			wantOK: true, wantData: `{"n":2,"rev":42}`, wantState: `{"n":2,"tags":[]}`},
		{name: "nil data, no SetState", domain: "norm", action: "nothing", state: `{"n":1,"tags":[]}`,
			wantOK: true},
		{name: "unknown action", domain: "norm", action: "fly", state: `{}`,
			wantCode: agentproc.CodeUnknownAction, wantMsg: `surface "norm" has no command "fly"`},
		{name: "unknown domain", domain: "nope", action: "set", state: `{}`,
			wantCode: agentproc.CodeSurfaceNotRegistered, wantMsg: `this agent hosts no surface "nope"`},
		{name: "coded error keeps its code", domain: "norm", action: "coded", state: `{}`,
			wantCode: "edit_failed", wantMsg: "the edit did not apply"},
		{name: "wrapped coded error keeps its code", domain: "norm", action: "wrapped", state: `{}`,
			wantCode: "quota", wantMsg: "10 of 10 used"},
		{name: "plain error is dispatch_failed", domain: "norm", action: "plain", state: `{}`,
			wantCode: agentproc.CodeDispatchFailed, wantMsg: "disk on fire"},
		{name: "panic is dispatch_failed", domain: "norm", action: "panics", state: `{}`,
			wantCode: agentproc.CodeDispatchFailed, wantMsg: "panic: boom"},
		{name: "failed command changes no state", domain: "norm", action: "set-then-fail", state: `{"n":1}`,
			wantCode: agentproc.CodeDispatchFailed, wantMsg: "changed my mind"},
		{name: "typed args decode", domain: "norm", action: "typed", args: `{"by":3,"name":"x"}`, state: `{"n":1,"tags":["a"]}`,
			wantOK: true, wantData: `{"n":4,"args":{"by":3,"name":"x"}}`, wantState: `{"n":4,"tags":["a","x"]}`},
		{name: "typed null args are the zero value", domain: "norm", action: "typed", args: `null`, state: `{"n":1,"tags":null}`,
			wantOK: true, wantData: `{"n":1,"args":{"by":0,"name":""}}`, wantState: `{"n":1,"tags":[""]}`},
		{name: "typed bad args are invalid_args", domain: "norm", action: "typed", args: `{"by":"three"}`, state: `{}`,
			wantCode: agentproc.CodeInvalidArgs},
		{name: "typed args of the wrong shape", domain: "norm", action: "typed", args: `[1,2]`, state: `{}`,
			wantCode: agentproc.CodeInvalidArgs},
		{name: "state that does not decode", domain: "norm", action: "set", state: `{"n":"seven"}`,
			wantCode: agentproc.CodeDispatchFailed},
		{name: "null state starts from Initial", domain: "norm", action: "set", state: `null`,
			wantOK: true, wantData: `{"n":8,"rev":42}`, wantState: `{"n":8,"tags":["init"]}`},
		{name: "unencodable result", domain: "norm", action: "unencodable", state: `{}`,
			wantCode: agentproc.CodeDispatchFailed},
		{name: "raw args reach the command", domain: "norm", action: "echo-args", args: `{"a":[1,"two"]}`, state: `{}`,
			wantOK: true, wantData: `{"a":[1,"two"]}`},
		{name: "probe command", domain: "norm", action: "surface:norm", state: `{}`,
			wantOK: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("d%d", i)
			args := json.RawMessage(tt.args)
			if tt.args == "" {
				args = json.RawMessage("null")
			}
			h.Send(agentproc.SurfaceDispatch{Type: agentproc.TypeSurfaceDispatch, ID: id, Domain: tt.domain,
				Action: tt.action, Args: args, State: json.RawMessage(tt.state), Rev: 42})
			var got agentproc.SurfaceDispatchResult
			h.Await(agentproc.TypeSurfaceDispatchResult, func(l agentkittest.Line) bool { return l.Map()["id"] == id }).Decode(t, &got)
			var res agentproc.Result
			if err := json.Unmarshal(got.Result, &res); err != nil {
				t.Fatalf("result %s: %v", got.Result, err)
			}
			if res.OK != tt.wantOK {
				t.Fatalf("ok = %v, want %v (result %s)", res.OK, tt.wantOK, got.Result)
			}
			if tt.wantOK {
				if res.Error != nil {
					t.Errorf("ok result carries error %+v", res.Error)
				}
				assertJSON(t, "data", res.Data, tt.wantData)
			} else {
				if res.Error == nil || res.Error.Code != tt.wantCode {
					t.Fatalf("error = %+v, want code %q", res.Error, tt.wantCode)
				}
				if res.Error.Message == "" {
					t.Errorf("error %q has no message", res.Error.Code)
				}
				if tt.wantMsg != "" && res.Error.Message != tt.wantMsg {
					t.Errorf("message = %q, want %q", res.Error.Message, tt.wantMsg)
				}
				if len(res.Data) != 0 {
					t.Errorf("failed result carries data %s", res.Data)
				}
			}
			assertJSON(t, "state", got.State, tt.wantState)
		})
	}
}

// assertJSON compares raw with want semantically; want "" means raw is absent.
func assertJSON(t *testing.T, what string, raw json.RawMessage, want string) {
	t.Helper()
	if want == "" {
		if len(raw) != 0 {
			t.Errorf("%s = %s, want absent", what, raw)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("%s %q: %v", what, raw, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s %q: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func TestAgentReadyDeclaresSurfaces(t *testing.T) {
	a, logs := newTestAgent(Options{Name: "decl", Images: true})
	AddSurface(a, normSurface())
	AddSurface(a, counterSurface())
	h := start(t, a, logs)
	r := h.ready
	if r.Protocol != agentproc.Protocol || r.Name != "decl" || !r.Images || len(r.Surfaces) != 2 {
		t.Fatalf("agent_ready = %+v", r)
	}
	if r.Surfaces[0].Domain != "norm" || r.Surfaces[1].Domain != "counter" {
		t.Errorf("domains out of registration order: %+v", r.Surfaces)
	}
	if got := r.Surfaces[1].Commands; len(got) != 1 || got[0] != "increment" {
		t.Errorf("counter commands = %v", got)
	}
	assertJSON(t, "initialState", r.Surfaces[0].InitialState, `{"n":7,"tags":["init"]}`)
}

func TestRegistrationPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	a := New(Options{})
	AddSurface(a, counterSurface())
	mustPanic("duplicate domain", func() { AddSurface(a, counterSurface()) })
	mustPanic("empty domain", func() { AddSurface(a, Surface[int]{}) })
	mustPanic("nil command", func() {
		AddSurface(a, Surface[int]{Domain: "x", Commands: map[string]Command[int]{"a": nil}})
	})
	mustPanic("unencodable initial", func() { AddSurface(a, Surface[chan int]{Domain: "y", Initial: make(chan int)}) })
	a.AddTool(Tool{Name: "t", Run: func(_ context.Context, _ *ToolCtx, _ json.RawMessage) (string, error) { return "", nil }})
	mustPanic("duplicate tool", func() {
		a.AddTool(Tool{Name: "t", Run: func(_ context.Context, _ *ToolCtx, _ json.RawMessage) (string, error) { return "", nil }})
	})
	mustPanic("tool without Run", func() { a.AddTool(Tool{Name: "u"}) })
}

// TestArgsSchemas: agent_ready declares each command's args schema, derived
// from a Typed command's args type (required unless omitempty, a
// json.RawMessage taking anything), described by Describe or replaced by
// WithSchema; a Func declares none.
func TestArgsSchemas(t *testing.T) {
	type rotate struct {
		Degrees float64         `json:"degrees" jsonschema:"clockwise"`
		Target  string          `json:"target,omitempty"`
		Params  json.RawMessage `json:"params,omitempty"`
	}
	a, _ := newTestAgent(Options{})
	AddSurface(a, Surface[normState]{Domain: "img", Commands: map[string]Command[normState]{
		"rotate": Describe(Typed(func(*SurfaceCtx[normState], rotate) (any, error) { return nil, nil }), "Rotate the image."),
		"raw":    Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) { return nil, nil }),
		"given":  WithSchema(Func[normState](func(*SurfaceCtx[normState], json.RawMessage) (any, error) { return nil, nil }), json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)),
		"scalar": Typed(func(*SurfaceCtx[normState], int) (any, error) { return nil, nil }),
	}})
	decl := a.surfaces["img"].decl()
	if _, ok := decl.Schemas["raw"]; ok {
		t.Errorf("a Func declares a schema: %s", decl.Schemas["raw"])
	}
	if _, ok := decl.Schemas["scalar"]; ok {
		t.Errorf("a Typed command whose args are not an object declares a schema: %s", decl.Schemas["scalar"])
	}
	if got := string(decl.Schemas["given"]); got != `{"type":"object","properties":{"n":{"type":"integer"}}}` {
		t.Errorf("WithSchema: %s", got)
	}
	var rot struct {
		Type        string                     `json:"type"`
		Description string                     `json:"description"`
		Required    []string                   `json:"required"`
		Properties  map[string]json.RawMessage `json:"properties"`
		Additional  *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(decl.Schemas["rotate"], &rot); err != nil {
		t.Fatalf("rotate's schema %s: %v", decl.Schemas["rotate"], err)
	}
	if rot.Type != "object" || rot.Description != "Rotate the image." || len(rot.Required) != 1 || rot.Required[0] != "degrees" {
		t.Errorf("rotate's schema: %s", decl.Schemas["rotate"])
	}
	var degrees map[string]any
	_ = json.Unmarshal(rot.Properties["degrees"], &degrees)
	if degrees["type"] != "number" || degrees["description"] != "clockwise" || string(rot.Properties["params"]) != "true" {
		t.Errorf("rotate's properties: %s", decl.Schemas["rotate"])
	}
	if rot.Additional == nil || *rot.Additional {
		t.Errorf("rotate's schema admits other properties: %s", decl.Schemas["rotate"])
	}
}
