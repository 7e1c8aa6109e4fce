// Package agentkit writes surfaced/1 agents in Go: programs that the surfaced
// daemon runs as a subprocess and talks to in JSONL on stdin/stdout
// (docs/agent-protocol.md describes it). It covers both halves of the protocol:
//
//   - pi's RPC mode, the base protocol: prompt, abort, get_state,
//     get_messages, get_commands, steer/follow_up, extension UI dialogs, and
//     the events pi emits for a turn (agent_start, turn_start, message_start,
//     message_update with text/thinking/toolcall deltas, message_end,
//     tool_execution_start/update/end, turn_end, agent_end).
//   - the surface extension: agent_ready announcing agent-hosted domains,
//     surface_dispatch answered by typed commands, and surface_command,
//     surface_get, state_set and state_delete for tools.
//
// A minimal agent:
//
//	agent := agentkit.New(agentkit.Options{Name: "demo", Model: agentkit.ModelFromEnv()})
//	agentkit.AddSurface(agent, agentkit.Surface[State]{Domain: "demo", Initial: State{},
//		Commands: map[string]agentkit.Command[State]{"increment": agentkit.Func[State](increment)}})
//	agent.AddTool(agentkit.Tool{Name: "increment", Run: func(ctx context.Context, tc *agentkit.ToolCtx, _ json.RawMessage) (string, error) {
//		data, err := tc.SurfaceCommand(ctx, "demo", "increment", nil)
//		return string(data), err
//	}})
//	if err := agent.Run(ctx, os.Stdin, os.Stdout); err != nil { ... }
//
// # Surfaces hold no state
//
// An agent-hosted domain's state lives in the daemon's domain actor. Each
// surface_dispatch carries the current state; agentkit decodes it into the
// surface's state type, runs the command, and sends back the result and, if
// the command called SetState, the new state. Results are normalized as
// docs/agent-protocol.md says ("Errors and reserved codes"): an unknown action is unknown_action, an
// *Error keeps its code, any other error or a panic is dispatch_failed, args
// that do not fit a Typed command are invalid_args, an unknown domain is
// surface_not_registered. A failed command changes no state.
//
// # Hooks
//
// Options.OnReady runs once after agent_ready, Options.OnAgentEnd after each
// agent_end, each on its own goroutine with the agent's context: the place to
// rebuild a domain's snapshot from something outside the daemon (a restart's
// hydration, a turn's convergence) without delaying readiness or the next run.
//
// # Concurrency
//
// The input loop never waits for a tool, a model or a command: prompts run on
// a turn goroutine and dispatches on their own goroutines. A tool blocked in
// SurfaceCommand on an agent-hosted domain is therefore served by the very
// dispatch the daemon sends for it. Every output line is written whole with
// one Write under a mutex. Logs go to stderr only.
//
// # Models
//
// Model is a streaming interface. ModelFromEnv returns an OpenAIModel
// (an OpenAI-compatible chat-completions client) when SURFACED_LLM_BASE_URL is
// set, configured by SURFACED_LLM_BASE_URL (including /v1),
// SURFACED_LLM_MODEL and SURFACED_LLM_API_KEY; otherwise the ScriptedModel.
// The agent loop runs model → tools → model until the model stops calling
// tools, at most Options.MaxSteps model calls per prompt.
//
// # The scripted model
//
// ScriptedModel is deterministic and says so: every reply starts with
// "(scripted model — no LLM configured)". It reads the last user message,
// ignoring case; a trigger matches a word that starts with it ("thinking"
// matches think, "task" does not match ask). The first matching row wins,
// except think, which adds reasoning before any answer:
//
//	think         thinking deltas before the answer
//	crash         streams one sentence, then the process exits with code 3
//	fail          the message ends with stopReason "error" and an errorMessage
//	long          the message ends with stopReason "length"
//	slow          40 deltas 50 ms apart; abort stops it (stopReason "aborted")
//	ask           opens a confirm dialog and reports the answer
//	choose        opens a select dialog (red, green, blue) and reports the choice
//	echo: <text>  calls the tool echo with {"text":"<text>"} (if the agent has it)
//	increment     calls the tool increment with {} (if the agent has it)
//	anything else a friendly reply that quotes the prompt
//
// After a tool call the next model call reports the tool's result text, e.g.
// "The increment tool answered: count = 3."
package agentkit
