// Package delivery is the one way out of the daemon for every connected
// client: browser SSE, browser WebSocket and ACP streams alike.
//
// A client's path has three parts, each one job:
//
//   - The subscriber (subscriber.go) is the actor the session sends its
//     frames to. It watches the session, and when the session actor goes
//     away it tells its sink so only after every frame the session sent
//     before (one sessionGone for every kind of client). What it does with
//     the frames is its Sink's business: the browser's sink queues them as
//     they are, ACP's renders them as JSON-RPC messages and keeps its
//     per-session bookkeeping (prompts held until their turn ends, dialogs).
//   - The queue (queue.go) holds what waits for the client: session frames
//     and messages already encoded (WebSocket replies, ACP JSON-RPC
//     messages). It is bounded in bytes and in age, every item counting; a
//     client past either bound is a slow consumer and is cut.
//   - The writer (writer.go) is the loop that drains a queue into a
//     Transport: keep-alives, write deadlines, revocation of the
//     credential, the daemon's shutdown, and the client-only end of a
//     stream. A transport is a thin adapter that encodes and writes (the SSE
//     plumbing shared by the browser and ACP is in sse.go); browser SSE,
//     WebSocket and ACP SSE are each a few lines in their own packages.
//
// The package is internal to the module: gateway and acpgw are its users.
package delivery
