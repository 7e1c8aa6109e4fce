package guard

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/clock"
)

// DefaultCookieName is the cookie the start URL exchange sets.
const DefaultCookieName = "surfaced_token"

// DefaultPollInterval is how often the tokens file is checked for changes.
const DefaultPollInterval = 250 * time.Millisecond

// Config configures a Guard. The zero value is not usable: New needs Addr
// and one of Token, TokensFile, SignIn, Bearer, TrustedProxy or NoAuth.
type Config struct {
	// Addr is the listen address as bound, host:port ("127.0.0.1:7800",
	// ":7800", "[::1]:41234"). Its host decides which Host headers pass.
	Addr string
	// AllowedHostnames are extra Host names (or IP literals) admitted:
	// bare hosts without scheme, port, path or wildcard.
	AllowedHostnames []string
	// BrowserOrigins are exact origins (scheme://host[:port]) admitted
	// besides the daemon's own, and made readable through CORS.
	BrowserOrigins []string
	// Token is the per-launch (or --token/SURFACED_TOKEN) token; its
	// subject is "local". Empty: no launch token.
	Token string
	// TokensFile names a JSON file {"tokens":[{"subject","sha256"}]},
	// reread on change. Empty: no file.
	TokensFile string
	// NoAuth admits everyone as subject "anonymous" (the Host and Origin
	// gates still apply). New logs a loud warning.
	NoAuth bool
	// CookieName is the name of the browser cookie; "" means
	// DefaultCookieName.
	CookieName string
	// PollInterval is how often TokensFile is checked; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives warnings and refusals; nil means slog.Default().
	Logger *slog.Logger

	// SignIn, when set, signs browsers in with an OpenID provider: the
	// guard serves LoginPath, its callback (the redirect URL's path) and
	// the landing step, and its sign-ins authenticate by the cookie.
	SignIn *idp.SignIn
	// Bearer, when set, verifies bearer tokens that are not static tokens
	// as JWTs of its issuers.
	Bearer *idp.Bearer
	// TrustedProxy, when set, takes the subject from a header on
	// connections from the proxy's addresses.
	TrustedProxy *TrustedProxy
	// ProtectedResources are path prefixes (the MCP mount) whose 401
	// answers name their OAuth protected resource metadata (RFC 9728),
	// which the guard serves at /.well-known/oauth-protected-resource<prefix>
	// when Bearer is set.
	ProtectedResources []string
	// ResourceScopes are the scopes the resource metadata says a client
	// asks for (scopes_supported; nil: openid, profile, email).
	ResourceScopes []string
	// PublicOrigin is the daemon's origin as browsers and clients reach it
	// (scheme://host[:port]), for the resource metadata; "" derives it
	// from each request.
	PublicOrigin string
	// Clock ends the streams of credentials that expire and tells the
	// time the sign-in confirmation's mark expires by (nil: the wall
	// clock).
	Clock clock.Clock
}

// AuthError is an authentication failure, ready to be written as an HTTP
// error answer.
type AuthError struct {
	Status  int    // 401 (503 when the identity provider's keys are unavailable)
	Code    string // "unauthorized" ("identity_unavailable")
	Message string // one clear sentence
}

