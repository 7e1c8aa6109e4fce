// Package guard holds the security gates every listener of the daemon
// uses (HTTP API, SSE, WebSocket, ACP, debug): a Host gate against DNS
// rebinding, an Origin gate against cross-site requests, token
// authentication with a browser cookie obtained from the start URL, token
// revocation that ends live streams, and CORS for the ACP mount.
//
// The gates are plain net/http functions (HostOK, OriginOK, Authenticate,
// Handler); Middleware and CORS wrap them for echo.
//
// # Host gate
//
// The request's host (r.Host: the Host header, the absolute-form request
// target, or HTTP/2 :authority) is parsed strictly: the port is ignored
// but must be a number up to 65535; IPv6 only in brackets and without a
// zone; case is folded; one trailing dot is dropped; userinfo, paths,
// escapes, empty labels and numeric-looking names ("127.1", "0x7f.1",
// which a browser would have normalized to a dotted quad) are refused. A
// missing Host is refused. X-Forwarded-Host, Forwarded and every other
// header are never read. The host passes when it is:
//
//   - listed in AllowedHostnames (names or IP literals); or
//   - the bound host (Config.Addr), when the listener is bound to one
//     address or name; or
//   - a loopback name — exactly "localhost", any address of 127.0.0.0/8,
//     or ::1 (also as ::ffff:127.x) — when bound to a loopback address,
//     to "localhost", or to a wildcard ("", 0.0.0.0, ::); or
//   - when bound to a wildcard, the IP literal of the local address the
//     connection arrived at: that is the concrete bound host, and an IP
//     literal cannot be rebound (a page whose origin is the literal was
//     served by us). Names reaching a wildcard listener from the network
//     must be listed in AllowedHostnames.
//
// "*.localhost" is not a loopback name here: browsers resolve it to
// loopback, but it is a distinct site that other local servers' pages can
// use, and neither spec nor the MCP SDKs admit it; list it explicitly.
// "0.0.0.0" as a Host is never admitted (it is the wildcard, not a host).
//
// Following the MCP Go SDK fix for CVE-2026-34742 (PR #760): when the
// connection's local address (http.LocalAddrContextKey) is loopback, a
// host that is not a loopback name, not the bound host and not listed is
// refused whatever the listen address.
//
// # Origin gate
//
// A request without Origin passes (a same-origin navigation or a
// non-browser client; browsers send Origin on every cross-origin fetch,
// EventSource and WebSocket). A present Origin must be one serialized
// http(s) origin equal, after normalization (lowercase scheme and host,
// default port dropped, leading zeros of the port dropped, trailing dot
// dropped), to an entry of BrowserOrigins or to the daemon's own origin:
// "http://" + the request's Host ("https://" on a TLS connection), which
// counts only when the Host passes the Host gate. "null", several Origin
// headers, paths and userinfo are refused. It applies to every method,
// GET (SSE) and WebSocket upgrades included. Behind a TLS-terminating
// proxy the browser's https origin is not the own origin (forwarded
// headers are not trusted): list it in BrowserOrigins.
//
// # Authentication
//
// "Authorization: Bearer <token>" (scheme case-insensitive), else the
// cookie (CookieName, default "surfaced_token"). A present Authorization
// header decides alone. Tokens are compared by SHA-256 digest against
// every known digest in constant time. Token sources: Config.Token
// (subject "local") and the tokens file (subjects as listed; "local" and
// "anonymous" are reserved there, one token may name one subject only,
// and a file entry may not repeat the launch token). A token in the query
// string is never API authentication; it is accepted only by the start URL
// exchange.
//
// Start URL exchange: GET of a public path with ?token=T and a valid
// token sets the cookie (HttpOnly, SameSite=Strict, Path=/, Secure on TLS,
// no Expires: it lasts for the browser session) and answers 303 to the
// same path and query without any token parameter (a relative Location;
// leading slashes collapsed so it cannot point at another host). An
// invalid token answers 401: an HTML page when the request accepts
// text/html, the JSON error otherwise. Both carry Cache-Control: no-store
// and Referrer-Policy: no-referrer. The cookie holds the token verbatim.
//
// A web page cannot use the exchange on a person's browser. A navigation
// the browser marks Sec-Fetch-Site: cross-site or same-site (another
// site's page, another port of the same host) is refused, 403 (a page, or
// cross_site_signin). A browser whose cookie is valid for another subject
// is not switched: it gets a confirmation page naming both subjects (JSON
// 409 signin_needs_confirmation without text/html), whose form posts to
// SignInPath; the POST switches the cookie only with a mark (an HMAC under
// a per-process key, valid 10 minutes) bound to the browser's current
// token and the new one, and not from another site. A navigation the
// person started (Sec-Fetch-Site: none), one from the daemon's pages
// (same-origin), a request without the header, a cookie of the same
// subject or one no longer valid: signed in at once. Browsers send
// Sec-Fetch-Site only to trustworthy origins (https, loopback): behind
// plain HTTP on a LAN address the first rule cannot apply, the second
// still does.
//
// # Identity providers
//
// Beside static tokens (docs/security.md, "Signing in with an identity
// provider"): Config.SignIn signs browsers in through an OpenID provider
// (LoginPath, the redirect URL's path as the callback, a landing page so
// that the SameSite=Strict cookie set on the cross-site callback is sent
// on a new same-site navigation, LogoutPath, MePath); Config.Bearer
// verifies bearer JWTs that are not static tokens (identity/idp);
// Config.TrustedProxy takes the subject from a header on connections from
// the proxy's addresses only, refusing and logging the header from
// anywhere else. Every refused credential is one 401 unauthorized; a JWT
// that cannot be checked because the provider's keys cannot be had is 503
// identity_unavailable. With Config.ProtectedResources the guard serves
// their OAuth protected resource metadata (RFC 9728) and names it in the
// 401's WWW-Authenticate.
//
// Under NoAuth everyone is identity.Identity{Subject: "anonymous"} and credentials
// are not looked at; the Host and Origin gates still apply.
//
// # Tokens file and revocation
//
// The file is polled (default every 250 ms): a change of identity, size or
// modification time triggers a read, and so does every poll while the file
// is younger than 2 s (a same-size rewrite within the timestamp
// granularity); the content is compared by hash before parsing. A new
// valid content replaces the set at once: a removed token stops
// authenticating on the next request, and every Context bound to a token
// that was removed or now names another subject is cancelled with cause
// identity.ErrRevoked. A file that becomes invalid, unreadable or missing keeps the
// last good set and logs one error per distinct failure.
//
// # CORS
//
// Preflights are answered by Middleware and by CORS (204; methods GET,
// POST, DELETE, OPTIONS; the ACP request headers; max-age 600;
// Access-Control-Allow-Private-Network when asked). Allow-Origin reflects
// the request's Origin only for loopback origins and BrowserOrigins, and
// only after the Origin gate admitted it: CORS never admits by itself.
// Credentials mode is off (no Access-Control-Allow-Credentials): a
// cross-origin browser client authenticates with a bearer token, never
// with the cookie.
package guard
