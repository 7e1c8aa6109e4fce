package idp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
)

// Sign-in defaults (config oidc.*).
const (
	DefaultLifetime = 12 * time.Hour
	DefaultRecheck  = 5 * time.Minute
	// AttemptWithin is how long a person has at the provider's login page
	// before the sign-in attempt is forgotten.
	AttemptWithin = 10 * time.Minute
	// maxAttempts bounds the sign-ins under way (anyone may start one);
	// past it the oldest is forgotten.
	maxAttempts = 10000
)

// SignInPrefix begins the Credential of a browser sign-in; CookiePrefix
// begins its cookie's value (a static token never does: it is told apart
// without a lookup).
const (
	SignInPrefix = "signin:"
	CookiePrefix = "s1."
)

// SignInConfig configures browser sign-in (config oidc).
type SignInConfig struct {
	// Issuer is the provider, set up with Discover (its endpoints are
	// needed).
	Issuer       *Issuer
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback the provider sends the browser back to.
	RedirectURL string
	// Scopes asked for (openid is added when missing).
	Scopes []string
	// SubjectClaim (default "sub") and GroupsClaim (default "groups") of
	// the ID token.
	SubjectClaim, GroupsClaim string
	// Lifetime is how long a sign-in lasts (session_lifetime, 12h).
	Lifetime time.Duration
	// Recheck is how often a sign-in is checked at the provider
	// (recheck_interval, 5m): a person the provider no longer admits is
	// signed out, and their streams end.
	Recheck time.Duration
	Client  *http.Client
	Clock   clock.Clock
	Logger  *slog.Logger
}

// SignIn is the OpenID Connect relying party for browsers: the
// authorization code flow with PKCE, state and nonce, and the sign-ins it
// made. A sign-in is held on this node, in memory, known by the SHA-256
// of its cookie value; it ends at its lifetime, when the person signs out,
// or when a re-check at the provider fails (the refresh token refused, or
// without one, the access token refused by userinfo or expired). It is an
// identity.Revoker for its credentials. Safe for concurrent use.
type SignIn struct {
	cfg      SignInConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	userinfo string
	log      *slog.Logger

	mu       sync.Mutex
	attempts map[string]*attempt // by state
	order    []string            // states, oldest first
	signins  map[string]*signin  // by credential
	closed   bool
}

type attempt struct {
	nonce, verifier, next string
	expires               time.Time
}

// signin is one browser's sign-in.
type signin struct {
	subject  string
	name     string // for people to read: the ID token's name, preferred_username or email
	groups   []string
	expires  time.Time
	token    *oauth2.Token // refresh token and access token for re-checks
	timer    clock.Timer
	watchers map[*watcher]struct{}
}

type watcher struct{ cancel context.CancelCauseFunc }

// NewSignIn returns the relying party.
func NewSignIn(cfg SignInConfig) (*SignIn, error) {
	if cfg.Issuer == nil || cfg.Issuer.provider == nil {
		return nil, errors.New("idp: sign-in needs an issuer set up by discovery")
	}
	if cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("idp: sign-in needs a client id and a redirect URL")
	}
	if cfg.SubjectClaim == "" {
		cfg.SubjectClaim = "sub"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Client == nil {
		cfg.Client = cfg.Issuer.client
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Issuer.clock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	scopes := slices.Clone(cfg.Scopes)
	if !slices.Contains(scopes, oidc.ScopeOpenID) {
		scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	}
	var doc struct {
		UserInfo string `json:"userinfo_endpoint"`
	}
	_ = cfg.Issuer.provider.Claims(&doc)
	return &SignIn{
		cfg: cfg,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: cfg.Issuer.provider.Endpoint(), Scopes: scopes},
		verifier: cfg.Issuer.verifier(cfg.ClientID),
		userinfo: doc.UserInfo,
		log:      cfg.Logger,
		attempts: map[string]*attempt{},
		signins:  map[string]*signin{},
	}, nil
}

// Issuer is the provider's issuer URL.
func (s *SignIn) Issuer() string { return s.cfg.Issuer.URL() }

// CallbackPath is the path of the redirect URL.
func (s *SignIn) CallbackPath() string {
	u, err := url.Parse(s.cfg.RedirectURL)
	if err != nil || u.Path == "" {
		return "/"
	}
	return u.Path
}

// Secure reports whether the redirect URL is https: the browser reaches the
// daemon over TLS (maybe through a proxy), so cookies are Secure.
func (s *SignIn) Secure() bool { return strings.HasPrefix(s.cfg.RedirectURL, "https://") }