func (e *AuthError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func unauthorized(msg string) *AuthError {
	return &AuthError{Status: http.StatusUnauthorized, Code: codes.Unauthorized, Message: msg}
}

// Guard holds the security gates shared by every listener. It is safe for
// concurrent use.
type Guard struct {
	log            *slog.Logger
	bind           binding
	allowedHosts   map[host]struct{}
	browserOrigins map[parsedOrigin]struct{}
	noAuth         bool
	cookieName     string
	launch         *tokenEntry // nil without Config.Token
	tokensFile     string
	markKey        [32]byte // signs the sign-in confirmation page's form
	oidc           *idp.SignIn
	bearer         *idp.Bearer
	proxy          *TrustedProxy
	resources      []string
	resourceScopes []string
	publicOrigin   string
	clock          clock.Clock
	refusals       *refusalLog

	file atomic.Pointer[tokenSet] // nil without a tokens file

	mu      sync.Mutex                       // serializes installs with Context registration
	watches map[string]map[*watcher]struct{} // Credential → live contexts

	// owned by the poll goroutine
	stamp       fileStamp
	contentSum  [sha256.Size]byte
	lastPollErr string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// watcher is one live Context bound to a token.
type watcher struct {
	subject string
	cancel  context.CancelCauseFunc
}

// New validates cfg and returns a Guard. With a TokensFile it starts a
// goroutine that watches the file until Close.
func New(cfg Config) (*Guard, error) {
	g := &Guard{
		log:            cfg.Logger,
		noAuth:         cfg.NoAuth,
		cookieName:     cfg.CookieName,
		tokensFile:     cfg.TokensFile,
		allowedHosts:   map[host]struct{}{},
		browserOrigins: map[parsedOrigin]struct{}{},
		watches:        map[string]map[*watcher]struct{}{},
		markKey:        newMarkKey(),
		oidc:           cfg.SignIn,
		bearer:         cfg.Bearer,
		proxy:          cfg.TrustedProxy,
		publicOrigin:   strings.TrimSuffix(cfg.PublicOrigin, "/"),
		resourceScopes: cfg.ResourceScopes,
		clock:          cfg.Clock,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.clock == nil {
		g.clock = clock.Real{}
	}
	g.refusals = newRefusalLog(g.log)
	if g.resourceScopes == nil {
		g.resourceScopes = []string{"openid", "profile", "email"}
	}
	for _, p := range cfg.ProtectedResources {
		if p = strings.TrimSuffix(p, "/"); p == "" || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("guard: protected resource %q must be a path", p)
		}
		g.resources = append(g.resources, strings.TrimSuffix(p, "/"))
	}
	if g.proxy != nil {
		if err := g.proxy.check(); err != nil {
			return nil, fmt.Errorf("guard: trusted proxy: %w", err)
		}
	}
	if g.cookieName == "" {
		g.cookieName = DefaultCookieName
	}
	if err := (&http.Cookie{Name: g.cookieName, Value: "x"}).Valid(); err != nil {
		return nil, fmt.Errorf("guard: cookie name %q: %w", g.cookieName, err)
	}
	var err error
	if g.bind, err = parseBinding(cfg.Addr); err != nil {
		return nil, fmt.Errorf("guard: listen address %q must be host:port as bound: %w", cfg.Addr, err)
	}
	for _, s := range cfg.AllowedHostnames {
		h, err := parseAllowedHostname(s)
		if err != nil {
			return nil, fmt.Errorf("guard: allowed hostname %q: %w", s, err)
		}
		g.allowedHosts[h] = struct{}{}
	}
	for _, s := range cfg.BrowserOrigins {
		o, err := parseOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("guard: browser origin %q: %w (like https://app.example.com or http://localhost:5173)", s, err)
		}
		g.browserOrigins[o] = struct{}{}
	}
	if cfg.NoAuth {
		g.log.Warn("AUTHENTICATION IS OFF (--no-auth): every request that passes the Host and Origin gates acts as subject \"anonymous\"",
			"addr", cfg.Addr, "reachable_beyond_this_machine", g.bind.kind != bindLoopback)
		return g, nil
	}
	if cfg.Token == "" && cfg.TokensFile == "" && cfg.SignIn == nil && cfg.Bearer == nil && cfg.TrustedProxy == nil {
		return nil, errors.New("guard: no credential configured: set a token, a tokens file, an identity provider, a trusted proxy, or no-auth explicitly")
	}
	if cfg.Token != "" {
		if !cookieSafe(cfg.Token) {
			return nil, fmt.Errorf("guard: the token must be 1 to %d printable ASCII characters without space, quote, comma, semicolon or backslash", maxTokenLen)
		}
		if len(cfg.Token) < 16 {
			g.log.Warn("the token is short and guessable; use at least 16 random characters (a launch token has 32 hex digits)", "length", len(cfg.Token))
		}
		e := newTokenEntry(cfg.Token, identity.Local)
		g.launch = &e
	}
	if cfg.TokensFile != "" {
		// Stat before reading: a change in between leaves an older stamp,
		// which the first poll sees as a change.
		if fi, err := os.Stat(cfg.TokensFile); err == nil {
			g.stamp = fileStamp{info: fi, modTime: fi.ModTime(), size: fi.Size()}
		}
		data, err := os.ReadFile(cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("guard: tokens file: %w", err)
		}
		set, err := parseTokensFile(cfg.TokensFile, data, g.launch)
		if err != nil {
			return nil, fmt.Errorf("guard: %w", err)
		}
		g.contentSum = sha256.Sum256(data)
		g.file.Store(set)
		if len(set.entries) == 0 && g.launch == nil {
			g.log.Warn("the tokens file lists no tokens and there is no launch token: nobody can sign in until the file gains an entry", "file", cfg.TokensFile)
		}
		every := cfg.PollInterval
		if every <= 0 {
			every = DefaultPollInterval
		}
		g.stop, g.done = make(chan struct{}), make(chan struct{})
		go g.watchFile(every)
	}
	return g, nil
}

func parseAllowedHostname(s string) (host, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		h, port, err := parseAuthority(s)
		if err == nil && port != "" {
			err = errBadHostname
		}
		return h, err
	}
	if strings.ContainsAny(s, "/:*@") && strings.Count(s, ":") < 2 {
		return host{}, errors.New("must be a bare hostname or IP address, without scheme, port, path or wildcard")
	}
	if strings.Count(s, ":") >= 2 { // an IPv6 literal written without brackets
		h, _, err := parseAuthority("[" + s + "]")
		return h, err
	}
	return parseHostname(s)
}

