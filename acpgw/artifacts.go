package acpgw

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// maxLinks bounds the artifacts one tool result links.
const maxLinks = 32

// linkLookup bounds the lookup of a tool result's artifacts.
const linkLookup = 2 * time.Second

// ToolResultArtifacts names the artifacts a tool result references: its
// details' "artifacts", ids or objects with an "id" (agentkit's
// ToolCtx.LinkArtifact writes them). pi's tool results carry details as they
// are.
func ToolResultArtifacts(output json.RawMessage) []string {
	var tr struct {
		Details struct {
			Artifacts []json.RawMessage `json:"artifacts"`
		} `json:"details"`
	}
	if len(output) == 0 || json.Unmarshal(output, &tr) != nil {
		return nil
	}
	var ids []string
	for _, raw := range tr.Details.Artifacts {
		var id string
		if json.Unmarshal(raw, &id) != nil {
			var obj struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &obj) != nil {
				continue
			}
			id = obj.ID
		}
		if id != "" && len(ids) < maxLinks {
			ids = append(ids, id)
		}
	}
	return ids
}

// artifactLinks are the resource_link blocks of the artifacts a tool result
// references that are the session's: uri the signed URL (absolute, on the
// daemon the editor reached), name, mimeType, size. An id the session does
// not have is left out.
func (a *attachment) artifactLinks(output json.RawMessage) []acp.ToolCallContent {
	ids := ToolResultArtifacts(output)
	svc := a.srv.opts.Runtime.Artifacts()
	if len(ids) == 0 || svc == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), linkLookup)
	defer cancel()
	var out []acp.ToolCallContent
	for _, id := range ids {
		art, err := svc.Get(ctx, a.sessionID, id)
		if err != nil {
			a.srv.log.Debug("a tool result's artifact is not linked", "session", a.sessionID, "artifact", id, "err", err)
			continue
		}
		url, _ := svc.URL(art.ID, 0)
		name := art.Name
		if name == "" {
			name = art.ID
		}
		block := acp.ResourceLinkBlock(name, a.conn.base+url)
		mt, size := art.MediaType, int(art.Size)
		block.ResourceLink.MimeType, block.ResourceLink.Size = &mt, &size
		out = append(out, acp.ToolContent(block))
	}
	return out
}

// baseURL is the daemon as the editor reached it: the signed URLs it is
// given are absolute on it.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
