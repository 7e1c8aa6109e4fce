package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
)

// collector is the real OpenTelemetry Collector of tools/otelcol (the OTLP
// receiver and the file exporter), which scripts/test-setup builds into
// bin/otelcol (SURFACED_OTELCOL names another binary).
type collector struct {
	cmd        *exec.Cmd
	grpc, http string // host:port of the OTLP receivers
	file       string // where the file exporter writes, one OTLP JSON batch a line
	stderr     *strings.Builder
	stopped    bool
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	bin := os.Getenv("SURFACED_OTELCOL")
	if bin == "" {
		bin = filepath.Join(testkit.RepoRoot(), "bin", "otelcol")
	}
	if _, err := os.Stat(bin); err != nil {
		testkit.Missing(t, "no OpenTelemetry Collector at %s (./scripts/test-setup builds it from tools/otelcol): %v", bin, err)
	}
	dir := t.TempDir()
	c := &collector{grpc: freeAddr(t), http: freeAddr(t), file: filepath.Join(dir, "spans.jsonl"), stderr: &strings.Builder{}}
	cfg := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, c.grpc, c.http, c.file)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "--config", cfg)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !c.stopped {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	for _, addr := range []string{c.grpc, c.http} {
		testkit.Eventually(t, 60*time.Second, func() bool {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err == nil
		}, "the collector to listen on %s (stderr: %s)", addr, c.stderr)
	}
	return c
}

// stop ends the collector with SIGTERM, which flushes its exporter.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	c.stopped = true
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("collector exit: %v\n%s", err, c.stderr)
	}
}

// exportedSpan is a span as the file exporter wrote it (OTLP JSON).
type exportedSpan struct {
	Service string
	TraceID string
	SpanID  string
	Parent  string
	Name    string
	Attrs   map[string]string
	Events  []string
}