// Close stops the tokens-file watcher and waits for it. Idempotent.
func (g *Guard) Close() {
	g.closeOnce.Do(func() {
		if g.stop != nil {
			close(g.stop)
			<-g.done
		}
	})
}

func (g *Guard) watchFile(every time.Duration) {
	defer close(g.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.poll()
		}
	}
}

// install swaps in a new set from the tokens file and cancels, with cause
// identity.ErrRevoked, every Context whose token left the file or now names another
// subject. Holding mu across the swap and the scan means a Context
// registered concurrently is either seen here or checked against the new
// set.
func (g *Guard) install(set *tokenSet) {
	var revoke []context.CancelCauseFunc
	g.mu.Lock()
	old := g.file.Swap(set)
	for id, ws := range g.watches {
		subject, ok := g.subjectOfLocked(id)
		for w := range ws {
			if !ok || w.subject != subject {
				revoke = append(revoke, w.cancel)
				delete(ws, w)
			}
		}
		if len(ws) == 0 {
			delete(g.watches, id)
		}
	}
	g.mu.Unlock()
	added, removed := diffSets(old, set)
	g.log.Info("tokens file reloaded", "file", g.tokensFile, "tokens", len(set.entries), "added", added, "removed", removed, "streams_revoked", len(revoke))
	for _, cancel := range revoke {
		cancel(identity.ErrRevoked)
	}
}

func diffSets(old, cur *tokenSet) (added, removed int) {
	if old == nil {
		return len(cur.entries), 0
	}
	for id, s := range cur.byID {
		if was, ok := old.byID[id]; !ok || was != s {
			added++
		}
	}
	for id, s := range old.byID {
		if cs, ok := cur.byID[id]; !ok || cs != s {
			removed++
		}
	}
	return added, removed
}

