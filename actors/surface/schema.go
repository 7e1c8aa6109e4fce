package surface

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/surfaced/surfaced/agentproc"
)

// ArgsSchemas are the compiled argument schemas of a domain's commands, by
// action. An action without one takes any args. The zero value (nil) checks
// nothing.
type ArgsSchemas map[string]*jsonschema.Resolved

// CompileSchemas compiles the argument schemas an agent declared
// (agent_ready's schemas). Each must be a JSON Schema whose top-level type is
// "object"; one that is not, or that does not compile, is left out (its
// action takes any object) and reported in bad, by action.
func CompileSchemas(raw map[string][]byte) (s ArgsSchemas, bad map[string]error) {
	for action, sch := range raw {
		rs, err := compileSchema(sch)
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[action] = err
			continue
		}
		if s == nil {
			s = ArgsSchemas{}
		}
		s[action] = rs
	}
	return s, bad
}

func compileSchema(raw []byte) (*jsonschema.Resolved, error) {
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	if sch.Type != "object" {
		return nil, fmt.Errorf(`its top-level "type" must be "object", not %q`, sch.Type)
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %w", err)
	}
	return rs, nil
}

// Check validates a command's args against its action's schema: nil when
// they fit (or the action has none), else an invalid_args error saying why.
// Absent or null args are checked as {}, which is what the domain passes on.
func (s ArgsSchemas) Check(domain, action string, args json.RawMessage) *Error {
	rs := s[action]
	if rs == nil {
		return nil
	}
	var v any = map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &v); err != nil {
			return &Error{Code: agentproc.CodeInvalidArgs, Message: fmt.Sprintf("%s.%s: the args are not JSON: %v", domain, action, err)}
		}
	}
	if err := rs.Validate(v); err != nil {
		return &Error{Code: agentproc.CodeInvalidArgs, Message: fmt.Sprintf("%s.%s: the args do not fit the command's schema: %v", domain, action, err)}
	}
	return nil
}
