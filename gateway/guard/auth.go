package guard

import (
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// The routes of browser sign-in and sign-out (the callback is the
// redirect URL's path).
const (
	// LoginPath starts a sign-in at the identity provider (GET; ?next= is
	// where the browser lands after, a path of this daemon).
	LoginPath = "/auth/login"
	// LogoutPath signs the browser out (POST): its sign-in ends, its
	// cookie is cleared.
	LogoutPath = "/auth/logout"
	// MePath says who the browser is signed in as (GET, JSON), and how it
	// signs in and out.
	MePath = "/auth/me"
	// resourceMetadataPath is the RFC 9728 document's well-known path; a
	// protected resource's document is at this path plus the resource's.
	resourceMetadataPath = "/.well-known/oauth-protected-resource"
)

// authRoute answers the guard's own routes; it reports whether r was one.
func (g *Guard) authRoute(w http.ResponseWriter, r *http.Request) bool {
	p := routePath(r)
	switch {
	case r.Method == http.MethodGet && p == MePath:
		g.me(w, r)
	case r.Method == http.MethodPost && p == LogoutPath:
		g.logout(w, r)
	case g.oidc != nil && r.Method == http.MethodGet && p == LoginPath:
		g.login(w, r)
	case g.oidc != nil && r.Method == http.MethodGet && p == g.oidc.CallbackPath():
		g.callback(w, r)
	case g.bearer != nil && len(g.resources) > 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(p, resourceMetadataPath):
		return g.resourceMetadata(w, r, strings.TrimPrefix(p, resourceMetadataPath))
	default:
		return false
	}
	return true
}

// attemptCookie is the cookie that binds a sign-in attempt to the browser
// that started it.
func (g *Guard) attemptCookie() string { return g.cookieName + "_signin" }

// secure reports whether the browser reaches the daemon over TLS: the
// connection is TLS, or the redirect URL is https (a TLS-terminating proxy
// in front).
func (g *Guard) secure(r *http.Request) bool {
	return r.TLS != nil || (g.oidc != nil && g.oidc.Secure())
}

// safeNext is a path of this daemon to land on: a relative reference that
// starts with one "/" (never "//" or "/\", which a browser reads as
// another host), else "/".
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if next[i] < 0x20 || next[i] == 0x7f || next[i] == '\\' {
			return "/"
		}
	}
	return next
}

// login starts a sign-in: the attempt's state goes into a cookie (SameSite
// Lax, so that the provider's cross-site redirect to the callback carries
// it; scoped to the callback's path) and the browser to the provider.
func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	authURL, state := g.oidc.Begin(next)
	http.SetCookie(w, &http.Cookie{
		Name:     g.attemptCookie(),
		Value:    state,
		Path:     g.oidc.CallbackPath(),
		MaxAge:   int(idp.AttemptWithin / time.Second),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   g.secure(r),
	})
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Location", authURL)
	w.WriteHeader(http.StatusSeeOther)
}

// callback completes a sign-in and lands the browser. The provider's
// redirect to the callback is a cross-site navigation: a SameSite=Strict
// cookie set on its answer would not be sent on a redirect within the same
// navigation, so the answer is a page of this daemon whose refresh makes
// a new, same-site navigation to where the browser lands.
func (g *Guard) callback(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	var bound string
	if c := r.CookiesNamed(g.attemptCookie()); len(c) > 0 {
		bound = c[0].Value
	}
	// The attempt is over whatever happens.
	http.SetCookie(w, &http.Cookie{Name: g.attemptCookie(), Value: "", Path: g.oidc.CallbackPath(), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: g.secure(r)})
	done, err := g.oidc.Finish(r.Context(), r.URL.Query(), bound)
	if err != nil {
		var fe *idp.FinishError
		if !errors.As(err, &fe) {
			fe = &idp.FinishError{Status: http.StatusInternalServerError, Msg: "The sign-in failed.", Err: err}
		}
		g.log.Warn("browser sign-in failed", "status", fe.Status, "err", fe.Err, "remote", r.RemoteAddr)
		if fe.Status == http.StatusServiceUnavailable {
			h.Set("Retry-After", "10")
		}
		if wantsHTML(r) {
			writeHTMLPage(w, fe.Status, "surfaced: sign-in failed", "<h1>Sign-in failed</h1><p>"+html.EscapeString(fe.Msg)+
				`</p><p><a href="`+LoginPath+`" data-testid="signin-again">Sign in again</a></p>`)
			return
		}
		writeError(w, r, fe.Status, codes.SigninFailed, fe.Msg)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     g.cookieName,
		Value:    done.Cookie,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   g.secure(r),
	})
	g.writeLanding(w, done.Identity, safeNext(done.Next))
}

