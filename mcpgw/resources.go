package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// The resources, one URI scheme (docs/mcp.md):
//
//	surfaced://sessions/{sessionId}/surfaces/{domain}     a surface's snapshot (JSON; _meta.rev)
//	surfaced://sessions/{sessionId}/transcript            the transcript (JSON)
//	surfaced://sessions/{sessionId}/artifacts/{artifactId} an artifact's bytes (a blob up to
//	                                                        mcp.artifact_inline_bytes, else its signed URL)
//
// A subscription to a surface hears notifications/resources/updated with
// exactly that URI on every new rev, whoever made it; one to the transcript
// on every prompt accepted and every turn ended.
const (
	scheme            = "surfaced://sessions/"
	surfaceTemplate   = scheme + "{sessionId}/surfaces/{domain}"
	transcriptTmpl    = scheme + "{sessionId}/transcript"
	artifactTemplate  = scheme + "{sessionId}/artifacts/{artifactId}"
	mimeJSON          = "application/json"
	mimeURIList       = "text/uri-list"
	surfaceKeyPrefix  = "surface:"
	maxURILength      = 512
	resourceKindState = "surfaces"
)

func surfaceURI(sessionID, domain string) string {
	return scheme + sessionID + "/surfaces/" + domain
}

func transcriptURI(sessionID string) string { return scheme + sessionID + "/transcript" }

func artifactURI(sessionID, id string) string { return scheme + sessionID + "/artifacts/" + id }

func sessionURI(sessionID string) map[string]string {
	return map[string]string{"transcript": transcriptURI(sessionID), "surfaces": surfaceURI(sessionID, "{domain}")}
}

// resourceRef is a parsed resource URI.
type resourceRef struct {
	session string
	kind    string // surfaces, transcript, artifacts
	name    string // the domain or the artifact id
}

func parseURI(uri string) (resourceRef, bool) {
	if len(uri) > maxURILength {
		return resourceRef{}, false
	}
	rest, ok := strings.CutPrefix(uri, scheme)
	if !ok {
		return resourceRef{}, false
	}
	parts := strings.Split(rest, "/")
	if store.CheckSessionID(parts[0]) != nil {
		return resourceRef{}, false
	}
	switch {
	case len(parts) == 2 && parts[1] == "transcript":
		return resourceRef{session: parts[0], kind: "transcript"}, true
	case len(parts) == 3 && (parts[1] == resourceKindState || parts[1] == "artifacts") && parts[2] != "":
		return resourceRef{session: parts[0], kind: parts[1], name: parts[2]}, true
	}
	return resourceRef{}, false
}

func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: surfaceTemplate, Name: "surface", Title: "A surface's snapshot",
		Description: "What a surface of a session shows now, as JSON; _meta.rev is its rev. Subscribe to hear of every new rev.", MIMEType: mimeJSON}, s.readResource)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: transcriptTmpl, Name: "transcript", Title: "A session's transcript",
		Description: "The conversation of a session: user, assistant, thinking and tool entries, as JSON.", MIMEType: mimeJSON}, s.readResource)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: artifactTemplate, Name: "artifact", Title: "An artifact of a session",
		Description: "An artifact's bytes (an image, a file): a blob up to a size limit, else its signed URL (text/uri-list)."}, s.readResource)
	s.mcp.AddReceivingMiddleware(s.listResources)
}

// listResources lists, for a client attached to a session, the session's
// surfaces and its transcript; on the mount itself the templates are the
// way in (a caller may have many sessions).
func (s *Server) listResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c, _ := callerOf(ctx)
		if method != "resources/list" || c.attached == "" {
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		lr := res.(*mcp.ListResourcesResult)
		r, e := s.ask(ctx, c.attached, &pb.ListSurfaces{Caller: caller(ctx)})
		if e == nil && r.(*pb.SurfaceList).GetError() != nil {
			e = refused(c.attached, r.(*pb.SurfaceList).GetError())
		}
		if e != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Code + ": " + e.Message}
		}
		for _, si := range r.(*pb.SurfaceList).GetSurfaces() {
			lr.Resources = append(lr.Resources, &mcp.Resource{URI: surfaceURI(c.attached, si.GetDomain()), Name: si.GetDomain(),
				Title: "The surface " + si.GetDomain(), MIMEType: mimeJSON})
		}
		lr.Resources = append(lr.Resources, &mcp.Resource{URI: transcriptURI(c.attached), Name: "transcript", Title: "The transcript", MIMEType: mimeJSON})
		return lr, nil
	}
}

// readResource reads a surface, the transcript or an artifact. A session
// the caller does not own is not found, as a missing one.
func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ref, ok := parseURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	switch ref.kind {
	case resourceKindState:
		snap, rev, e := s.snapshot(ctx, ref.session, ref.name)
		if e != nil {
			return nil, resourceErr(uri, e)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeJSON, Text: string(snap),
			Meta: mcp.Meta{"rev": rev}}}}, nil
	case "transcript":
		b, e := s.transcript(ctx, ref.session)
		if e != nil {
			return nil, resourceErr(uri, e)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeJSON, Text: string(b)}}}, nil
	default:
		return s.readArtifact(ctx, uri, ref)
	}
}

