package guard

import (
	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/identity"
)

// Middleware runs the gates for every request, in this order:
//
//  1. Host gate: 403 host_not_allowed.
//  2. Origin gate: 403 origin_not_allowed.
//  3. CORS preflight (OPTIONS with Origin and Access-Control-Request-Method):
//     answered 204 here, without authentication (browsers never send
//     credentials on a preflight); handlers never see a preflight.
//  4. Start URL exchange: GET of a public path with ?token=T sets the
//     cookie and answers 303 to the URL without the token, or 401; 403
//     when another site sent the browser; a confirmation page when the
//     browser is signed in as another subject (its form posts to
//     SignInPath).
//  5. Authentication: 401 unauthorized with WWW-Authenticate: Bearer.
//     Public paths skip this step only; they still carry the identity
//     when the request has a valid credential.
//
// public receives the path as echo's router sees it (the raw, still
// escaped path when the request has one); nil means no public paths.
// Errors are written directly as {"error":{"code","message"}}, so the
// application's HTTPErrorHandler is not involved.
func (g *Guard) Middleware(public func(path string) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r, ok := g.admit(c.Response(), c.Request(), public)
			if !ok {
				return nil
			}
			c.SetRequest(r)
			return next(c)
		}
	}
}

// IdentityOf returns the identity Middleware established for c (kept in
// the request's context, so it survives echo.WrapHandler and is the same
// one identity.FromContext sees); the zero Identity when there is none (a
// public path without a valid credential).
func IdentityOf(c echo.Context) identity.Identity {
	id, _ := identity.FromContext(c.Request().Context())
	return id
}

// CORS is the CORS layer for the ACP mount. It runs the Host and Origin
// gates itself (CORS never admits by itself: an Origin the gate refuses
// gets 403 even here), answers preflights (204 with the ACP request
// headers allowed), and on other requests from a CORS-eligible origin
// (loopback, or listed in BrowserOrigins) sets Access-Control-Allow-Origin
// and exposes Acp-Connection-Id, Acp-Session-Id and WWW-Authenticate.
// Credentials mode is not enabled: browser ACP clients authenticate with a
// bearer token. Place it before Middleware so that 401 answers are
// readable by the browser client too; after Middleware it still works,
// but then Middleware answers the preflights (identically).
func (g *Guard) CORS() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			w, r := c.Response(), c.Request()
			if !g.gates(w, r) {
				return nil
			}
			if isPreflight(r) {
				g.writePreflight(w, r)
				return nil
			}
			g.corsHeaders(w, r)
			return next(c)
		}
	}
}
