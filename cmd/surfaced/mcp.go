package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/mcpgw"
	"github.com/surfaced/surfaced/mcpgw/bridge"
)

// mcpMount is the daemon's MCP mount; a nil *mcpMount (mcp.enabled: false)
// mounts nothing.
type mcpMount struct {
	srv *mcpgw.Server
}

func newMCPMount(f *config.File, rt *surfaced.Runtime, g *guard.Guard, gl config.GatewayLimits, log *slog.Logger) *mcpMount {
	s := f.MCPSettings()
	if !s.Enabled {
		return nil
	}
	return &mcpMount{srv: mcpgw.New(mcpgw.Options{
		Runtime:                 rt,
		Logger:                  log,
		Path:                    s.Path,
		IdleTimeout:             s.IdleTimeout,
		SessionsPerSubject:      s.SessionsPerSubject,
		SubscriptionsPerSession: s.SubscriptionsPerSession,
		TurnTimeout:             s.TurnTimeout,
		ArtifactInline:          s.ArtifactInlineBytes,
		BodyBytes:               gl.PromptBodyBytes,
		RequestTimeout:          gl.RequestTimeout,
		Revoker:                 g,
	})}
}

// add puts the mount beside the others.
func (m *mcpMount) add(mounts map[string]http.Handler) map[string]http.Handler {
	if m == nil {
		return mounts
	}
	if mounts == nil {
		mounts = map[string]http.Handler{}
	}
	mounts[m.srv.Path()] = m.srv.Handler()
	return mounts
}

// close ends the MCP sessions, so that the HTTP server's shutdown does not
// wait for their streams.
func (m *mcpMount) close() {
	if m != nil {
		m.srv.Close()
	}
}

// mcpCmd is `surfaced mcp`: the stdio bridge MCP clients launch.
func mcpCmd() *cobra.Command {
	var url, token, session string
	usage := func(err error) error { return &exitError{code: bridge.ExitUsage, err: err} }
	cmd := &cobra.Command{
		Use:   "mcp [--url URL] [--token T] [--session ID]",
		Short: "Bridge an MCP client's stdio to a running daemon's /mcp",
		Long: `Relay the Model Context Protocol between a client that launches a local server
(Claude Code, Claude Desktop, Cursor, VS Code, any stdio MCP client) and a running
surfaced daemon's /mcp mount. Newline-delimited JSON-RPC on stdin and stdout is
relayed as it is; diagnostics go to stderr. When the daemon goes away the bridge
waits for it, opens a new MCP session (the client's initialize again), subscribes
again to what the client subscribed to, and goes on.

The token is --token, else $SURFACED_TOKEN. --session attaches the client to one
session: its surface commands become tools of their own (demo_increment).

Exit codes: 0 the client closed stdin, 1 the client's pipe broke, 2 usage,
3 the daemon never answered the first message.

Claude Desktop (claude_desktop_config.json), Cursor (.cursor/mcp.json):
  {"mcpServers": {"surfaced": {"command": "surfaced", "args": ["mcp"],
                               "env": {"SURFACED_TOKEN": "..."}}}}`,
		Example: `  surfaced mcp
  SURFACED_TOKEN=... surfaced mcp --url http://127.0.0.1:9000 --session 3k5d...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(fmt.Errorf("mcp takes no arguments, got %q", args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") {
				token = os.Getenv("SURFACED_TOKEN")
			}
			target, err := bridge.MountURL(url)
			if err != nil {
				return usage(err)
			}
			if session != "" {
				if strings.ContainsAny(session, "/?#% ") {
					return usage(fmt.Errorf("--session %q is not a session id", session))
				}
				target = strings.TrimSuffix(target, "/") + "/sessions/" + session
			}
			// A closed stdout must be an error to write to (exit 1), not a
			// SIGPIPE that kills the bridge without a word.
			signal.Ignore(syscall.SIGPIPE)
			code := bridge.Run(cmd.Context(), bridge.Options{URL: target, Token: token,
				Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
			if code != bridge.ExitOK {
				return &exitError{code: code, err: errors.New("")}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	fs := cmd.Flags()
	fs.StringVar(&url, "url", bridge.DefaultURL, "the daemon's URL (the mount is its /mcp), or the mount's own URL")
	fs.StringVar(&token, "token", "", "bearer token (default $SURFACED_TOKEN)")
	fs.StringVar(&session, "session", "", "attach to this session: its commands become tools")
	return cmd
}
