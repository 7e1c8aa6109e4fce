package identity

import "slices"

// Rule names who may use one agent: a subject listed in Subjects (in the
// subject's own form, see the package doc), or a member of a group listed
// in Groups.
type Rule struct {
	Subjects []string
	Groups   []string
}

// Access says which subjects may use which agents. An agent without a rule
// is open to every subject; an agent with one only to those it names. A
// nil *Access lets every subject use every agent (no access section).
//
// Transports ask it on every route that lists agents or creates a session,
// and answer an agent a caller may not use as one that does not exist.
type Access struct {
	rules map[string]Rule
}

// NewAccess returns the access rules by agent name; nil or empty rules give
// a nil *Access (every agent open).
func NewAccess(rules map[string]Rule) *Access {
	if len(rules) == 0 {
		return nil
	}
	a := &Access{rules: make(map[string]Rule, len(rules))}
	for agent, r := range rules {
		a.rules[agent] = Rule{Subjects: slices.Clone(r.Subjects), Groups: slices.Clone(r.Groups)}
	}
	return a
}

// Allows reports whether id may use agent.
func (a *Access) Allows(id Identity, agent string) bool {
	if a == nil {
		return true
	}
	r, ok := a.rules[agent]
	if !ok {
		return true
	}
	if id.Subject != "" && slices.Contains(r.Subjects, id.Subject) {
		return true
	}
	for _, g := range id.Groups {
		if g != "" && slices.Contains(r.Groups, g) {
			return true
		}
	}
	return false
}

// Restricted reports whether agent has a rule (is not open to everyone).
func (a *Access) Restricted(agent string) bool {
	if a == nil {
		return false
	}
	_, ok := a.rules[agent]
	return ok
}
