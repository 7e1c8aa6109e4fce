// Command surfaced is the surfaced daemon and its tools.
//
//	surfaced run ./examples/surface-demo-agent   the demo gateway (one agent)
//	surfaced run -- pi --mode rpc                 host any agent command
//	surfaced serve --config surfaced.yaml         several agents, every setting
//
// Run `surfaced --help` for everything.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := rootCmd()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(os.Stderr, "surfaced:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "surfaced:", err)
	os.Exit(1)
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "surfaced",
		Short: "A gateway that hosts AI-agent sessions for browsers and editors",
		Long: `surfaced hosts AI-agent sessions. Each session runs one agent subprocess that
speaks JSONL (the pi coding agent's RPC mode, plus surface lines). People in a
browser (SSE or WebSocket) drive rich surfaces beside the chat; people in an
editor talk to the same sessions over the Agent Client Protocol at /acp.

Start here:
  surfaced run ./examples/surface-demo-agent
prints the URL to open (it carries a per-launch token).`,
		Version:       surfaced.VersionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A flag that does not parse is a usage error, as everywhere: exit 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	root.AddCommand(runCmd(), serveCmd(), versionCmd())
	root.AddCommand(inspectCmd())
	root.AddCommand(acpCmd())
	root.AddCommand(mcpCmd())
	root.AddCommand(agentCmd())
	root.AddCommand(adminCmd())
	return root
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit it was built from",
		Long: `Prints the version and the commit: stamped by make build (git describe and
git rev-parse), or, for a binary built without them, what the Go toolchain
recorded of its checkout; "dev" when nothing was recorded.`,
		Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "surfaced", surfaced.VersionString())
		},
	}
}
