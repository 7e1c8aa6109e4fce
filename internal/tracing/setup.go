//go:build !notrace

package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Setup turns tracing on, exporting spans over OTLP as the environment
// says, and returns what flushes and stops it at exit. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none leave it
// off (and Setup returns a no-op).
func Setup(ctx context.Context, cfg Config) (func(context.Context) error, error) {
	getenv := os.Getenv
	nop := func(context.Context) error { return nil }
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nop, nil
	}
	switch e := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); e {
	case "", "otlp":
	case "none":
		return nop, nil
	default:
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", e)
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, fmt.Errorf("tracing: sample ratio %v is not within (0, 1]", cfg.SampleRatio)
	}
	exp, err := exporter(ctx, getenv)
	if err != nil {
		return nil, err
	}
	// Schemaless: the SDK's default resource names its own semantic
	// conventions' schema, and merging two that differ is an error.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("surfaced"), semconv.ServiceVersion(cfg.Version), semconv.ServiceInstanceID(cfg.Node)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the defaults.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.SampleRatio > 0 || getenv("OTEL_TRACES_SAMPLER") == "" {
		r := cfg.SampleRatio
		if r == 0 {
			r = 1
		}
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	Use(tp)
	return func(ctx context.Context) error {
		Use(nil)
		return tp.Shutdown(ctx)
	}, nil
}

func exporter(ctx context.Context, getenv func(string) string) (*otlptrace.Exporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto == "" {
		proto = ProtocolHTTP // the OpenTelemetry specification's default
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch proto {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	case ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q: use %s or %s", proto, ProtocolGRPC, ProtocolHTTP)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP %s exporter: %w", proto, err)
	}
	return exp, nil
}
