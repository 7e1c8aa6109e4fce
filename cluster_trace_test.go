//go:build !race && !notrace

// In-process cluster test: see cluster_rejoin_test.go for why it runs
// without the race detector. Built without tracing (the notrace tag),
// there is nothing to trace.

package surfaced

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/tracing"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

// A command sent through one node of a three-node cluster to a session
// another node hosts is one trace: the caller's span, the cluster hop, the
// session actor's handling on the session's node, the domain actor's
// command, the agent round trip (whose traceparent the agent received on
// its surface_dispatch line) and the store write, each the child of the one
// before it (the write and the round trip of the command), with the rev
// the command made on the command's span.
func TestInProcessClusterTraceOfACommand(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })

	st := memstore.New()
	agent := test.NewInMemAgent()
	var logs logBuffer
	fake := testkit.FakeAgent(t)
	var nodes []*Runtime
	for range 3 {
		rt, err := New(Config{Store: st,
			Cluster: &ClusterConfig{Name: "trace-test", LeaseTTL: 2 * time.Second,
				Provider: func() (cluster.ClusterProvider, error) { return test.NewTestProvider(agent), nil }},
			Agents: []AgentSpec{{Name: "fake", Argv: fake}},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rt.Shutdown(ctx)
		})
		nodes = append(nodes, rt)
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		for _, rt := range nodes {
			if len(rt.ClusterMembers()) != 3 {
				return false
			}
		}
		return true
	}, "three members in every node's view")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := nodes[0].CreateSession(ctx, CreateOptions{Owner: "alice", Agent: "fake", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The command goes through a node that does not host the session.
	var via *Runtime
	for _, rt := range nodes {
		if rt.node.dir.Owner(id) != rt.node.sys.Address() {
			via = rt
			break
		}
	}
	if via == nil {
		t.Fatal("every node says it hosts the session")
	}
	alice := &pb.Caller{Subject: "alice"}
	// The agent is ready (a command waits for it, but this keeps the trace
	// to one command's work).
	testkit.Eventually(t, 20*time.Second, func() bool {
		res, err := via.Request(ctx, id, &pb.ListSurfaces{Caller: alice})
		return err == nil && len(res.(*pb.SurfaceList).GetSurfaces()) > 0
	}, "the agent to register its domain")

	ctx, root := tp.Tracer("test").Start(ctx, "client command")
	res, err := via.Request(ctx, id, &pb.RunCommand{Caller: alice, Domain: "demo", Action: "increment"})
	root.End()
	if err != nil || !res.(*pb.CommandResult).GetOk() {
		t.Fatalf("command: %v %v", res, err)
	}
	rev := res.(*pb.CommandResult).GetRev()
	tid := root.SpanContext().TraceID()

	find := func(spans tracetest.SpanStubs, name string, parent trace.SpanID) *tracetest.SpanStub {
		for i := range spans {
			s := &spans[i]
			if s.Name == name && s.SpanContext.TraceID() == tid && s.Parent.SpanID() == parent {
				return s
			}
		}
		return nil
	}
	var hop, sess, cmd, dispatch, write *tracetest.SpanStub
	testkit.Eventually(t, 10*time.Second, func() bool {
		spans := exp.GetSpans()
		hop = find(spans, "cluster hop", root.SpanContext().SpanID())
		if hop == nil {
			return false
		}
		sess = find(spans, "session RunCommand", hop.SpanContext.SpanID())
		if sess == nil {
			return false
		}
		cmd = find(spans, "surface RunCommand", sess.SpanContext.SpanID())
		if cmd == nil {
			return false
		}
		dispatch = find(spans, "agent surface_dispatch", cmd.SpanContext.SpanID())
		write = find(spans, "store write", cmd.SpanContext.SpanID())
		return dispatch != nil && write != nil
	}, "the span tree of the command")

	attr := func(s *tracetest.SpanStub, k attribute.Key) attribute.Value {
		for _, kv := range s.Attributes {
			if kv.Key == k {
				return kv.Value
			}
		}
		return attribute.Value{}
	}
	if !attr(hop, attribute.Key("surfaced.cluster.remote")).AsBool() {
		t.Errorf("the hop is not remote: %v", hop.Attributes)
	}
	callerNode := attr(hop, tracing.AttrNode).AsString()
	for _, s := range []*tracetest.SpanStub{sess, cmd, dispatch, write} {
		if got := attr(s, tracing.AttrSession).AsString(); got != id {
			t.Errorf("%s: session %q, want %q", s.Name, got, id)
		}
		if n := attr(s, tracing.AttrNode).AsString(); n == "" || n == callerNode {
			t.Errorf("%s ran on node %q, the caller's is %q", s.Name, n, callerNode)
		}
	}
	if d, a := attr(cmd, tracing.AttrDomain).AsString(), attr(cmd, tracing.AttrAction).AsString(); d != "demo" || a != "increment" {
		t.Errorf("command span names %s/%s", d, a)
	}
	if got := attr(cmd, tracing.AttrRev).AsInt64(); got != int64(rev) {
		t.Errorf("command span rev %d, the result's %d", got, rev)
	}
	if attr(write, attribute.Key("surfaced.store.commit")).AsInt64() == 0 {
		t.Errorf("the store write names no commit: %v", write.Attributes)
	}
	// Into the agent: the surface_dispatch line carried the round trip's
	// span as its traceparent.
	want := fmt.Sprintf("traceparent 00-%s-%s-01", tid, dispatch.SpanContext.SpanID())
	testkit.Eventually(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), want) },
		"the agent to report %q", want)
	// Never a payload: no attribute carries the command's args or state.
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, `"count"`) {
				t.Errorf("%s: attribute %s carries a payload: %s", s.Name, kv.Key, v)
			}
		}
	}
}
