package idp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/surfaced/surfaced/internal/clock"
)

// Key set timings (docs/security.md, "Keys").
const (
	// RefetchEvery is the least time between two fetches of a key set: a
	// token signed by a key the set does not hold makes the daemon fetch
	// the set again, at most this often, so a rotated key is accepted
	// within RefetchEvery plus a fetch.
	RefetchEvery = 10 * time.Second
	// DefaultMaxAge is how long fetched keys stay trusted while the key set
	// cannot be fetched again (jwks_max_age).
	DefaultMaxAge = 24 * time.Hour
	// refreshAfter is the age past which a request starts a fetch in the
	// background (keys the provider removed stop being trusted), capped
	// by half the max age.
	refreshAfter = time.Hour
	// fetchTimeout bounds one fetch of a key set or a discovery document.
	fetchTimeout = 10 * time.Second
	// maxDocument bounds a key set or discovery document read.
	maxDocument = 1 << 20
)

// signingAlgs are the algorithms a token may be signed with: asymmetric
// only. A symmetric algorithm (HS256 with a provider's public key as the
// secret) and "none" never parse.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// signingAlgNames is signingAlgs as go-oidc's verifier takes them.
func signingAlgNames() []string {
	out := make([]string, len(signingAlgs))
	for i, a := range signingAlgs {
		out[i] = string(a)
	}
	return out
}

// KeySet is a provider's JSON Web Key Set, fetched from its jwks_uri and
// kept: it verifies token signatures for go-oidc's verifier (the
// oidc.KeySet interface). The rules, on the injected clock:
//
//   - a token whose key (kid) the set does not hold makes it fetch the set
//     again, at most once per RefetchEvery; callers share one fetch;
//   - keys older than an hour (or half the max age) are fetched again in
//     the background while they keep verifying;
//   - fetched keys stay trusted while the set cannot be fetched again, up
//     to the max age since the last fetch that worked; past it, and when no
//     fetch ever worked, a verification fails with ErrUnavailable.
//
// Only public asymmetric signing keys are kept (a symmetric "oct" key or
// an encryption key in the set is ignored).
type KeySet struct {
	url    string
	client *http.Client
	clock  clock.Clock
	maxAge time.Duration
	log    *slog.Logger

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time // when the keys were fetched (zero: never)
	tried    time.Time // when the last fetch started (zero: never)
	lastErr  error     // the last fetch's error (nil: it worked)
	inflight chan struct{}
}

// NewKeySet returns the key set at url. maxAge 0 is DefaultMaxAge; a nil
// client is http.DefaultClient, a nil clock the wall clock.
func NewKeySet(url string, client *http.Client, clk clock.Clock, maxAge time.Duration, log *slog.Logger) *KeySet {
	if client == nil {
		client = http.DefaultClient
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	if log == nil {
		log = slog.Default()
	}
	return &KeySet{url: url, client: client, clock: clk, maxAge: maxAge, log: log}
}

// URL is where the set is fetched from.
func (k *KeySet) URL() string { return k.url }

// Refresh fetches the set now (at start, to warm it); the error says why
// it could not.
func (k *KeySet) Refresh(ctx context.Context) error {
	k.mu.Lock()
	ch := k.startFetchLocked()
	k.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastErr
}

// errUnknownKey: no key of the set verifies the token (after a fetch, or
// within RefetchEvery of the last one).
var errUnknownKey = errors.New("the token is signed by a key the provider's key set does not hold")

// errBadSignature: the key the token names does not verify it.
var errBadSignature = errors.New("the token's signature does not verify")

// VerifySignature implements oidc.KeySet: it returns the payload of jwt
// when a key of the set verifies its signature. go-oidc's verifier has
// checked the algorithm already; it is checked here again.
func (k *KeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must carry exactly one signature")
	}
	payload, err := k.verify(ctx, jws)
	if err != nil && errors.Is(err, ErrUnavailable) {
		noteUnavailable(ctx)
	}
	return payload, err
}

