package guard

import (
	"errors"
	"net/http"
	"strings"
)

var errBadOrigin = errors.New(`not an origin: want scheme://host[:port] with scheme http or https and nothing after the port`)

// parsedOrigin is a serialized origin in canonical form.
type parsedOrigin struct {
	scheme string // "http" or "https"
	host   host
	port   string // "" for the scheme's default port; no leading zeros
}

func (o parsedOrigin) String() string {
	s := o.scheme + "://" + o.host.authority()
	if o.port != "" {
		s += ":" + o.port
	}
	return s
}

// parseOrigin parses an Origin header value (or a configured origin) into
// canonical form: lowercase scheme and host, default port dropped, leading
// zeros of the port dropped, the host's trailing dot dropped. "null",
// paths, queries, fragments, userinfo and other schemes are refused.
func parseOrigin(s string) (parsedOrigin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return parsedOrigin{}, errBadOrigin
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return parsedOrigin{}, errBadOrigin
	}
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '/', '?', '#', '@', '\\', '%':
			return parsedOrigin{}, errBadOrigin
		}
	}
	h, port, err := parseAuthority(rest)
	if err != nil {
		return parsedOrigin{}, err
	}
	return parsedOrigin{scheme: scheme, host: h, port: canonicalPort(scheme, port)}, nil
}

// canonicalPort drops the default port of the scheme and leading zeros.
// The port was already checked by parseAuthority.
func canonicalPort(scheme, port string) string {
	if port == "" {
		return ""
	}
	port = strings.TrimLeft(port, "0")
	switch {
	case port == "":
		return "0"
	case scheme == "http" && port == "80", scheme == "https" && port == "443":
		return ""
	}
	return port
}

// ownOrigin is the origin a page served by this daemon for r has:
// http:// (https:// when the connection is TLS) + the request's Host.
func ownOrigin(r *http.Request) (parsedOrigin, bool) {
	h, port, err := parseAuthority(r.Host)
	if err != nil {
		return parsedOrigin{}, false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return parsedOrigin{scheme: scheme, host: h, port: canonicalPort(scheme, port)}, true
}

// OriginOK is the Origin gate (cross-site request protection for every
// method, GET and WebSocket upgrades included). A request without Origin
// passes: browsers send it on every cross-origin fetch, EventSource and
// WebSocket, so its absence means a same-origin navigation or a
// non-browser client. A present Origin must equal, after normalization,
// an entry of BrowserOrigins or the daemon's own origin; the own origin
// counts only when the request also passes the Host gate, so OriginOK is
// safe to call alone. "null" and more than one Origin header are refused.
func (g *Guard) OriginOK(r *http.Request) bool {
	vals := r.Header.Values("Origin")
	switch len(vals) {
	case 0:
		return true
	case 1:
	default:
		return false
	}
	o, err := parseOrigin(vals[0])
	if err != nil {
		return false
	}
	if _, ok := g.browserOrigins[o]; ok {
		return true
	}
	own, ok := ownOrigin(r)
	return ok && own == o && g.HostOK(r)
}

// corsEligible reports whether an (already admitted) origin may read
// responses cross-origin: a loopback origin (http or https, any port) or
// an entry of BrowserOrigins.
func (g *Guard) corsEligible(origin string) bool {
	o, err := parseOrigin(origin)
	if err != nil {
		return false
	}
	if o.host.loopback() {
		return true
	}
	_, ok := g.browserOrigins[o]
	return ok
}
