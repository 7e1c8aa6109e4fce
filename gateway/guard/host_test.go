package guard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

const testToken = "0123456789abcdef0123456789abcdef"

// hostCase is one Host header and whether the gate must admit it.
type hostCase struct {
	host string
	ok   bool
}

// checkHosts sends each Host to addr over a raw connection, with a valid
// bearer, and checks the answer: 200 when admitted, 403
// host_not_allowed when not.
func checkHosts(t *testing.T, addr string, cases []hostCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.host, "/", "_"), func(t *testing.T) {
			resp, body := rawGet(t, addr, "/api/whoami", tc.host, "Authorization", "Bearer "+testToken)
			if tc.ok {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("Host %q: got %d %s, want 200", tc.host, resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != http.StatusForbidden || errorCode(body) != "host_not_allowed" {
				t.Fatalf("Host %q: got %d %s, want 403 host_not_allowed", tc.host, resp.StatusCode, body)
			}
		})
	}
}

func TestHostGateBoundToLoopback(t *testing.T) {
	s := start(t, Config{Token: testToken, AllowedHostnames: []string{"surfaced.example.net"}})
	addr := s.srv.Listener.Addr().String()
	p := s.port
	checkHosts(t, addr, []hostCase{
		{"127.0.0.1:" + p, true},
		{"127.0.0.1", true},
		{"localhost:" + p, true},
		{"localhost", true},
		{"LOCALHOST:" + p, true},
		{"LocalHost.:" + p, true},
		{"127.0.0.1.:" + p, true},
		{"[::1]:" + p, true},
		{"[::1]", true},
		{"[::ffff:127.0.0.1]:" + p, true},
		{"127.0.0.2:" + p, true},
		{"surfaced.example.net:" + p, true},
		{"SURFACED.example.net.", true},
		{"evil.example.com", false},
		{"evil.example.com:" + p, false},
		{"evil.localhost:" + p, false},
		{"localhost.evil.example.com:" + p, false},
		{"127.0.0.1.nip.io:" + p, false},
		{"0.0.0.0:" + p, false},
		{"127.1:" + p, false},
		{"0x7f.0.0.1:" + p, false},
		{"localhost..:" + p, false},
		{"localhost:99999", false},
		{"localhost:http", false},
		{"::1", false},
		{"[::1%25lo]:" + p, false},
		{"[fe80::1]:" + p, false},
		{"192.0.2.2:" + p, false},
		{"sub.surfaced.example.net", false},
	})
}

func TestHostGateMissingHost(t *testing.T) {
	s := start(t, Config{Token: testToken})
	addr := s.srv.Listener.Addr().String()
	// HTTP/1.0 may omit Host; net/http passes it on with r.Host == "".
	resp, body := raw(t, addr, "GET /api/whoami HTTP/1.0\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || errorCode(body) != "host_not_allowed" {
		t.Fatalf("HTTP/1.0 without Host: got %d %s, want 403 host_not_allowed", resp.StatusCode, body)
	}
	// An empty Host header, same.
	resp, body = raw(t, addr, "GET /api/whoami HTTP/1.1\r\nHost:\r\nConnection: close\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("empty Host: got %d %s, want 403", resp.StatusCode, body)
	}
	// HTTP/1.1 without Host never reaches the guard: net/http answers 400.
	resp, _ = raw(t, addr, "GET /api/whoami HTTP/1.1\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP/1.1 without Host: got %d, want 400", resp.StatusCode)
	}
}

func TestHostGateIgnoresForwardedHeaders(t *testing.T) {
	s := start(t, Config{Token: testToken})
	addr := s.srv.Listener.Addr().String()
	for _, tc := range []struct {
		name    string
		host    string
		headers []string
		want    int
	}{
		{"spoofed X-Forwarded-Host does not admit", "evil.example.com",
			[]string{"X-Forwarded-Host", "localhost:" + s.port, "Forwarded", "host=localhost", "X-Forwarded-For", "127.0.0.1"}, http.StatusForbidden},
		{"X-Forwarded-Host does not refuse either", "localhost:" + s.port,
			[]string{"X-Forwarded-Host", "evil.example.com", "Forwarded", "host=evil.example.com"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := append([]string{"Authorization", "Bearer " + testToken}, tc.headers...)
			resp, body := rawGet(t, addr, "/api/whoami", tc.host, h...)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.want)
			}
		})
	}
	// An absolute-form target names the host net/http uses: it is gated too.
	resp, body := raw(t, addr, "GET http://evil.example.com/api/whoami HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("absolute-form to evil.example.com: got %d %s, want 403", resp.StatusCode, body)
	}
}

// lanAddr is a non-loopback IPv4 address of this machine, if any.
func lanAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				ip = ip.Unmap()
				if ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
					return ip.String()
				}
			}
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address")
	return ""
}

