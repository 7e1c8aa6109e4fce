package inspect_test

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

type counter struct{ N int }

var counterDomain = surface.Define("counter", counter{}, map[string]surface.Command[counter]{
	"add": surface.Typed(func(ctx *surface.Ctx[counter], a struct{ N int }) (any, error) {
		ctx.SetState(func(c counter) counter { c.N += a.N; return c })
		return nil, nil
	}),
})

// BenchmarkCommand is the in-process command path with and without the
// inspector, in the same run: a native-domain command through the Directory
// (session actor -> domain actor -> memstore write -> result), with every
// actor of the session inspected in the second case. Compare ns/op.
func BenchmarkCommand(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchCommand(b, false) })
	b.Run("inspected", func(b *testing.B) { benchCommand(b, true) })
}

func benchCommand(b *testing.B, inspected bool) {
	run := commandRunner(b, inspected)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}

// BenchmarkCommandPair runs the same two setups in alternating batches and
// reports inspected/plain as "ratio" (wall time) and "cpu-ratio" (process
// CPU time, user+system): on a shared machine, load that comes and goes hits
// both sides alike, and the CPU ratio does not count time spent waiting for
// a core.
func BenchmarkCommandPair(b *testing.B) {
	plain, inspected := commandRunner(b, false), commandRunner(b, true)
	const batch = 200
	var tp, ti, cp, ci time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		start, cpu := time.Now(), cpuTime(b)
		for range batch {
			plain()
		}
		tp += time.Since(start)
		cp += cpuTime(b) - cpu
		start, cpu = time.Now(), cpuTime(b)
		for range batch {
			inspected()
		}
		ti += time.Since(start)
		ci += cpuTime(b) - cpu
	}
	rounds := float64((b.N + batch - 1) / batch * batch)
	b.ReportMetric(float64(tp.Nanoseconds())/rounds, "plain-ns/cmd")
	b.ReportMetric(float64(ti.Nanoseconds())/rounds, "inspected-ns/cmd")
	b.ReportMetric(float64(ti)/float64(tp), "ratio")
	b.ReportMetric(float64(cp.Nanoseconds())/rounds, "plain-cpu-ns/cmd")
	b.ReportMetric(float64(ci.Nanoseconds())/rounds, "inspected-cpu-ns/cmd")
	b.ReportMetric(float64(ci)/float64(cp), "cpu-ratio")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// commandRunner starts a runtime with one session and returns a function
// that runs one native command on it and checks the result.
func commandRunner(b *testing.B, inspected bool) func() {
	b.Helper()
	cfg := surfaced.Config{
		Store:   memstore.New(),
		Agents:  []surfaced.AgentSpec{{Name: "fake", Argv: testkit.FakeAgent(b)}},
		Domains: []surfaced.DomainBinding{{Domain: counterDomain}},
		Limits:  surfaced.Limits{CommandsPerSecond: 1 << 30},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	var in *inspect.Inspector
	if inspected {
		in = inspect.New(inspect.Options{})
		cfg.Props = in.Props
	}
	rt, err := surfaced.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	testkit.ShutdownAtCleanup(b, rt)
	ctx := context.Background()
	id, err := rt.CreateSession(ctx, surfaced.CreateOptions{Owner: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cmd := &pb.RunCommand{Caller: &pb.Caller{Subject: "bench", Via: "browser"}, Domain: "counter", Action: "add", Args: []byte(`{"N":1}`)}
	run := func() {
		res, err := rt.Request(ctx, id, cmd)
		if err != nil {
			b.Fatal(err)
		}
		if r := res.(*pb.CommandResult); !r.GetOk() {
			b.Fatalf("command: %v", r)
		}
	}
	run()
	if inspected && in.Len() < 3 {
		b.Fatalf("inspected actors: %d, want session, surface and agentproc", in.Len())
	}
	return run
}

type ping struct{}
type pong struct{}

// BenchmarkActorRequest is the worst case: a request to an actor that does
// nothing, so the inspector's per-message cost is all there is to measure.
func BenchmarkActorRequest(b *testing.B) {
	for _, inspected := range []bool{false, true} {
		name := "plain"
		if inspected {
			name = "inspected"
		}
		b.Run(name, func(b *testing.B) {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return slog.New(slog.NewTextHandler(io.Discard, nil))
			}))
			var opts []actor.PropsOption
			if inspected {
				opts = inspect.New(inspect.Options{}).Props(inspect.KindSession, "s", "")
			}
			pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(*ping); ok {
					c.Respond(&pong{})
				}
			}, opts...))
			defer sys.Root.Stop(pid)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sys.Root.RequestFuture(pid, &ping{}, time.Second).Result(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSend is the inspector's own cost per message, without scheduling:
// a send to an actor on the synchronized dispatcher runs its handler on the
// sender's goroutine, so ns/op is the mailbox path alone, plain and
// inspected.
func BenchmarkSend(b *testing.B) {
	for _, inspected := range []bool{false, true} {
		name := "plain"
		if inspected {
			name = "inspected"
		}
		b.Run(name, func(b *testing.B) {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return slog.New(slog.NewTextHandler(io.Discard, nil))
			}))
			opts := []actor.PropsOption{actor.WithDispatcher(actor.NewSynchronizedDispatcher(300))}
			if inspected {
				opts = append(inspect.New(inspect.Options{}).Props(inspect.KindSession, "s", ""), opts...)
			}
			n := 0
			pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(*ping); ok {
					n++
				}
			}, opts...))
			defer sys.Root.Stop(pid)
			msg := &ping{}
			b.ReportAllocs()
			for b.Loop() {
				sys.Root.Send(pid, msg)
			}
			if n != b.N {
				b.Fatalf("handled %d of %d", n, b.N)
			}
		})
	}
}
