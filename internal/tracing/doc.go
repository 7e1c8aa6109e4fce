// Package tracing is the daemon's OpenTelemetry tracing: the few seams that
// make spans (the HTTP middleware, the actor middleware, the agent process
// actor, store.Writer, the artifact service, the cluster directory) ask it
// for a span, and it answers with nothing at all while tracing is off.
//
// Off is the default and costs one atomic load at each seam: no middleware
// is installed on the actors, no header is added to a message, no line to an
// agent changes. Built with the notrace tag, the package is empty stubs and
// the OpenTelemetry SDK is not linked at all (the benchmark's baseline).
//
// The trace context crosses every boundary in one form, W3C trace context:
//
//   - protoactor messages carry it in their envelope's headers ("traceparent",
//     "tracestate"), which the remote transport sends between nodes. A
//     request from outside an actor (the session directory) puts it on the
//     envelope it sends; an actor's sender middleware copies the header of
//     the message being handled onto what the actor sends; its receiver
//     middleware starts the actor's span from it and puts that span in the
//     header, so that what the actor sends next is its child.
//   - lines the daemon writes to an agent carry a "traceparent" member
//     (docs/agent-protocol.md), which agents may continue.
//   - HTTP requests may carry a traceparent header, which the request's span
//     continues.
package tracing
