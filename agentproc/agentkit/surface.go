package agentkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Error is a command failure with a stable code. A surface command that
// returns an *Error (or an error wrapping one) fails with that code; any other
// error fails with "dispatch_failed". SurfaceCommand returns an *Error when the
// daemon answers ok:false.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Surface declares an agent-hosted domain. The agent holds no state of its own:
// each surface_dispatch carries the domain actor's current state, the command
// computes against it, and the actor commits what comes back.
type Surface[S any] struct {
	// Domain is the domain name, e.g. "demo"; its snapshot key is "surface:<domain>".
	Domain string
	// Initial is announced in agent_ready as the domain's initial state; it is
	// also the state a dispatch starts from when the daemon sends no state.
	Initial S
	// Commands by action name.
	Commands map[string]Command[S]
	// Data, when set, serves the domain's data pages (surface_fetch): large,
	// cold, read-only pages a client asks for by path, beside the commands.
	Data DataHandler
}

// Command runs one action against the state in ctx. Its result becomes
// {ok:true,data:<result>} (a nil result omits data); see Error for failures.
// A command changes the state only through ctx.SetState; a command that fails
// (error or panic) changes nothing, even if it called SetState.
//
// Typed makes a Command from a function of typed args and declares their
// JSON Schema, derived from the args type; Func makes one from a function of
// raw args, which takes any object unless WithSchema gives it a schema.
type Command[S any] interface {
	Run(ctx *SurfaceCtx[S], args json.RawMessage) (any, error)
}

// Func adapts a function of raw JSON args to Command. It declares no args
// schema: the daemon passes it any object.
type Func[S any] func(ctx *SurfaceCtx[S], args json.RawMessage) (any, error)

// Run calls f.
func (f Func[S]) Run(ctx *SurfaceCtx[S], args json.RawMessage) (any, error) { return f(ctx, args) }

// ArgsSchemer is a Command that declares the JSON Schema of its args: an
// object schema, whose top-level description is the command's. agent_ready
// carries it (schemas), the daemon refuses args that do not fit it
// (invalid_args, before any dispatch), and MCP clients see it as the
// command's tool input schema.
type ArgsSchemer interface {
	ArgsSchema() json.RawMessage
}

// Typed adapts a command with typed arguments. Args that are absent or null
// leave A at its zero value; args that do not decode into A fail the command
// with code "invalid_args" before f runs.
//
// Its args schema is derived from A as the MCP Go SDK derives a tool's
// input schema: A must be a struct or a map; a struct's fields are its
// properties, by their JSON names, required unless tagged omitempty or
// omitzero, described by a `jsonschema:"..."` tag; other properties are
// refused; a json.RawMessage takes any value. Describe adds the command's
// description; WithSchema replaces the schema whole. An A that is not an
// object (a number, a slice), or that has no schema (a channel, a func),
// declares none.
func Typed[S, A any](f func(ctx *SurfaceCtx[S], args A) (any, error)) Command[S] {
	run := func(ctx *SurfaceCtx[S], raw json.RawMessage) (any, error) {
		var args A
		if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			if err := json.Unmarshal(raw, &args); err != nil {
				return nil, &Error{Code: agentproc.CodeInvalidArgs,
					Message: fmt.Sprintf("%s.%s: args do not match %T: %v", ctx.Domain, ctx.Action, args, err)}
			}
		}
		return f(ctx, args)
	}
	sch, err := jsonschema.For[A](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}})
	if err != nil || sch.Type != "object" {
		return Func[S](run)
	}
	raw, err := plainjson.Marshal(sch)
	if err != nil {
		return Func[S](run)
	}
	return schemed[S]{run: run, schema: raw}
}

// WithSchema gives cmd the args schema schema (a JSON Schema object with
// "type":"object"), replacing any it had. It panics when schema is not a
// JSON object.
func WithSchema[S any](cmd Command[S], schema json.RawMessage) Command[S] {
	var probe map[string]any
	if err := json.Unmarshal(schema, &probe); err != nil {
		panic(fmt.Sprintf("agentkit: WithSchema: the schema is not a JSON object: %v", err))
	}
	return schemed[S]{run: cmd.Run, schema: schema}
}

// Describe sets the description of cmd: the top-level description of its
// args schema (an open object schema when it has none).
func Describe[S any](cmd Command[S], description string) Command[S] {
	sch := map[string]any{"type": "object"}
	if sc, ok := cmd.(ArgsSchemer); ok {
		if err := json.Unmarshal(sc.ArgsSchema(), &sch); err != nil {
			panic(fmt.Sprintf("agentkit: Describe: the args schema does not decode: %v", err))
		}
	}
	sch["description"] = description
	raw, err := plainjson.Marshal(sch)
	if err != nil {
		panic(fmt.Sprintf("agentkit: Describe: the args schema does not encode: %v", err))
	}
	return schemed[S]{run: cmd.Run, schema: raw}
}

// schemed is a command with its args schema.
type schemed[S any] struct {
	run    func(ctx *SurfaceCtx[S], args json.RawMessage) (any, error)
	schema json.RawMessage
}

func (c schemed[S]) Run(ctx *SurfaceCtx[S], args json.RawMessage) (any, error) {
	return c.run(ctx, args)
}
func (c schemed[S]) ArgsSchema() json.RawMessage { return c.schema }

// SurfaceCtx is what a command sees: the state it runs against and the means
// to change it. It is built fresh for every dispatch and is not safe for use
// after the command returns.
type SurfaceCtx[S any] struct {
	// Domain and Action name the command; Rev is the rev of the state it runs against.
	Domain string
	Action string
	Rev    uint64

	ctx     context.Context
	agent   *Agent
	state   S
	changed bool
}