// subjectOfLocked is the subject a Credential currently authenticates as.
func (g *Guard) subjectOfLocked(id string) (string, bool) {
	if g.launch != nil && id == g.launch.id {
		return g.launch.subject, true
	}
	if set := g.file.Load(); set != nil {
		s, ok := set.byID[id]
		return s, ok
	}
	return "", false
}

// lookup finds the identity of a presented token.
func (g *Guard) lookup(token string) (identity.Identity, bool) {
	if token == "" || len(token) > maxTokenLen {
		return identity.Identity{}, false
	}
	sum := sha256.Sum256([]byte(token))
	d := wordsOf(&sum)
	var launchHit int
	if g.launch != nil {
		launchHit = match([]tokenEntry{*g.launch}, &d) + 1 // 1 on a hit, 0 otherwise
	}
	fileHit := -1
	var set *tokenSet
	if set = g.file.Load(); set != nil {
		fileHit = match(set.entries, &d)
	}
	switch {
	case launchHit == 1:
		return identity.Identity{Subject: g.launch.subject, Credential: g.launch.id}, true
	case fileHit >= 0:
		e := set.entries[fileHit]
		return identity.Identity{Subject: e.subject, Credential: e.id}, true
	}
	return identity.Identity{}, false
}

// Authenticate finds who r is, in this order:
//
//  1. the trusted proxy's header, when the guard has one: on a connection
//     from the proxy it decides alone; from anywhere else it is refused;
//  2. "Authorization: Bearer <token>": a static token, else (when the guard
//     has a Bearer) a JWT of a configured issuer. A present Authorization
//     header decides alone (a bad one is not rescued by a good cookie);
//  3. the cookie: a static token set by the start URL exchange, or a
//     browser sign-in.
//
// A token in the query string is never accepted here. Under NoAuth
// everyone is subject "anonymous". Errors are *AuthError: 401 unauthorized
// for every refused credential, 503 identity_unavailable when a JWT cannot
// be checked because the provider's keys cannot be had.
func (g *Guard) Authenticate(r *http.Request) (identity.Identity, error) {
	if g.noAuth {
		return identity.Identity{Subject: identity.Anonymous}, nil
	}
	if g.proxy != nil {
		if id, decided, err := g.fromProxy(r); decided {
			return id, err
		}
	}
	if hs := r.Header.Values("Authorization"); len(hs) > 0 {
		if len(hs) > 1 {
			return identity.Identity{}, unauthorized("The request carries more than one Authorization header; send exactly one.")
		}
		scheme, tok, ok := strings.Cut(hs[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return identity.Identity{}, unauthorized("The Authorization header must be \"Bearer <token>\".")
		}
		tok = strings.TrimLeft(tok, " ")
		if id, ok := g.lookup(tok); ok {
			return id, nil
		}
		if g.bearer != nil && idp.LooksLikeJWT(tok) {
			return g.verifyJWT(r, tok)
		}
		return identity.Identity{}, unauthorized("The bearer token is not valid.")
	}
	cookies := r.CookiesNamed(g.cookieName)
	if len(cookies) == 0 {
		if r.URL != nil && r.URL.Query().Has("token") {
			return identity.Identity{}, unauthorized("A token in the query string is accepted only when opening a page; send Authorization: Bearer <token> instead.")
		}
		if g.oidc != nil {
			return identity.Identity{}, unauthorized("No credential: send Authorization: Bearer <token>, or sign in at " + LoginPath + ".")
		}
		return identity.Identity{}, unauthorized("No credential: send Authorization: Bearer <token>, or open the start URL once in this browser.")
	}
	if id, ok := g.cookieIdentity(r); ok {
		return id, nil
	}
	if g.oidc != nil {
		return identity.Identity{}, unauthorized("The sign-in cookie is not valid (it expired, was signed out or revoked); sign in again at " + LoginPath + ".")
	}
	return identity.Identity{}, unauthorized("The sign-in cookie is not valid (its token may have been revoked); open the start URL again.")
}

// verifyJWT checks a bearer JWT.
func (g *Guard) verifyJWT(r *http.Request, tok string) (identity.Identity, error) {
	id, err := g.bearer.Verify(r.Context(), tok)
	if err == nil {
		return id, nil
	}
	var refusal *idp.Refusal
	switch {
	case errors.As(err, &refusal):
		g.refusals.jwt(r, refusal.Reason)
		if refusal.Expired {
			return identity.Identity{}, unauthorized("The bearer token has expired; get a new one from the identity provider.")
		}
		return identity.Identity{}, unauthorized("The bearer token is not valid.")
	case errors.Is(err, idp.ErrUnavailable):
		g.refusals.unavailable(err)
		return identity.Identity{}, &AuthError{Status: http.StatusServiceUnavailable, Code: codes.IdentityUnavailable,
			Message: "The identity provider's keys cannot be fetched right now, so the bearer token cannot be checked; try again later."}
	default: // the request's context ended during a key fetch
		return identity.Identity{}, unauthorized("The bearer token could not be checked.")
	}
}

// Context returns a child of parent that is cancelled with cause
// identity.ErrRevoked as soon as id's credential stops proving id.Subject:
// a static token removed from the tokens file (or moved to another
// subject), a browser sign-in signed out, re-checked and refused, or over,
// and any credential at its Expires (a JWT's exp). When that already
// happened, the context comes back cancelled. The launch token, a trusted
// proxy's header and NoAuth identities are never revoked. The CancelFunc
// releases the registration and must be called, as with
// context.WithCancel.
func (g *Guard) Context(parent context.Context, id identity.Identity) (context.Context, context.CancelFunc) {
	if g.noAuth {
		ctx, cancel := context.WithCancel(parent)
		return ctx, cancel
	}
	var ctx context.Context
	var release context.CancelFunc
	switch {
	case strings.HasPrefix(id.Credential, idp.SignInPrefix) && g.oidc != nil:
		ctx, release = g.oidc.Context(parent, id)
	case strings.HasPrefix(id.Credential, idp.CredentialPrefix), strings.HasPrefix(id.Credential, proxyPrefix):
		ctx, release = context.WithCancel(parent)
	default:
		ctx, release = g.tokenContext(parent, id)
	}
	if id.Expires.IsZero() {
		return ctx, release
	}
	// The credential's end ends what it opened.
	ctx, cancel := context.WithCancelCause(ctx)
	expire := func() { cancel(identity.ErrRevoked) }
	left := id.Expires.Sub(g.clock.Now())
	if left <= 0 {
		expire()
		return ctx, func() { cancel(context.Canceled); release() }
	}
	t := g.clock.AfterFunc(left, expire)
	return ctx, func() { t.Stop(); cancel(context.Canceled); release() }
}

// tokenContext is Context for a static token.
func (g *Guard) tokenContext(parent context.Context, id identity.Identity) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	release := func() { cancel(context.Canceled) }
	g.mu.Lock()
	subject, ok := g.subjectOfLocked(id.Credential)
	if !ok || subject != id.Subject {
		g.mu.Unlock()
		cancel(identity.ErrRevoked)
		return ctx, release
	}
	if g.launch != nil && id.Credential == g.launch.id {
		g.mu.Unlock()
		return ctx, release
	}
	w := &watcher{subject: id.Subject, cancel: cancel}
	ws := g.watches[id.Credential]
	if ws == nil {
		ws = map[*watcher]struct{}{}
		g.watches[id.Credential] = ws
	}
	ws[w] = struct{}{}
	g.mu.Unlock()
	// Unregister however the context ends: release, parent done, revoked.
	context.AfterFunc(ctx, func() { g.unwatch(id.Credential, w) })
	return ctx, release
}

func (g *Guard) unwatch(id string, w *watcher) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ws := g.watches[id]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(g.watches, id)
		}
	}
}

// watching counts live registered contexts (for tests).
func (g *Guard) watching() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, ws := range g.watches {
		n += len(ws)
	}
	return n
}
