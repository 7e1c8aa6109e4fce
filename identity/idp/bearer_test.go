package idp_test

import (
	"context"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/clock"
)

type bearerFixture struct {
	ks  *keyServer
	clk *clock.Fake
	b   *idp.Bearer
	iss *idp.Issuer
}

func newBearerFixture(t *testing.T, maxAge time.Duration) *bearerFixture {
	t.Helper()
	ks := newKeyServer(t)
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	iss, err := idp.Discover(context.Background(), idp.IssuerConfig{URL: ks.srv.URL, Clock: clk, MaxAge: maxAge, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := idp.NewBearer([]idp.BearerIssuer{{Issuer: iss, Audience: "surfaced"}})
	if err != nil {
		t.Fatal(err)
	}
	return &bearerFixture{ks: ks, clk: clk, b: b, iss: iss}
}

func (f *bearerFixture) claims(over map[string]any) map[string]any {
	now := f.clk.Now()
	c := map[string]any{"iss": f.ks.srv.URL, "sub": "alice", "aud": "surfaced", "exp": unix(now.Add(time.Hour)), "iat": unix(now), "groups": []string{"staff", "dev"}}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func refused(t *testing.T, err error, what string) *idp.Refusal {
	t.Helper()
	var r *idp.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("%s: got %v, want a refusal", what, err)
	}
	return r
}

func TestBearerAcceptsAValidToken(t *testing.T) {
	f := newBearerFixture(t, 0)
	tok := sign(t, f.ks.current(), f.claims(nil))
	id, err := f.b.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != f.ks.srv.URL+"#alice" {
		t.Errorf("subject %q", id.Subject)
	}
	if len(id.Groups) != 2 || id.Groups[0] != "staff" || id.Groups[1] != "dev" {
		t.Errorf("groups %q", id.Groups)
	}
	if !id.Expires.Equal(f.clk.Now().Add(time.Hour)) {
		t.Errorf("expires %v", id.Expires)
	}
	if !strings.HasPrefix(id.Credential, idp.CredentialPrefix) {
		t.Errorf("credential %q", id.Credential)
	}
	// An EC key verifies too, and an audience list that holds ours.
	ec := newECKey(t, "ec1")
	f.ks.rotate(ec)
	f.clk.Advance(idp.RefetchEvery)
	if _, err := f.b.Verify(context.Background(), sign(t, ec, f.claims(map[string]any{"aud": []string{"other", "surfaced"}}))); err != nil {
		t.Fatalf("ES256 with an audience list: %v", err)
	}
}

func TestBearerRefusals(t *testing.T) {
	f := newBearerFixture(t, 0)
	k := f.ks.current()
	now := f.clk.Now()
	pub := &k.key.(*rsa.PrivateKey).PublicKey
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := func(secret []byte) string {
		tok := unsigned(map[string]any{"alg": "HS256", "typ": "JWT", "kid": k.kid}, f.claims(nil), nil)
		input := tok[:strings.LastIndexByte(tok, '.')]
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		return unsigned(map[string]any{"alg": "HS256", "typ": "JWT", "kid": k.kid}, f.claims(nil), m.Sum(nil))
	}
	cases := []struct {
		name    string
		token   string
		expired bool
	}{
		{"expired", sign(t, k, f.claims(map[string]any{"exp": unix(now.Add(-2 * time.Minute))})), true},
		{"not yet valid", sign(t, k, f.claims(map[string]any{"nbf": unix(now.Add(10 * time.Minute))})), false},
		{"issued in the future", sign(t, k, f.claims(map[string]any{"iat": unix(now.Add(10 * time.Minute))})), false},
		{"wrong audience", sign(t, k, f.claims(map[string]any{"aud": "other"})), false},
		{"no audience", sign(t, k, f.claims(map[string]any{"aud": nil})), false},
		{"wrong issuer", sign(t, k, f.claims(map[string]any{"iss": "https://elsewhere.example"})), false},
		{"issuer with a trailing slash", sign(t, k, f.claims(map[string]any{"iss": f.ks.srv.URL + "/"})), false},
		{"no subject", sign(t, k, f.claims(map[string]any{"sub": nil})), false},
		{"numeric subject", sign(t, k, f.claims(map[string]any{"sub": 42})), false},
		{"empty subject", sign(t, k, f.claims(map[string]any{"sub": ""})), false},
		{"no expiry", sign(t, k, f.claims(map[string]any{"exp": nil})), false},
		{"unknown key", sign(t, newRSAKey(t, "evil"), f.claims(nil)), false},
		{"known kid, other key", sign(t, signingKey{kid: k.kid, alg: k.alg, key: newRSAKey(t, "x").key}, f.claims(nil)), false},
		{"alg none", unsigned(map[string]any{"alg": "none", "typ": "JWT", "kid": k.kid}, f.claims(nil), nil), false},
		{"alg none, no kid", unsigned(map[string]any{"alg": "none"}, f.claims(nil), nil), false},
		{"HS256 with the PEM public key", hs(pemKey), false},
		{"HS256 with the DER public key", hs(der), false},
		{"not a JWT", "a.b", false},
		{"garbage parts", "e30.e30.e30", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.b.Verify(context.Background(), c.token)
			r := refused(t, err, c.name)
			if r.Expired != c.expired {
				t.Errorf("Expired = %v, want %v (%s)", r.Expired, c.expired, r.Reason)
			}
		})
	}
	// Within the skew, an expired token still passes.
	if _, err := f.b.Verify(context.Background(), sign(t, k, f.claims(map[string]any{"exp": unix(now.Add(-30 * time.Second))}))); err != nil {
		t.Fatalf("a token expired 30s ago, within the 1m skew: %v", err)
	}
}

// TestKeyRotation: a token signed by a key the set does not hold yet makes
// the set be fetched again, at most once per RefetchEvery; the rotated key
// is accepted once it is fetched, without a restart.
func TestKeyRotation(t *testing.T) {
	f := newBearerFixture(t, 0)
	ctx := context.Background()
	if _, err := f.b.Verify(ctx, sign(t, f.ks.current(), f.claims(nil))); err != nil {
		t.Fatal(err)
	}
	if n := f.ks.served.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	k2 := newRSAKey(t, "k2")
	f.ks.rotate(k2)
	f.clk.Advance(time.Second)
	tok := sign(t, k2, f.claims(nil))
	refused(t, mustFail(f.b.Verify(ctx, tok)), "a new key within RefetchEvery of the last fetch")
	if n := f.ks.served.Load(); n != 1 {
		t.Fatalf("%d fetches within RefetchEvery, want 1", n)
	}
	for range 5 { // a flood of unknown keys fetches nothing more
		refused(t, mustFail(f.b.Verify(ctx, sign(t, newRSAKey(t, "flood"), f.claims(nil)))), "flood")
	}
	if n := f.ks.served.Load(); n != 1 {
		t.Fatalf("%d fetches after a flood of unknown keys, want 1", n)
	}
	f.clk.Advance(idp.RefetchEvery)
	if _, err := f.b.Verify(ctx, tok); err != nil {
		t.Fatalf("the rotated key after RefetchEvery: %v", err)
	}
	if n := f.ks.served.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	// The old key still verifies while the set publishes it.
	if _, err := f.b.Verify(ctx, sign(t, f.ks.keys[1], f.claims(nil))); err != nil {
		t.Fatalf("the previous key: %v", err)
	}
}

// TestKeySetDown: cached keys keep verifying while the key set cannot be
// fetched, up to the max age; then the answer is ErrUnavailable, and once
// the set is back, tokens verify again.
func TestKeySetDown(t *testing.T) {
	const maxAge = time.Hour
	f := newBearerFixture(t, maxAge)
	ctx := context.Background()
	k1 := f.ks.current()
	if _, err := f.b.Verify(ctx, sign(t, k1, f.claims(nil))); err != nil {
		t.Fatal(err)
	}
	f.ks.setDown(true)
	f.clk.Advance(45 * time.Minute) // past the background refresh, within the max age
	if _, err := f.b.Verify(ctx, sign(t, k1, f.claims(nil))); err != nil {
		t.Fatalf("cached keys within jwks_max_age: %v", err)
	}
	// A key the cache does not hold, while the set cannot be fetched, may
	// be a rotated one: unavailable, not refused.
	f.clk.Advance(idp.RefetchEvery)
	if _, err := f.b.Verify(ctx, sign(t, newRSAKey(t, "k9"), f.claims(nil))); !errors.Is(err, idp.ErrUnavailable) {
		t.Fatalf("an unknown key while the set is down: %v, want ErrUnavailable", err)
	}
	f.clk.Advance(maxAge)
	_, err := f.b.Verify(ctx, sign(t, k1, f.claims(nil)))
	if !errors.Is(err, idp.ErrUnavailable) {
		t.Fatalf("past jwks_max_age: %v, want ErrUnavailable", err)
	}
	f.ks.setDown(false)
	f.clk.Advance(idp.RefetchEvery)
	if _, err := f.b.Verify(ctx, sign(t, k1, f.claims(nil))); err != nil {
		t.Fatalf("the set back: %v", err)
	}
}

func TestKeySetNeverFetched(t *testing.T) {
	f := newBearerFixture(t, 0)
	f.ks.setDown(true)
	if _, err := f.b.Verify(context.Background(), sign(t, f.ks.current(), f.claims(nil))); !errors.Is(err, idp.ErrUnavailable) {
		t.Fatalf("no key ever fetched: %v, want ErrUnavailable", err)
	}
}

func TestDiscoveryFailsAtStart(t *testing.T) {
	ks := newKeyServer(t)
	if _, err := idp.Discover(context.Background(), idp.IssuerConfig{URL: ks.srv.URL + "/nothing-here"}); err == nil {
		t.Fatal("an issuer without a discovery document was accepted")
	}
	// A document that names another issuer.
	if _, err := idp.Discover(context.Background(), idp.IssuerConfig{URL: strings.Replace(ks.srv.URL, "127.0.0.1", "localhost", 1)}); err == nil {
		t.Fatal("a discovery document of another issuer was accepted")
	}
}

func TestGroupsClaimShapes(t *testing.T) {
	f := newBearerFixture(t, 0)
	k := f.ks.current()
	cases := []struct {
		claim  string
		claims map[string]any
		want   []string
	}{
		{"groups", map[string]any{"groups": "solo"}, []string{"solo"}},
		{"groups", map[string]any{"groups": []any{"a", 3, "", "b"}}, []string{"a", "b"}},
		{"groups", map[string]any{"groups": nil}, nil},
		{"realm_access.roles", map[string]any{"realm_access": map[string]any{"roles": []string{"admin"}}}, []string{"admin"}},
		{"https://example.com/groups", map[string]any{"https://example.com/groups": []string{"ns"}}, []string{"ns"}},
	}
	for _, c := range cases {
		b, err := idp.NewBearer([]idp.BearerIssuer{{Issuer: f.iss, Audience: "surfaced", GroupsClaim: c.claim}})
		if err != nil {
			t.Fatal(err)
		}
		id, err := b.Verify(context.Background(), sign(t, k, f.claims(c.claims)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(id.Groups, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s %v: groups %q, want %q", c.claim, c.claims, id.Groups, c.want)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func mustFail(_ any, err error) error { return err }
