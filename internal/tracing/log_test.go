//go:build !notrace

package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A record logged with a context that holds a span carries the span's
// trace_id and span_id, through WithAttrs and WithGroup; one logged without
// a span, or with the plain (context-free) methods, carries neither.
func TestLogHandlerAddsTheSpanOfTheContext(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("session", "s1")
	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			out = append(out, m)
		}
		buf.Reset()
		return out
	}

	log.InfoContext(ctx, "with span")
	log.WithGroup("g").InfoContext(ctx, "grouped")
	for _, m := range lines() {
		tid, sid := m["trace_id"], m["span_id"]
		if g, ok := m["g"].(map[string]any); ok {
			tid, sid = g["trace_id"], g["span_id"]
		}
		if tid != sc.TraceID().String() || sid != sc.SpanID().String() || m["session"] != "s1" {
			t.Errorf("%v: want trace_id %s span_id %s session s1", m, sc.TraceID(), sc.SpanID())
		}
	}
	log.InfoContext(context.Background(), "no span")
	log.Info("no context")
	for _, m := range lines() {
		if _, ok := m["trace_id"]; ok {
			t.Errorf("%v: a trace_id without a span", m)
		}
	}
}