func readSpans(t *testing.T, file string) []exportedSpan {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("the collector wrote no spans: %v", err)
	}
	defer f.Close()
	type kv struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	var out []exportedSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var batch struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []kv `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []struct {
						TraceID      string `json:"traceId"`
						SpanID       string `json:"spanId"`
						ParentSpanID string `json:"parentSpanId"`
						Name         string `json:"name"`
						Attributes   []kv   `json:"attributes"`
						Events       []struct {
							Name string `json:"name"`
						} `json:"events"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(sc.Bytes(), &batch); err != nil {
			t.Fatalf("collector file line: %v\n%s", err, sc.Bytes())
		}
		for _, rs := range batch.ResourceSpans {
			service := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					var v struct{ StringValue string }
					_ = json.Unmarshal(a.Value, &v)
					service = v.StringValue
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					e := exportedSpan{Service: service, TraceID: s.TraceID, SpanID: s.SpanID, Parent: s.ParentSpanID, Name: s.Name, Attrs: map[string]string{}}
					for _, a := range s.Attributes {
						e.Attrs[a.Key] = string(a.Value)
					}
					for _, ev := range s.Events {
						e.Events = append(e.Events, ev.Name)
					}
					out = append(out, e)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The real daemon, with tracing: on in its config and the OTEL_*
// environment naming a real collector (over gRPC, then over HTTP), exports
// the spans of a command and of a prompt, and the demo agent (agentkit,
// agenttrace) exports its own into the same traces: read back from the
// collector's file, each trace's parent links hold from the caller's
// traceparent through the HTTP request, the actors and the agent round trip
// into the agent's spans. No span carries the command's args, the prompt's
// text, the tool's arguments or the model's reply; and the daemon's log
// lines of a traced request carry its trace_id and span_id.
func TestDaemonExportsTracesToACollector(t *testing.T) {
	col := startCollector(t)
	const (
		secretArg    = "ARG-7f3a9c"
		secretPrompt = "PROMPT-91c2be"
		secretTool   = "TOOLARG-5d1e04"
		secretReply  = "REPLY-c0ffee"
	)
	llm, err := llmstub.Start(func(req llmstub.Request) llmstub.Reply {
		if req.LastRole() == "tool" {
			return llmstub.Say("the count went up: ", secretReply)
		}
		return llmstub.Reply{Events: llmstub.Stream(llmstub.CallTool(0, "call_1", "increment", map[string]any{"why": secretTool}), llmstub.Finish("tool_calls"))}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(llm.Close)

	type traceOf struct{ command, prompt, stream string }
	var runs []traceOf
	for _, proto := range []struct{ name, protocol, endpoint string }{
		{"grpc", "grpc", col.grpc},
		{"http", "http/protobuf", col.http},
	} {
		t.Run(proto.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "surfaced.yaml")
			if err := os.WriteFile(cfg, []byte(`addr: 127.0.0.1:0
data_dir: `+filepath.Join(dir, "data")+`
log_format: json
log_level: debug
agents:
  - dir: `+filepath.Join(testkit.RepoRoot(), "examples/surface-demo-agent")+`
tracing:
  enabled: true
  sample_ratio: 1
`), 0o644); err != nil {
				t.Fatal(err)
			}
			p := startBinaryEnv(t, []string{
				"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + proto.endpoint,
				"OTEL_EXPORTER_OTLP_PROTOCOL=" + proto.protocol,
				"OTEL_BSP_SCHEDULE_DELAY=200",
				"SURFACED_LLM_BASE_URL=" + llm.URL,
			}, "serve", "--config", cfg)
			call := func(method, path, body, traceparent string) (int, string) {
				req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+p.token)
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if traceparent != "" {
					req.Header.Set("traceparent", traceparent)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			st, body := call("POST", "/api/sessions", "{}", "")
			if st != http.StatusCreated {
				t.Fatalf("create: %d %s", st, body)
			}
			var created struct{ SessionID string }
			_ = json.Unmarshal([]byte(body), &created)
			sid := created.SessionID
			testkit.Eventually(t, 60*time.Second, func() bool {
				_, body := call("GET", "/api/sessions/"+sid+"/surfaces", "", "")
				return strings.Contains(body, `"available":true`)
			}, "the demo agent to register its domain")

			run := traceOf{command: newTraceID(), prompt: newTraceID(), stream: newTraceID()}
			if st, body := call("POST", "/api/sessions/"+sid+"/surfaces/demo/echo", `{"args":{"text":"`+secretArg+`"}}`,
				"00-"+run.command+"-00f067aa0ba902b7-01"); st != http.StatusOK || !strings.Contains(body, secretArg) {
				t.Fatalf("echo: %d %s", st, body)
			}
			if st, body := call("POST", "/api/sessions/"+sid+"/prompt", `{"message":"please `+secretPrompt+`"}`,
				"00-"+run.prompt+"-00f067aa0ba902b7-01"); st != http.StatusAccepted {
				t.Fatalf("prompt: %d %s", st, body)
			}
			testkit.Eventually(t, 60*time.Second, func() bool {
				_, body := call("GET", "/api/sessions/"+sid+"/messages", "", "")
				return strings.Contains(body, secretReply)
			}, "the turn to end with the model's reply")
			// An event stream opened with a traceparent: the daemon logs
			// the subscription with the request's span.
			func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/api/sessions/"+sid+"/events", nil)
				req.Header.Set("Authorization", "Bearer "+p.token)
				req.Header.Set("traceparent", "00-"+run.stream+"-00f067aa0ba902b7-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
					t.Fatalf("event stream: %v", err)
				}
			}()
			testkit.Eventually(t, 10*time.Second, func() bool {
				return logLineWith(p.stderr.String(), "client subscribed", run.stream)
			}, "the daemon to log the subscription with its trace_id")

			// SIGTERM: the daemon stops its agent (which flushes its spans)
			// and flushes its own before it exits.
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- p.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("daemon exit: %v\n%s", err, p.stderr)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the daemon did not exit on SIGTERM\n%s", p.stderr)
			}
			runs = append(runs, run)
		})
	}
	col.stop(t)
	if t.Failed() {
		return
	}

	raw, err := os.ReadFile(col.file)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{secretArg, secretPrompt, secretTool, secretReply} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the exported spans carry %q (a command's args, a prompt, a tool's arguments or a reply)", secret)
		}
	}
	spans := readSpans(t, col.file)
	for i, run := range runs {
		t.Logf("run %d: %d spans", i, len(spans))
		command := treeOf(t, spans, run.command)
		http := command.child(t, "00f067aa0ba902b7", "surfaced", "POST /api/sessions/:id/surfaces/:domain/:action")
		if http.Attrs["surfaced.domain"] != `{"stringValue":"demo"}` || http.Attrs["surfaced.action"] != `{"stringValue":"echo"}` {
			t.Errorf("the HTTP span's attributes: %v", http.Attrs)
		}
		cmd := command.descendant(t, http, "surfaced", "surface RunCommand")
		dispatch := command.child(t, cmd.SpanID, "surfaced", "agent surface_dispatch")
		command.child(t, cmd.SpanID, "surfaced", "store write")
		command.child(t, dispatch.SpanID, "surface-demo-agent", "surface_dispatch demo.echo")
		command.linksIntact(t)

		prompt := treeOf(t, spans, run.prompt)
		turn := prompt.descendant(t, prompt.byName(t, "surfaced", "POST /api/sessions/:id/prompt"), "surfaced", "agent prompt")
		if !slices.Contains(turn.Events, "first text delta") {
			t.Errorf("the prompt's span has no first text delta event: %v", turn.Events)
		}
		agentTurn := prompt.child(t, turn.SpanID, "surface-demo-agent", "turn")
		prompt.child(t, agentTurn.SpanID, "surface-demo-agent", "model call")
		prompt.child(t, agentTurn.SpanID, "surface-demo-agent", "tool increment")
		prompt.linksIntact(t)
	}
}

