package signin_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

func claims(op *idptest.OP, now time.Time, over map[string]any) map[string]any {
	c := map[string]any{"iss": op.Issuer, "sub": "alice-id", "aud": "surfaced", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "groups": []string{"staff"}}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// handmade builds a compact JWS by hand (for alg none and the HS256
// confusion, which no signer makes).
func handmade(header, claims map[string]any, sign func(input string) []byte) string {
	enc := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := enc(h) + "." + enc(c)
	return input + "." + enc(sign(input))
}

// publicKeyPEM is the provider's current RSA public key, as PEM and DER: the
// secret an HS256 confusion attack signs with.
func publicKeyPEM(t *testing.T, op *idptest.OP) (pemKey, der []byte, kid string) {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(op.Keys(), &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("key set: %v", err)
	}
	k := set.Keys[0]
	der, err := x509.MarshalPKIXPublicKey(k.Key.(*rsa.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), der, k.KeyID
}

func signUnknown(t *testing.T, c map[string]any) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), "not-the-providers"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(c)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := obj.CompactSerialize()
	return out
}

// TestJWTBearer: a JWT the provider issued is a bearer credential for the
// API, /acp and /mcp, as "<issuer>#<sub>"; every bad one is refused with
// the answer a wrong static token gets.
func TestJWTBearer(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	d, _ := bearerDaemon(t, op, clk, time.Hour)
	now := clk.Now()

	good := op.Mint(claims(op, now, nil))
	if a := do(t, http.MethodGet, d.URL+"/api/agents", good, ""); a.status != http.StatusOK {
		t.Fatalf("a valid JWT: %d %s", a.status, a.body)
	}
	m := me(t, d, good)
	if !m.SignedIn || m.Subject != subjectOf(op, "alice") || m.Via != "jwt" || len(m.Groups) != 1 || m.Groups[0] != "staff" || m.SignOut != "" {
		t.Fatalf("/auth/me with a JWT: %+v", m)
	}
	// The ACP and MCP mounts take it too.
	if a := do(t, http.MethodPost, d.ACPURL, good, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		"Accept", "application/json, text/event-stream"); a.status != http.StatusOK {
		t.Fatalf("ACP initialize with a JWT: %d %s", a.status, a.body)
	}
	if a := do(t, http.MethodPost, d.MCPURL, good, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		"Accept", "application/json, text/event-stream"); a.status != http.StatusOK {
		t.Fatalf("MCP initialize with a JWT: %d %s", a.status, a.body)
	}

	// The answer to a wrong static token is the reference shape.
	ref := do(t, http.MethodGet, d.URL+"/api/agents", "not-a-token", "")
	if ref.status != http.StatusUnauthorized || ref.errorCode(t) != codes.Unauthorized {
		t.Fatalf("a wrong static token: %d %s", ref.status, ref.body)
	}
	pemKey, der, kid := publicKeyPEM(t, op)
	hs256 := func(secret []byte) string {
		return handmade(map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}, claims(op, now, nil), func(in string) []byte {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte(in))
			return m.Sum(nil)
		})
	}
	bad := []struct{ name, token string }{
		{"expired", op.Mint(claims(op, now, map[string]any{"exp": now.Add(-5 * time.Minute).Unix()}))},
		{"not yet valid", op.Mint(claims(op, now, map[string]any{"nbf": now.Add(10 * time.Minute).Unix()}))},
		{"wrong audience", op.Mint(claims(op, now, map[string]any{"aud": "another-api"}))},
		{"wrong issuer", op.Mint(claims(op, now, map[string]any{"iss": "https://idp.elsewhere.example"}))},
		{"unknown key", signUnknown(t, claims(op, now, nil))},
		{"alg none", handmade(map[string]any{"alg": "none", "typ": "JWT", "kid": kid}, claims(op, now, nil), func(string) []byte { return nil })},
		{"HS256 with the public key (PEM)", hs256(pemKey)},
		{"HS256 with the public key (DER)", hs256(der)},
		{"a signature of another token", good[:strings.LastIndexByte(good, '.')] + "." + strings.Split(op.Mint(claims(op, now, map[string]any{"sub": "bob-id"})), ".")[2]},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			for _, url := range []string{d.URL + "/api/agents", d.ACPURL, d.MCPURL} {
				method := http.MethodGet
				if url != d.URL+"/api/agents" {
					method = http.MethodPost
				}
				a := do(t, method, url, c.token, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
				if a.status != http.StatusUnauthorized || a.errorCode(t) != codes.Unauthorized || a.errorShape(t) != ref.errorShape(t) {
					t.Fatalf("%s: %d %s, want the shape of %d %s", url, a.status, a.body, ref.status, ref.body)
				}
				if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("%s: WWW-Authenticate %q", url, a.header.Get("WWW-Authenticate"))
				}
			}
		})
	}
}