// Begin starts a sign-in: it returns the provider's authorization URL to
// send the browser to, and the state, which the caller binds to the
// browser (a cookie the callback must carry: no one can complete a sign-in
// another browser started). next is where the browser lands after.
func (s *SignIn) Begin(next string) (authURL, state string) {
	a := &attempt{nonce: random(), verifier: oauth2.GenerateVerifier(), next: next,
		expires: s.cfg.Clock.Now().Add(AttemptWithin)}
	state = random()
	s.mu.Lock()
	s.forgetAttemptsLocked()
	s.attempts[state] = a
	s.order = append(s.order, state)
	s.mu.Unlock()
	return s.oauth.AuthCodeURL(state, oidc.Nonce(a.nonce), oauth2.S256ChallengeOption(a.verifier)), state
}

// forgetAttemptsLocked drops expired attempts, and the oldest past
// maxAttempts.
func (s *SignIn) forgetAttemptsLocked() {
	now := s.cfg.Clock.Now()
	i := 0
	for ; i < len(s.order); i++ {
		a, ok := s.attempts[s.order[i]]
		if ok && now.Before(a.expires) && len(s.order)-i < maxAttempts {
			break
		}
		delete(s.attempts, s.order[i])
	}
	s.order = slices.Delete(s.order, 0, i)
}

// Done is a sign-in completed by Finish.
type Done struct {
	// Cookie is the value of the browser's sign-in cookie.
	Cookie string
	// Identity is who signed in; it expires with the sign-in.
	Identity identity.Identity
	// Next is where the browser lands.
	Next string
}

// FinishError is a callback that does not complete a sign-in: Status is
// the answer's (400 for a request that is not a callback of an attempt of
// this browser, 403 for a provider's refusal or a token that does not
// verify, 503 when the provider cannot be reached).
type FinishError struct {
	Status int
	Msg    string // for the person
	Err    error  // for the log
}

func (e *FinishError) Error() string { return fmt.Sprintf("%d %s: %v", e.Status, e.Msg, e.Err) }

// Finish completes a sign-in from the callback's query and the state the
// browser carries (boundState, from Begin's cookie): it checks the state,
// exchanges the code (with the PKCE verifier), verifies the ID token (the
// key set, iss, aud, exp and iat with the skew, the nonce) and holds the
// new sign-in. Errors are *FinishError.
func (s *SignIn) Finish(ctx context.Context, q url.Values, boundState string) (Done, error) {
	if e := q.Get("error"); e != "" {
		return Done{}, &FinishError{Status: http.StatusForbidden,
			Msg: "The identity provider did not sign you in (" + clip(e) + ": " + clip(q.Get("error_description")) + ").",
			Err: fmt.Errorf("the provider answered %s", clip(e))}
	}
	state, code := q.Get("state"), q.Get("code")
	if state == "" || code == "" || len(q["state"]) != 1 || len(q["code"]) != 1 {
		return Done{}, &FinishError{Status: http.StatusBadRequest, Msg: "This is not a sign-in callback (it needs one state and one code).", Err: errors.New("no state or code")}
	}
	if boundState == "" || boundState != state {
		return Done{}, &FinishError{Status: http.StatusBadRequest,
			Msg: "This sign-in was not started in this browser, or its cookie was lost; sign in again.",
			Err: errors.New("the state does not match the browser's")}
	}
	s.mu.Lock()
	a, ok := s.attempts[state]
	delete(s.attempts, state) // one use
	s.mu.Unlock()
	if !ok || !s.cfg.Clock.Now().Before(a.expires) {
		return Done{}, &FinishError{Status: http.StatusBadRequest, Msg: "This sign-in took too long or was already used; sign in again.", Err: errors.New("no such attempt")}
	}
	hctx := context.WithValue(ctx, oauth2.HTTPClient, s.cfg.Client)
	hctx, cancel := context.WithTimeout(hctx, fetchTimeout)
	defer cancel()
	tok, err := s.oauth.Exchange(hctx, code, oauth2.VerifierOption(a.verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Done{}, &FinishError{Status: http.StatusForbidden, Msg: "The identity provider refused the sign-in code; sign in again.", Err: err}
		}
		return Done{}, &FinishError{Status: http.StatusServiceUnavailable, Msg: "The identity provider cannot be reached; try again.", Err: err}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Done{}, &FinishError{Status: http.StatusForbidden, Msg: "The identity provider gave no ID token.", Err: errors.New("no id_token")}
	}
	id, name, err := s.identityOf(ctx, raw, a.nonce)
	if err != nil {
		status := http.StatusForbidden
		if errors.Is(err, ErrUnavailable) {
			status = http.StatusServiceUnavailable
		}
		return Done{}, &FinishError{Status: status, Msg: "The identity provider's ID token was not accepted.", Err: err}
	}
	if name == "" {
		name = s.userinfoName(hctx, tok)
	}
	cookie := CookiePrefix + random()
	cred := credentialOf(cookie)
	now := s.cfg.Clock.Now()
	si := &signin{subject: id.Subject, name: name, groups: id.Groups, expires: now.Add(s.cfg.Lifetime), token: tok, watchers: map[*watcher]struct{}{}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Done{}, &FinishError{Status: http.StatusServiceUnavailable, Msg: "The daemon is shutting down.", Err: errors.New("closed")}
	}
	s.signins[cred] = si
	s.scheduleLocked(cred, si, now)
	s.mu.Unlock()
	s.log.Info("browser signed in through the identity provider", "subject", id.Subject, "groups", len(id.Groups), "until", si.expires.UTC().Format(time.RFC3339))
	return Done{Cookie: cookie, Identity: identity.Identity{Subject: si.subject, Credential: cred, Groups: si.groups, Expires: si.expires}, Next: a.next}, nil
}

