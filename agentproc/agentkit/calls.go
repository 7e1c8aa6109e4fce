package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// ErrStopped is returned by calls waiting for the daemon when the agent stops.
var ErrStopped = errors.New("agentkit: agent stopped before the daemon answered")

// newID returns a fresh request id with the given prefix.
func (a *Agent) newID(prefix string) string {
	return prefix + "-" + strconv.FormatUint(a.nextID.Add(1), 10)
}

// call writes a request line and waits for the answer of type answerType with
// the same id.
func (a *Agent) call(ctx context.Context, answerType, id string, line any) (json.RawMessage, error) {
	key := answerType + "\x00" + id
	ch := make(chan json.RawMessage, 1)
	a.pendMu.Lock()
	a.pending[key] = ch
	a.pendMu.Unlock()
	defer func() {
		a.pendMu.Lock()
		delete(a.pending, key)
		a.pendMu.Unlock()
	}()
	if err := a.send(line); err != nil {
		return nil, err
	}
	select {
	case ans := <-ch:
		return ans, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.closed:
		return nil, ErrStopped
	}
}

// resolve hands an answer line to the call waiting for it.
func (a *Agent) resolve(answerType, id string, line []byte) bool {
	key := answerType + "\x00" + id
	a.pendMu.Lock()
	ch, ok := a.pending[key]
	delete(a.pending, key)
	a.pendMu.Unlock()
	if ok {
		ch <- line // buffered; the waiter may already be gone
	}
	return ok
}

// marshalArgs turns command args into JSON: nil stays absent, json.RawMessage
// passes as is.
func marshalArgs(args any) (json.RawMessage, error) {
	switch v := args.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	b, err := plainjson.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("agentkit: encode args: %w", err)
	}
	return b, nil
}

// SurfaceCommand runs action on a domain (native or agent-hosted) through the
// domain actor, as any UI command would, and returns the result's data. When
// the daemon answers ok:false the error is an *Error carrying the code. args
// may be nil, a json.RawMessage, or any value that encodes to JSON.
//
// For an agent-hosted domain the daemon sends this same agent a
// surface_dispatch before it answers; agentkit serves it concurrently.
func (a *Agent) SurfaceCommand(ctx context.Context, domain, action string, args any) (json.RawMessage, error) {
	raw, err := marshalArgs(args)
	if err != nil {
		return nil, err
	}
	id := a.newID("sc")
	ans, err := a.call(ctx, agentproc.TypeSurfaceCommandResult, id, agentproc.SurfaceCommand{
		Type: agentproc.TypeSurfaceCommand, ID: id, Domain: domain, Action: action, Args: raw,
	})
	if err != nil {
		return nil, fmt.Errorf("agentkit: surface command %s.%s: %w", domain, action, err)
	}
	var res agentproc.SurfaceCommandResult
	if err := json.Unmarshal(ans, &res); err != nil {
		return nil, fmt.Errorf("agentkit: surface command %s.%s: bad answer: %w", domain, action, err)
	}
	if !res.OK {
		if res.Error == nil {
			return nil, &Error{Code: agentproc.CodeDispatchFailed, Message: "the daemon answered ok:false without an error"}
		}
		return nil, &Error{Code: res.Error.Code, Message: res.Error.Message}
	}
	return res.Data, nil
}

// SurfaceGet reads a domain's current snapshot and its rev.
func (a *Agent) SurfaceGet(ctx context.Context, domain string) (state json.RawMessage, rev uint64, err error) {
	id := a.newID("sg")
	ans, err := a.call(ctx, agentproc.TypeSurfaceGetResult, id, agentproc.SurfaceGet{Type: agentproc.TypeSurfaceGet, ID: id, Domain: domain})
	if err != nil {
		return nil, 0, fmt.Errorf("agentkit: surface get %s: %w", domain, err)
	}
	var res agentproc.SurfaceGetResult
	if err := json.Unmarshal(ans, &res); err != nil {
		return nil, 0, fmt.Errorf("agentkit: surface get %s: bad answer: %w", domain, err)
	}
	if !res.OK {
		if res.Error == nil {
			return nil, 0, &Error{Code: agentproc.CodeSurfaceNotRegistered, Message: "the daemon answered ok:false without an error"}
		}
		return nil, 0, &Error{Code: res.Error.Code, Message: res.Error.Message}
	}
	return res.State, res.Rev, nil
}

