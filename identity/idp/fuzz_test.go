package idp

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
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
