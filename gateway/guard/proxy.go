package guard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/surfaced/surfaced/identity"
)

// TrustedProxy is an authenticating reverse proxy in front of the daemon
// (oauth2-proxy and the like): on a connection from one of its addresses
// the subject is its Header, as sent, and the groups its GroupsHeader
// (comma-separated). The connection's own address decides (X-Forwarded-For
// and the like are never read). A request from anywhere else that carries
// either header is refused (401) and logged; a request from the proxy
// without the Header may still authenticate any other way.
type TrustedProxy struct {
	Header       string
	GroupsHeader string // "": no groups
	From         []netip.Prefix
}

// proxyPrefix begins the Credential of a trusted proxy's identity.
const proxyPrefix = "proxy:"

// maxGroupsHeader bounds the groups taken from a proxy's header.
const maxProxyGroups = 256

func (p *TrustedProxy) check() error {
	if p.Header == "" {
		return errors.New("no header")
	}
	if len(p.From) == 0 {
		return errors.New("no proxy address (from)")
	}
	for _, h := range []string{p.Header, p.GroupsHeader} {
		if h != "" && !validHeaderName(h) {
			return fmt.Errorf("%q is not a header name", h)
		}
	}
	switch strings.ToLower(p.Header) {
	case "authorization", "cookie", "host", "origin":
		return fmt.Errorf("%s cannot carry the subject", p.Header)
	}
	return nil
}

func validHeaderName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return h != ""
}

// trusts reports whether the connection comes from one of the proxy's
// addresses.
func (p *TrustedProxy) trusts(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, pre := range p.From {
		if pre.Contains(ip) {
			return true
		}
	}
	return false
}

// fromProxy applies the trusted proxy's rule: decided is false when the
// request carries neither header (authentication goes on the other ways).
func (g *Guard) fromProxy(r *http.Request) (id identity.Identity, decided bool, err error) {
	p := g.proxy
	subjects := r.Header.Values(p.Header)
	var groupVals []string
	if p.GroupsHeader != "" {
		groupVals = r.Header.Values(p.GroupsHeader)
	}
	if len(subjects) == 0 && len(groupVals) == 0 {
		return identity.Identity{}, false, nil
	}
	if !p.trusts(r.RemoteAddr) {
		g.log.Warn("refused: the trusted proxy's header from an address that is not the proxy's",
			"header", p.Header, "remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path), "claimed_subject", clip(strings.Join(subjects, ", ")))
		return identity.Identity{}, true, unauthorized("The request carries the " + p.Header + " header but does not come from the trusted proxy.")
	}
	if len(subjects) == 0 {
		return identity.Identity{}, false, nil // groups alone prove nothing
	}
	if len(subjects) > 1 {
		return identity.Identity{}, true, unauthorized("The proxy sent more than one " + p.Header + " header.")
	}
	subject := subjects[0]
	if err := checkSubject(subject); err != nil {
		g.log.Warn("refused: the trusted proxy's subject is not valid", "header", p.Header, "err", err, "remote", r.RemoteAddr)
		return identity.Identity{}, true, unauthorized("The proxy's " + p.Header + " header is not a valid subject.")
	}
	var groups []string
	for _, v := range groupVals {
		for g := range strings.SplitSeq(v, ",") {
			if g = strings.TrimSpace(g); g != "" && checkSubject(g) == nil && len(groups) < maxProxyGroups {
				groups = append(groups, g)
			}
		}
	}
	return identity.Identity{Subject: subject, Credential: proxyPrefix + subject, Groups: groups}, true, nil
}
