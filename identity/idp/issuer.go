package idp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
)

// DefaultSkew is the clock skew allowed on exp, nbf and iat.
const DefaultSkew = time.Minute

// IssuerConfig configures one identity provider (an issuer).
type IssuerConfig struct {
	// URL is the issuer, exactly as its tokens' iss says.
	URL string
	// JWKSURL is its key set; "" reads jwks_uri from the discovery
	// document.
	JWKSURL string
	// Discover reads the discovery document even with a JWKSURL (browser
	// sign-in needs its endpoints).
	Discover bool
	// MaxAge is jwks_max_age (DefaultMaxAge when 0).
	MaxAge time.Duration
	// Skew is the clock skew allowed on exp, nbf and iat (DefaultSkew when
	// 0; negative for none).
	Skew time.Duration
	// Client makes the requests to the provider (nil: http.DefaultClient).
	Client *http.Client
	// Clock tells the time of lifetimes and fetch intervals (nil: the wall
	// clock).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Issuer is one identity provider: its discovery document, when read, and
// its key set.
type Issuer struct {
	url      string
	provider *oidc.Provider // nil without discovery
	keys     *KeySet
	skew     time.Duration
	clock    clock.Clock
	client   *http.Client
}

// Discover sets up an issuer: it reads the discovery document
// (<issuer>/.well-known/openid-configuration) when the key set's URL is not
// given or Discover asks for it, and fails when the provider does not
// answer or names another issuer. The key set is fetched on first use and
// may be warmed with Keys().Refresh.
func Discover(ctx context.Context, cfg IssuerConfig) (*Issuer, error) {
	if cfg.URL == "" {
		return nil, errors.New("idp: no issuer URL")
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	switch {
	case cfg.Skew == 0:
		cfg.Skew = DefaultSkew
	case cfg.Skew < 0:
		cfg.Skew = 0
	}
	i := &Issuer{url: cfg.URL, skew: cfg.Skew, clock: cfg.Clock, client: cfg.Client}
	jwks := cfg.JWKSURL
	if jwks == "" || cfg.Discover {
		dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, cfg.Client), fetchTimeout)
		defer cancel()
		p, err := oidc.NewProvider(dctx, cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("idp: discovery of %s: %w", cfg.URL, err)
		}
		i.provider = p
		if jwks == "" {
			var doc struct {
				JWKS string `json:"jwks_uri"`
			}
			if err := p.Claims(&doc); err != nil || doc.JWKS == "" {
				return nil, fmt.Errorf("idp: the discovery document of %s names no jwks_uri", cfg.URL)
			}
			jwks = doc.JWKS
		}
	}
	i.keys = NewKeySet(jwks, cfg.Client, cfg.Clock, cfg.MaxAge, cfg.Logger)
	return i, nil
}

// URL is the issuer.
func (i *Issuer) URL() string { return i.url }

// Keys is the issuer's key set.
func (i *Issuer) Keys() *KeySet { return i.keys }

// verifier checks a token of this issuer for audience: signature (the key
// set, asymmetric algorithms only), iss, aud, and exp with the skew.
func (i *Issuer) verifier(audience string) *oidc.IDTokenVerifier {
	return oidc.NewVerifier(i.url, i.keys, &oidc.Config{
		ClientID:             audience,
		SupportedSigningAlgs: signingAlgNames(),
		Now:                  func() time.Time { return i.clock.Now().Add(-i.skew) },
	})
}

// claims are a verified token's claims.
type claims map[string]json.RawMessage

