package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/acpgw/bridge"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway/guard"
)

// acpCmd is `surfaced acp`: the stdio bridge editors launch.
func acpCmd() *cobra.Command {
	var url, token, agent string
	usage := func(err error) error { return &exitError{code: bridge.ExitUsage, err: err} }
	cmd := &cobra.Command{
		Use:   "acp [--url URL] [--token T] [--agent NAME]",
		Short: "Bridge an editor's ACP (stdio) to a running daemon's /acp",
		Long: `Relay the Agent Client Protocol between an editor that launches a command (Zed,
JetBrains, any stdio ACP client) and a running surfaced daemon's /acp mount.
Newline-delimited JSON on stdin and stdout is relayed verbatim; diagnostics go
to stderr. When the daemon goes away the bridge answers what was in flight,
queues what the editor sends, reconnects, and resumes the editor's sessions.

The token is --token, else $SURFACED_TOKEN. --agent picks the agent when the
daemon has several (sent as the Surfaced-Agent header).

Exit codes: 0 the editor closed stdin, 1 the editor's pipe broke, 2 usage,
3 the daemon never answered the first connection.

Zed (settings.json):
  "agent_servers": {"surfaced": {"type": "custom", "command": "surfaced",
                                 "args": ["acp", "--agent", "demo"]}}`,
		Example: `  surfaced acp --agent demo
  SURFACED_TOKEN=... surfaced acp --url http://127.0.0.1:9000 --agent demo`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(fmt.Errorf("acp takes no arguments, got %q", args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") {
				token = os.Getenv("SURFACED_TOKEN")
			}
			if _, err := bridge.MountURL(url); err != nil {
				return usage(err)
			}
			// A closed stdout must be an error to write to (exit 1), not a
			// SIGPIPE that kills the bridge without a word.
			signal.Ignore(syscall.SIGPIPE)
			code := bridge.Run(cmd.Context(), bridge.Options{URL: url, Token: token, Agent: agent,
				Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
			if code != bridge.ExitOK {
				return &exitError{code: code, err: errors.New("")}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	fs := cmd.Flags()
	fs.StringVar(&url, "url", bridge.DefaultURL, "the daemon's URL (the mount is its /acp), or the mount's own URL")
	fs.StringVar(&token, "token", "", "bearer token (default $SURFACED_TOKEN)")
	fs.StringVar(&agent, "agent", "", "the agent to talk to, when the daemon has several")
	return cmd
}

// acpMount is the daemon's ACP mount; a nil *acpMount (acp.enabled: false)
// mounts nothing.
type acpMount struct {
	srv *acpgw.Server
}

func newACPMount(f *config.File, rt *surfaced.Runtime, g *guard.Guard, gl config.GatewayLimits,
	props func(kind, sessionID string) []actor.PropsOption, log *slog.Logger) *acpMount {
	s := f.ACPSettings()
	if !s.Enabled {
		return nil
	}
	srv := acpgw.New(acpgw.Options{
		Runtime:               rt,
		Logger:                log,
		Path:                  s.Path,
		AgentInfo:             acpgw.AgentInfo{Name: s.AgentInfo.Name, Title: s.AgentInfo.Title, Version: s.AgentInfo.Version},
		WithholdToolPayloads:  !s.ToolCallPayloads,
		BufferBytes:           s.BufferBytes,
		BufferAge:             s.BufferAge,
		ConnectionsPerSubject: s.ConnectionsPerSubject,
		SessionsPerConnection: s.SessionsPerConnection,
		KeepAlive:             gl.SSEKeepalive,
		RequestTimeout:        gl.RequestTimeout,
		BodyBytes:             gl.PromptBodyBytes,
		Revoker:               g,
		Props:                 props,
	})
	return &acpMount{srv: srv}
}

func (m *acpMount) mounts() map[string]http.Handler {
	if m == nil {
		return nil
	}
	return map[string]http.Handler{m.srv.Path(): m.srv.Handler()}
}

func (m *acpMount) corsMounts() []string {
	if m == nil {
		return nil
	}
	return []string{m.srv.Path()}
}

// close ends the ACP connections (after the sessions answered their held
// prompts), so that the HTTP server's shutdown does not wait for them.
func (m *acpMount) close() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.srv.Close(ctx)
}
