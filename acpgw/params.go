package acpgw

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// Params: decoding and checking what methods take. Errors name the field.

// decodeParams decodes params into v; the error names what is wrong.
func decodeParams(params json.RawMessage, v any) *acp.RequestError {
	if len(params) == 0 {
		return errInvalidParams("params", "params are required")
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errInvalidParams(te.Field, "%s must be %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return errInvalidParams("", "params must be an object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	default:
		return "a number"
	}
}

func requireSessionID(sid *string) (string, *acp.RequestError) {
	if sid == nil {
		return "", errInvalidParams("sessionId", "sessionId is required")
	}
	if *sid == "" || len(*sid) > maxSessionIDLen {
		return "", errInvalidParams("sessionId", "sessionId must be 1 to %d characters", maxSessionIDLen)
	}
	return *sid, nil
}

func requireCwd(cwd *string, required bool) (string, *acp.RequestError) {
	if cwd == nil {
		if required {
			return "", errInvalidParams("cwd", "cwd is required (an absolute path)")
		}
		return "", nil
	}
	if !filepath.IsAbs(*cwd) {
		return "", errInvalidParams("cwd", "cwd must be an absolute path, got %q", *cwd)
	}
	return filepath.Clean(*cwd), nil
}

// mcpServersOf checks mcpServers (required, an array) and logs what is
// ignored: the daemon never spawns what an editor names.
func (s *Server) mcpServersOf(c *conn, raw json.RawMessage) *acp.RequestError {
	if raw == nil {
		return errInvalidParams("mcpServers", "mcpServers is required (an array, [] for none)")
	}
	var servers []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &servers) != nil {
		return errInvalidParams("mcpServers", "mcpServers must be an array of MCP server descriptions")
	}
	if len(servers) > 0 {
		names := make([]string, 0, len(servers))
		for _, m := range servers {
			names = append(names, m.Name)
		}
		s.log.Info("acp mcpServers ignored: the daemon's agents bring their own tools", "connection", c.id, "servers", names)
	}
	return nil
}

type sessionParams struct {
	SessionID  *string          `json:"sessionId"`
	Cwd        *string          `json:"cwd"`
	McpServers *json.RawMessage `json:"mcpServers"`
}

func (p sessionParams) mcp() json.RawMessage {
	if p.McpServers == nil {
		return nil
	}
	return *p.McpServers
}

type promptParams struct {
	SessionID *string            `json:"sessionId"`
	Prompt    *[]json.RawMessage `json:"prompt"`
}

type contentBlock struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	URI      string  `json:"uri"`
	Name     string  `json:"name"`
	Data     string  `json:"data"`
	MimeType string  `json:"mimeType"`
}

// promptContent turns ACP content blocks into the prompt's text and images:
// text as is, resource_link as "name (uri)", images for agents that take
// them; any other block is refused naming its type.
func promptContent(blocks []json.RawMessage) (string, []*pb.Image, *acp.RequestError) {
	var texts []string
	var imgs []*pb.Image
	for i, raw := range blocks {
		var b contentBlock
		if json.Unmarshal(raw, &b) != nil {
			return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d]", i), "prompt[%d] must be a content block object", i)
		}
		switch b.Type {
		case "text":
			if b.Text == nil {
				return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d].text", i), "prompt[%d].text is required", i)
			}
			texts = append(texts, *b.Text)
		case "resource_link":
			if b.URI == "" {
				return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d].uri", i), "prompt[%d].uri is required", i)
			}
			name := b.Name
			if name == "" {
				name = b.URI
			}
			texts = append(texts, name+" ("+b.URI+")")
		case "image":
			// Whether the agent takes images is the session's to say (an
			// agent may announce it when it starts): a refusal comes back
			// from the session as -32602 naming "image".
			if b.Data == "" || b.MimeType == "" {
				return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d]", i), "prompt[%d] (image) needs data and mimeType", i)
			}
			imgs = append(imgs, &pb.Image{MimeType: b.MimeType, Data: b.Data})
		case "":
			return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d].type", i), "prompt[%d].type is required", i)
		default:
			return "", nil, errInvalidParams(fmt.Sprintf("prompt[%d]", i), "This agent does not accept %q content in a prompt.", b.Type)
		}
	}
	text := strings.Join(texts, "\n\n")
	if strings.TrimSpace(text) == "" {
		return "", nil, errInvalidParams("prompt", "The prompt carried no text.")
	}
	return text, imgs, nil
}
