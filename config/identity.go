package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/surfaced/surfaced/identity"
)

// EnvOIDCClientSecret is the OpenID client's secret (over the file's
// client_secret and client_secret_file).
const EnvOIDCClientSecret = "SURFACED_OIDC_CLIENT_SECRET"

// The routes of the daemon a redirect_url may not take.
var reservedCallbackPaths = []string{"/", "/auth/login", "/auth/logout", "/auth/me", "/signin", "/healthz", "/readyz", "/metrics", "/index.html"}

func (v *validation) identity() {
	f := v.f
	o := f.OIDC
	if f.NoAuth && (o.Enabled() || len(f.JWT) > 0 || f.TrustedProxy.Enabled()) {
		v.add("no_auth", "turns authentication off; it cannot be combined with oidc, jwt or trusted_proxy")
	}
	if o.Enabled() || o.ClientID != "" || o.RedirectURL != "" {
		v.oidc()
	}
	seen := map[string]int{}
	for i, j := range f.JWT {
		path := fmt.Sprintf("jwt[%d]", i)
		switch {
		case j.Issuer == "":
			v.add(path+".issuer", "is required (the issuer exactly as its tokens' iss says)")
		default:
			if msg := checkProviderURL(j.Issuer); msg != "" {
				v.add(path+".issuer", "%q %s", j.Issuer, msg)
			}
			if first, dup := seen[j.Issuer]; dup {
				v.add(path+".issuer", "%q is already jwt[%d]", j.Issuer, first)
			}
			seen[j.Issuer] = i
		}
		if j.Audience == "" {
			v.add(path+".audience", "is required (what the tokens' aud must hold, e.g. surfaced)")
		}
		if j.JWKSURL != "" {
			if msg := checkProviderURL(j.JWKSURL); msg != "" {
				v.add(path+".jwks_url", "%q %s", j.JWKSURL, msg)
			}
		}
		v.keyTimings(path, j.JWKSMaxAge, j.Skew())
	}
	if p := f.TrustedProxy; p.Enabled() {
		if p.Header == "" {
			v.add("trusted_proxy.header", "is required (the header the proxy puts the subject in, e.g. X-Forwarded-User)")
		} else if msg := checkHeaderName(p.Header); msg != "" {
			v.add("trusted_proxy.header", "%q %s", p.Header, msg)
		}
		if p.GroupsHeader != "" {
			if msg := checkHeaderName(p.GroupsHeader); msg != "" {
				v.add("trusted_proxy.groups_header", "%q %s", p.GroupsHeader, msg)
			}
		}
		if len(p.From) == 0 {
			v.add("trusted_proxy.from", "is required: the proxy's addresses (e.g. [127.0.0.1/32])")
		}
		for i, s := range p.From {
			if _, err := ParsePrefix(s); err != nil {
				v.add(fmt.Sprintf("trusted_proxy.from[%d]", i), "%q is not an address or CIDR (127.0.0.1/32, 10.0.0.0/8, ::1)", s)
			}
		}
	}
	if len(f.Access) > 0 {
		ms, _ := f.manifests()
		names := make([]string, 0, len(ms))
		for _, m := range ms {
			names = append(names, m.Name)
		}
		for agent, r := range f.Access {
			path := "access." + agent
			if !slices.Contains(names, agent) {
				v.add(path, "names no configured agent (agents: %s)", strings.Join(names, ", "))
			}
			for i, s := range r.Subjects {
				if s == "" || strings.TrimSpace(s) != s {
					v.add(fmt.Sprintf("%s.subjects[%d]", path, i), "%q is not a subject", s)
				}
			}
			for i, g := range r.Groups {
				if g == "" || strings.TrimSpace(g) != g {
					v.add(fmt.Sprintf("%s.groups[%d]", path, i), "%q is not a group", g)
				}
			}
		}
	}
}

func (v *validation) oidc() {
	f := v.f
	o := f.OIDC
	if o.Issuer == "" {
		v.add("oidc.issuer", "is required (the provider's issuer URL, e.g. https://idp.example.com)")
	} else if msg := checkProviderURL(o.Issuer); msg != "" {
		v.add("oidc.issuer", "%q %s", o.Issuer, msg)
	}
	if o.ClientID == "" {
		v.add("oidc.client_id", "is required (the client registered at the provider)")
	}
	if o.ClientSecret != "" && o.ClientSecretFile != "" {
		v.add("oidc.client_secret_file", "client_secret and client_secret_file exclude each other; give one")
	}
	if o.ClientSecretFile != "" {
		if _, err := readSecret(o.ClientSecretFile); err != nil {
			v.add("oidc.client_secret_file", "%v", err)
		}
	}
	if o.RedirectURL == "" {
		v.add("oidc.redirect_url", "is required (this daemon's callback as the browser reaches it, e.g. https://surfaced.example.com/auth/callback)")
	} else if msg := v.checkRedirectURL(o.RedirectURL); msg != "" {
		v.add("oidc.redirect_url", "%q %s", o.RedirectURL, msg)
	}
	if o.SubjectClaim == "" {
		v.add("oidc.subject_claim", "is empty (default sub)")
	}
	if o.SessionLifetime < Duration(time.Minute) {
		v.add("oidc.session_lifetime", "must be at least 1m, got %s", o.SessionLifetime)
	}
	if o.RecheckInterval < Duration(10*time.Second) {
		v.add("oidc.recheck_interval", "must be at least 10s, got %s", o.RecheckInterval)
	}
	v.keyTimings("oidc", o.JWKSMaxAge, o.ClockSkew)
}

