package guard

import (
	"errors"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Handler is the net/http form of Middleware: the same gates, in the same
// order, around next. The identity is in the request context
// (IdentityFromContext).
func (g *Guard) Handler(public func(path string) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r2, ok := g.admit(w, r, public); ok {
			next.ServeHTTP(w, r2)
		}
	})
}

// admit runs, in order: the Host gate, the Origin gate, CORS preflight
// (answered here: preflights never carry credentials), the start URL
// exchange (GET of a public path with ?token=, and the POST of its
// confirmation page), and authentication
// (skipped for public paths, which still get the identity when the
// request has a valid credential). It either answers the request and
// returns false, or returns the request, its context carrying the
// identity, to pass on.
func (g *Guard) admit(w http.ResponseWriter, r *http.Request, public func(string) bool) (*http.Request, bool) {
	if !g.gates(w, r) {
		return nil, false
	}
	if isPreflight(r) {
		g.writePreflight(w, r)
		return nil, false
	}
	if !g.noAuth && r.Method == http.MethodPost && routePath(r) == SignInPath {
		g.confirmSignIn(w, r)
		return nil, false
	}
	if g.authRoute(w, r) {
		return nil, false
	}
	isPublic := public != nil && public(routePath(r))
	if isPublic && r.Method == http.MethodGet && !g.noAuth && r.URL.Query().Has("token") {
		g.exchange(w, r)
		return nil, false
	}
	id, err := g.Authenticate(r)
	if err != nil {
		if isPublic {
			return r, true
		}
		var ae *AuthError
		if !errors.As(err, &ae) {
			ae = unauthorized("Authentication failed.")
		}
		g.log.Debug("refused: not authenticated", "remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path), "reason", ae.Message)
		switch ae.Status {
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", g.challenge(r))
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "10")
		}
		writeError(w, r, ae.Status, ae.Code, ae.Message)
		return nil, false
	}
	return r.WithContext(identity.NewContext(r.Context(), id)), true
}

// gates runs the Host gate then the Origin gate, answering 403 on a
// refusal. It reports whether the request passed both.
func (g *Guard) gates(w http.ResponseWriter, r *http.Request) bool {
	if !g.HostOK(r) {
		g.log.Warn("refused: Host not allowed", "host", clip(r.Host), "remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path))
		writeError(w, r, http.StatusForbidden, codes.HostNotAllowed,
			"The Host "+strconv.Quote(clip(r.Host))+" is not one this daemon answers to; add it to allowed_hostnames if it is yours.")
		return false
	}
	if !g.OriginOK(r) {
		origin := clip(strings.Join(r.Header.Values("Origin"), ", "))
		g.log.Warn("refused: Origin not allowed", "origin", origin, "host", clip(r.Host), "remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path))
		writeError(w, r, http.StatusForbidden, codes.OriginNotAllowed,
			"The Origin "+strconv.Quote(origin)+" is not allowed; add it to browser_origins if it is yours.")
		return false
	}
	return true
}

// routePath is the path as echo's router matches it (the raw path when the
// request has one), so that `public` judges the same path that routing
// does.
func routePath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// ACP headers a browser client sends and reads.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Accept, Acp-Connection-Id, Acp-Session-Id, Surfaced-Agent, Last-Event-ID"
	corsExposeHeaders = "Acp-Connection-Id, Acp-Session-Id, WWW-Authenticate"
	corsMaxAge        = "600"
)

// writePreflight answers a CORS preflight whose Origin already passed the
// Origin gate: 204, and the allow headers when the origin is CORS-eligible
// (loopback or listed). No credentials mode: browser clients send a bearer
// token, the cookie is never offered cross-origin.
func (g *Guard) writePreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Origin")
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	origin := r.Header.Get("Origin")
	if g.corsEligible(origin) {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		// Private Network Access: a listed public origin reaching a
		// loopback daemon must be allowed explicitly.
		if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// corsHeaders adds the headers of a non-preflight CORS answer.
func (g *Guard) corsHeaders(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if g.corsEligible(origin) {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	}
}

// withoutToken is the request's own path and query, minus every "token"
// parameter, as a relative reference. Leading slashes are collapsed so the
// result can never read as a scheme-relative URL to another host.
func withoutToken(u *url.URL) string {
	p := "/" + strings.TrimLeft(u.EscapedPath(), "/")
	var kept []string
	for _, pair := range strings.Split(u.RawQuery, "&") {
		if pair == "" {
			continue
		}
		k, _, _ := strings.Cut(pair, "=")
		if key, err := url.QueryUnescape(k); err == nil && key == "token" {
			continue
		}
		kept = append(kept, pair)
	}
	if len(kept) > 0 {
		p += "?" + strings.Join(kept, "&")
	}
	return p
}

func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes {"error":{"code","message"}} with status.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	out, _ := plainjson.Marshal(b)
	_, _ = w.Write(append(out, '\n'))
}

func writeHTMLError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("<!doctype html><meta charset=utf-8><title>surfaced: not signed in</title>" +
		"<h1>Not signed in</h1><p>" + html.EscapeString(msg) + "</p>\n"))
}

// clip bounds attacker-controlled text before it reaches a log or a body.
func clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
