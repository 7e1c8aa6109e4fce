//go:build !notrace

package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Compiled reports whether this binary was built with tracing (false under
// the notrace build tag).
const Compiled = true

type state struct {
	tracer trace.Tracer
}

var (
	cur  atomic.Pointer[state]
	prop = propagation.TraceContext{}
)

// Use turns tracing on with tp's tracer, or off with nil. The daemon calls it
// once at start; tests call it around what they trace.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		cur.Store(nil)
		return
	}
	cur.Store(&state{tracer: tp.Tracer(ScopeName)})
}

// On reports whether tracing is on.
func On() bool { return cur.Load() != nil }

// Span is a span, or nothing (the zero value) while tracing is off or the
// work is not part of a trace. Its methods do nothing on the zero value.
type Span struct{ s trace.Span }

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// Set adds attributes.
func (s Span) Set(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// Event records an event on the span.
func (s Span) Event(name string, kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.AddEvent(name, trace.WithAttributes(kv...))
	}
}

// Fail marks the span as failed with a code (never a message that could
// carry a payload).
func (s Span) Fail(code string) {
	if s.s != nil {
		s.s.SetAttributes(AttrOutcome.String(code))
		s.s.SetStatus(2, code) // codes.Error
	}
}

// Valid reports whether this is a real span.
func (s Span) Valid() bool { return s.s != nil }

// Traceparent is the span's W3C traceparent ("" for no span).
func (s Span) Traceparent() string {
	if s.s == nil {
		return ""
	}
	return traceparentOf(s.s.SpanContext())
}

// Context returns ctx with the span in it.
func (s Span) Context(ctx context.Context) context.Context {
	if s.s == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.s)
}

// Start starts a child of the span in ctx. Without tracing, or without a
// span in ctx (a seam never starts a trace of its own, but for an HTTP
// request: see StartRoot), it returns ctx and no span.
func Start(ctx context.Context, name string, kind trace.SpanKind, kv ...attribute.KeyValue) (context.Context, Span) {
	st := cur.Load()
	if st == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, Span{}
	}
	ctx, s := st.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(kv...))
	return ctx, Span{s}
}

// StartRoot starts a span that may begin a trace (an HTTP request's): the
// sampler decides, continuing the caller's trace when ctx has one.
func StartRoot(ctx context.Context, name string, kind trace.SpanKind, kv ...attribute.KeyValue) (context.Context, Span) {
	st := cur.Load()
	if st == nil {
		return ctx, Span{}
	}
	ctx, s := st.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(kv...))
	return ctx, Span{s}
}

// StartFrom starts a child of the span a traceparent names ("" or invalid:
// no span).
func StartFrom(traceparent, tracestate, name string, kind trace.SpanKind, kv ...attribute.KeyValue) (context.Context, Span) {
	if traceparent == "" || cur.Load() == nil {
		return context.Background(), Span{}
	}
	return Start(FromTraceparent(context.Background(), traceparent, tracestate), name, kind, kv...)
}

// FromTraceparent returns ctx with the remote span a traceparent names as
// its parent (ctx as it is when the traceparent is invalid).
func FromTraceparent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return prop.Extract(ctx, pair{traceparent, tracestate})
}

// FromHeaders returns ctx with the remote span a carrier (HTTP headers)
// names as its parent.
func FromHeaders(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if cur.Load() == nil {
		return ctx
	}
	return prop.Extract(ctx, c)
}

// Headers returns the trace context of ctx's span as envelope headers, nil
// while tracing is off or ctx has no span.
func Headers(ctx context.Context) map[string]string {
	if cur.Load() == nil {
		return nil
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	h := map[string]string{Traceparent: traceparentOf(sc)}
	if ts := sc.TraceState().String(); ts != "" {
		h[Tracestate] = ts
	}
	return h
}

// TraceparentOf is the traceparent of ctx's span ("" for none, or off).
func TraceparentOf(ctx context.Context) string {
	if cur.Load() == nil {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return traceparentOf(sc)
}

func traceparentOf(sc trace.SpanContext) string {
	var b [55]byte
	const hex = "0123456789abcdef"
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, v := range tid {
		b[3+2*i], b[4+2*i] = hex[v>>4], hex[v&15]
	}
	b[35] = '-'
	for i, v := range sid {
		b[36+2*i], b[37+2*i] = hex[v>>4], hex[v&15]
	}
	b[52] = '-'
	f := sc.TraceFlags()
	b[53], b[54] = hex[f>>4], hex[f&15]
	return string(b[:])
}

// pair is a carrier of one traceparent (and tracestate).
type pair struct{ tp, ts string }

func (p pair) Get(key string) string {
	switch key {
	case Traceparent:
		return p.tp
	case Tracestate:
		return p.ts
	}
	return ""
}
func (p pair) Set(string, string) {}
func (p pair) Keys() []string     { return []string{Traceparent, Tracestate} }
