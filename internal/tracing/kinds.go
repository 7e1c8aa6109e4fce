package tracing

import "go.opentelemetry.io/otel/trace"

// Span kinds, so that the seams need not import the trace API.
const (
	Internal = trace.SpanKindInternal
	Server   = trace.SpanKindServer
	Client   = trace.SpanKindClient
	Producer = trace.SpanKindProducer
	Consumer = trace.SpanKindConsumer
)
