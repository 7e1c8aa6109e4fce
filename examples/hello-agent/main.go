// Command hello-agent is the smallest surfaced agent: a chat with one tool,
// echo, and no surface.
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
)

// newAgent builds the hello agent around model.
func newAgent(model agentkit.Model, log *slog.Logger) *agentkit.Agent {
	agent := agentkit.New(agentkit.Options{
		Name:   "hello",
		Model:  model,
		Logger: log,
		System: "You are the surfaced hello agent. You have one tool, echo, which returns its text.",
	})
	agent.AddTool(agentkit.Tool{
		Name:        "echo",
		Description: "Return the given text unchanged.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the text to echo"}},"required":["text"]}`),
		Run: func(_ context.Context, _ *agentkit.ToolCtx, args json.RawMessage) (string, error) {
			var a struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", fmt.Errorf("echo: args must be {\"text\": string}: %w", err)
			}
			if a.Text == nil {
				return "", fmt.Errorf("echo: missing \"text\"")
			}
			return *a.Text, nil
		},
	})
	return agent
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGTERM is how the daemon stops an agent (with its stdin closed): a
	// normal end, exit 0.
	if err := newAgent(agentkit.ModelFromEnv(), log).Run(ctx, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("hello-agent stopped", "err", err)
		os.Exit(1)
	}
}