func TestHostGateBoundToWildcard(t *testing.T) {
	for _, bind := range []string{"*", "0.0.0.0"} {
		t.Run("bind="+bind, func(t *testing.T) {
			s := startOn(t, "0.0.0.0:0", bind, Config{Token: testToken, AllowedHostnames: []string{"surfaced.example.net"}})
			p := s.port
			t.Run("via loopback", func(t *testing.T) {
				lan := lanAddr(t)
				checkHosts(t, "127.0.0.1:"+p, []hostCase{
					{"localhost:" + p, true},
					{"127.0.0.1:" + p, true},
					{"[::1]:" + p, true},
					{"surfaced.example.net:" + p, true},
					// go-sdk #760: on a loopback connection, a LAN Host is a
					// rebound browser, even though the listener is a wildcard.
					{lan + ":" + p, false},
					{"0.0.0.0:" + p, false},
					{"evil.example.com:" + p, false},
					{"evil.localhost:" + p, false},
				})
			})
			t.Run("via LAN", func(t *testing.T) {
				lan := lanAddr(t)
				checkHosts(t, net.JoinHostPort(lan, p), []hostCase{
					{lan + ":" + p, true},               // the concrete bound host
					{"localhost:" + p, true},            // a loopback name, bound to a wildcard
					{"surfaced.example.net:" + p, true}, // listed
					{"192.0.2.254:" + p, lan == "192.0.2.254"},
					{"evil.example.com:" + p, false},
					{"lan-name.example.org:" + p, false}, // names must be listed
				})
			})
		})
	}
}

func TestHostGateBoundToLANAddress(t *testing.T) {
	lan := lanAddr(t)
	s := startOn(t, net.JoinHostPort(lan, "0"), "", Config{Token: testToken})
	p := s.port
	checkHosts(t, net.JoinHostPort(lan, p), []hostCase{
		{lan + ":" + p, true},
		{lan, true},
		{"localhost:" + p, false},
		{"127.0.0.1:" + p, false},
		{"[::1]:" + p, false},
		{"evil.example.com:" + p, false},
	})
}

// TestHostOKTable covers the bind kinds that need no special listener,
// with the connection's local address supplied as net/http would.
func TestHostOKTable(t *testing.T) {
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7800}
	lan := &net.TCPAddr{IP: net.ParseIP("192.0.2.2"), Port: 7800}
	for _, tc := range []struct {
		bind  string
		local net.Addr // nil: no LocalAddrContextKey
		host  string
		ok    bool
	}{
		{"localhost:7800", loop, "localhost:7800", true},
		{"localhost:7800", loop, "127.0.0.1:7800", true},
		{"localhost:7800", loop, "evil.example.com", false},
		{"[::1]:7800", &net.TCPAddr{IP: net.IPv6loopback, Port: 7800}, "[::1]:7800", true},
		{"[::1]:7800", &net.TCPAddr{IP: net.IPv6loopback, Port: 7800}, "localhost", true},
		{"[::]:7800", lan, "192.0.2.2:7800", true},
		{"[::]:7800", lan, "192.0.2.3:7800", false},
		{"[::]:7800", nil, "192.0.2.2:7800", false}, // no local address known: only loopback names
		{"[::]:7800", nil, "localhost:7800", true},
		{"myhost.lan:7800", lan, "myhost.lan:7800", true},
		{"myhost.lan:7800", lan, "localhost:7800", false},
		// Debian maps the host name to 127.0.1.1: the bound name still passes
		// on a loopback connection.
		{"myhost.lan:7800", &net.TCPAddr{IP: net.ParseIP("127.0.1.1"), Port: 7800}, "myhost.lan", true},
		{"myhost.lan:7800", &net.TCPAddr{IP: net.ParseIP("127.0.1.1"), Port: 7800}, "other.lan", false},
		{"192.0.2.2:7800", lan, "192.0.2.2", true},
		{"192.0.2.2:7800", lan, "localhost", false},
	} {
		t.Run(tc.bind+"/"+tc.host, func(t *testing.T) {
			g, err := New(Config{Addr: tc.bind, Token: testToken, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = tc.host
			if tc.local != nil {
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			}
			if got := g.HostOK(r); got != tc.ok {
				t.Fatalf("HostOK(bind %s, local %v, Host %q) = %v, want %v", tc.bind, tc.local, tc.host, got, tc.ok)
			}
		})
	}
}

// TestDNSRebindingProtectionScenario is the MCP conformance scenario
// "dns-rebinding-protection": Host evil.example.com → any 4xx; a valid
// localhost Host → accepted. Run against the ACP mount with a JSON-RPC
// body, as the conformance client does.
func TestDNSRebindingProtectionScenario(t *testing.T) {
	s := start(t, Config{Token: testToken})
	addr := s.srv.Listener.Addr().String()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	post := func(host string) int {
		resp, _ := raw(t, addr, "POST /acp HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n"+
			"Authorization: Bearer "+testToken+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"Content-Length: "+itoa(len(body))+"\r\n\r\n"+body)
		return resp.StatusCode
	}
	if st := post("evil.example.com"); st < 400 || st > 499 {
		t.Fatalf("Host evil.example.com: got %d, want 4xx", st)
	}
	if st := post("localhost:" + s.port); st != http.StatusOK {
		t.Fatalf("Host localhost: got %d, want 200", st)
	}
}
