// Command surface-demo-agent is the surfaced demo agent: it hosts the domain
// "demo" ({count, log}) with the commands increment and echo, and chats
// through the configured model (the scripted model when no LLM is set). Its
// tool "increment" runs the same command the UI button runs, through the
// domain actor, so the chat and the button move one counter.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/agentproc/agentkit/agenttrace"
)

// DemoState is the snapshot of the domain "demo".
type DemoState struct {
	Count int      `json:"count"`
	Log   []string `json:"log"`
}

// EchoArgs are the args of demo.echo.
type EchoArgs struct {
	Text string `json:"text"`
}

func increment(ctx *agentkit.SurfaceCtx[DemoState], _ json.RawMessage) (any, error) {
	ctx.SetState(func(s DemoState) DemoState {
		s.Count++
		return s
	})
	return map[string]int{"count": ctx.Get().Count}, nil
}

func echo(ctx *agentkit.SurfaceCtx[DemoState], args EchoArgs) (any, error) {
	ctx.SetState(func(s DemoState) DemoState {
		// A fresh slice: the state decoded for this dispatch is ours, but
		// appending in place would be a trap if it ever were not.
		s.Log = append(append(make([]string, 0, len(s.Log)+1), s.Log...), args.Text)
		return s
	})
	return map[string]any{"echoed": args.Text, "size": len(ctx.Get().Log)}, nil
}

// newAgent builds the demo agent around model.
func newAgent(model agentkit.Model, log *slog.Logger) *agentkit.Agent {
	agent := agentkit.New(agentkit.Options{
		Name:   "surface-demo",
		Model:  model,
		Logger: log,
		System: "You are the surfaced demo agent. A counter lives in the surface \"demo\". " +
			"When the user asks to increment it, call the tool increment and report the new count.",
	})
	agentkit.AddSurface(agent, agentkit.Surface[DemoState]{
		Domain:  "demo",
		Initial: DemoState{Count: 0, Log: []string{}},
		Commands: map[string]agentkit.Command[DemoState]{
			"increment": agentkit.Func[DemoState](increment),
			"echo":      agentkit.Typed(echo),
		},
	})
	agent.AddTool(agentkit.Tool{
		Name:        "increment",
		Description: "Add one to the demo counter (the same counter as the UI's increment button) and return the new count.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
		Run: func(ctx context.Context, tc *agentkit.ToolCtx, _ json.RawMessage) (string, error) {
			data, err := tc.SurfaceCommand(ctx, "demo", "increment", nil)
			if err != nil {
				return "", fmt.Errorf("demo.increment: %w", err)
			}
			var res struct {
				Count int `json:"count"`
			}
			if err := json.Unmarshal(data, &res); err != nil {
				return "", fmt.Errorf("demo.increment answered %s: %w", data, err)
			}
			return fmt.Sprintf("count = %d", res.Count), nil
		},
	})
	return agent
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The daemon's OTEL_* environment, when it traces: this agent's spans
	// join the daemon's traces (docs/tracing.md).
	shutdown, err := agenttrace.Setup(ctx, "surface-demo-agent")
	if err != nil {
		log.Warn("tracing not set up", "err", err)
		shutdown = func(context.Context) error { return nil }
	}
	defer func() { _ = shutdown(context.Background()) }()
	// SIGTERM is how the daemon stops an agent (with its stdin closed): a
	// normal end, exit 0.
	if err := newAgent(agentkit.ModelFromEnv(), log).Run(ctx, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("surface-demo-agent stopped", "err", err)
		_ = shutdown(context.Background())
		os.Exit(1)
	}
}
