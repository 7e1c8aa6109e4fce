package tracing

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
)

// Header names of the W3C trace context, on envelopes, agent lines and HTTP.
const (
	Traceparent = "traceparent"
	Tracestate  = "tracestate"
)

// Attribute keys of the daemon's spans. They name things, never contents:
// no prompt text, command arguments or tool payloads.
const (
	AttrNode    = attribute.Key("surfaced.node")
	AttrSession = attribute.Key("surfaced.session")
	AttrDomain  = attribute.Key("surfaced.domain")
	AttrAction  = attribute.Key("surfaced.action")
	AttrAgent   = attribute.Key("surfaced.agent")
	AttrRev     = attribute.Key("surfaced.rev")
	AttrKind    = attribute.Key("surfaced.actor")
	AttrMessage = attribute.Key("surfaced.message")
	AttrOutcome = attribute.Key("surfaced.outcome")
)

// ScopeName is the instrumentation scope of every span the daemon makes.
const ScopeName = "github.com/surfaced/surfaced"

// Config is the daemon's tracing: where spans go is the standard OTEL_*
// environment's (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// their _TRACES_ forms, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, ...).
type Config struct {
	// SampleRatio is the share of new traces kept (0 < r <= 1; 0 takes
	// OTEL_TRACES_SAMPLER's, else 1). A request that arrives with a
	// traceparent follows its caller's decision.
	SampleRatio float64
	// Node names this daemon (service.instance.id).
	Node string
	// Version is the daemon's version (service.version).
	Version string
}

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// ErrNotCompiled is what Setup answers in a binary built without tracing.
var ErrNotCompiled = errors.New("tracing: this binary was built without tracing (the notrace build tag)")
