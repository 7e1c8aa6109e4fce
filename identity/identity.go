// Package identity is who a request acts as: the one notion of a caller
// that every transport (the HTTP API, SSE, WebSocket, ACP, and whatever
// joins them) and the session core share.
//
// An authenticator establishes an Identity and attaches it to the
// request's context (NewContext); a transport reads it there
// (FromContext) and hands the session core only its Subject, which owns
// sessions: a caller sees its own sessions and no others. The token guard
// (gateway/guard) authenticates static tokens, OpenID Connect sign-ins and
// JWT bearer tokens (identity/idp) and a trusted proxy's header; all land in
// the same type, so a transport never depends on how a caller proved who it
// is. Per-subject rules (Access: which agents a subject may use) live here
// for the same reason: every transport enforces the same ones.
//
// Subjects have one form per source: a tokens-file subject as written,
// "local" for the launch token, "anonymous" without authentication,
// "<issuer>#<claim value>" for OpenID Connect and JWT (Qualify: a person
// signed in by browser and by bearer token is one subject), and a trusted
// proxy's header value as sent.
//
// A credential can be revoked while a stream is open: a Revoker binds a
// stream's context to its credential, and cancels it with cause ErrRevoked.
package identity

import (
	"context"
	"errors"
	"slices"
	"time"
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
	// can end what it opened: for a static token, the hex SHA-256 of the
	// token; for the other sources a prefix says which ("signin:",
	// "jwt:", "proxy:"). "" for one that is never revoked (authentication
	// off).
	Credential string
	// Groups are the groups the credential puts Subject in (an OpenID
	// provider's groups claim, a trusted proxy's groups header), for the
	// Access rules. Nil for a static token.
	Groups []string
	// Expires is when the credential stops proving Subject by itself (a
	// JWT's exp, the end of a browser sign-in): what it opened ends then.
	// Zero: it does not expire.
	Expires time.Time
}

// IsZero reports whether id is no identity.
func (id Identity) IsZero() bool {
	return id.Subject == "" && id.Credential == "" && id.Groups == nil && id.Expires.IsZero()
}

// Qualify is the subject of an OpenID Connect or JWT credential: the
// issuer, "#", and the value of the configured claim, so that two
// providers never give the same subject to two people.
func Qualify(issuer, value string) string { return issuer + "#" + value }

// InGroup reports whether id's groups include group.
func (id Identity) InGroup(group string) bool { return slices.Contains(id.Groups, group) }

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
