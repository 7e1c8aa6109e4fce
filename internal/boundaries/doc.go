// Package boundaries holds no code: its test reads the imports of every
// package of the module (go/parser, production files only) and fails when
// a package crosses a boundary of the layout (docs/architecture.md):
//
//   - the actors and the delivery path import only the core: never a
//     transport's package, nor anything the core does not list;
//   - no core package imports a transport;
//   - a transport imports no other transport, and never the agent
//     protocol (agentproc): what it tells clients comes from the session,
//     in codes of package codes;
//   - every package that imports internal/delivery (the one way out to a
//     client) is a transport the rules know;
//   - identity and codes, which every transport and the core share,
//     import nothing of the module.
package boundaries
