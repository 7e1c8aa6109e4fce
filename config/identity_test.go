package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const agentsYAML = "agents:\n  - {name: demo, command: [/bin/true]}\n  - {name: other, command: [/bin/true]}\n"

func TestIdentitySettings(t *testing.T) {
	src := agentsYAML + `oidc:
  issuer: https://idp.example.com
  client_id: surfaced
  client_secret: s3cret
  redirect_url: http://localhost:7800/auth/callback
  scopes: [openid, offline_access]
  session_lifetime: 8h
jwt:
  - issuer: https://idp.example.com
    audience: surfaced
  - issuer: http://127.0.0.1:9000
    audience: api
    jwks_url: http://127.0.0.1:9000/keys
    groups_claim: realm_access.roles
    clock_skew: 0s
trusted_proxy:
  header: X-Forwarded-User
  groups_header: X-Forwarded-Groups
  from: [127.0.0.1/32, "::1"]
access:
  demo: {subjects: [alice], groups: [staff]}
`
	f, err := parse(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if !f.OIDC.Enabled() || f.OIDC.SubjectClaim != "sub" || time.Duration(f.OIDC.SessionLifetime) != 8*time.Hour ||
		time.Duration(f.OIDC.RecheckInterval) != 5*time.Minute || len(f.OIDC.Scopes) != 2 {
		t.Errorf("oidc: %+v", f.OIDC)
	}
	if s, err := f.OIDCClientSecret(); err != nil || s != "s3cret" {
		t.Errorf("secret %q %v", s, err)
	}
	if len(f.JWT) != 2 || f.JWT[1].GroupsClaim != "realm_access.roles" || f.JWT[0].Skew() != Duration(time.Minute) || f.JWT[1].Skew() != 0 {
		t.Errorf("jwt: %+v", f.JWT)
	}
	a := f.AccessRules()
	if a == nil || !a.Restricted("demo") || a.Restricted("other") {
		t.Errorf("access: %+v", a)
	}
}

func TestIdentityErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"oidc without issuer", "oidc:\n  client_id: x\n  redirect_url: http://localhost:7800/auth/callback\n", "surfaced.yaml:1: oidc.issuer: is required"},
		{"oidc without client", "oidc:\n  issuer: https://idp.example.com\n  redirect_url: http://localhost:7800/auth/callback\n", "oidc.client_id: is required"},
		{"plain http issuer", "oidc:\n  issuer: http://idp.example.com\n  client_id: x\n  redirect_url: http://localhost:7800/auth/callback\n", `surfaced.yaml:2: oidc.issuer: "http://idp.example.com" must be https`},
		{"redirect on another host", "oidc:\n  issuer: https://idp.example.com\n  client_id: x\n  redirect_url: https://evil.example.com/auth/callback\n",
			`surfaced.yaml:4: oidc.redirect_url: "https://evil.example.com/auth/callback" is on host "evil.example.com", which this daemon does not answer to`},
		{"redirect over http to a name", "allowed_hostnames: [surfaced.example.com]\noidc:\n  issuer: https://idp.example.com\n  client_id: x\n  redirect_url: http://surfaced.example.com/auth/callback\n", "must be https"},
		{"redirect on the API", "oidc:\n  issuer: https://idp.example.com\n  client_id: x\n  redirect_url: http://localhost:7800/api/cb\n", "under another route"},
		{"redirect on /", "oidc:\n  issuer: https://idp.example.com\n  client_id: x\n  redirect_url: http://localhost:7800/\n", "another route"},
		{"two secrets", "oidc:\n  issuer: https://idp.example.com\n  client_id: x\n  client_secret: a\n  client_secret_file: /nonexistent\n  redirect_url: http://localhost:7800/auth/callback\n", "exclude each other"},
		{"short lifetime", "oidc:\n  issuer: https://idp.example.com\n  client_id: x\n  redirect_url: http://localhost:7800/auth/callback\n  session_lifetime: 10s\n", "oidc.session_lifetime: must be at least 1m"},
		{"jwt without audience", "jwt:\n  - issuer: https://idp.example.com\n", "surfaced.yaml:2: jwt[0].audience: is required"},
		{"jwt twice", "jwt:\n  - {issuer: https://idp.example.com, audience: a}\n  - {issuer: https://idp.example.com, audience: b}\n", "jwt[1].issuer: \"https://idp.example.com\" is already jwt[0]"},
		{"proxy without from", "trusted_proxy:\n  header: X-Forwarded-User\n", "trusted_proxy.from: is required"},
		{"proxy bad cidr", "trusted_proxy:\n  header: X-Forwarded-User\n  from: [10.0.0.0/33]\n", "trusted_proxy.from[0]: \"10.0.0.0/33\" is not an address or CIDR"},
		{"proxy on Authorization", "trusted_proxy:\n  header: Authorization\n  from: [127.0.0.1]\n", "cannot carry the subject"},
		{"access to no agent", agentsYAML + "access:\n  nosuch: {subjects: [a]}\n", "access.nosuch: names no configured agent (agents: demo, other)"},
		{"no_auth with oidc", "no_auth: true\noidc:\n  issuer: https://idp.example.com\n  client_id: x\n  redirect_url: http://localhost:7800/auth/callback\n", "no_auth: turns authentication off"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(t, c.src)
			wantErr(t, err, c.want)
		})
	}
}

func TestOIDCSecretSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := []byte("oidc:\n  issuer: https://idp.example.com\n  client_id: x\n  client_secret_file: secret\n  redirect_url: http://localhost:7800/auth/callback\n")
	f, err := Parse(src, "surfaced.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.OIDCClientSecret(); err != nil || s != "from-file" {
		t.Fatalf("file secret %q %v", s, err)
	}
	f.ApplyEnv(func(k string) string {
		if k == EnvOIDCClientSecret {
			return "from-env"
		}
		return ""
	})
	if s, _ := f.OIDCClientSecret(); s != "from-env" {
		t.Fatalf("env secret %q", s)
	}
	issuer := "https://other.example.com"
	if err := f.ApplyFlags(Flags{OIDCIssuer: &issuer}); err != nil || f.OIDC.Issuer != issuer {
		t.Fatalf("flag: %v %q", err, f.OIDC.Issuer)
	}
	if err := f.SettingError("oidc.issuer", os.ErrNotExist); err == nil || err.Error() != "surfaced.yaml:2: oidc.issuer: file does not exist" {
		t.Fatalf("SettingError: %v", err)
	}
}