// writeLanding is the same-site step: a page that moves on to next at once
// (a meta refresh: no script under the page's CSP), with a link for a
// browser that does not.
func (g *Guard) writeLanding(w http.ResponseWriter, id identity.Identity, next string) {
	e := html.EscapeString
	body := `<meta http-equiv="refresh" content="0;url=` + e(next) + `">` +
		`<h1>Signed in</h1><p>Signed in as <b data-testid="landing-subject">` + e(id.Subject) + `</b>. ` +
		`<a href="` + e(next) + `" data-testid="landing-continue">Continue</a></p>`
	writeHTMLPage(w, http.StatusOK, "surfaced: signed in", body)
}

// logout ends the browser's sign-in (and forgets a start URL's token in
// this browser): the cookie is cleared and, for a browser sign-in, its
// streams end. Only the daemon's own pages may sign a browser out (the
// Origin gate ran; Sec-Fetch-Site is checked too). 204, or 303 to "/" for
// a form.
func (g *Guard) logout(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		writeError(w, r, http.StatusForbidden, codes.OriginNotAllowed, "Sign-out is accepted only from this daemon's pages.")
		return
	}
	ended := 0
	for i, c := range r.CookiesNamed(g.cookieName) {
		if i == 4 {
			break
		}
		if g.oidc != nil && g.oidc.End(c.Value) {
			ended++
		}
	}
	http.SetCookie(w, &http.Cookie{Name: g.cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: g.secure(r)})
	g.log.Info("browser signed out", "sign_ins_ended", ended, "remote", r.RemoteAddr)
	if wantsHTML(r) {
		h.Set("Location", "/")
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Me is the answer of MePath.
type Me struct {
	SignedIn bool   `json:"signedIn"`
	Subject  string `json:"subject,omitempty"`
	// Name is the person's name for people to read, when the identity
	// provider gave one (a browser sign-in's name, preferred_username or
	// email claim).
	Name   string   `json:"name,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Via says how: "signin" (the identity provider, by cookie), "token"
	// (a static token, by cookie or bearer), "jwt", "proxy" or "none"
	// (authentication off).
	Via string `json:"via,omitempty"`
	// Expires is when the credential ends (RFC 3339), when it does.
	Expires string `json:"expires,omitempty"`
	// SignIn is where a browser signs in (when an identity provider is
	// configured); SignOut where it signs out (when it is signed in by
	// cookie).
	SignIn  string `json:"signIn,omitempty"`
	SignOut string `json:"signOut,omitempty"`
}

func (g *Guard) me(w http.ResponseWriter, r *http.Request) {
	var out Me
	if g.oidc != nil {
		out.SignIn = LoginPath
	}
	if id, err := g.Authenticate(r); err == nil {
		out.SignedIn, out.Subject, out.Groups = true, id.Subject, id.Groups
		out.Via = via(id)
		if out.Via == "signin" {
			out.Name = g.oidc.NameOf(id.Credential)
		}
		if !id.Expires.IsZero() {
			out.Expires = id.Expires.UTC().Format(time.RFC3339)
		}
		if len(r.Header.Values("Authorization")) == 0 && (out.Via == "signin" || out.Via == "token") {
			out.SignOut = LogoutPath
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if b, err := plainjson.Marshal(out); err == nil {
		_, _ = w.Write(append(b, '\n'))
	}
}

func via(id identity.Identity) string {
	switch {
	case id.Subject == identity.Anonymous && id.Credential == "":
		return "none"
	case strings.HasPrefix(id.Credential, idp.SignInPrefix):
		return "signin"
	case strings.HasPrefix(id.Credential, idp.CredentialPrefix):
		return "jwt"
	case strings.HasPrefix(id.Credential, proxyPrefix):
		return "proxy"
	}
	return "token"
}