// TestJWTKeyRotation: a token signed with the provider's new key is
// accepted without a restart, once the key set is fetched again: at most
// once per 10 s, so within 15 s.
func TestJWTKeyRotation(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	d, _ := bearerDaemon(t, op, clk, time.Hour)
	if a := do(t, http.MethodGet, d.URL+"/api/agents", op.Mint(claims(op, clk.Now(), nil)), ""); a.status != http.StatusOK {
		t.Fatalf("before the rotation: %d %s", a.status, a.body)
	}
	clk.Advance(time.Second)
	op.Rotate()
	rotated := op.Mint(claims(op, clk.Now(), nil))
	if a := do(t, http.MethodGet, d.URL+"/api/agents", rotated, ""); a.status != http.StatusUnauthorized {
		t.Fatalf("a new key within 10 s of the last fetch: %d %s (the key set was fetched again too early)", a.status, a.body)
	}
	clk.Advance(idp.RefetchEvery)
	if a := do(t, http.MethodGet, d.URL+"/api/agents", rotated, ""); a.status != http.StatusOK {
		t.Fatalf("the rotated key after 10 s: %d %s", a.status, a.body)
	}
}

// TestJWTKeySetDown: while the provider's key set is down, the keys
// fetched before keep working up to jwks_max_age; then every JWT is
// answered 503 identity_unavailable (the shape of every error), and once
// the set is back, 200 again.
func TestJWTKeySetDown(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	const maxAge = time.Hour
	d, _ := bearerDaemon(t, op, clk, maxAge)
	get := func() answer {
		return do(t, http.MethodGet, d.URL+"/api/agents", op.Mint(claims(op, clk.Now(), nil)), "")
	}
	if a := get(); a.status != http.StatusOK {
		t.Fatalf("up: %d %s", a.status, a.body)
	}
	op.KeysDown(true)
	clk.Advance(maxAge - time.Minute)
	if a := get(); a.status != http.StatusOK {
		t.Fatalf("down, within jwks_max_age: %d %s", a.status, a.body)
	}
	clk.Advance(2 * time.Minute)
	a := get()
	ref := do(t, http.MethodGet, d.URL+"/api/agents", "not-a-token", "")
	if a.status != http.StatusServiceUnavailable || a.errorCode(t) != codes.IdentityUnavailable || a.errorShape(t) != ref.errorShape(t) || a.header.Get("Retry-After") == "" {
		t.Fatalf("down past jwks_max_age: %d %v %s", a.status, a.header, a.body)
	}
	op.KeysDown(false)
	clk.Advance(idp.RefetchEvery)
	if a := get(); a.status != http.StatusOK {
		t.Fatalf("back up: %d %s", a.status, a.body)
	}
}

// TestJWTStreamEndsWithTheToken: a stream opened with a JWT ends, revoked,
// when the token expires.
func TestJWTStreamEndsWithTheToken(t *testing.T) {
	op := idptest.StartOP(t, people)
	clk := clock.NewFake(time.Now())
	d, _ := bearerDaemon(t, op, clk, time.Hour)
	tok := op.Mint(claims(op, clk.Now(), map[string]any{"exp": clk.Now().Add(2 * time.Minute).Unix()}))
	a := do(t, http.MethodPost, d.URL+"/api/sessions", tok, `{}`)
	if a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	var created struct{ SessionID string }
	_ = json.Unmarshal(a.body, &created)
	stream := testkit.OpenSSE(t, d.URL+"/api/sessions/"+created.SessionID+"/events", http.Header{"Authorization": {"Bearer " + tok}})
	defer stream.Close()
	stream.Wait(t, 10*time.Second, "the session frame", testkit.IsKind("session"))
	clk.Advance(2 * time.Minute)
	end := stream.Wait(t, 10*time.Second, "the end frame", testkit.IsKind("end"))
	if end.Data["reason"] != "revoked" {
		t.Fatalf("end %v, want revoked", end.Data)
	}
}