// verify verifies raw with v and makes the checks go-oidc leaves out: nbf
// and iat against the injected clock with the skew. Errors are *Refusal or
// wrap ErrUnavailable.
func (i *Issuer) verify(ctx context.Context, v *oidc.IDTokenVerifier, raw string) (*oidc.IDToken, claims, error) {
	ctx, note := withNote(ctx)
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		switch {
		case note.set:
			return nil, nil, fmt.Errorf("%w (%v)", ErrUnavailable, err)
		case errors.As(err, &expired) && expired.Expiry.IsZero():
			return nil, nil, refuse("the token has no exp claim", nil)
		case errors.As(err, &expired):
			return nil, nil, &Refusal{Reason: "the token expired at " + expired.Expiry.UTC().Format(time.RFC3339), Expired: true}
		}
		return nil, nil, refuse("the token does not verify", err)
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return nil, nil, refuse("the token's claims are not a JSON object", err)
	}
	now := i.clock.Now()
	if t, ok, err := c.time("nbf"); err != nil {
		return nil, nil, refuse("nbf", err)
	} else if ok && t.After(now.Add(i.skew)) {
		return nil, nil, refuse("the token is not valid before "+t.UTC().Format(time.RFC3339), nil)
	}
	if t, ok, err := c.time("iat"); err != nil {
		return nil, nil, refuse("iat", err)
	} else if ok && t.After(now.Add(i.skew)) {
		return nil, nil, refuse("the token was issued in the future ("+t.UTC().Format(time.RFC3339)+")", nil)
	}
	return tok, c, nil
}

// time reads a NumericDate claim (RFC 7519 §2: seconds, maybe
// fractional).
func (c claims) time(name string) (time.Time, bool, error) {
	raw, ok := c[name]
	if !ok || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, false, fmt.Errorf("%s is not a date in seconds", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// lookup finds a claim by name, or by a dotted path into nested objects
// ("realm_access.roles") when no claim has the whole name.
func (c claims) lookup(name string) (json.RawMessage, bool) {
	if v, ok := c[name]; ok {
		return v, true
	}
	head, rest, ok := strings.Cut(name, ".")
	if !ok {
		return nil, false
	}
	v, found := c[head]
	for found {
		var obj claims
		if json.Unmarshal(v, &obj) != nil {
			return nil, false
		}
		if v, found = obj[rest]; found {
			return v, true
		}
		head, rest, ok = strings.Cut(rest, ".")
		if !ok {
			return nil, false
		}
		v, found = obj[head]
	}
	return nil, false
}

// maxSubjectValue bounds a subject claim's value.
const maxSubjectValue = 256

// subject is the qualified subject from the claim named claim: a
// non-empty string of at most 256 bytes, valid UTF-8, without control
// characters.
func (i *Issuer) subject(c claims, claim string) (string, error) {
	raw, ok := c.lookup(claim)
	if !ok {
		return "", refuse(fmt.Sprintf("the token has no %q claim (subject_claim)", claim), nil)
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", refuse(fmt.Sprintf("the %q claim (subject_claim) is not a string", claim), nil)
	}
	if err := checkClaimValue(v); err != nil {
		return "", refuse(fmt.Sprintf("the %q claim (subject_claim)", claim), err)
	}
	return identity.Qualify(i.url, v), nil
}

func checkClaimValue(v string) error {
	switch {
	case v == "":
		return errors.New("is empty")
	case len(v) > maxSubjectValue:
		return fmt.Errorf("is longer than %d bytes", maxSubjectValue)
	case !utf8.ValidString(v):
		return errors.New("is not valid UTF-8")
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return errors.New("contains a control character")
	}
	return nil
}

// Groups a token may put its subject in, at most.
const maxGroups = 256

// groups reads the groups claim: an array of strings (other members are
// skipped) or one string; absent is none. At most maxGroups are kept.
func groups(c claims, claim string) []string {
	if claim == "" {
		return nil
	}
	raw, ok := c.lookup(claim)
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if checkClaimValue(one) != nil {
			return nil
		}
		return []string{one}
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) != nil {
		return nil
	}
	out := make([]string, 0, min(len(many), maxGroups))
	for _, m := range many {
		var g string
		if json.Unmarshal(m, &g) != nil || checkClaimValue(g) != nil {
			continue
		}
		if out = append(out, g); len(out) == maxGroups {
			break
		}
	}
	return out
}
