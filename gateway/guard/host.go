package guard

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// host is a parsed, canonical host: either an IP literal or a DNS name.
// The zero value is "no host".
type host struct {
	ip   netip.Addr // valid for a literal: unmapped, without zone
	name string     // lowercase, without the trailing dot; "" for a literal
}

// key is the canonical spelling used to compare hosts and to key sets:
// "localhost", "127.0.0.1", "::1" (no brackets).
func (h host) key() string {
	if h.ip.IsValid() {
		return h.ip.String()
	}
	return h.name
}

// authority is the host as it appears in a URL: IPv6 literals bracketed.
func (h host) authority() string {
	if h.ip.Is6() {
		return "[" + h.ip.String() + "]"
	}
	return h.key()
}

// loopback reports whether the host names this machine's loopback interface.
// Only the exact name "localhost" counts among names: "*.localhost" is not
// admitted by default (see the package documentation).
func (h host) loopback() bool {
	if h.ip.IsValid() {
		return h.ip.IsLoopback()
	}
	return h.name == "localhost"
}

var (
	errEmptyHost   = errors.New("empty host")
	errBadPort     = errors.New("port must be a number from 0 to 65535")
	errBadIPv6     = errors.New("an IPv6 address must be in brackets, without a zone")
	errBadHostname = errors.New("not a valid hostname or IP address")
)

// maxAuthority bounds what is parsed at all: a DNS name is at most 253 bytes.
const maxAuthority = 253 + len("[]:65535") + 1

// parseAuthority splits "host[:port]" (the form of a Host header and of an
// origin's authority) strictly: no userinfo, path, escapes or spaces; IPv6
// only in brackets; one trailing dot tolerated; case folded. The port is
// returned as written ("" when absent) after checking it is a port number.
func parseAuthority(s string) (host, string, error) {
	if s == "" {
		return host{}, "", errEmptyHost
	}
	if len(s) > maxAuthority {
		return host{}, "", errBadHostname
	}
	var hostPart, port string
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return host{}, "", errBadIPv6
		}
		ip, err := netip.ParseAddr(s[1:end])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return host{}, "", errBadIPv6
		}
		rest := s[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return host{}, "", errBadHostname
			}
			port = rest[1:]
		}
		if err := checkPort(port); err != nil {
			return host{}, "", err
		}
		return host{ip: ip.Unmap()}, port, nil
	}
	hostPart = s
	if i := strings.IndexByte(s, ':'); i >= 0 {
		hostPart, port = s[:i], s[i+1:]
		if strings.IndexByte(port, ':') >= 0 {
			return host{}, "", errBadIPv6
		}
		if err := checkPort(port); err != nil {
			return host{}, "", err
		}
	}
	h, err := parseHostname(hostPart)
	return h, port, err
}

// parseHostname parses a bare host: an IPv4 literal or a DNS name.
func parseHostname(s string) (host, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" {
		return host{}, errEmptyHost
	}
	if onlyDigitsAndDots(s) { // only then can it be IPv4 (and ParseAddr's error allocates)
		if ip, err := netip.ParseAddr(s); err == nil {
			return host{ip: ip}, nil
		}
		return host{}, errBadHostname
	}
	if strings.IndexByte(s, ':') >= 0 {
		return host{}, errBadIPv6
	}
	if len(s) > 253 {
		return host{}, errBadHostname
	}
	start := 0 // of the current label
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if n := i - start; n == 0 || n > 63 {
				return host{}, errBadHostname
			}
			start = i + 1
			continue
		}
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return host{}, errBadHostname
		}
	}
	// A browser parses a host whose last label is numeric as IPv4 ("127.1",
	// "0x7f.1") and sends the normalized dotted quad; anything that still
	// looks numeric here was not produced by a browser and is refused rather
	// than guessed at.
	last := s[strings.LastIndexByte(s, '.')+1:]
	if strings.HasPrefix(last, "0x") || onlyDigitsAndDots(last) {
		return host{}, errBadHostname
	}
	return host{name: s}, nil
}

func onlyDigitsAndDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}

func checkPort(p string) error {
	if p == "" {
		return nil
	}
	if len(p) > 5 {
		return errBadPort
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return errBadPort
		}
	}
	if n, _ := strconv.Atoi(p); n > 65535 {
		return errBadPort
	}
	return nil
}

// bindKind classifies the listen address, which decides whether loopback
// names are admitted.
type bindKind int

const (
	bindWildcard bindKind = iota // "", 0.0.0.0, ::
	bindLoopback                 // 127.0.0.0/8, ::1, "localhost"
	bindSpecific                 // any other IP or name
)

type binding struct {
	kind bindKind
	host host // zero for bindWildcard
}

func parseBinding(addr string) (binding, error) {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return binding{}, err
	}
	if h == "" {
		return binding{kind: bindWildcard}, nil
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		ip = ip.WithZone("").Unmap()
		switch {
		case ip.IsUnspecified():
			return binding{kind: bindWildcard}, nil
		case ip.IsLoopback():
			return binding{kind: bindLoopback, host: host{ip: ip}}, nil
		default:
			return binding{kind: bindSpecific, host: host{ip: ip}}, nil
		}
	}
	hn, err := parseHostname(h)
	if err != nil {
		return binding{}, err
	}
	if hn.loopback() {
		return binding{kind: bindLoopback, host: hn}, nil
	}
	return binding{kind: bindSpecific, host: hn}, nil
}

// localAddr is the address the request's connection arrived at, when the
// server recorded it (net/http always does; handler tests may not).
func localAddr(r *http.Request) (netip.Addr, bool) {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().WithZone("").Unmap(), true
}

// HostOK is the Host gate (DNS-rebinding protection). It reads r.Host (the
// Host header, the absolute-form request target, or HTTP/2 :authority) and
// never a forwarded header. See the package documentation for the rules.
func (g *Guard) HostOK(r *http.Request) bool {
	h, _, err := parseAuthority(r.Host)
	if err != nil {
		return false
	}
	if _, ok := g.allowedHosts[h]; ok {
		return true
	}
	isLoop := h.loopback()
	isBound := g.bind.kind != bindWildcard && h == g.bind.host
	local, haveLocal := localAddr(r)
	// go-sdk #760: a connection that arrived on loopback can only be from
	// this machine, so a non-loopback Host on it is a browser that was
	// rebound to 127.0.0.1, whatever the listen address says.
	if haveLocal && local.IsLoopback() && !isLoop && !isBound {
		return false
	}
	switch g.bind.kind {
	case bindWildcard:
		// The address the connection arrived at is the concrete bound host
		// of a wildcard listener. An IP literal cannot be rebound: a page
		// whose origin is that literal was served by us.
		return isLoop || (h.ip.IsValid() && haveLocal && h.ip == local)
	case bindLoopback:
		return isLoop || isBound
	default:
		return isBound
	}
}
