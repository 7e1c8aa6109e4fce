package cluster_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/tracing"
)

// Where a command's time goes, hop by hop, on a three-node cluster: the
// daemons trace every command (tracing on, sample ratio 1) to a collector
// in this process (OTLP over HTTP), and each sub-benchmark reports the p50
// of each hop over its commands, for a session on the client's node
// (same-node) and on another one (cross-node). Tracing costs its own time
// (a few µs a span), so these add up to a little more than
// BenchmarkClusterCommandToSnapshot's figures; the differences between the
// two rows are what crossing the cluster costs. docs/benchmarks.md reads them.
func BenchmarkClusterCommandHops(b *testing.B) {
	col := &otlpCollector{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: col}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	b.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	b.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	cfg := filepath.Join(b.TempDir(), "traced.yaml")
	if err := os.WriteFile(cfg, []byte("limits:\n  commands_per_second: 1000000\ntracing:\n  enabled: true\n  sample_ratio: 1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, "automanaged", 3)
	e.extra = []string{"--config", cfg}
	e.startAll(3)
	a := e.nodes[0]
	local, remote := e.localAndRemote(b, a)
	for _, c := range []struct{ name, id string }{{"same-node", local}, {"cross-node", remote}} {
		b.Run(c.name, func(b *testing.B) {
			col.reset()
			for i := 0; i < b.N; i++ {
				if st, err := a.post("/api/sessions/" + c.id + "/surfaces/demo/increment"); st != 200 || err != nil {
					b.Fatalf("command: %d %v", st, err)
				}
			}
			b.StopTimer()
			var hops []commandHops
			testkit.Eventually(b, 30*time.Second, func() bool {
				hops = col.commands(c.id)
				return len(hops) >= b.N
			}, "the spans of %d commands", b.N)
			p50 := func(f func(commandHops) int64) float64 {
				v := make([]int64, len(hops))
				for i, h := range hops {
					v[i] = f(h)
				}
				slices.Sort(v)
				return float64(v[len(v)/2]) / 1e3
			}
			b.ReportMetric(p50(func(h commandHops) int64 { return h.post }), "http-µs")
			b.ReportMetric(p50(func(h commandHops) int64 { return h.toSession }), "to-session-µs")
			b.ReportMetric(p50(func(h commandHops) int64 { return h.command }), "command-µs")
			b.ReportMetric(p50(func(h commandHops) int64 { return h.agent }), "agent-µs")
			b.ReportMetric(p50(func(h commandHops) int64 { return h.store }), "store-µs")
			b.ReportMetric(p50(func(h commandHops) int64 { return h.back }), "back-µs")
		})
	}
}

// commandHops is one command's trace, in ns.
type commandHops struct {
	post      int64 // the HTTP request's span, on the client's node
	toSession int64 // the cluster hop's start → the session actor's span's start (the request's way there)
	command   int64 // the domain's command, on the session's node
	agent     int64 // its agent round trip (surface_dispatch)
	store     int64 // its store write
	back      int64 // the command's end → the cluster hop's end (the result's way back)
}

// otlpCollector is an OTLP/HTTP trace receiver that keeps every span.
type otlpCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *otlpCollector) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = nil
}

// commands returns the complete traces of the commands to session id.
func (c *otlpCollector) commands(id string) []commandHops {
	c.mu.Lock()
	spans := slices.Clone(c.spans)
	c.mu.Unlock()
	byTrace := map[string]map[string]*tracepb.Span{}
	for _, s := range spans {
		t := byTrace[string(s.GetTraceId())]
		if t == nil {
			t = map[string]*tracepb.Span{}
			byTrace[string(s.GetTraceId())] = t
		}
		t[s.GetName()] = s
	}
	var out []commandHops
	for _, t := range byTrace {
		post, hop, sess := t["POST /api/sessions/:id/surfaces/:domain/:action"], t["cluster hop"], t["session RunCommand"]
		cmd, agent, write := t["surface RunCommand"], t["agent surface_dispatch"], t["store write"]
		if post == nil || hop == nil || sess == nil || cmd == nil || agent == nil || write == nil || sessionOf(sess) != id {
			continue
		}
		out = append(out, commandHops{
			post:      dur(post),
			toSession: int64(sess.GetStartTimeUnixNano() - hop.GetStartTimeUnixNano()),
			command:   dur(cmd),
			agent:     dur(agent),
			store:     dur(write),
			back:      int64(hop.GetEndTimeUnixNano() - cmd.GetEndTimeUnixNano()),
		})
	}
	return out
}

func dur(s *tracepb.Span) int64 { return int64(s.GetEndTimeUnixNano() - s.GetStartTimeUnixNano()) }

func sessionOf(s *tracepb.Span) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == string(tracing.AttrSession) {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}
