package main_test

import (
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// TestMCPBridgeSurvivesDaemonRestart: the official TypeScript SDK's client
// launches `surfaced mcp` over stdio (StdioClientTransport), creates a
// session, subscribes to its surface and runs a command; the daemon is
// killed and started again on the same address and data; the same client
// runs a command again and hears the update: the bridge reconnected by
// itself (a new MCP session, the subscription made again).
func TestMCPBridgeSurvivesDaemonRestart(t *testing.T) {
	dir := testkit.NodeFixture(t, "mcp-sdk", "@modelcontextprotocol/sdk")
	d := startACPDaemon(t)
	s := testkit.StartScenario(t, dir, "stdio", "SURFACED_BIN="+d.bin, "SURFACED_URL=http://"+d.addr, "MCP_TOKEN="+acpTestToken)
	before := s.Next("before")
	d.kill()
	d.start()
	s.Go()
	done := s.Next("done")
	if done["rev"].(float64) <= before["rev"].(float64) {
		t.Errorf("rev %v after the restart, %v before", done["rev"], before["rev"])
	}
	s.Wait()
}
