package guard

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/surfaced/surfaced/identity"
)

type originCase struct {
	name    string
	host    string   // Host header; "" means 127.0.0.1:port
	origins []string // Origin headers sent (none, one, several)
	ok      bool
}

func originCases(p string) []originCase {
	return []originCase{
		{"missing", "", nil, true},
		{"own", "", []string{"http://127.0.0.1:" + p}, true},
		{"own uppercase", "", []string{"HTTP://127.0.0.1:" + p}, true},
		{"own via localhost", "localhost:" + p, []string{"http://localhost:" + p}, true},
		{"own via [::1]", "[::1]:" + p, []string{"http://[::1]:" + p}, true},
		{"listed with leading-zero port", "", []string{"http://localhost:05173"}, true},
		{"listed", "", []string{"https://app.example.com"}, true},
		{"listed with default port", "", []string{"https://app.example.com:443"}, true},
		{"listed dev server", "", []string{"http://localhost:5173"}, true},
		{"other port", "", []string{"http://127.0.0.1:1"}, false},
		{"other scheme", "", []string{"https://127.0.0.1:" + p}, false},
		{"localhost is not 127.0.0.1", "", []string{"http://localhost:" + p}, false},
		{"listed host, other scheme", "", []string{"http://app.example.com"}, false},
		{"listed as a prefix", "", []string{"https://app.example.com.evil.example"}, false},
		{"null", "", []string{"null"}, false},
		{"with a path", "", []string{"http://127.0.0.1:" + p + "/"}, false},
		{"with userinfo", "", []string{"http://u@127.0.0.1:" + p}, false},
		{"not a URL", "", []string{"127.0.0.1:" + p}, false},
		{"evil", "", []string{"http://evil.example.com"}, false},
		{"two Origin headers", "", []string{"http://127.0.0.1:" + p, "http://127.0.0.1:" + p}, false},
	}
}

func TestOriginGate(t *testing.T) {
	s := start(t, Config{Token: testToken, BrowserOrigins: []string{"https://APP.example.com", "http://localhost:5173"}})
	base := s.srv.URL
	for _, tc := range originCases(s.port) {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{"Authorization", "Bearer " + testToken}
			if tc.host != "" {
				headers = append(headers, "Host", tc.host)
			}
			for _, o := range tc.origins {
				headers = append(headers, "Origin", o)
			}
			check := func(what string, status int, body string) {
				t.Helper()
				if tc.ok && status == http.StatusForbidden {
					t.Fatalf("%s: refused (%s), want admitted", what, body)
				}
				if !tc.ok && (status != http.StatusForbidden || body != "" && errorCode(body) != "origin_not_allowed") {
					t.Fatalf("%s: got %d %s, want 403 origin_not_allowed", what, status, body)
				}
			}
			resp, body := do(t, http.MethodGet, base+"/api/whoami", headers...)
			check("GET", resp.StatusCode, body)
			resp, body = do(t, http.MethodPost, base+"/api/echo", headers...)
			check("POST", resp.StatusCode, body)
			check("SSE", sseStatus(t, base+"/api/events", headers...), "")
			if len(tc.origins) <= 1 { // the WebSocket dialer sends one Origin
				check("WebSocket", wsStatus(t, s, tc), "")
			}
		})
	}
}

// sseStatus opens the event stream and returns its status, closing it as
// soon as the headers arrived.
func sseStatus(t *testing.T, url string, headers ...string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	return resp.StatusCode
}

// wsStatus tries a WebSocket handshake and returns the HTTP status of the
// answer (101 when upgraded).
func wsStatus(t *testing.T, s *server, tc originCase) int {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + testToken}}
	if len(tc.origins) == 1 {
		h.Set("Origin", tc.origins[0])
	}
	if tc.host != "" {
		h.Set("Host", tc.host)
	}
	url := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/api/ws"
	conn, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err == nil {
		defer conn.Close()
		_, msg, err := conn.ReadMessage()
		if err != nil || string(msg) != identity.Local {
			t.Fatalf("WebSocket: read %q, %v; want the subject", msg, err)
		}
	}
	if resp == nil {
		t.Fatalf("WebSocket: no answer: %v", err)
	}
	return resp.StatusCode
}

func TestCanonicalOrigins(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:80":           "http://localhost",
		"https://localhost:443":         "https://localhost",
		"https://localhost:80":          "https://localhost:80",
		"HTTP://LocalHost.:08080":       "http://localhost:8080",
		"http://[::1]:7800":             "http://[::1]:7800",
		"http://[0:0:0:0:0:0:0:1]:7800": "http://[::1]:7800",
		"http://[::ffff:7f00:1]:7800":   "http://127.0.0.1:7800",
		"https://app.example.com":       "https://app.example.com",
	} {
		o, err := parseOrigin(in)
		if err != nil || o.String() != want {
			t.Errorf("parseOrigin(%q) = %q, %v; want %q", in, o.String(), err, want)
		}
	}
	for _, bad := range []string{
		"", "null", "*", "localhost:7800", "ftp://x.example", "file:///etc", "http://", "http://x.example/",
		"http://x.example?q", "http://x.example#f", "http://u:p@x.example", "http://x.example:99999",
		"http://x.example:-1", "http://::1", "http://[::1", "http://%65vil.example", "http://x.example:80:80",
		"http://*.example.com", "http:/x.example", "http://x..example",
	} {
		if o, err := parseOrigin(bad); err == nil {
			t.Errorf("parseOrigin(%q) = %q, want an error", bad, o.String())
		}
	}
}

func TestParseAuthority(t *testing.T) {
	for in, want := range map[string]string{
		"localhost":          "localhost",
		"LOCALHOST:1":        "localhost",
		"localhost.":         "localhost",
		"localhost:":         "localhost",
		"127.0.0.1:7800":     "127.0.0.1",
		"[::1]:7800":         "::1",
		"[::ffff:127.0.0.1]": "127.0.0.1",
		"a-b_c.example.com":  "a-b_c.example.com",
		"xn--bcher-kva.ch":   "xn--bcher-kva.ch",
	} {
		h, _, err := parseAuthority(in)
		if err != nil || h.key() != want {
			t.Errorf("parseAuthority(%q) = %q, %v; want %q", in, h.key(), err, want)
		}
	}
	for _, bad := range []string{
		"", ".", "::1", "[::1", "[::1]x", "[127.0.0.1]", "[fe80::1%eth0]", "a..b", "a.b..",
		"localhost:65536", "localhost:1:2", "localhost:x", "a b", "a@b", "a/b", "a%2eb", "bücher.ch",
		"127.1", "1.2.3.4.5", "0x7f000001", strings.Repeat("a", 64) + ".example", strings.Repeat("a.", 130) + "x",
	} {
		if h, _, err := parseAuthority(bad); err == nil {
			t.Errorf("parseAuthority(%q) = %q, want an error", bad, h.key())
		}
	}
}

func TestCanonicalPort(t *testing.T) {
	for _, tc := range []struct{ scheme, in, want string }{
		{"http", "", ""}, {"http", "80", ""}, {"http", "080", ""}, {"https", "443", ""},
		{"https", "80", "80"}, {"http", "443", "443"}, {"http", "07800", "7800"},
		{"http", "0", "0"}, {"http", "000", "0"},
	} {
		if got := canonicalPort(tc.scheme, tc.in); got != tc.want {
			t.Errorf("canonicalPort(%s, %q) = %q, want %q", tc.scheme, tc.in, got, tc.want)
		}
	}
}