// identityOf verifies an ID token: with a nonce for the callback's, and
// none for a refreshed one (which need not carry it). name is the person's
// name for people to read (name, preferred_username or email; "" when it
// has none).
func (s *SignIn) identityOf(ctx context.Context, raw, nonce string) (_ identity.Identity, name string, _ error) {
	tok, c, err := s.cfg.Issuer.verify(ctx, s.verifier, raw)
	if err != nil {
		return identity.Identity{}, "", err
	}
	if nonce != "" && tok.Nonce != nonce {
		return identity.Identity{}, "", refuse("the ID token's nonce is not this sign-in's", nil)
	}
	if len(tok.Audience) > 1 {
		var azp struct {
			AZP string `json:"azp"`
		}
		_ = tok.Claims(&azp)
		if azp.AZP != s.cfg.ClientID {
			return identity.Identity{}, "", refuse("the ID token is for several audiences and its azp is not this client", nil)
		}
	}
	subject, err := s.cfg.Issuer.subject(c, s.cfg.SubjectClaim)
	if err != nil {
		return identity.Identity{}, "", err
	}
	for _, claim := range []string{"name", "preferred_username", "email"} {
		var v string
		if raw, ok := c[claim]; ok && json.Unmarshal(raw, &v) == nil && checkClaimValue(v) == nil {
			name = v
			break
		}
	}
	return identity.Identity{Subject: subject, Groups: groups(c, s.cfg.GroupsClaim)}, name, nil
}

// userinfoName asks userinfo for the person's name when the ID token had
// none (providers leave profile claims out of ID tokens that come with an
// access token); "" when it cannot.
func (s *SignIn) userinfoName(ctx context.Context, tok *oauth2.Token) string {
	if s.userinfo == "" || tok.AccessToken == "" {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.userinfo, nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var c map[string]any
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(&c) != nil {
		return ""
	}
	for _, claim := range []string{"name", "preferred_username", "email"} {
		if v, ok := c[claim].(string); ok && checkClaimValue(v) == nil {
			return v
		}
	}
	return ""
}

// NameOf is the name, for people to read, of a sign-in credential's person
// ("" when unknown).
func (s *SignIn) NameOf(credential string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if si, ok := s.signins[credential]; ok {
		return si.name
	}
	return ""
}

// Lookup returns the identity of a sign-in cookie's value, while the
// sign-in lasts.
func (s *SignIn) Lookup(cookie string) (identity.Identity, bool) {
	if !strings.HasPrefix(cookie, CookiePrefix) || len(cookie) > 128 {
		return identity.Identity{}, false
	}
	cred := credentialOf(cookie)
	s.mu.Lock()
	defer s.mu.Unlock()
	si, ok := s.signins[cred]
	if !ok || !s.cfg.Clock.Now().Before(si.expires) {
		return identity.Identity{}, false
	}
	return identity.Identity{Subject: si.subject, Credential: cred, Groups: si.groups, Expires: si.expires}, true
}

// End signs a cookie's sign-in out (the browser's sign-out): it is
// forgotten and what it opened ends. It reports whether there was one.
func (s *SignIn) End(cookie string) bool {
	if !strings.HasPrefix(cookie, CookiePrefix) {
		return false
	}
	return s.revoke(credentialOf(cookie), "signed out")
}

// Context implements identity.Revoker for sign-in credentials: the
// context ends with cause identity.ErrRevoked when the sign-in ends
// (signed out, re-check failed, its lifetime over).
func (s *SignIn) Context(parent context.Context, id identity.Identity) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	release := func() { cancel(context.Canceled) }
	s.mu.Lock()
	si, ok := s.signins[id.Credential]
	if !ok || si.subject != id.Subject {
		s.mu.Unlock()
		cancel(identity.ErrRevoked)
		return ctx, release
	}
	w := &watcher{cancel: cancel}
	si.watchers[w] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(si.watchers, w)
		s.mu.Unlock()
	})
	return ctx, release
}

