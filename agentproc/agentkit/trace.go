package agentkit

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/surfaced/surfaced/agentproc"
)

// Tracing. The daemon puts a W3C traceparent on the lines it sends while
// it traces (docs/agent-protocol.md, "Trace context"); agentkit continues
// it: a surface dispatch, a turn, each model call and each tool are spans
// of the daemon's trace, and a handler's context holds its span, so that
// the agent's own spans join the trace too. The spans go to the global
// OpenTelemetry tracer provider, which does nothing until the program
// installs one (package agentkit/agenttrace sets one up from the OTEL_*
// environment the daemon passes on).

// ScopeName is the instrumentation scope of agentkit's spans.
const ScopeName = "github.com/surfaced/surfaced/agentproc/agentkit"

var tracer = otel.Tracer(ScopeName)

// withTrace returns ctx with the remote span a traceparent names.
func withTrace(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

func startSpan(ctx context.Context, name string, kv ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer.Start(ctx, name, trace.WithAttributes(kv...))
}

func spanResult(span trace.Span, res agentproc.Result) {
	if !res.OK {
		code := "failed"
		if res.Error != nil {
			code = res.Error.Code
		}
		span.SetStatus(codes.Error, code)
	}
}

func spanError(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "the model call failed")
	}
}
