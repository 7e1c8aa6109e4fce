// Package mcpgw serves the Model Context Protocol at /mcp, on the official
// Go SDK (github.com/modelcontextprotocol/go-sdk): any MCP client (a coding
// agent, an assistant, an IDE) becomes a third client of a session's
// surfaces, beside the browser and the editor over ACP. It lists and opens
// the caller's sessions, prompts their agents (progress notifications while
// the turn streams; cancellation aborts it), runs surface commands, reads
// snapshots and the transcript as resources and notifies a subscriber of
// every new rev, and answers the agent's dialogs. docs/mcp.md describes what
// the mount serves; the stdio bridge is mcpgw/bridge (surfaced mcp).
//
// A request passes through these stages, one file each:
//
//  1. Transport (server.go): the mount's paths (/mcp, and /mcp/sessions/{id}
//     for a client attached to one session), the caller's identity and its
//     revocation, and the choice of the SDK's handler by protocol version:
//     2026-07-28 and later are stateless (every request carries its version
//     in _meta; subscriptions ride a subscriptions/listen request), earlier
//     versions are stateful (initialize, Mcp-Session-Id, notifications on the
//     GET stream). Stateful sessions are bound to their subject and path,
//     capped per subject, and closed when idle (bindings.go).
//  2. Tools (tools.go, commands.go, prompt.go): the tools every client sees,
//     and the commands of the attached session as tools of their own
//     (<domain>_<action>, with the args schemas the agent declared). A
//     command's failure is a tool result with isError, never a protocol
//     error; a session the caller does not own answers as a missing one.
//  3. Resources (resources.go): a surface's snapshot, the transcript and an
//     artifact by URI (surfaced://sessions/{sessionId}/...), and their
//     subscriptions, fed by a watch of the session's frames (watch.go).
package mcpgw
