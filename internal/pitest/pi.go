// Package pitest runs the real pi coding agent (the npm package
// @mariozechner/pi-coding-agent, pinned in testdata/npm/pi) in tests, offline,
// against a scripted OpenAI-compatible model server (internal/llmstub).
//
// pi reads its models and settings from PI_CODING_AGENT_DIR; Home writes a
// models.json with one provider ("stub", api openai-completions) and one
// model ("stub-model") pointing at the server, and a settings.json that makes
// it the default, turns off install telemetry and sets the retry policy.
// Env adds PI_OFFLINE=1, which turns off every start-up network operation pi
// has (version check, package update checks, install telemetry, tool
// downloads), so pi reaches nothing but the loopback model server.
//
// Tests skip when the npm fixture is not installed (scripts/test-setup runs
// npm ci there), except on CI (CI set), where a missing pi is a failure.
package pitest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
)

// Version is the pinned pi version (testdata/npm/pi/package.json).
const Version = "0.73.1"

// Provider and Model name the stub model in models.json.
const (
	Provider = "stub"
	Model    = "stub-model"
)

// Dir is the npm fixture that pins pi: testdata/npm/pi.
func Dir() string { return filepath.Join(testkit.RepoRoot(), "testdata", "npm", "pi") }

// BinDir is the fixture's node_modules/.bin, where the pi command is.
func BinDir() string { return filepath.Join(Dir(), "node_modules", ".bin") }

// ExtensionsDir holds the pi extensions the tests load (dialogs.ts).
func ExtensionsDir() string { return filepath.Join(Dir(), "extensions") }

// Bin returns the path of the pi command. Without the npm fixture the test
// is skipped, except on CI, where it fails.
func Bin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(BinDir(), "pi")
	if _, err := os.Stat(bin); err != nil {
		testkit.Missing(t, "pi is not installed in %s; run scripts/test-setup (npm ci) to test against the real pi: %v", Dir(), err)
	}
	testkit.Node(t)
	return bin
}

// Config is how Home sets pi up.
type Config struct {
	// BaseURL is the OpenAI-compatible server, including /v1.
	BaseURL string
	// Images: the model's input is ["text","image"] (else ["text"]).
	Images bool
	// Retries is pi's own agent-level retry count for transient model
	// errors (0: retry off). RetryDelay is its first backoff (default 50 ms).
	Retries    int
	RetryDelay time.Duration
	// Extensions are pi extension files to load (settings.json extensions).
	Extensions []string
}

// Home writes a pi agent directory (PI_CODING_AGENT_DIR) for cfg into a
// temporary directory of t and returns it.
func Home(t testing.TB, cfg Config) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteHome(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WriteHome writes models.json and settings.json into dir.
func WriteHome(dir string, cfg Config) error {
	input := []string{"text"}
	if cfg.Images {
		input = append(input, "image")
	}
	models := map[string]any{"providers": map[string]any{Provider: map[string]any{
		"baseUrl": cfg.BaseURL,
		"api":     "openai-completions",
		"apiKey":  "stub-key",
		// A plain OpenAI-compatible server: system role, no reasoning_effort.
		"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
		"models": []any{map[string]any{
			"id": Model, "name": "Stub model", "input": input,
			"contextWindow": 128000, "maxTokens": 4096,
			"cost": map[string]any{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
		}},
	}}}
	delay := cfg.RetryDelay
	if delay == 0 {
		delay = 50 * time.Millisecond
	}
	settings := map[string]any{
		"defaultProvider":        Provider,
		"defaultModel":           Model,
		"enableInstallTelemetry": false,
		"quietStartup":           true,
		"retry": map[string]any{
			"enabled":     cfg.Retries > 0,
			"maxRetries":  cfg.Retries,
			"baseDelayMs": delay.Milliseconds(),
			// The OpenAI SDK inside pi retries 5xx on its own (twice, with
			// backoff) unless told not to; the tests count requests.
			"provider": map[string]any{"maxRetries": 0},
		},
	}
	if len(cfg.Extensions) > 0 {
		settings["extensions"] = cfg.Extensions
	}
	for name, v := range map[string]any{"models.json": models, "settings.json": settings} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("pitest: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("pitest: write %s: %w", name, err)
		}
	}
	return nil
}

// Env is the environment (KEY=VALUE) pi runs with: its agent directory,
// offline, no telemetry.
func Env(home string) []string {
	return []string{
		"PI_CODING_AGENT_DIR=" + home,
		"PI_OFFLINE=1",
		"PI_SKIP_VERSION_CHECK=1",
		"PI_TELEMETRY=0",
	}
}

// Argv is `pi --mode rpc --no-session` plus extra flags.
func Argv(t testing.TB, extra ...string) []string {
	return append([]string{Bin(t), "--mode", "rpc", "--no-session"}, extra...)
}

// Agent is a configured agent running the real pi with home.
func Agent(t testing.TB, name, home string, extra ...string) surfaced.AgentSpec {
	return surfaced.AgentSpec{Name: name, Title: "pi " + Version, Argv: Argv(t, extra...), Env: Env(home)}
}
