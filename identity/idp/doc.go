// Package idp is the daemon's side of an identity provider: the OpenID
// Connect relying party that signs browsers in (SignIn: the authorization
// code flow with PKCE, state and nonce; its sign-ins held on the node,
// re-checked at the provider and revocable), and the verifier of JWT
// bearer tokens the provider issues (Bearer). Both establish an
// identity.Identity whose subject is "<issuer>#<claim value>"
// (identity.Qualify), so a person signed in by browser and by bearer token
// is one subject.
//
// The protocol work is go-oidc's and golang.org/x/oauth2's; signatures are
// go-jose's. This package adds what they leave to their users: discovery
// at start (Discover), a key set with the daemon's rotation and outage
// rules on the injected clock (KeySet), the checks go-oidc does not make
// (not-before and issued-at with the configured skew), the subject and
// groups claims, and the routes a browser signs in and out through.
//
// gateway/guard decides which credential a request carries and asks this
// package; a refusal is a *Refusal (401 unauthorized, one shape for every
// credential), a provider that cannot be reached ErrUnavailable (503
// identity_unavailable).
package idp
