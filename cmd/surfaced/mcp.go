package main

import (
	"log/slog"
	"net/http"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/mcpgw"
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