// newTraceID is a random W3C trace id.
func newTraceID() string {
	b := make([]byte, 16)
	f, _ := os.Open("/dev/urandom")
	defer f.Close()
	_, _ = io.ReadFull(f, b)
	return fmt.Sprintf("%x", b)
}

// logLineWith reports whether a JSON log line with msg carries traceID.
func logLineWith(logs, msg, traceID string) bool {
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg && m["trace_id"] == traceID && m["span_id"] != "" {
			return true
		}
	}
	return false
}

type spanTree struct {
	id    string
	spans []exportedSpan
}

func treeOf(t *testing.T, all []exportedSpan, traceID string) spanTree {
	t.Helper()
	tr := spanTree{id: traceID}
	for _, s := range all {
		if s.TraceID == traceID {
			tr.spans = append(tr.spans, s)
		}
	}
	if len(tr.spans) == 0 {
		t.Fatalf("no span of trace %s", traceID)
	}
	return tr
}

func (tr spanTree) String() string {
	var b strings.Builder
	for _, s := range tr.spans {
		fmt.Fprintf(&b, "\n  %s %s <- %s [%s] %v", s.SpanID, s.Name, s.Parent, s.Service, s.Events)
	}
	return b.String()
}

func (tr spanTree) byName(t *testing.T, service, name string) exportedSpan {
	t.Helper()
	for _, s := range tr.spans {
		if s.Service == service && s.Name == name {
			return s
		}
	}
	t.Fatalf("trace %s: no %q span of %s:%s", tr.id, name, service, tr)
	return exportedSpan{}
}

func (tr spanTree) child(t *testing.T, parent, service, name string) exportedSpan {
	t.Helper()
	for _, s := range tr.spans {
		if s.Parent == parent && s.Service == service && s.Name == name {
			return s
		}
	}
	t.Fatalf("trace %s: no %q span of %s under %s:%s", tr.id, name, service, parent, tr)
	return exportedSpan{}
}

// descendant finds a span below from, through any spans between them.
func (tr spanTree) descendant(t *testing.T, from exportedSpan, service, name string) exportedSpan {
	t.Helper()
	for _, s := range tr.spans {
		if s.Service != service || s.Name != name {
			continue
		}
		for p := s.Parent; p != ""; {
			if p == from.SpanID {
				return s
			}
			next := ""
			for _, q := range tr.spans {
				if q.SpanID == p {
					next = q.Parent
				}
			}
			p = next
		}
	}
	t.Fatalf("trace %s: no %q span of %s below %s:%s", tr.id, name, service, from.Name, tr)
	return exportedSpan{}
}

// linksIntact: every span's parent is a span of the trace, but for the
// caller's (the test's traceparent, which no one exported).
func (tr spanTree) linksIntact(t *testing.T) {
	t.Helper()
	ids := map[string]bool{"00f067aa0ba902b7": true}
	for _, s := range tr.spans {
		ids[s.SpanID] = true
	}
	for _, s := range tr.spans {
		if !ids[s.Parent] {
			t.Errorf("trace %s: %s (%s) has a parent %q outside the trace:%s", tr.id, s.Name, s.Service, s.Parent, tr)
		}
	}
}
