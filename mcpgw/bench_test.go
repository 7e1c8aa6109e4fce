package mcpgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// BenchmarkCommand measures one surface command three ways in the same
// run, interleaved: POST /api/sessions/{id}/surfaces/{domain}/{action}
// (the baseline, what a browser's button does), and the MCP tool
// run_command through the official Go SDK's client in each protocol
// version (2026-07-28 stateless, 2025-11-25 stateful). Sub-benchmarks: a
// native domain (the command costs nothing, so the transports are all
// there is) and the fake agent's agent-hosted demo domain (a round trip
// to the agent). It reports p50 and p99 of each and the MCP/HTTP ratios.
func BenchmarkCommand(b *testing.B) {
	type counter struct{ N int }
	native := surface.Define("counter", counter{}, map[string]surface.Command[counter]{
		"add": func(ctx *surface.Ctx[counter], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c counter) counter { c.N++; return c })
			return nil, nil
		},
	})
	// Four ways interleaved run past the default 1000 commands per second
	// of a session: the bound is not what is measured.
	d := daemon.Start(b, daemon.Domains(surfaced.DomainBinding{Domain: native}),
		daemon.Config(func(c *surfaced.Config) { c.Limits.CommandsPerSecond = 1 << 20 }))
	id := d.Create(nil)
	ready(b, d, id)
	for _, c := range []struct{ name, domain, action string }{{"native", "counter", "add"}, {"agent", "demo", "increment"}} {
		b.Run(c.name, func(b *testing.B) {
			httpc := &http.Client{}
			url := d.URL + "/api/sessions/" + id + "/surfaces/" + c.domain + "/" + c.action
			viaHTTP := func() {
				req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(`{"args":{}}`)))
				req.Header.Set("Authorization", "Bearer "+d.Token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := httpc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("HTTP %d", resp.StatusCode)
				}
			}
			clients := map[string]*mcp.ClientSession{}
			for _, v := range versions {
				clients[v] = benchClient(b, d, v)
			}
			// The same tools/call as a plain HTTP client sends it: one POST
			// (stateless: the version in its headers and _meta), the answer
			// read from its SSE body. What the server costs, without the
			// SDK client's own.
			rawBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"sessionId":"` + id +
				`","domain":"` + c.domain + `","action":"` + c.action + `"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
			viaRaw := func() {
				req, _ := http.NewRequest("POST", d.MCPURL, bytes.NewReader(rawBody))
				req.Header.Set("Authorization", "Bearer "+d.Token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", stateless)
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "run_command")
				resp, err := httpc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"ok":true`)) {
					b.Fatalf("raw tools/call: %d %s", resp.StatusCode, body)
				}
			}
			viaMCP := func(cs *mcp.ClientSession) {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command",
					Arguments: map[string]any{"sessionId": id, "domain": c.domain, "action": c.action}})
				if err != nil || res.IsError {
					b.Fatalf("run_command: %v %v", err, res)
				}
			}
			// Warm up every path (connections, the SDK's caches).
			for range 20 {
				viaHTTP()
				viaRaw()
				for _, cs := range clients {
					viaMCP(cs)
				}
			}
			lat := map[string][]time.Duration{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				viaHTTP()
				lat["http"] = append(lat["http"], time.Since(t0))
				t0 = time.Now()
				viaRaw()
				lat["raw"] = append(lat["raw"], time.Since(t0))
				for _, v := range versions {
					t0 = time.Now()
					viaMCP(clients[v])
					lat[v] = append(lat[v], time.Since(t0))
				}
			}
			b.StopTimer()
			p := func(name string, q float64) float64 {
				l := slices.Clone(lat[name])
				slices.Sort(l)
				return float64(l[int(q*float64(len(l)-1))].Microseconds())
			}
			b.ReportMetric(p("http", 0.5), "http-p50-µs")
			b.ReportMetric(p("http", 0.99), "http-p99-µs")
			b.ReportMetric(p("raw", 0.5), "raw-p50-µs")
			b.ReportMetric(p("raw", 0.99), "raw-p99-µs")
			b.ReportMetric(p("raw", 0.5)/p("http", 0.5), "raw-p50-ratio")
			b.ReportMetric(p("raw", 0.99)/p("http", 0.99), "raw-p99-ratio")
			for _, v := range versions {
				tag := "mcp" + v[:4] + v[5:7]
				b.ReportMetric(p(v, 0.5), tag+"-p50-µs")
				b.ReportMetric(p(v, 0.99), tag+"-p99-µs")
				b.ReportMetric(p(v, 0.5)/p("http", 0.5), tag+"-p50-ratio")
				b.ReportMetric(p(v, 0.99)/p("http", 0.99), tag+"-p99-ratio")
			}
		})
	}
}

func benchClient(b *testing.B, d *daemon.Daemon, version string) *mcp.ClientSession {
	b.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: d.MCPURL, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{token: d.Token, next: http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}
