// Package agenttrace sets up OpenTelemetry tracing in an agent written with
// agentkit, from the standard OTEL_* environment that the daemon passes on
// to its agents: with it, the agent's spans (each surface dispatch, turn,
// model call and tool, and whatever the agent's own code starts from a
// handler's context) join the daemon's traces in the same collector.
//
//	shutdown, err := agenttrace.Setup(ctx, "my-agent")
//	if err != nil { ... }
//	defer shutdown(context.Background())
//
// Nothing is set up (and Setup returns a no-op) unless an OTLP endpoint is
// configured (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or when OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none.
package agenttrace

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Setup installs a global tracer provider exporting over OTLP (gRPC or
// HTTP, as OTEL_EXPORTER_OTLP_PROTOCOL says; http/protobuf by default),
// with service.name service (OTEL_SERVICE_NAME overrides it). It returns
// what flushes the spans and stops: call it before the agent exits.
// Sampling follows the daemon's decision, carried by the traceparent.
func Setup(ctx context.Context, service string) (func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") ||
		os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")+os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nop, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch proto {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("agenttrace: OTLP protocol %q: use grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("agenttrace: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("agenttrace: resource: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, nil
}
