// Package agentproc is the daemon's side of the agent protocol, below the
// actors: the JSONL codec (records split on "\n" only, a hard line cap with
// a diagnostic, bad lines isolated), the child process (its own process
// group, one buffered stdin writer, stderr into a ring for the session log,
// exit detection and an orderly stop), and the line types of pi's RPC mode
// and of the surfaced/1 surface extension. The agent process actor
// (actors/agent) drives it; agentkit (agentproc/agentkit) is the SDK for
// agents written in Go.
//
// docs/agent-protocol.md describes every line both ways.
package agentproc
