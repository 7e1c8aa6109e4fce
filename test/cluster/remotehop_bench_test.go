package cluster_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The baseline of the cross-node path: what protoactor's remote costs by
// itself. The daemon's cross-node command is one request/response between
// two nodes (the command to the session's grain, its result back; the state
// frame comes back beside the result), so cross-node − same-node is to be
// read against one bare remote round trip between two processes on this
// machine, measured in the same run: a RunCommand to an actor in another OS
// process that answers it at once with a CommandResult, through the same
// library, the same remote configuration and the same serializer as the
// daemons, with nothing of surfaced on the way.

// echoEnv makes the test binary the other process of the remote hop: it
// prints its remote address and answers until its stdin closes.
const echoEnv = "SURFACED_REMOTE_ECHO"

// echoMain serves the echo actor (see echoEnv) and returns the exit code.
func echoMain() int {
	sys := quietSystem()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	defer r.Shutdown(true)
	if _, err := sys.Root.SpawnNamed(actor.PropsFromFunc(echo), "echo"); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		return 1
	}
	fmt.Println(sys.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// quietSystem is an actor system whose library logs go nowhere (a lost
// connection at the end is the benchmark ending).
func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

// echo answers a command as the daemon's session does when it succeeds: a
// CommandResult with a small JSON result and a rev.
func echo(ctx actor.Context) {
	if _, ok := ctx.Message().(*pb.RunCommand); ok {
		ctx.Respond(&pb.CommandResult{Ok: true, Data: []byte(`{"count":1}`), Rev: 1})
	}
}

// remoteHop measures request/response round trips from this process to
// the echo actor of another process (crossProcess) or of this one.
func remoteHop(b *testing.B, crossProcess bool) {
	sys := quietSystem()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	defer sys.Shutdown()
	defer r.Shutdown(true)
	target, err := sys.Root.SpawnNamed(actor.PropsFromFunc(echo), "echo")
	if err != nil {
		b.Fatal(err)
	}
	if crossProcess {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), echoEnv+"=1")
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = in.Close(); _ = cmd.Wait() }()
		addr, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			b.Fatalf("echo process: %v", err)
		}
		target = actor.NewPID(strings.TrimSpace(addr), "echo")
	}
	msg := &pb.RunCommand{Caller: &pb.Caller{Subject: "bench"}, Domain: "demo", Action: "increment", Args: []byte(`{}`),
		IdempotencyKey: "0123456789abcdef0123456789abcdef", DeadlineMs: time.Now().Add(time.Hour).UnixMilli()}
	call := func() {
		res, err := sys.Root.RequestFuture(target, msg, 10*time.Second).Result()
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := res.(*pb.CommandResult); !ok {
			b.Fatalf("answer %T", res)
		}
	}
	call() // connects
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		call()
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, samples)
}
