package agentkit

import (
	"context"
	"encoding/json"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object; nil means an
	// object without properties.
	Parameters json.RawMessage
	// Run executes one call. Its text goes back to the model as the tool
	// result; an error becomes an error result (isError) with the error's
	// text. ctx ends when the turn is aborted. Run may block: the agent keeps
	// serving the daemon meanwhile.
	Run func(ctx context.Context, tc *ToolCtx, args json.RawMessage) (string, error)
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

func (t *Tool) spec() ToolSpec {
	params := t.Parameters
	if len(params) == 0 {
		params = emptyObjectSchema
	}
	return ToolSpec{Name: t.Name, Description: t.Description, Parameters: params}
}

// ToolCtx gives a running tool call access to its agent.
type ToolCtx struct {
	// ToolCallID and ToolName identify the call.
	ToolCallID string
	ToolName   string

	agent *Agent
	args  json.RawMessage
	ctx   context.Context // the call's (nil: the agent's)
	links []string
}

// LinkArtifact says that the call's result references artifacts of the
// session (by id): the result carries them as details.artifacts, and an
// editor (ACP) sees them as resource_link blocks of the call.
func (tc *ToolCtx) LinkArtifact(ids ...string) { tc.links = append(tc.links, ids...) }

func (tc *ToolCtx) context() context.Context {
	if tc.ctx != nil {
		return tc.ctx
	}
	return tc.agent.base
}

// Agent returns the agent running the call.
func (tc *ToolCtx) Agent() *Agent { return tc.agent }

// Update reports progress: a tool_execution_update whose partialResult is
// text. Each update replaces the previous one; send the whole text so far.
func (tc *ToolCtx) Update(text string) error {
	pr, err := plainjson.Marshal(textResult(text))
	if err != nil {
		return err
	}
	return tc.agent.send(agentproc.Event{
		Type: agentproc.EventToolExecutionUpdate, ToolCallID: tc.ToolCallID, ToolName: tc.ToolName,
		Args: tc.args, PartialResult: pr,
	})
}

// SurfaceCommand runs a command on a domain; see Agent.SurfaceCommand.
func (tc *ToolCtx) SurfaceCommand(ctx context.Context, domain, action string, args any) (json.RawMessage, error) {
	return tc.agent.SurfaceCommand(ctx, domain, action, args)
}

// SurfaceGet reads a domain's snapshot; see Agent.SurfaceGet.
func (tc *ToolCtx) SurfaceGet(ctx context.Context, domain string) (json.RawMessage, uint64, error) {
	return tc.agent.SurfaceGet(ctx, domain)
}

// SetState writes a session KV key; see Agent.SetState.
func (tc *ToolCtx) SetState(key string, value any) error { return tc.agent.SetState(key, value) }

// DeleteState deletes a session KV key; see Agent.DeleteState.
func (tc *ToolCtx) DeleteState(key string) error { return tc.agent.DeleteState(key) }

// Pref reads a session KV key reported by the daemon; see Agent.Pref.
func (tc *ToolCtx) Pref(key string) (json.RawMessage, bool) { return tc.agent.Pref(key) }

// Dialog asks the user; see Agent.Dialog.
func (tc *ToolCtx) Dialog(ctx context.Context, req agentproc.ExtensionUIRequest) (DialogAnswer, error) {
	return tc.agent.Dialog(ctx, req)
}

// Notify sends a notice; see Agent.Notify.
func (tc *ToolCtx) Notify(req agentproc.ExtensionUIRequest) error { return tc.agent.Notify(req) }

// textResult is pi's tool result with one text block.
func textResult(text string) agentproc.ToolResult {
	return agentproc.ToolResult{Content: []agentproc.ContentBlock{{Type: "text", Text: text}}}
}
