package surface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// logBuffer is a log a test reads while actors write it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// memWriter is a store writer on a memory store holding session "s".
func memWriter(t *testing.T) *store.Writer {
	t.Helper()
	st := memstore.New()
	if err := st.CreateSession(t.Context(), store.Session{ID: "s", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(st, 1, slog.New(slog.DiscardHandler))
	t.Cleanup(w.Close)
	return w
}

//go:noinline
func handlerBlowsUp() { panic("the handler blew up") }

// Where a handler panicked is logged: a stack through the function that
// panicked.
func checkLogged(t *testing.T, logs *logBuffer, what string) {
	t.Helper()
	got := logs.String()
	if !strings.Contains(got, what) || !strings.Contains(got, "the handler blew up") || !strings.Contains(got, "surface_test.handlerBlowsUp") {
		t.Errorf("the log does not say %q with the stack of the panic:\n%s", what, got)
	}
}

func panicky() surface.Domain {
	return surface.Define("counter", count{}, map[string]surface.Command[count]{
		"add": func(ctx *surface.Ctx[count], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c count) count { c.N++; return c })
			return ctx.Get().N, nil
		},
		"boom": func(ctx *surface.Ctx[count], _ json.RawMessage) (any, error) {
			ctx.SetState(func(c count) count { c.N += 100; return c })
			handlerBlowsUp()
			return nil, nil
		},
	})
}

// A native command that panics answers dispatch_failed and changes nothing
// (its half-done state is dropped); the panic is logged with its stack.
func TestNativeCommandPanicIsLoggedWithItsStack(t *testing.T) {
	var logs logBuffer
	h := startDomain(t, surface.Config{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative, Native: panicky(),
		Writer: memWriter(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if r := result(t, h.send("add")); n(t, r) != 1 {
		t.Fatalf("add: %v", r)
	}
	r := result(t, h.send("boom"))
	if r.GetOk() || r.GetError().GetCode() != agentproc.CodeDispatchFailed || !strings.Contains(r.GetError().GetMessage(), `command "boom" panicked: the handler blew up`) {
		t.Fatalf("a panicking command: %v, want dispatch_failed saying it panicked", r)
	}
	if r := result(t, h.send("add")); n(t, r) != 2 {
		t.Fatalf("add after the panic: %v, want 2 (the panic changed nothing)", r)
	}
	checkLogged(t, &logs, "a native command panicked")
}

// custom is a native domain written without Define: its Instance is its
// own, and may panic.
type custom struct{}

func (custom) Name() string                                  { return "counter" }
func (custom) Commands() []string                            { return []string{"boom"} }
func (custom) New(json.RawMessage) (surface.Instance, error) { return customInstance{}, nil }

type customInstance struct{}

func (customInstance) Dispatch(string, json.RawMessage) (surface.Result, bool) {
	handlerBlowsUp()
	return surface.Result{}, false
}
func (customInstance) Snapshot() (json.RawMessage, error) { return json.RawMessage(`{}`), nil }

// Any Instance's panic is caught the same way: the command is answered
// (the actor is not restarted under a caller left waiting).
func TestCustomInstancePanicIsAnswered(t *testing.T) {
	var logs logBuffer
	h := startDomain(t, surface.Config{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative, Native: custom{},
		Writer: memWriter(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	res, err := h.sys.Root.RequestFuture(h.domain, &pb.RunCommand{Domain: "counter", Action: "boom"}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("the command was not answered: %v", err)
	}
	if r := res.(*pb.CommandResult); r.GetOk() || r.GetError().GetCode() != agentproc.CodeDispatchFailed {
		t.Fatalf("a panicking Instance: %v, want dispatch_failed", r)
	}
	checkLogged(t, &logs, "a native command panicked")
}

// dataDomain serves pages from a View that panics.
type dataDomain struct{ custom }

func (dataDomain) HasData() bool { return true }
func (dataDomain) View(json.RawMessage, uint64) (surface.View, error) {
	return panickyView{}, nil
}

type panickyView struct{}

func (panickyView) Fetch(context.Context, surface.DataRequest) (surface.Page, error) {
	handlerBlowsUp()
	return surface.Page{}, errors.New("unreachable")
}

// A data handler that panics fails its page, on the fetcher's goroutine for
// it, instead of the process; the panic is logged with its stack.
func TestDataHandlerPanicFailsThePage(t *testing.T) {
	var logs logBuffer
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	f := sys.Root.Spawn(surface.FetcherProps(surface.FetcherConfig{SessionID: "s", Domain: "counter", Hosted: surface.HostedNative,
		Native: dataDomain{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	sys.Root.Send(f, &pb.StateCommitted{Key: agentproc.SurfaceKey("counter"), Value: []byte(`{}`), Rev: 1})
	res, err := sys.Root.RequestFuture(f, &pb.SurfaceFetch{Domain: "counter", Path: "rows"}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("the page was not answered: %v", err)
	}
	if r := res.(*pb.SurfaceFetchResult); r.GetError().GetCode() != agentproc.CodeDispatchFailed ||
		!strings.Contains(r.GetError().GetMessage(), "the data handler panicked: the handler blew up") {
		t.Fatalf("a panicking data handler: %v, want dispatch_failed saying it panicked", r)
	}
	checkLogged(t, &logs, "a data handler panicked")
}