// resourceErr is a read's failure: not found (a missing or foreign session,
// a surface that is not registered), or the reason.
func resourceErr(uri string, e *toolError) error {
	switch e.Code {
	case codes.NotFound, codes.SurfaceNotRegistered:
		return mcp.ResourceNotFoundError(uri)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: e.Code + ": " + e.Message}
}

func (s *Server) transcript(ctx context.Context, sessionID string) ([]byte, *toolError) {
	res, e := s.ask(ctx, sessionID, &pb.GetMessages{Caller: caller(ctx)})
	if e != nil {
		return nil, e
	}
	tr := res.(*pb.Transcript)
	if tr.GetError() != nil {
		return nil, refused(sessionID, tr.GetError())
	}
	type msg struct {
		Role       string          `json:"role"`
		Text       string          `json:"text,omitempty"`
		ToolCallID string          `json:"toolCallId,omitempty"`
		ToolName   string          `json:"toolName,omitempty"`
		Args       json.RawMessage `json:"args,omitempty"`
		Result     json.RawMessage `json:"result,omitempty"`
		IsError    bool            `json:"isError,omitempty"`
		Via        string          `json:"via,omitempty"`
		TurnID     uint64          `json:"turnId"`
		PromptID   uint64          `json:"promptId,omitempty"`
	}
	out := make([]msg, 0, len(tr.GetEntries()))
	for _, e := range tr.GetEntries() {
		out = append(out, msg{Role: e.GetRole(), Text: e.GetText(), ToolCallID: e.GetToolCallId(), ToolName: e.GetToolName(),
			Args: rawJSON(e.GetToolArgs()), Result: rawJSON(e.GetToolResult()), IsError: e.GetIsError(), Via: e.GetVia(),
			TurnID: e.GetTurnId(), PromptID: e.GetPromptId()})
	}
	b, err := plainjson.Marshal(map[string]any{"messages": out})
	if err != nil {
		return nil, fail(codes.Internal, "the transcript does not encode: %v", err)
	}
	return b, nil
}

// readArtifact reads an artifact of a session the caller owns: its bytes
// as a blob up to the inline limit, else its signed URL.
func (s *Server) readArtifact(ctx context.Context, uri string, ref resourceRef) (*mcp.ReadResourceResult, error) {
	arts := s.rt.Artifacts()
	if _, err := arts.Session(ctx, ref.session, subject(ctx)); errors.Is(err, artifact.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	} else if err != nil {
		return nil, resourceErr(uri, s.requestErr(ref.session, err))
	}
	a, err := arts.Get(ctx, ref.session, ref.name)
	if errors.Is(err, artifact.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	} else if err != nil {
		return nil, resourceErr(uri, s.requestErr(ref.session, err))
	}
	meta := mcp.Meta{"size": a.Size, "sha256": a.SHA256, "name": a.Name, "url": s.signedURL(ctx, a.ID)}
	if a.Size > s.opts.ArtifactInline {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeURIList,
			Text: s.signedURL(ctx, a.ID) + "\r\n", Meta: meta}}}, nil
	}
	_, rd, err := arts.Open(ctx, a.ID)
	if err != nil {
		return nil, resourceErr(uri, s.requestErr(ref.session, err))
	}
	defer rd.Close()
	b, err := io.ReadAll(io.LimitReader(rd, s.opts.ArtifactInline+1))
	if err != nil {
		return nil, resourceErr(uri, fail(codes.Internal, "reading the artifact: %v", err))
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: a.MediaType, Blob: b, Meta: meta}}}, nil
}

// signedURL is the artifact's signed URL, absolute on the daemon the
// client reached.
func (s *Server) signedURL(ctx context.Context, id string) string {
	u, _ := s.rt.Artifacts().URL(id, 0)
	c, _ := callerOf(ctx)
	return c.base + u
}

// artifactIDRE finds artifact ids in a command's result.
var artifactIDRE = regexp.MustCompile(`att_[A-Za-z0-9_-]{16,}`)

// artifactLinks are resource links to the artifacts of the session a
// command's result names (a canvas edit's new image).
func (s *Server) artifactLinks(ctx context.Context, sessionID string, data []byte) []mcp.Content {
	if len(data) == 0 {
		return nil
	}
	var ids []string
	seen := map[string]bool{}
	for _, id := range artifactIDRE.FindAllString(string(data), 16) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return s.links(ctx, sessionID, ids)
}

// links are resource links to artifacts of the session (ids that are not
// its artifacts are left out).
func (s *Server) links(ctx context.Context, sessionID string, ids []string) []mcp.Content {
	var out []mcp.Content
	for _, id := range ids {
		a, err := s.rt.Artifacts().Get(ctx, sessionID, id)
		if err != nil {
			continue
		}
		size := a.Size
		name := a.Name
		if name == "" {
			name = a.ID
		}
		out = append(out, &mcp.ResourceLink{URI: artifactURI(sessionID, a.ID), Name: name, MIMEType: a.MediaType, Size: &size,
			Description: fmt.Sprintf("an artifact of session %s; resources/read gives its bytes (or, past the inline limit, its signed URL: _meta.url)", sessionID),
			Meta:        mcp.Meta{"url": s.signedURL(ctx, a.ID)}})
	}
	return out
}
