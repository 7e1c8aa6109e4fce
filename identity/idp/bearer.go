package idp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/surfaced/surfaced/identity"
)

// BearerIssuer is one issuer whose JWTs are bearer credentials (config
// jwt[i]).
type BearerIssuer struct {
	Issuer *Issuer
	// Audience must be among the token's aud.
	Audience string
	// SubjectClaim names the subject (default "sub"); GroupsClaim the
	// groups (default "groups"; a dotted path reaches into objects).
	SubjectClaim string
	GroupsClaim  string
}

// Bearer verifies JWT bearer tokens of a list of issuers. It is safe for
// concurrent use.
type Bearer struct {
	byIssuer map[string]bearerEntry
	order    []string
}

type bearerEntry struct {
	issuer         *Issuer
	verifier       *oidc.IDTokenVerifier
	subject, group string
}

// NewBearer returns the verifier of entries' tokens; an issuer may be
// listed once.
func NewBearer(entries []BearerIssuer) (*Bearer, error) {
	b := &Bearer{byIssuer: map[string]bearerEntry{}}
	for _, e := range entries {
		if e.Issuer == nil || e.Audience == "" {
			return nil, errors.New("idp: a bearer issuer needs an issuer and an audience")
		}
		url := e.Issuer.URL()
		if _, dup := b.byIssuer[url]; dup {
			return nil, fmt.Errorf("idp: issuer %s is listed twice", url)
		}
		if e.SubjectClaim == "" {
			e.SubjectClaim = "sub"
		}
		if e.GroupsClaim == "" {
			e.GroupsClaim = "groups"
		}
		b.byIssuer[url] = bearerEntry{issuer: e.Issuer, verifier: e.Issuer.verifier(e.Audience), subject: e.SubjectClaim, group: e.GroupsClaim}
		b.order = append(b.order, url)
	}
	return b, nil
}

// Issuers are the issuers whose tokens are accepted, in order.
func (b *Bearer) Issuers() []string { return slices.Clone(b.order) }

// CredentialPrefix begins the Credential of a JWT bearer identity.
const CredentialPrefix = "jwt:"

// Verify returns who token proves: the token must be a JWS of a listed
// issuer, signed by a key of its key set, for the issuer's audience,
// within its lifetime (exp, nbf, iat with the skew). The identity expires
// with the token. Errors are *Refusal, or wrap ErrUnavailable.
func (b *Bearer) Verify(ctx context.Context, token string) (identity.Identity, error) {
	iss, err := PeekIssuer(token)
	if err != nil {
		return identity.Identity{}, refuse("not a JWT", err)
	}
	e, ok := b.byIssuer[iss]
	if !ok {
		return identity.Identity{}, refuse(fmt.Sprintf("issuer %q is not one the daemon accepts", clip(iss)), nil)
	}
	tok, c, err := e.issuer.verify(ctx, e.verifier, token)
	if err != nil {
		return identity.Identity{}, err
	}
	subject, err := e.issuer.subject(c, e.subject)
	if err != nil {
		return identity.Identity{}, err
	}
	sum := sha256.Sum256([]byte(token))
	return identity.Identity{
		Subject:    subject,
		Credential: CredentialPrefix + hex.EncodeToString(sum[:]),
		Groups:     groups(c, e.group),
		Expires:    tok.Expiry,
	}, nil
}

// MaxTokenBytes bounds a bearer JWT.
const MaxTokenBytes = 16 << 10

// LooksLikeJWT reports whether token has the shape of a compact JWS (three
// base64url parts): a bearer token that is not a static token is tried as
// a JWT only then.
func LooksLikeJWT(token string) bool {
	if len(token) > MaxTokenBytes || strings.Count(token, ".") != 2 {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// PeekIssuer reads the iss claim of a compact JWS without verifying it, to
// choose the issuer whose keys verify it. Nothing else is taken from an
// unverified token.
func PeekIssuer(token string) (string, error) {
	if !LooksLikeJWT(token) {
		return "", errors.New("the token is not three base64url parts")
	}
	parts := strings.SplitN(token, ".", 3)
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("the payload is not base64url: %w", err)
	}
	var c struct {
		Iss *string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", fmt.Errorf("the payload is not a JSON object: %w", err)
	}
	if c.Iss == nil || *c.Iss == "" {
		return "", errors.New("the token has no iss claim")
	}
	return *c.Iss, nil
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