// Context is the dispatch's context; it ends when the agent stops.
func (c *SurfaceCtx[S]) Context() context.Context { return c.ctx }

// Get returns the current state, including changes made by SetState.
func (c *SurfaceCtx[S]) Get() S { return c.state }

// SetState replaces the state with f(current). The new state goes back to the
// domain actor, which commits it with the next rev.
func (c *SurfaceCtx[S]) SetState(f func(S) S) {
	c.state = f(c.state)
	c.changed = true
}

// surfaceHost is a Surface with its state type erased.
type surfaceHost interface {
	decl() agentproc.SurfaceDecl
	dispatch(ctx context.Context, a *Agent, d *agentproc.SurfaceDispatch) (agentproc.Result, json.RawMessage)
	// data is the domain's data handler (nil: none).
	data() DataHandler
}

type surfaceHostOf[S any] struct {
	s       Surface[S]
	initial json.RawMessage
}

// AddSurface registers an agent-hosted domain. It panics, like
// http.ServeMux.Handle, on programmer errors: an empty or duplicate domain, a
// nil command, an initial state that does not encode, or a call after Run.
func AddSurface[S any](a *Agent, s Surface[S]) {
	if s.Domain == "" {
		panic("agentkit: AddSurface with an empty domain")
	}
	for name, c := range s.Commands {
		if c == nil {
			panic(fmt.Sprintf("agentkit: surface %q: command %q is nil", s.Domain, name))
		}
	}
	initial, err := plainjson.Marshal(s.Initial)
	if err != nil {
		panic(fmt.Sprintf("agentkit: surface %q: initial state does not encode: %v", s.Domain, err))
	}
	a.addSurface(s.Domain, &surfaceHostOf[S]{s: s, initial: initial})
}

func (h *surfaceHostOf[S]) decl() agentproc.SurfaceDecl {
	cmds := make([]string, 0, len(h.s.Commands))
	var schemas map[string]json.RawMessage
	for name, c := range h.s.Commands {
		cmds = append(cmds, name)
		if sc, ok := c.(ArgsSchemer); ok {
			if schemas == nil {
				schemas = map[string]json.RawMessage{}
			}
			schemas[name] = sc.ArgsSchema()
		}
	}
	slices.Sort(cmds)
	return agentproc.SurfaceDecl{Domain: h.s.Domain, Commands: cmds, InitialState: h.initial, Data: h.s.Data != nil, Schemas: schemas}
}

func (h *surfaceHostOf[S]) data() DataHandler { return h.s.Data }

// dispatch runs one command and normalizes its outcome as docs/agent-protocol.md
// says ("Errors and reserved codes"). The returned state is nil unless the command succeeded and
// called SetState.
func (h *surfaceHostOf[S]) dispatch(ctx context.Context, a *Agent, d *agentproc.SurfaceDispatch) (res agentproc.Result, state json.RawMessage) {
	log := a.log
	if d.Action == agentproc.SurfaceKey(h.s.Domain) {
		return agentproc.Result{OK: true}, nil // the probe command
	}
	cmd, ok := h.s.Commands[d.Action]
	if !ok {
		return failure(agentproc.CodeUnknownAction, fmt.Sprintf("surface %q has no command %q", h.s.Domain, d.Action)), nil
	}
	sc := &SurfaceCtx[S]{Domain: h.s.Domain, Action: d.Action, Rev: d.Rev, ctx: ctx, agent: a}
	raw := d.State
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = h.initial // decoded afresh so that no dispatch shares memory with Initial
	}
	if err := json.Unmarshal(raw, &sc.state); err != nil {
		return failure(agentproc.CodeDispatchFailed,
			fmt.Sprintf("surface %q: state does not decode into %T: %v", h.s.Domain, sc.state, err)), nil
	}

	data, err := runCommand(cmd, sc, d.Args, log)
	if err != nil {
		return errorResult(err), nil
	}
	res = agentproc.Result{OK: true}
	if data != nil {
		b, err := plainjson.Marshal(data)
		if err != nil {
			return failure(agentproc.CodeDispatchFailed,
				fmt.Sprintf("%s.%s: result does not encode: %v", h.s.Domain, d.Action, err)), nil
		}
		res.Data = b
	}
	if sc.changed {
		b, err := plainjson.Marshal(sc.state)
		if err != nil {
			return failure(agentproc.CodeDispatchFailed,
				fmt.Sprintf("%s.%s: new state does not encode: %v", h.s.Domain, d.Action, err)), nil
		}
		state = b
	}
	return res, state
}

// runCommand calls cmd and turns a panic into an error.
func runCommand[S any](cmd Command[S], sc *SurfaceCtx[S], args json.RawMessage, log *slog.Logger) (data any, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("surface command panicked", "domain", sc.Domain, "action", sc.Action,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			data, err = nil, &Error{Code: agentproc.CodeDispatchFailed, Message: fmt.Sprintf("panic: %v", r)}
		}
	}()
	return cmd.Run(sc, args)
}

// errorResult maps an error to a command result: a coded *Error keeps its
// code, anything else is dispatch_failed with the error's text.
func errorResult(err error) agentproc.Result {
	var ce *Error
	if errors.As(err, &ce) && ce.Code != "" {
		msg := ce.Message
		if msg == "" {
			msg = err.Error()
		}
		return failure(ce.Code, msg)
	}
	return failure(agentproc.CodeDispatchFailed, err.Error())
}

func failure(code, message string) agentproc.Result {
	return agentproc.Result{Error: &agentproc.ErrorBody{Code: code, Message: message}}
}
