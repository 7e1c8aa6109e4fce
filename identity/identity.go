// Package identity is who a request acts as: the one notion of a caller
// that every transport (the HTTP API, SSE, WebSocket, ACP, and whatever
// joins them) and the session core share.
//
// An authenticator establishes an Identity and attaches it to the
// request's context (NewContext); a transport reads it there
// (FromContext) and hands the session core only its Subject, which owns
// sessions: a caller sees its own sessions and no others. The token guard
// (gateway/guard) is today's authenticator; subjects from OpenID Connect or
// JWT bearer tokens and from a trusted proxy are established the same way
// and land in the same type, so a transport never depends on how a caller
// proved who it is. Per-subject rules (which agents a subject may run)
// belong here too when they come, for the same reason: every transport
// then enforces the same ones.
//
// A credential can be revoked while a stream is open: a Revoker binds a
// stream's context to its credential, and cancels it with cause ErrRevoked.
package identity

import (
	"context"
	"errors"
)

// Subjects the daemon assigns itself; an authenticator never gives them to
// a credential of its own (the tokens file refuses them).
const (
	// Local is the holder of the daemon's launch token.
	Local = "local"
	// Anonymous is everyone when authentication is off (--no-auth).
	Anonymous = "anonymous"
)

// Identity is who a request authenticated as. The zero value is no
// identity (a public path reached without a credential).
type Identity struct {
	// Subject is who acts: the owner of the sessions the caller creates,
	// and the only owner whose sessions it can see.
	Subject string
	// Credential names the credential that proved Subject, so a Revoker
	// can end what it opened: for a bearer token, the hex SHA-256 of the
	// token. "" for one that is never revoked (authentication off).
	Credential string
}

// IsZero reports whether id is no identity.
func (id Identity) IsZero() bool { return id == Identity{} }

// ErrRevoked is the cause of a context cancelled because the credential
// that opened it was revoked (a token that left the tokens file, or now
// names another subject). Transports end the stream and say so.
var ErrRevoked = errors.New("identity: the credential was revoked")

// Revoker binds contexts to the life of a credential.
type Revoker interface {
	// Context returns a child of parent that is cancelled with cause
	// ErrRevoked as soon as id's credential stops proving id.Subject
	// (already cancelled when that happened before). The CancelFunc
	// releases the binding and must be called, as with
	// context.WithCancel.
	Context(parent context.Context, id Identity) (context.Context, context.CancelFunc)
}

type contextKey struct{}

// NewContext returns a copy of ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// FromContext returns the identity attached to ctx, and whether there was
// one (a public path reached without a valid credential has none).
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(contextKey{}).(Identity)
	return id, ok
}