// scheduleLocked arms the sign-in's next event: a re-check, or its end.
func (s *SignIn) scheduleLocked(cred string, si *signin, now time.Time) {
	next := now.Add(s.cfg.Recheck)
	end := !next.Before(si.expires)
	if end {
		next = si.expires
	}
	si.timer = s.cfg.Clock.AfterFunc(next.Sub(now), func() {
		if end {
			s.revoke(cred, "its lifetime is over")
			return
		}
		s.recheck(cred)
	})
}

// revoke forgets a sign-in and ends what it opened.
func (s *SignIn) revoke(cred, why string) bool {
	s.mu.Lock()
	si, ok := s.signins[cred]
	if ok {
		delete(s.signins, cred)
		if si.timer != nil {
			si.timer.Stop()
		}
	}
	var cancels []context.CancelCauseFunc
	if ok {
		for w := range si.watchers {
			cancels = append(cancels, w.cancel)
		}
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	s.log.Info("browser sign-in ended", "subject", si.subject, "why", why, "streams_revoked", len(cancels))
	for _, c := range cancels {
		c(identity.ErrRevoked)
	}
	return true
}

// recheck asks the provider whether the person is still admitted: a
// refresh grant with the refresh token, or, without one, userinfo with the
// access token while it is valid. A refusal ends the sign-in; a provider
// that cannot be reached keeps it until the next re-check (or its end).
func (s *SignIn) recheck(cred string) {
	s.mu.Lock()
	si, ok := s.signins[cred]
	var tok *oauth2.Token
	if ok {
		tok = si.token
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), oauth2.HTTPClient, s.cfg.Client), fetchTimeout)
	defer cancel()
	refused, updated, err := s.ask(ctx, tok)
	switch {
	case refused != "":
		s.revoke(cred, refused)
		return
	case err != nil:
		s.log.Warn("a browser sign-in cannot be re-checked now; it stays until the next re-check", "subject", si.subject, "err", err)
	}
	if updated != nil {
		if raw, _ := updated.Extra("id_token").(string); raw != "" {
			id, _, err := s.identityOf(ctx, raw, "")
			switch {
			case errors.Is(err, ErrUnavailable):
			case err != nil:
				s.revoke(cred, "the renewed ID token was not accepted: "+err.Error())
				return
			case id.Subject != si.subject:
				s.revoke(cred, "the renewed ID token names another subject")
				return
			default:
				s.mu.Lock()
				si.groups = id.Groups
				s.mu.Unlock()
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.signins[cred]; !ok || cur != si || s.closed {
		return
	}
	if updated != nil {
		if updated.RefreshToken == "" {
			updated.RefreshToken = tok.RefreshToken
		}
		si.token = updated
	}
	s.scheduleLocked(cred, si, s.cfg.Clock.Now())
}

// ask re-checks at the provider: refused says why the provider no longer
// admits the person ("" when it does, or could not be asked: err).
func (s *SignIn) ask(ctx context.Context, tok *oauth2.Token) (refused string, updated *oauth2.Token, err error) {
	if tok.RefreshToken != "" {
		// An expired copy makes the token source refresh.
		old := &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Unix(1, 0)}
		nt, err := s.oauth.TokenSource(ctx, old).Token()
		var re *oauth2.RetrieveError
		switch {
		case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500:
			return "the provider refused to renew it (" + re.ErrorCode + ")", nil, nil
		case err != nil:
			return "", nil, err
		}
		return "", nt, nil
	}
	if s.userinfo == "" || tok.AccessToken == "" || !tok.Expiry.IsZero() && !s.cfg.Clock.Now().Before(tok.Expiry) {
		return "it cannot be re-checked (the provider gave no refresh token; ask for offline_access)", nil, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.userinfo, nil)
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return "", nil, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return "", nil, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "the provider's userinfo refused its access token", nil, nil
	}
	return "", nil, fmt.Errorf("userinfo answered %s", resp.Status)
}

// Close stops the re-checks (the sign-ins die with the process; their
// streams end with the server). Idempotent.
func (s *SignIn) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, si := range s.signins {
		if si.timer != nil {
			si.timer.Stop()
		}
	}
}

// SignedIn is the number of sign-ins held (for tests and metrics).
func (s *SignIn) SignedIn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.signins)
}

func credentialOf(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return SignInPrefix + hex.EncodeToString(sum[:])
}

// random is 256 random bits, base64url: safe in a URL and a cookie.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
