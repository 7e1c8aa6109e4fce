package idp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keyServer is an issuer's discovery document and key set on a loopback
// listener, whose keys a test rotates and whose key set it takes down.
// (The daemon's own tests run a real OpenID provider; this one is for the
// key set's rules, on a fake clock.)
type keyServer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	keys   []signingKey // published, newest first
	down   bool
	served atomic.Int64 // key set fetches answered
}

type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key any // *rsa.PrivateKey or *ecdsa.PrivateKey
}

func newKeyServer(t *testing.T) *keyServer {
	t.Helper()
	ks := &keyServer{t: t}
	ks.keys = []signingKey{newRSAKey(t, "k1")}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                ks.srv.URL,
			"authorization_endpoint":                ks.srv.URL + "/authorize",
			"token_endpoint":                        ks.srv.URL + "/token",
			"jwks_uri":                              ks.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		ks.mu.Lock()
		down := ks.down
		var set jose.JSONWebKeySet
		for _, k := range ks.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: publicOf(k.key), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		ks.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		ks.served.Add(1)
		_ = json.NewEncoder(w).Encode(set)
	})
	ks.srv = httptest.NewServer(mux)
	t.Cleanup(ks.srv.Close)
	return ks
}

func newRSAKey(t *testing.T, kid string) signingKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.RS256, key: k}
}

func newECKey(t *testing.T, kid string) signingKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.ES256, key: k}
}

func publicOf(k any) any {
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return &k.PublicKey
	case *ecdsa.PrivateKey:
		return &k.PublicKey
	}
	panic("unknown key")
}

func (ks *keyServer) current() signingKey {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.keys[0]
}

// rotate publishes a new key, first, keeping the old ones.
func (ks *keyServer) rotate(k signingKey) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.keys = append([]signingKey{k}, ks.keys...)
}

func (ks *keyServer) setDown(down bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.down = down
}

// sign makes a compact JWS of claims with k.
func sign(t *testing.T, k signingKey, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), k.kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unsigned builds a token by hand: header and claims, and a signature
// part (for alg none and the HS256 confusion).
func unsigned(header, claims map[string]any, sig []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(c) + "." + enc(sig)
}

func unix(t time.Time) int64 { return t.Unix() }
