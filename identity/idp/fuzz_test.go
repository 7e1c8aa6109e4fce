package idp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"
)

// FuzzPeekIssuer: the one thing read from a token before its signature is
// checked never panics, and a token it accepts has the JWS shape.
func FuzzPeekIssuer(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	f.Add(enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"iss":"https://idp.example"}`)) + ".c2ln")
	f.Add("a.b.c")
	f.Add("..")
	f.Add(enc([]byte(`{}`)) + "." + enc([]byte(`{"iss":7}`)) + ".")
	f.Add(enc([]byte(`{}`)) + "." + enc([]byte(`{"iss":"x","iss":"y"}`)) + ".")
	f.Add(strings.Repeat("A", 100) + "." + strings.Repeat("B", 100) + ".")
	f.Fuzz(func(t *testing.T, token string) {
		iss, err := PeekIssuer(token)
		if err != nil {
			return
		}
		if iss == "" || !LooksLikeJWT(token) || strings.Count(token, ".") != 2 || len(token) > MaxTokenBytes {
			t.Fatalf("PeekIssuer(%q) = %q for a token of the wrong shape", token, iss)
		}
	})
}

// FuzzClaims: the subject, groups and dates read from a verified token's
// claims never panic, and what they return keeps the documented bounds.
func FuzzClaims(f *testing.F) {
	f.Add(`{"sub":"alice","groups":["a","b"],"nbf":1700000000,"iat":1.5}`, "sub", "groups")
	f.Add(`{"realm_access":{"roles":["x"]},"email":"a@b"}`, "email", "realm_access.roles")
	f.Add(`{"a":{"b":{"c":"deep"}}}`, "a.b.c", "a.b")
	f.Add(`{"sub":"\u0000","groups":"solo","nbf":-1,"iat":1e300}`, "sub", "groups")
	f.Add(`{"a.b":"dotted","a":{"b":"nested"}}`, "a.b", "a")
	f.Fuzz(func(t *testing.T, doc, subjectClaim, groupsClaim string) {
		var c claims
		if json.Unmarshal([]byte(doc), &c) != nil {
			return
		}
		iss := &Issuer{url: "https://idp.example"}
		if s, err := iss.subject(c, subjectClaim); err == nil {
			v := strings.TrimPrefix(s, "https://idp.example#")
			if v == s || v == "" || len(v) > maxSubjectValue || !utf8.ValidString(v) {
				t.Fatalf("subject %q out of bounds", s)
			}
		}
		gs := groups(c, groupsClaim)
		if len(gs) > maxGroups {
			t.Fatalf("%d groups", len(gs))
		}
		for _, g := range gs {
			if checkClaimValue(g) != nil {
				t.Fatalf("group %q out of bounds", g)
			}
		}
		for _, name := range []string{"nbf", "iat", "exp"} {
			if tm, ok, err := c.time(name); ok && err == nil && tm.Unix() < 0 {
				t.Fatalf("%s before 1970: %v", name, tm)
			}
		}
	})
}

// FuzzParseKeySet: whatever the key set endpoint answers, the parse never
// panics and keeps only public signing keys (never a symmetric key, a
// private key or an encryption key), or refuses the set with an error.
func FuzzParseKeySet(f *testing.F) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	for _, k := range []jose.JSONWebKey{
		{Key: &rk.PublicKey, KeyID: "r", Algorithm: "RS256", Use: "sig"},
		{Key: &ek.PublicKey, KeyID: "e", Algorithm: "ES256"},
		{Key: rk, KeyID: "private"},
		{Key: &rk.PublicKey, KeyID: "enc", Use: "enc"},
		{Key: []byte("0123456789abcdef"), KeyID: "oct", Algorithm: "HS256"},
	} {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"","e":""}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, err := parseKeySet(body)
		if err != nil {
			if len(keys) != 0 {
				t.Fatalf("keys beside an error: %v", err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no key and no error")
		}
		for _, k := range keys {
			if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
				t.Fatalf("kept %+v", k)
			}
			if _, sym := k.Key.([]byte); sym {
				t.Fatalf("kept a symmetric key %q", k.KeyID)
			}
		}
	})
}