// SetState writes a session KV key (e.g. a preference "canvas.model"). Keys
// under "surface:" belong to their domain actor and are refused here.
func (a *Agent) SetState(key string, value any) error {
	if err := checkKVKey(key); err != nil {
		return err
	}
	raw, err := marshalArgs(value)
	if err != nil {
		return err
	}
	if raw == nil {
		raw = json.RawMessage("null")
	}
	return a.send(agentproc.StateSet{Type: agentproc.TypeStateSet, Key: key, Value: raw})
}

// DeleteState deletes a session KV key.
func (a *Agent) DeleteState(key string) error {
	if err := checkKVKey(key); err != nil {
		return err
	}
	return a.send(agentproc.StateDelete{Type: agentproc.TypeStateDelete, Key: key})
}

func checkKVKey(key string) error {
	if key == "" {
		return errors.New("agentkit: empty state key")
	}
	if strings.HasPrefix(key, agentproc.SurfaceKeyPrefix) {
		return fmt.Errorf("agentkit: state key %q is a surface snapshot, written only by its domain actor; use SurfaceCommand", key)
	}
	return nil
}

// Pref returns the last value the daemon reported for a session KV key via
// state_changed, and whether the key is set.
func (a *Agent) Pref(key string) (json.RawMessage, bool) {
	a.prefMu.RLock()
	defer a.prefMu.RUnlock()
	v, ok := a.prefs[key]
	return v, ok
}

// Prefs returns a copy of every session KV key the daemon has reported.
func (a *Agent) Prefs() map[string]json.RawMessage {
	a.prefMu.RLock()
	defer a.prefMu.RUnlock()
	return maps.Clone(a.prefs)
}

func (a *Agent) applyStateChanged(sc agentproc.StateChanged) {
	a.prefMu.Lock()
	if sc.Deleted {
		delete(a.prefs, sc.Key)
	} else {
		a.prefs[sc.Key] = sc.Value
	}
	a.prefMu.Unlock()
	if a.opts.OnStateChanged != nil {
		a.opts.OnStateChanged(sc)
	}
}

// DialogAnswer is the user's answer to a dialog.
type DialogAnswer struct {
	// Value is the chosen option (select) or the text entered (input, editor).
	Value string
	// Confirmed is the answer to a confirm dialog.
	Confirmed bool
	// Cancelled reports that the user dismissed the dialog, or that its
	// Timeout expired first (then Confirmed is false and Value empty, the
	// defaults pi resolves with).
	Cancelled bool
}

// Dialog opens a dialog (req.Method "select", "confirm", "input" or
// "editor") and waits for the user's extension_ui_response. req.Type and
// req.ID are filled in. A positive req.Timeout (milliseconds) ends the wait
// with a cancelled answer, as pi does.
func (a *Agent) Dialog(ctx context.Context, req agentproc.ExtensionUIRequest) (DialogAnswer, error) {
	if !agentproc.IsDialog(req.Method) {
		return DialogAnswer{}, fmt.Errorf("agentkit: %q is not a dialog method (select, confirm, input, editor); use Notify", req.Method)
	}
	req.Type = agentproc.TypeExtensionUIRequest
	req.ID = a.newID("ui")
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Millisecond)
		defer cancel()
	}
	ans, err := a.call(ctx, agentproc.TypeExtensionUIResponse, req.ID, req)
	if err != nil {
		if req.Timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
			return DialogAnswer{Cancelled: true}, nil
		}
		return DialogAnswer{}, fmt.Errorf("agentkit: dialog %s: %w", req.Method, err)
	}
	var r agentproc.ExtensionUIResponse
	if err := json.Unmarshal(ans, &r); err != nil {
		return DialogAnswer{}, fmt.Errorf("agentkit: dialog %s: bad answer: %w", req.Method, err)
	}
	out := DialogAnswer{Cancelled: r.Cancelled}
	if r.Value != nil {
		out.Value = *r.Value
	}
	if r.Confirmed != nil {
		out.Confirmed = *r.Confirmed
	}
	return out, nil
}

// Notify sends a fire-and-forget notice (req.Method "notify", "setStatus",
// "setWidget", "setTitle" or "set_editor_text"). req.Type and req.ID are
// filled in.
func (a *Agent) Notify(req agentproc.ExtensionUIRequest) error {
	if req.Method == "" || agentproc.IsDialog(req.Method) {
		return fmt.Errorf("agentkit: %q is not a notice method; use Dialog for select, confirm, input, editor", req.Method)
	}
	req.Type = agentproc.TypeExtensionUIRequest
	req.ID = a.newID("ui")
	return a.send(req)
}
