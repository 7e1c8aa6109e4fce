//go:build notrace

package tracing

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// This file is the package under the notrace build tag: every seam calls
// these empty functions, and the OpenTelemetry SDK is not linked.

// Compiled reports whether this binary was built with tracing.
const Compiled = false

// Use does nothing: this binary has no tracing.
func Use(trace.TracerProvider) {}

// On is false.
func On() bool { return false }

// Span is nothing.
type Span struct{}

func (Span) End()                                {}
func (Span) Set(...attribute.KeyValue)           {}
func (Span) Event(string, ...attribute.KeyValue) {}
func (Span) Fail(string)                         {}
func (Span) Valid() bool                         { return false }
func (Span) Traceparent() string                 { return "" }
func (Span) Context(ctx context.Context) context.Context {
	return ctx
}

func Start(ctx context.Context, _ string, _ trace.SpanKind, _ ...attribute.KeyValue) (context.Context, Span) {
	return ctx, Span{}
}

func StartRoot(ctx context.Context, _ string, _ trace.SpanKind, _ ...attribute.KeyValue) (context.Context, Span) {
	return ctx, Span{}
}

func StartFrom(_, _, _ string, _ trace.SpanKind, _ ...attribute.KeyValue) (context.Context, Span) {
	return context.Background(), Span{}
}

func FromTraceparent(ctx context.Context, _, _ string) context.Context { return ctx }

func FromHeaders(ctx context.Context, _ propagation.TextMapCarrier) context.Context { return ctx }

func Headers(context.Context) map[string]string { return nil }

func TraceparentOf(context.Context) string { return "" }

func ActorOptions(string, ...attribute.KeyValue) []actor.PropsOption { return nil }

func HeaderOf(actor.Context) string { return "" }

func Envelope(msg any, _ string) any { return msg }

// Setup refuses: this binary has no tracing.
func Setup(context.Context, Config) (func(context.Context) error, error) {
	return nil, ErrNotCompiled
}
