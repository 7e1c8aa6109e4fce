package guard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/identity/idp"
)

// SignInPath is where the sign-in confirmation page posts to.
const SignInPath = "/signin"

// confirmWithin is how long a confirmation page can be used.
const confirmWithin = 10 * time.Minute

// exchange turns GET <public page>?token=T into a browser-session cookie
// and a 303 to the same URL without the token, so the token leaves the
// address bar and the history. An invalid token gets a 401 (a page for a
// browser, JSON otherwise).
//
// A web page must not be able to sign a browser in, or switch it to
// another subject, by sending it to a start URL (the person would then type
// into a session someone else reads):
//
//   - a navigation the browser marks as coming from another site
//     (Sec-Fetch-Site: cross-site or same-site; a page on another port of
//     the same host is another site's page) is refused with a page that
//     says to open the link directly;
//   - a browser already signed in as another subject gets a confirmation
//     page naming both; only its form (a same-origin POST carrying a token
//     bound to this browser's current cookie) switches the cookie.
//
// A navigation the person started (typed, pasted, a bookmark, a link from
// another program: Sec-Fetch-Site none) or one from the daemon's own pages
// (same-origin) signs in at once, as does a request without the header (a
// non-browser client, or a browser over plain HTTP to a non-loopback
// address, which does not send it).
func (g *Guard) exchange(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	toks := r.URL.Query()["token"]
	var id identity.Identity
	ok := len(toks) == 1
	if ok {
		id, ok = g.lookup(toks[0])
	}
	if !ok {
		g.log.Info("start URL opened with an invalid token", "remote", r.RemoteAddr, "path", clip(r.URL.Path))
		h.Set("WWW-Authenticate", "Bearer")
		msg := "The token in this link is not valid (it may have been revoked, or the daemon restarted with a new one); open the start URL the daemon printed."
		if wantsHTML(r) {
			writeHTMLError(w, http.StatusUnauthorized, msg)
			return
		}
		writeError(w, r, http.StatusUnauthorized, codes.Unauthorized, msg)
		return
	}
	if !cookieSafe(toks[0]) {
		// Only a tokens-file token can get here: the file holds digests,
		// so the token's characters were never checked.
		writeError(w, r, http.StatusBadRequest, codes.TokenNotCookieSafe,
			"This token has characters a cookie cannot hold; use it as Authorization: Bearer, or choose a token of letters and digits.")
		return
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		g.log.Warn("start URL refused: opened from another site", "subject", id.Subject, "sec_fetch_site", site, "remote", r.RemoteAddr)
		msg := "This sign-in link was opened by another web site, which is not allowed: a page could otherwise sign your browser in as someone else. If the link is yours, paste it into the address bar."
		if wantsHTML(r) {
			writeHTMLPage(w, http.StatusForbidden, "surfaced: sign-in refused", "<h1>Sign-in refused</h1><p>"+html.EscapeString(msg)+"</p>")
			return
		}
		writeError(w, r, http.StatusForbidden, codes.CrossSiteSignin, msg)
		return
	}
	if cur, signedIn := g.cookieIdentity(r); signedIn && cur.Subject != id.Subject {
		g.log.Info("start URL of another subject: asking the browser to confirm", "subject", cur.Subject, "new_subject", id.Subject, "remote", r.RemoteAddr)
		next := withoutToken(r.URL)
		if !wantsHTML(r) {
			writeError(w, r, http.StatusConflict, codes.SigninNeedsConfirmation,
				"This browser is signed in as another subject; open the link in a browser to confirm the switch.")
			return
		}
		g.writeConfirmation(w, cur, id, toks[0], next)
		return
	}
	g.signIn(w, r, id, toks[0], withoutToken(r.URL))
}

// signIn sets the cookie and sends the browser on to next.
func (g *Guard) signIn(w http.ResponseWriter, r *http.Request, id identity.Identity, token, next string) {
	http.SetCookie(w, &http.Cookie{
		Name:     g.cookieName,
		Value:    token,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	})
	g.log.Info("browser signed in through the start URL", "subject", id.Subject, "remote", r.RemoteAddr)
	w.Header().Set("Location", next)
	w.WriteHeader(http.StatusSeeOther)
}

