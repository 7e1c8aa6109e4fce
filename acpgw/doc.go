// Package acpgw serves the Agent Client Protocol (v1) to editors: the
// Streamable HTTP transport at /acp (one JSON-RPC message per POST, answers
// and notifications on SSE streams per connection and per session), the
// session methods, and one attachment per (connection, session) that renders
// the session's typed events as session/update notifications and answers
// each session/prompt when the turn that answers it has streamed. The stdio
// bridge for editors that launch a command is acpgw/bridge (surfaced acp).
//
// docs/acp.md describes what the mount serves.
package acpgw
