//go:build !notrace

package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/internal/tracing"
)

// While tracing is on, every HTTP request is a server span named by its
// method and route (the pattern, never the path with its ids), continuing
// the caller's traceparent: the API's routes and every mount, ACP and MCP
// among them (AG-UI, when it is mounted, goes through the same middleware).
// A refused request is a span too, with its status.
func TestEveryRouteAndMountIsASpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	d := daemon.Start(t)

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	caller := map[string]string{}
	for i, r := range []struct{ method, path, body, route string }{
		{"POST", "/api/sessions", "{}", "POST /api/sessions"},
		{"GET", "/api/sessions/nosuch/state", "", "GET /api/sessions/:id/state"},
		{"POST", d.MCP.Path(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "POST " + d.MCP.Path()},
		{"POST", d.ACP.Path(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`, "POST " + d.ACP.Path()},
	} {
		span := "00f067aa0ba902b" + string(rune('0'+i))
		caller[r.route] = span
		req, _ := http.NewRequest(r.method, d.URL+r.path, strings.NewReader(r.body))
		for k, v := range d.Auth() {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("traceparent", "00-"+trace+"-"+span+"-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for route, parent := range caller {
		found := false
		for _, s := range exp.GetSpans() {
			if s.Name == route && s.SpanContext.TraceID().String() == trace && s.Parent.SpanID().String() == parent {
				found = true
				for _, kv := range s.Attributes {
					if kv.Key == "http.route" && strings.Contains(kv.Value.AsString(), "nosuch") {
						t.Errorf("%s: the route carries the path: %s", route, kv.Value.AsString())
					}
				}
			}
		}
		if !found {
			var names []string
			for _, s := range exp.GetSpans() {
				names = append(names, s.Name)
			}
			t.Errorf("no span %q under the caller's %s; spans: %q", route, parent, names)
		}
	}
}
