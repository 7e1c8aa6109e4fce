package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/internal/agentcheck"
)

func agentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Tools for people writing agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &exitError{code: 2, err: fmt.Errorf("agent needs a subcommand: check")}
		},
	}
	cmd.AddCommand(agentCheckCmd())
	return cmd
}

func agentCheckCmd() *cobra.Command {
	var (
		dataDir      string
		readyTimeout time.Duration
		settle       time.Duration
		timeout      time.Duration
		prompt       string
		command      string
		args         string
		abort        bool
		abortPrompt  string
		trace        bool
		logLevel     string
	)
	cmd := &cobra.Command{
		Use:   "check [flags] <agent-dir> | check [flags] -- <command> [args...]",
		Short: "Check an agent against the agent protocol",
		Long: `Check an agent against the agent protocol (docs/agent-protocol.md), the way
the daemon runs it: the same manifest handling, environment and working
directory as surfaced run, in a session of the real runtime on a memory store.

The steps:
  start          the agent becomes ready (agent_ready, or an answer to
                 get_commands for a plain pi agent) within --ready-timeout;
                 what it announces
  surface <d>    the probe command surface:<d> of every declared domain
  command        with --command domain/action (and --args): one declared
                 command, when it is safe to run
  prompt         a prompt (--prompt): the turn's events, and that it ends
                 properly within --timeout
  abort          with --abort: a prompt aborted as soon as its turn starts;
                 the agent must end the turn
  restart        the agent stopped as the daemon stops it (stdin closed,
                 SIGTERM), started again, ready again, its surfaces at the
                 revs they had

What is wrong is printed in plain sentences: what was expected, what came,
and a line of the agent's stderr when it helps. Exit code 0 when every check
passed, 1 when one failed, 2 for a usage error.`,
		Example: `  surfaced agent check ./examples/surface-demo-agent
  surfaced agent check --command demo/increment ./examples/surface-demo-agent
  surfaced agent check --abort --abort-prompt "count slowly to 100" ./my-agent
  surfaced agent check --trace -- python3 my_agent.py`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: 2, err: fmt.Errorf("name an agent directory or give a command after --")}
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) > 1 {
				return &exitError{code: 2, err: fmt.Errorf("give one agent directory, or put the agent command after --")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, argv []string) error {
			if cmd.ArgsLenAtDash() < 0 {
				if fi, err := os.Stat(argv[0]); err != nil || !fi.IsDir() {
					return &exitError{code: 2, err: fmt.Errorf("%s is not an agent directory (to check a command, put it after --)", argv[0])}
				}
			}
			if command != "" {
				if _, _, err := agentcheck.SplitCommand(command); err != nil {
					return &exitError{code: 2, err: err}
				}
			}
			if args != "" && !json.Valid([]byte(args)) {
				return &exitError{code: 2, err: fmt.Errorf("--args is not JSON: %s", args)}
			}
			if args != "" && command == "" {
				return &exitError{code: 2, err: fmt.Errorf("--args goes with --command")}
			}
			m, err := config.ManifestForRun(argv)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var fl config.Flags
			if cmd.Flags().Changed("data-dir") {
				fl.DataDir = &dataDir
			}
			if cmd.Flags().Changed("log-level") {
				fl.LogLevel = &logLevel
			}
			file, err := config.Resolve("", fl, os.Getenv)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			log := slog.New(slog.DiscardHandler)
			if logLevel != "" {
				log = file.NewLogger(cmd.ErrOrStderr())
			}
			ms := []config.Manifest{m}
			if err := config.Build(cmd.Context(), ms, file.BinDir(), log); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("building the agent: %w", err)}
			}
			specs, err := config.AgentSpecs(ms)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var traceTo io.Writer
			if trace {
				traceTo = cmd.ErrOrStderr()
			}
			rep, err := agentcheck.Run(cmd.Context(), agentcheck.Options{
				Agent:        specs[0],
				ReadyTimeout: readyTimeout,
				SettleWindow: settle,
				Timeout:      timeout,
				Prompt:       prompt,
				Command:      command,
				Args:         json.RawMessage(args),
				Abort:        abort,
				AbortPrompt:  abortPrompt,
				Trace:        traceTo,
				Logger:       log,
			})
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if err := rep.Write(cmd.OutOrStdout()); err != nil {
				return &exitError{code: 1, err: err}
			}
			if !rep.OK() {
				return &exitError{code: 1, err: fmt.Errorf("")}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", "", "where Go agents are built, as for run (default $SURFACED_DATA_DIR, else $XDG_DATA_HOME/surfaced)")
	fs.DurationVar(&readyTimeout, "ready-timeout", agentcheck.DefaultReadyTimeout, "how long the agent has to become ready (the daemon's limits.ready_timeout)")
	fs.DurationVar(&settle, "settle-window", agentcheck.DefaultSettleWindow, "how long an agent-hosted command may take (the daemon's limits.settle_window)")
	fs.DurationVar(&timeout, "timeout", agentcheck.DefaultTimeout, "how long a turn may take")
	fs.StringVar(&prompt, "prompt", agentcheck.DefaultPrompt, "the prompt to send")
	fs.StringVar(&command, "command", "", "a declared command to run, domain/action (only one that is safe to run)")
	fs.StringVar(&args, "args", "", "the command's args, JSON")
	fs.BoolVar(&abort, "abort", false, "also abort a turn as soon as it starts")
	fs.StringVar(&abortPrompt, "abort-prompt", "", "the prompt of the turn to abort (default --prompt); one that makes a long turn")
	fs.BoolVar(&trace, "trace", false, "print every line both ways, the agent's stderr and its exits on stderr as they happen")
	fs.StringVar(&logLevel, "log-level", "", "print the runtime's log on stderr at this level (debug, info, warn, error)")
	return cmd
}
