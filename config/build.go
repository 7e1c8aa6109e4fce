package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sourcegraph/conc/pool"
)

// buildParallelism bounds concurrent go build processes. Two overlap one
// build's package loading with the other's compile and link; more only
// fight over the cores go build already uses.
const buildParallelism = 2

// maxBuildOutput bounds the compiler output kept in an error.
const maxBuildOutput = 16 << 10

// Build builds every go_build agent of ms, once: `go build -o
// <binDir>/<name> .` runs in the package's directory (for an import path:
// `go build -o <binDir>/<name> <path>` in the agent directory), then the
// manifest (ms[i], in place) records the binary in Binary and in
// command[0] (see Manifest for the rule). Agents without go_build are left
// alone. Every failing agent is reported, each with the compiler's output.
//
// There is no staleness check of its own: go build is always run and the
// Go build cache decides. It knows every dependency (an edit to a library
// the agent imports counts, which a modification-time check of the agent's
// own files would miss), and when nothing changed it leaves the binary as
// it is, in well under a second per agent (0.3-0.7 s measured).
func Build(ctx context.Context, ms []Manifest, binDir string, logger *slog.Logger) error {
	return build(ctx, ms, binDir, logger, buildParallelism)
}

func build(ctx context.Context, ms []Manifest, binDir string, logger *slog.Logger, parallel int) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var todo []int
	seen := map[string]bool{}
	for i := range ms {
		if ms[i].GoBuild == "" {
			continue
		}
		if seen[ms[i].Name] {
			return fmt.Errorf("build: two go_build agents are named %q (their binaries would collide)", ms[i].Name)
		}
		seen[ms[i].Name] = true
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build: go_build agents need the go command in PATH: %w", err)
	}
	binDir, err = filepath.Abs(binDir)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return buildAll(len(todo), parallel, func(j int) error {
		return buildOne(ctx, goBin, &ms[todo[j]], binDir, logger)
	})
}

// buildAll runs one(0) … one(n-1) on at most parallel goroutines (a pool:
// no goroutine waits for a turn) and joins their errors in order. A build
// that panics does not take the daemon down from a goroutine of its own:
// the others finish, and the panic is raised again here, in the caller's
// goroutine, carrying the stack where it happened (a *panics.Recovered).
func buildAll(n, parallel int, one func(j int) error) error {
	errs := make([]error, n)
	p := pool.New().WithMaxGoroutines(max(parallel, 1))
	for j := range n {
		p.Go(func() { errs[j] = one(j) })
	}
	p.Wait()
	return errors.Join(errs...)
}

func buildOne(ctx context.Context, goBin string, m *Manifest, binDir string, logger *slog.Logger) error {
	if m.Dir == "" {
		return fmt.Errorf("agent %q: go_build needs the agent directory (Manifest.Dir)", m.Name)
	}
	built := m.Binary != "" && len(m.Command) > 0 && m.Command[0] == m.Binary // a second Build
	if len(m.Command) > 0 && !built && m.Command[0] != BinPlaceholder && m.Command[0] != m.packageBase() {
		return fmt.Errorf("agent %q: command[0] %q is not the built program (%q or %s)", m.Name, m.Command[0], m.packageBase(), BinPlaceholder)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("agent %q: build: %w", m.Name, err)
	}
	out := filepath.Join(binDir, m.Name)
	start := time.Now()
	// A package directory is built from inside it, so that its own module
	// applies even when the agent directory (an inline agent's is the
	// configuration file's) lies outside that module.
	dir, pkg := m.Dir, m.GoBuild
	if isLocalPackage(pkg) {
		dir, pkg = absPath(m.Dir, pkg), "."
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, pkg)
	cmd.Dir = dir
	output, err := cmd.CombinedOutput()
	if err != nil {
		text := strings.TrimSpace(string(output))
		if len(text) > maxBuildOutput {
			text = text[:maxBuildOutput] + "\n[... output truncated]"
		}
		logger.Error("agent build failed", "agent", m.Name, "package", m.GoBuild, "dir", dir, "err", err)
		return fmt.Errorf("agent %q: go build %s (in %s): %w\n%s", m.Name, pkg, dir, err, text)
	}
	logger.Info("agent built", "agent", m.Name, "package", m.GoBuild, "binary", out, "took", time.Since(start).Round(time.Millisecond))
	m.Binary = out
	if len(m.Command) == 0 {
		m.Command = []string{out}
	} else {
		m.Command = slices.Clone(m.Command)
		m.Command[0] = out
	}
	return nil
}
