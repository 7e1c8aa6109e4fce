// Package agui serves AG-UI (the Agent–User Interaction protocol, 1.0: the
// events of @ag-ui/core, framed as @ag-ui/encoder frames them) over a
// surfaced session, so that CopilotKit and any AG-UI client (the stock
// HttpAgent of @ag-ui/client) drive a session of any agent and see its
// surfaces as shared state. It is a transport of its own, mounted by the
// gateway like acpgw (POST /ag-ui/{agent}, and POST
// /api/sessions/{id}/ag-ui through the gateway's session mounts) behind the
// same gates and authentication, under the same limits (its runs take the
// gateway's event-stream slots); docs/ag-ui.md describes the mapping event
// by event.
//
// A run is a thin transport over internal/delivery, like the gateway's
// per-turn chat stream, in five parts:
//
//   - The mount (server.go, errors.go): the routes, the body, refusals as
//     the API's JSON errors before the stream starts, the thread's session
//     (created by its first run), the run's requests to the session, its
//     media parts as artifacts.
//   - Input (input.go, dialogs.go): RunAgentInput checked against the
//     schema of @ag-ui/core (a refusal names the field), the prompt (the
//     user message the messages end with), resume entries as answers to
//     the agent's dialogs.
//   - The sink (sink.go): the run's subscriber keeps the state and status
//     frames, the chat frames of the run's turn and that turn's dialogs,
//     and ends the stream at the turn's finish or at a dialog.
//   - The renderer (render.go, events.go, state.go): the session's typed
//     events (proto/surfaced/v1) as AG-UI events, the state as one JSON
//     document, its changes as RFC 6902 JSON Patches from rev to rev.
//   - The transport (transport.go, json.go): the delivery writer's wire,
//     JSON strings escaped as JSON.stringify escapes them.
//
// A thread's session is named by SessionID (thread.go): derived from the
// caller's subject, the agent and the threadId, so that every node finds it
// and another subject's thread of the same name is another session.
package agui