func (k *KeySet) verify(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	sig := jws.Signatures[0].Header
	now := k.clock.Now()
	k.mu.Lock()
	keys, fetched := k.keys, k.fetched
	stale := fetched.IsZero() || now.Sub(fetched) > k.maxAge
	if !stale && now.Sub(fetched) > min(refreshAfter, k.maxAge/2) && now.Sub(k.tried) >= RefetchEvery {
		k.startFetchLocked() // in the background: the keys still verify
	}
	k.mu.Unlock()
	if !stale {
		payload, named, err := verifyWith(jws, sig, keys)
		if err == nil || named {
			return payload, err
		}
	}
	// Fetch again: the token names a key the set does not hold, or the
	// keys are past their age.
	ch, ok := k.refetch(now)
	if ok {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	k.mu.Lock()
	keys, fetched, lastErr := k.keys, k.fetched, k.lastErr
	k.mu.Unlock()
	if fetched.IsZero() || k.clock.Now().Sub(fetched) > k.maxAge {
		why := "it was never fetched"
		if !fetched.IsZero() {
			why = "the keys fetched " + fetched.UTC().Format(time.RFC3339) + " are past jwks_max_age"
		}
		return nil, fmt.Errorf("%w: the key set %s cannot be fetched (%v) and %s", ErrUnavailable, k.url, lastErr, why)
	}
	payload, named, err := verifyWith(jws, sig, keys)
	if err == nil || named {
		return payload, err
	}
	if lastErr != nil {
		// The set could not be fetched: the token's key may be a new one.
		return nil, fmt.Errorf("%w: the token names key %q, which the cached key set does not hold, and the key set %s cannot be fetched: %v", ErrUnavailable, sig.KeyID, k.url, lastErr)
	}
	return nil, errUnknownKey
}

// refetch starts a fetch unless one ran within RefetchEvery (then it
// reports false); a fetch under way is shared.
func (k *KeySet) refetch(now time.Time) (<-chan struct{}, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inflight != nil {
		return k.inflight, true
	}
	if !k.tried.IsZero() && now.Sub(k.tried) < RefetchEvery {
		return nil, false
	}
	return k.startFetchLocked(), true
}

// startFetchLocked starts a fetch (or returns the one under way).
func (k *KeySet) startFetchLocked() chan struct{} {
	if k.inflight != nil {
		return k.inflight
	}
	ch := make(chan struct{})
	k.inflight = ch
	k.tried = k.clock.Now()
	go func() {
		keys, err := k.fetch()
		k.mu.Lock()
		k.lastErr = err
		if err == nil {
			k.keys, k.fetched = keys, k.clock.Now()
		}
		k.inflight = nil
		k.mu.Unlock()
		close(ch)
		if err != nil {
			k.log.Warn("the identity provider's key set cannot be fetched; cached keys stay trusted up to jwks_max_age", "url", k.url, "err", err, "max_age", k.maxAge)
		} else {
			k.log.Debug("key set fetched", "url", k.url, "keys", len(keys))
		}
	}()
	return ch
}

// verifyWith tries the keys the token may name: the one with its kid (or
// every key when it names none). named reports that a key with its kid
// was there (a failure is then a bad signature, not an unknown key).
func verifyWith(jws *jose.JSONWebSignature, sig jose.Header, keys []jose.JSONWebKey) (payload []byte, named bool, err error) {
	for i := range keys {
		key := &keys[i]
		if sig.KeyID != "" && key.KeyID != sig.KeyID {
			continue
		}
		if key.Algorithm != "" && key.Algorithm != sig.Algorithm {
			continue
		}
		if sig.KeyID != "" {
			named = true
		}
		if p, err := jws.Verify(key); err == nil {
			return p, true, nil
		}
	}
	if named {
		return nil, true, errBadSignature
	}
	return nil, false, errUnknownKey
}

// fetch reads the key set.
func (k *KeySet) fetch() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	body, err := getDocument(ctx, k.client, k.url)
	if err != nil {
		return nil, err
	}
	return parseKeySet(body)
}

// parseKeySet decodes a JWK Set, keeping the public signing keys go-jose
// understands and skipping the others (RFC 7517 §5: a set member of a type
// not understood is ignored). A set without one usable key is an error.
func parseKeySet(body []byte) ([]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("the key set is not JSON of the form {\"keys\":[…]}: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, m := range raw.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(m); err != nil {
			continue
		}
		if !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the key set holds no public signing key (%d keys)", len(raw.Keys))
	}
	return keys, nil
}

// getDocument GETs a JSON document (a key set, a discovery document),
// bounded in size.
func getDocument(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	if len(body) > maxDocument {
		return nil, fmt.Errorf("%s answered more than %d bytes", url, maxDocument)
	}
	return body, nil
}
