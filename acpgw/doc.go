// Package acpgw serves the Agent Client Protocol (v1) to editors: the
// Streamable HTTP transport at /acp (one JSON-RPC message per POST, answers
// and notifications on SSE streams per connection and per session), the
// session methods, and one attachment per (connection, session) that renders
// the session's typed events as session/update notifications and answers
// each session/prompt when the turn that answers it has streamed. One ACP
// session is one surfaced session, which a browser may open too. The stdio
// bridge for editors that launch a command is acpgw/bridge (surfaced acp);
// docs/acp.md describes what the mount serves.
//
// A request passes through five stages, one file (or two) each:
//
//  1. Transport (transport.go, sse.go): the HTTP verbs, their headers and
//     errors. A POST carries one JSON-RPC message (jsonrpc.go decodes and
//     encodes them); a GET reads one of a connection's SSE streams through
//     internal/delivery's writer.
//  2. Connection (connection.go, registry.go): what one Acp-Connection-Id
//     holds: its subject and agent, its streams (one bounded queue each,
//     which keeps messages until a reader comes), where the answer to each
//     request goes, the requests the daemon put to the client, and the
//     sessions attached through it. The registry finds connections and
//     reaps abandoned ones.
//  3. Methods (methods.go, sessions.go, params.go, replay.go): each
//     JSON-RPC method, its params checked; session methods go to the
//     session's attachment.
//  4. Attachment (attachment.go, dialogs.go): one session attached to one
//     connection. It is the sink of a delivery subscriber actor, the same
//     actor kind a browser's stream has: it puts prompts to the session,
//     holds their requests until their turns end, and puts the agent's
//     dialogs to the editor.
//  5. Rendering (render.go): the session's typed events as session/update
//     notifications, and the transcript as a session/load replay.
//
// Events of the mount (events.go) go to the daemon's bus, the log and the
// metrics.
package acpgw
