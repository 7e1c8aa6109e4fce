package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/surfaced/surfaced"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

// Embedding the runtime: a native domain of this program's own, a session,
// and a command run on it — the same command the HTTP API, a WebSocket or
// the agent's tools would send.
func Example() {
	rt, err := surfaced.New(surfaced.Config{
		Store:  memstore.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The smallest surfaced/1 agent: it announces itself and waits.
		Agents:  []surfaced.AgentSpec{{Name: "assistant", Argv: []string{"sh", "-c", `echo '{"type":"agent_ready","protocol":"surfaced/1"}'; exec cat >/dev/null`}}},
		Domains: []surfaced.DomainBinding{{Domain: NotesDomain()}},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer rt.Shutdown(ctx)

	id, err := rt.CreateSession(ctx, surfaced.CreateOptions{Owner: "alice"})
	if err != nil {
		panic(err)
	}
	args, _ := json.Marshal(map[string]string{"text": "buy milk"})
	res, err := rt.Request(ctx, id, &pb.RunCommand{Caller: &pb.Caller{Subject: "alice"}, Domain: "notes", Action: "add", Args: args})
	if err != nil {
		panic(err)
	}
	r := res.(*pb.CommandResult)
	fmt.Printf("ok=%v data=%s rev=%d\n", r.GetOk(), r.GetData(), r.GetRev())
	// Output: ok=true data={"count":1} rev=2
}
