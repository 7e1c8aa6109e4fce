package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced/config"
)

func runCmd() *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "run [flags] <agent-dir> | run [flags] -- <command> [args...]",
		Short: "Run the gateway with one agent (the quick start)",
		Long: `Run the gateway with one agent: an agent directory (with an agent.json
manifest, or a Go main package), or any command after --.

  surfaced run ./examples/surface-demo-agent
  surfaced run ./examples/hello-agent
  surfaced run -- pi --mode rpc --provider openai --model gpt-4o-mini

It listens on 127.0.0.1:7800 (--addr), keeps sessions in an embedded SQLite
store under --data-dir, and prints one line with the URL to open; the URL
carries the per-launch token, which the page exchanges for a cookie. Go agents
are built once at start. Other settings come from --config, if given (its
agents are replaced by this one).`,
		Example: `  surfaced run ./examples/surface-demo-agent
  surfaced run --addr 127.0.0.1:9000 --data-dir /tmp/sd ./examples/hello-agent
  surfaced run -- pi --mode rpc`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: 2, err: fmt.Errorf("name an agent directory or give a command after --")}
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) > 1 {
				return &exitError{code: 2, err: fmt.Errorf("give one agent directory, or put the agent command after --")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() < 0 {
				if fi, err := os.Stat(args[0]); err != nil || !fi.IsDir() {
					return &exitError{code: 2, err: fmt.Errorf("%s is not an agent directory (to run a command, put it after --)", args[0])}
				}
			}
			m, err := config.ManifestForRun(args)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			file, err := config.Resolve(f.config, f.flags(cmd), os.Getenv)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return runDaemon(cmd.Context(), file, []config.Manifest{m}, cmd.OutOrStdout())
		},
	}
	f.register(cmd)
	return cmd
}

func serveCmd() *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "serve --config surfaced.yaml [flags]",
		Short: "Run the gateway with the agents and settings of a configuration file",
		Long: `Run the gateway as configured in a YAML file: several agents, limits, the
ACP mount, allowed hostnames and browser origins, workspace roots, the store.
Flags override the file. docs/configuration.md lists every setting.`,
		Example: `  surfaced serve --config surfaced.yaml
  surfaced serve --config surfaced.yaml --addr 0.0.0.0:7800 --tokens-file tokens.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.config == "" {
				return &exitError{code: 2, err: fmt.Errorf("serve needs --config (or use `surfaced run` for one agent)")}
			}
			file, err := config.Resolve(f.config, f.flags(cmd), os.Getenv)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			ms, err := file.Manifests()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if len(ms) == 0 {
				return &exitError{code: 2, err: fmt.Errorf("%s configures no agents", f.config)}
			}
			return runDaemon(cmd.Context(), file, ms, cmd.OutOrStdout())
		},
	}
	f.register(cmd)
	return cmd
}
