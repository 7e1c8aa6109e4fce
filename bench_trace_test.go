//go:build !notrace

package surfaced_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

// Tracing on: the command benchmarks with every command a sampled trace
// (a root span per command, as an HTTP request makes), the spans batched to
// an exporter that drops them, so that what is measured is the daemon's
// cost of tracing and not a collector's. Tracing off, and a build without
// it, are BenchmarkNativeCommand and BenchmarkAgentHostedCommand
// (scripts/bench-tracing runs the three in one run; docs/benchmarks.md).

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func tracedRuntime(b *testing.B) (*surfaced.Runtime, string, *sdktrace.TracerProvider) {
	b.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tracing.Use(tp)
	b.Cleanup(func() {
		tracing.Use(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	})
	rt, id := benchRuntime(b, memstore.New(), testkit.FakeAgent(b))
	return rt, id, tp
}

func benchTracedCommand(b *testing.B, domain, action string) {
	rt, id, tp := tracedRuntime(b)
	tracer := tp.Tracer("bench")
	msg := &pb.RunCommand{Caller: me, Domain: domain, Action: action}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ctx, span := tracer.Start(context.Background(), "command")
		res, err := rt.Request(ctx, id, msg)
		span.End()
		samples = append(samples, time.Since(t0))
		if err != nil || !res.(*pb.CommandResult).GetOk() {
			b.Fatalf("command: %v %v", err, res)
		}
	}
	b.StopTimer()
	reportLatencies(b, samples)
}

// BenchmarkNativeCommand with tracing on.
func BenchmarkNativeCommandTraced(b *testing.B) { benchTracedCommand(b, "counter", "add") }

// BenchmarkAgentHostedCommand with tracing on: the surface_dispatch line
// carries a traceparent, which the fake agent reads.
func BenchmarkAgentHostedCommandTraced(b *testing.B) { benchTracedCommand(b, "demo", "increment") }
