package mcpgw

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// A client attached to one session (/mcp/sessions/{id}) sees that
// session's surface commands as tools of their own, named
// <domain>_<action>, whose input schema is the one the agent declared for
// the command (an open object when it declared none) and whose description
// is the schema's. They are listed fresh on every tools/list, from the
// session's domains as they are registered now.

// toolNameRE is what MCP allows in a tool name.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// openSchema is the input schema of a command that declared none.
var openSchema = json.RawMessage(`{"type":"object"}`)

// commandTool is one surface command as a tool.
type commandTool struct {
	tool           *mcp.Tool
	domain, action string
}

// commandTools lists the attached session's commands as tools.
func (s *Server) commandTools(ctx context.Context, sessionID string) ([]commandTool, *toolError) {
	res, e := s.ask(ctx, sessionID, &pb.ListSurfaces{Caller: caller(ctx)})
	if e != nil {
		return nil, e
	}
	r := res.(*pb.SurfaceList)
	if r.GetError() != nil {
		return nil, refused(sessionID, r.GetError())
	}
	var out []commandTool
	for _, si := range r.GetSurfaces() {
		for _, action := range si.GetCommands() {
			name := si.GetDomain() + "_" + action
			if !toolNameRE.MatchString(name) || s.generalTool(name) {
				continue // run_command still runs it
			}
			schema := json.RawMessage(si.GetSchemas()[action])
			var meta struct {
				Description string `json:"description"`
			}
			if len(schema) == 0 {
				schema = openSchema
			} else {
				_ = json.Unmarshal(schema, &meta)
			}
			desc := meta.Description
			if desc == "" {
				desc = "The surface command " + si.GetDomain() + "." + action + "."
			}
			desc += " Runs on this session's surface " + si.GetDomain() + " (as its browser's buttons do) and answers the command's result and the new rev."
			out = append(out, commandTool{domain: si.GetDomain(), action: action,
				tool: &mcp.Tool{Name: name, Title: si.GetDomain() + "." + action, Description: desc, InputSchema: schema}})
		}
	}
	return out, nil
}

func (s *Server) generalTool(name string) bool {
	return slices.Contains(generalTools, name)
}

// generalTools are the tools every client sees (addTools).
var generalTools = []string{"list_agents", "list_sessions", "create_session", "get_session", "prompt", "abort", "run_command", "read_snapshot", "answer_dialog"}

// toolsMiddleware serves the tools the SDK does not hold: run_command
// (tools.go), and the attached session's command tools, which it adds to
// tools/list and runs on tools/call.
func (s *Server) toolsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			lr := res.(*mcp.ListToolsResult)
			if lp, _ := req.GetParams().(*mcp.ListToolsParams); lp == nil || lp.Cursor == "" {
				lr.Tools = append(lr.Tools, runCommandTool)
			}
			c, _ := callerOf(ctx)
			if c.attached == "" {
				return lr, nil
			}
			tools, e := s.commandTools(ctx, c.attached)
			if e != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Code + ": " + e.Message}
			}
			for _, t := range tools {
				lr.Tools = append(lr.Tools, t.tool)
			}
			return lr, nil
		case "tools/call":
			cr, ok := req.(*mcp.CallToolRequest)
			if !ok {
				break
			}
			if cr.Params.Name == runCommandTool.Name {
				return s.runCommand(ctx, cr.Params.Arguments), nil
			}
			c, _ := callerOf(ctx)
			if c.attached == "" || s.generalTool(cr.Params.Name) {
				break
			}
			tools, e := s.commandTools(ctx, c.attached)
			if e != nil {
				return errorResult(e), nil
			}
			for _, t := range tools {
				if t.tool.Name == cr.Params.Name {
					out, e := s.command(ctx, c.attached, t.domain, t.action, cr.Params.Arguments, "")
					if e != nil {
						return errorResult(e), nil
					}
					return out.(*mcp.CallToolResult), nil
				}
			}
		}
		return next(ctx, method, req)
	}
}