// cookieIdentity is who the browser's sign-in cookie says it is, when it
// holds a valid token or a browser sign-in. Several cookies of one name
// can arrive (another Path or Domain); any valid one will do, looking at a
// bounded number.
func (g *Guard) cookieIdentity(r *http.Request) (identity.Identity, bool) {
	for i, c := range r.CookiesNamed(g.cookieName) {
		if i == 4 {
			break
		}
		if strings.HasPrefix(c.Value, idp.CookiePrefix) {
			if g.oidc != nil {
				if id, ok := g.oidc.Lookup(c.Value); ok {
					return id, true
				}
			}
		}
		if id, ok := g.lookup(c.Value); ok {
			return id, true
		}
	}
	return identity.Identity{}, false
}

// writeConfirmation answers the confirmation page: who the browser is, who
// the link signs in as, and a form that posts the switch with a mark bound
// to this browser's current cookie.
func (g *Guard) writeConfirmation(w http.ResponseWriter, cur, next identity.Identity, token, to string) {
	mark := g.confirmMark(cur.Credential, next.Credential, g.clock.Now().Add(confirmWithin))
	// The form's POST must carry the page's origin for the Origin gate:
	// with no-referrer a browser sends "Origin: null". "origin" still
	// keeps the page's address (it holds the token) out of any Referer.
	w.Header().Set("Referrer-Policy", "origin")
	e := html.EscapeString
	body := "<h1>Switch to " + e(next.Subject) + "?</h1>" +
		"<p>This browser is signed in as <b>" + e(cur.Subject) + "</b>. The link you opened signs it in as <b>" + e(next.Subject) + "</b> instead: " +
		"what you do here afterwards, you do as " + e(next.Subject) + ". Switch only if you meant to.</p>" +
		`<form method="post" action="` + SignInPath + `">` +
		`<input type="hidden" name="token" value="` + e(token) + `">` +
		`<input type="hidden" name="next" value="` + e(to) + `">` +
		`<input type="hidden" name="confirm" value="` + e(mark) + `">` +
		`<button type="submit" data-testid="signin-switch">Sign in as ` + e(next.Subject) + `</button> ` +
		`<a href="/" data-testid="signin-stay">Stay ` + e(cur.Subject) + `</a></form>`
	writeHTMLPage(w, http.StatusOK, "surfaced: switch to "+next.Subject+"?", body)
}

// confirmSignIn takes the confirmation page's POST: the mark must have been
// made for this browser's current cookie and this token, recently, and the
// form must come from the daemon's own page.
func (g *Guard) confirmSignIn(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	refuse := func(msg string) {
		g.log.Warn("sign-in confirmation refused", "reason", msg, "remote", r.RemoteAddr)
		writeHTMLPage(w, http.StatusForbidden, "surfaced: sign-in refused", "<h1>Sign-in refused</h1><p>"+html.EscapeString(msg)+"</p>")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		refuse("The confirmation was not sent from this daemon's page.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		refuse("The confirmation could not be read.")
		return
	}
	token := r.PostForm.Get("token")
	id, ok := g.lookup(token)
	if !ok || !cookieSafe(token) {
		refuse("The token of the link is not valid (any more); open the start URL again.")
		return
	}
	cur, _ := g.cookieIdentity(r)
	if !g.checkMark(r.PostForm.Get("confirm"), cur.Credential, id.Credential) {
		refuse("This confirmation expired or was not made for this browser; open the link again.")
		return
	}
	next, err := url.Parse(r.PostForm.Get("next"))
	if err != nil || !strings.HasPrefix(next.Path, "/") {
		next = &url.URL{Path: "/"}
	}
	g.signIn(w, r, id, token, withoutToken(next))
}

// confirmMark binds a confirmation to the browser's current token (by id,
// "" when it has none), the new one and an expiry: hex HMAC, a dot, the
// expiry in Unix seconds.
func (g *Guard) confirmMark(curID, nextID string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return g.mac(curID, nextID, exp) + "." + exp
}

func (g *Guard) checkMark(mark, curID, nextID string) bool {
	sum, exp, ok := strings.Cut(mark, ".")
	if !ok {
		return false
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || g.clock.Now().After(time.Unix(t, 0)) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(sum), []byte(g.mac(curID, nextID, exp))) == 1
}

func (g *Guard) mac(parts ...string) string {
	m := hmac.New(sha256.New, g.markKey[:])
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// newMarkKey is the per-process key of confirmation marks.
func newMarkKey() (k [32]byte) {
	_, _ = rand.Read(k[:])
	return k
}

func writeHTMLPage(w http.ResponseWriter, status int, title, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("<!doctype html><meta charset=utf-8><title>" + html.EscapeString(title) + "</title>" + body + "\n"))
}
