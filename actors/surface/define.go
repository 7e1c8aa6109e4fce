// Package surface is the surface domain: the typed Go API for native domains
// (Define) and the domain actor, the lone writer of a domain's snapshot and rev.
//
// A native domain is Go code registered with the runtime:
//
//	counter := surface.Define("counter", Counter{}, map[string]surface.Command[Counter]{
//		"add": surface.Typed(func(ctx *surface.Ctx[Counter], a struct{ N int }) (any, error) {
//			ctx.SetState(func(c Counter) Counter { c.N += a.N; return c })
//			return ctx.Get(), nil
//		}),
//	})
//
// The domain actor runs one command at a time (its mailbox serializes them,
// whoever sent them), assigns revs and publishes the snapshot. Handlers never
// see concurrency.
package surface

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Error is a command failure with a stable code. A handler that returns an
// *Error (or an error wrapping one) answers {ok:false, error:{code, message}};
// any other error answers dispatch_failed.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Result is a normalized command result: OK with Data (JSON, may be nil), or
// not OK with Err.
type Result struct {
	OK   bool
	Data json.RawMessage
	Err  *Error
}

// Fail builds a failed result.
func Fail(code, message string) Result {
	return Result{Err: &Error{Code: code, Message: message}}
}

// Succeed builds a successful result from a value, marshalling it to JSON. A
// value that cannot be marshalled fails with dispatch_failed.
func Succeed(v any) Result {
	if v == nil {
		return Result{OK: true}
	}
	if raw, ok := v.(json.RawMessage); ok {
		return Result{OK: true, Data: raw}
	}
	b, err := plainjson.Marshal(v)
	if err != nil {
		return Fail(agentproc.CodeDispatchFailed, "the command's result is not JSON: "+err.Error())
	}
	return Result{OK: true, Data: b}
}

// FromError normalizes a handler error: a coded *Error keeps its code,
// anything else is dispatch_failed with the error's text.
func FromError(err error) Result {
	var se *Error
	if errors.As(err, &se) {
		return Result{Err: &Error{Code: se.Code, Message: se.Message}}
	}
	return Fail(agentproc.CodeDispatchFailed, err.Error())
}

// Domain is a native domain definition: what the runtime needs to host it.
// Define builds one from typed handlers; implementing it directly is for
// domains whose state is not a Go value.
type Domain interface {
	Name() string
	// Commands lists the actions, sorted.
	Commands() []string
	// New returns an instance holding stored (a snapshot this domain wrote
	// before), or the initial state when stored is nil.
	New(stored json.RawMessage) (Instance, error)
}

// Instance is one session's live copy of a native domain. It is used by one
// goroutine at a time (the domain actor's).
type Instance interface {
	// Dispatch runs one command; changed reports whether the state changed.
	Dispatch(action string, args json.RawMessage) (res Result, changed bool)
	// Snapshot returns the state as JSON.
	Snapshot() (json.RawMessage, error)
}

// Ctx is what a typed handler sees: the state as of the command, and a way to
// change it.
type Ctx[S any] struct {
	state   S
	changed bool
}

// Get returns the current state (after any SetState of this command).
func (c *Ctx[S]) Get() S { return c.state }

// SetState replaces the state by f(current). The domain actor commits it with
// the next rev when the handler returns, whatever the handler returns.
func (c *Ctx[S]) SetState(f func(S) S) {
	c.state = f(c.state)
	c.changed = true
}

// Command is a typed handler; args is the command's JSON args (nil when absent).
type Command[S any] func(ctx *Ctx[S], args json.RawMessage) (any, error)

// Typed adapts a handler taking decoded args. Args that do not decode into A
// (unknown fields included) answer invalid_args without calling f.
func Typed[S, A any](f func(ctx *Ctx[S], args A) (any, error)) Command[S] {
	return func(ctx *Ctx[S], raw json.RawMessage) (any, error) {
		var a A
		if len(raw) > 0 && string(raw) != "null" {
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil {
				return nil, &Error{Code: agentproc.CodeInvalidArgs, Message: "the args do not fit: " + err.Error()}
			}
		}
		return f(ctx, a)
	}
}

// Define builds a native domain whose state is a JSON-serializable Go value.
// initial is copied through JSON for every session, so sessions never share
// slices or maps of it. Options add to it: Data gives it a data plane.
func Define[S any](domain string, initial S, commands map[string]Command[S], opts ...Option[S]) Domain {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	d := &typedDomain[S]{name: domain, initial: initial, commands: commands, names: names}
	for _, o := range opts {
		o(d)
	}
	return d
}

type typedDomain[S any] struct {
	name     string
	initial  S
	commands map[string]Command[S]
	names    []string
	data     DataHandler[S]
}

func (d *typedDomain[S]) Name() string       { return d.name }
func (d *typedDomain[S]) Commands() []string { return append([]string(nil), d.names...) }

func (d *typedDomain[S]) New(stored json.RawMessage) (Instance, error) {
	if stored == nil {
		b, err := plainjson.Marshal(d.initial)
		if err != nil {
			return nil, fmt.Errorf("surface %s: initial state is not JSON: %w", d.name, err)
		}
		stored = b
	}
	var s S
	if err := json.Unmarshal(stored, &s); err != nil {
		return nil, fmt.Errorf("surface %s: stored snapshot does not fit the state type: %w", d.name, err)
	}
	return &typedInstance[S]{d: d, state: s}, nil
}

type typedInstance[S any] struct {
	d     *typedDomain[S]
	state S
}

func (in *typedInstance[S]) Snapshot() (json.RawMessage, error) {
	b, err := plainjson.Marshal(in.state)
	if err != nil {
		return nil, fmt.Errorf("surface %s: state is not JSON: %w", in.d.name, err)
	}
	return b, nil
}

func (in *typedInstance[S]) Dispatch(action string, args json.RawMessage) (res Result, changed bool) {
	cmd, ok := in.d.commands[action]
	if !ok {
		return Fail(agentproc.CodeUnknownAction, fmt.Sprintf("surface %q has no command %q", in.d.name, action)), false
	}
	ctx := &Ctx[S]{state: in.state}
	// A panic goes up to the domain actor, which logs it with its stack
	// and answers dispatch_failed; the state is only replaced below.
	v, err := cmd(ctx, args)
	if ctx.changed {
		in.state = ctx.state
	}
	if err != nil {
		return FromError(err), ctx.changed
	}
	return Succeed(v), ctx.changed
}
