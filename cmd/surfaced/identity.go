package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity/idp"
)

// identitySources are the ways of signing in besides static tokens: the
// OpenID provider for browsers, the issuers of bearer JWTs, a trusted
// proxy. Each is nil when not configured.
type identitySources struct {
	signIn *idp.SignIn
	bearer *idp.Bearer
	proxy  *guard.TrustedProxy
	origin string // the daemon's public origin, from oidc.redirect_url
}

// any reports whether a source other than static tokens is configured
// (then the daemon makes no launch token of its own).
func (s identitySources) any() bool { return s.signIn != nil || s.bearer != nil || s.proxy != nil }

func (s identitySources) close() {
	if s.signIn != nil {
		s.signIn.Close()
	}
}

// newIdentitySources sets the sources up. Each provider must answer
// discovery now: one that does not is an error naming the setting and its
// line, as a config error is.
func newIdentitySources(ctx context.Context, f *config.File, log *slog.Logger) (identitySources, error) {
	var out identitySources
	client := &http.Client{Timeout: 15 * time.Second}
	if o := f.OIDC; o.Enabled() {
		iss, err := idp.Discover(ctx, idp.IssuerConfig{URL: o.Issuer, Discover: true, MaxAge: time.Duration(o.JWKSMaxAge),
			Skew: skew(o.ClockSkew), Client: client, Logger: log})
		if err != nil {
			return out, f.SettingError("oidc.issuer", err)
		}
		warm(ctx, iss, log)
		secret, err := f.OIDCClientSecret()
		if err != nil {
			return out, err
		}
		out.signIn, err = idp.NewSignIn(idp.SignInConfig{Issuer: iss, ClientID: o.ClientID, ClientSecret: secret,
			RedirectURL: o.RedirectURL, Scopes: o.Scopes, SubjectClaim: o.SubjectClaim, GroupsClaim: o.GroupsClaim,
			Lifetime: time.Duration(o.SessionLifetime), Recheck: time.Duration(o.RecheckInterval), Client: client, Logger: log})
		if err != nil {
			return out, f.SettingError("oidc", err)
		}
		if u, err := url.Parse(o.RedirectURL); err == nil {
			out.origin = u.Scheme + "://" + u.Host
		}
	}
	if len(f.JWT) > 0 {
		var entries []idp.BearerIssuer
		for i, j := range f.JWT {
			iss, err := idp.Discover(ctx, idp.IssuerConfig{URL: j.Issuer, JWKSURL: j.JWKSURL, MaxAge: time.Duration(j.JWKSMaxAge),
				Skew: skew(j.Skew()), Client: client, Logger: log})
			if err != nil {
				return out, f.SettingError(fmt.Sprintf("jwt[%d].issuer", i), err)
			}
			warm(ctx, iss, log)
			entries = append(entries, idp.BearerIssuer{Issuer: iss, Audience: j.Audience, SubjectClaim: j.SubjectClaim, GroupsClaim: j.GroupsClaim})
		}
		b, err := idp.NewBearer(entries)
		if err != nil {
			return out, f.SettingError("jwt", err)
		}
		out.bearer = b
	}
	if p := f.TrustedProxy; p.Enabled() {
		tp := &guard.TrustedProxy{Header: p.Header, GroupsHeader: p.GroupsHeader}
		for i, s := range p.From {
			pre, err := config.ParsePrefix(s)
			if err != nil {
				return out, f.SettingError(fmt.Sprintf("trusted_proxy.from[%d]", i), err)
			}
			tp.From = append(tp.From, pre)
		}
		out.proxy = tp
		log.Info("trusted proxy: the subject is taken from its header on its connections only", "header", p.Header, "from", prefixes(tp.From))
	}
	return out, nil
}

// warm fetches a provider's key set at start; a failure is logged (the set
// is fetched again on the first token).
func warm(ctx context.Context, iss *idp.Issuer, log *slog.Logger) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := iss.Keys().Refresh(wctx); err != nil {
		log.Warn("the identity provider's key set cannot be fetched at start; tokens are refused with identity_unavailable until it can", "issuer", iss.URL(), "err", err)
	}
}

// skew is the configured clock skew for idp (which reads 0 as its
// default): a configured 0 is none.
func skew(d config.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return time.Duration(d)
}

func prefixes(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