func (v *validation) keyTimings(path string, maxAge, skew Duration) {
	if maxAge != 0 && maxAge < Duration(time.Minute) {
		v.add(path+".jwks_max_age", "must be at least 1m, got %s", maxAge)
	}
	if skew < 0 || skew > Duration(10*time.Minute) {
		v.add(path+".clock_skew", "must be from 0 to 10m, got %s", skew)
	}
}

// Skew is the clock skew allowed on the issuer's tokens (1m unless set).
func (j JWTIssuer) Skew() Duration {
	if j.ClockSkew == nil {
		return Duration(time.Minute)
	}
	return *j.ClockSkew
}

// checkProviderURL returns what is wrong with an issuer or key set URL:
// https, or http to a loopback host (a provider on this machine).
func checkProviderURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil || u.Fragment != "" {
		return "is not an absolute URL (https://idp.example.com)"
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return "must be https (http only for a provider on this machine)"
		}
	default:
		return "must be https"
	}
	return ""
}

// checkRedirectURL returns what is wrong with oidc.redirect_url: an
// absolute URL of this daemon (a host the Host gate admits), https unless
// the host is loopback, whose path is the callback and is no other route.
func (v *validation) checkRedirectURL(s string) string {
	f := v.f
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
		return "is not an absolute URL without query or fragment (https://surfaced.example.com/auth/callback)"
	}
	host := strings.ToLower(u.Hostname())
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(host) {
			return "must be https (cookies of a sign-in must be Secure; http only on a loopback host)"
		}
	default:
		return "must be https"
	}
	p := u.Path
	for _, r := range reservedCallbackPaths {
		if p == r || p == "" {
			return fmt.Sprintf("has path %q, which is another route of the daemon; use /auth/callback", p)
		}
	}
	for _, pre := range []string{"/api/", "/agents/", "/app/", "/.well-known/", f.ACP.Path + "/", f.MCP.Path + "/"} {
		if strings.HasPrefix(p+"/", pre) {
			return fmt.Sprintf("has path %q, which is under another route of the daemon; use /auth/callback", p)
		}
	}
	if !v.hostAdmitted(host) {
		return fmt.Sprintf("is on host %q, which this daemon does not answer to: add it to allowed_hostnames (or listen on it)", host)
	}
	return ""
}

// hostAdmitted reports whether the Host gate admits host: listed in
// allowed_hostnames, the listen address's host, or a loopback name when
// listening on loopback or every address.
func (v *validation) hostAdmitted(host string) bool {
	f := v.f
	for _, h := range f.AllowedHostnames {
		if strings.EqualFold(strings.Trim(h, "[]"), strings.Trim(host, "[]")) {
			return true
		}
	}
	bound, _, err := net.SplitHostPort(f.Addr)
	if err != nil {
		return false
	}
	bound = strings.ToLower(bound)
	if bound == host {
		return true
	}
	wildcard := bound == "" || bound == "0.0.0.0" || bound == "::"
	return loopbackHost(host) && (wildcard || loopbackHost(bound))
}

func loopbackHost(h string) bool {
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func checkHeaderName(h string) string {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "is not a header name"
		}
	}
	switch strings.ToLower(h) {
	case "authorization", "cookie", "host", "origin":
		return "cannot carry the subject"
	}
	return ""
}

// ParsePrefix reads a trusted_proxy.from entry: a CIDR, or one address.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// readSecret reads a secret file's first line.
func readSecret(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%q is not an absolute path", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimRight(line, "\r \t")
	if line == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return line, nil
}

// OIDCClientSecret is the OpenID client's secret: client_secret (which the
// environment may have set), else client_secret_file's first line; "" for
// a public client (PKCE alone).
func (f *File) OIDCClientSecret() (string, error) {
	if f.OIDC.ClientSecret != "" {
		return f.OIDC.ClientSecret, nil
	}
	if f.OIDC.ClientSecretFile == "" {
		return "", nil
	}
	s, err := readSecret(f.OIDC.ClientSecretFile)
	if err != nil {
		return "", f.SettingError("oidc.client_secret_file", err)
	}
	return s, nil
}

// AccessRules are the access section as the runtime takes them (nil when
// absent: every agent for every subject).
func (f *File) AccessRules() *identity.Access {
	if len(f.Access) == 0 {
		return nil
	}
	rules := make(map[string]identity.Rule, len(f.Access))
	for agent, r := range f.Access {
		rules[agent] = identity.Rule{Subjects: r.Subjects, Groups: r.Groups}
	}
	return identity.NewAccess(rules)
}

// SettingError is err about the setting at path, with the file's line: a
// setting that validates but cannot work when the daemon starts (an
// issuer that does not answer discovery) is reported like a config error.
func (f *File) SettingError(path string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return err
	}
	return &FieldError{Source: f.source, Line: f.lineOf(path), Path: path, Msg: err.Error(), Err: err}
}
