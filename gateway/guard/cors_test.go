package guard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func TestCORSPreflight(t *testing.T) {
	s := start(t, Config{Token: testToken, BrowserOrigins: []string{"https://app.example.com"}})
	own := "http://127.0.0.1:" + s.port
	for _, tc := range []struct {
		name     string
		origin   string
		extra    []string
		want     int
		reflect  bool // Access-Control-Allow-Origin echoes the origin
		private  bool // Access-Control-Allow-Private-Network
		wantCode string
	}{
		{"own loopback origin", own, nil, 204, true, false, ""},
		{"listed origin", "https://app.example.com", nil, 204, true, false, ""},
		{"listed origin asking for private network", "https://app.example.com",
			[]string{"Access-Control-Request-Private-Network", "true"}, 204, true, true, ""},
		// Loopback but neither own nor listed: CORS does not admit by itself.
		{"other loopback port", "http://localhost:5555", nil, 403, false, false, "origin_not_allowed"},
		{"evil", "http://evil.example.com", nil, 403, false, false, "origin_not_allowed"},
		{"null", "null", nil, 403, false, false, "origin_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := append([]string{
				"Origin", tc.origin,
				"Access-Control-Request-Method", "POST",
				"Access-Control-Request-Headers", "authorization, content-type, acp-connection-id",
			}, tc.extra...)
			resp, body := do(t, http.MethodOptions, s.srv.URL+"/acp", headers...)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.wantCode != "" && errorCode(body) != tc.wantCode {
				t.Fatalf("body %s, want %s", body, tc.wantCode)
			}
			h := resp.Header
			if got := h.Get("Access-Control-Allow-Origin"); (got == tc.origin) != tc.reflect || (!tc.reflect && got != "") {
				t.Fatalf("Access-Control-Allow-Origin = %q (reflect %v)", got, tc.reflect)
			}
			if (h.Get("Access-Control-Allow-Private-Network") == "true") != tc.private {
				t.Errorf("Access-Control-Allow-Private-Network = %q", h.Get("Access-Control-Allow-Private-Network"))
			}
			if h.Get("Access-Control-Allow-Credentials") != "" {
				t.Error("credentials mode must stay off")
			}
			if !tc.reflect {
				return
			}
			for _, want := range []string{"Authorization", "Content-Type", "Accept", "Acp-Connection-Id", "Acp-Session-Id", "Surfaced-Agent", "Last-Event-ID"} {
				if !strings.Contains(h.Get("Access-Control-Allow-Headers"), want) {
					t.Errorf("Access-Control-Allow-Headers %q lacks %s", h.Get("Access-Control-Allow-Headers"), want)
				}
			}
			for _, want := range []string{"GET", "POST", "DELETE"} {
				if !strings.Contains(h.Get("Access-Control-Allow-Methods"), want) {
					t.Errorf("Access-Control-Allow-Methods %q lacks %s", h.Get("Access-Control-Allow-Methods"), want)
				}
			}
			if !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
				t.Errorf("Vary %v lacks Origin", h.Values("Vary"))
			}
		})
	}
}

func TestCORSActualRequests(t *testing.T) {
	s := start(t, Config{Token: testToken, BrowserOrigins: []string{"https://app.example.com"}})
	listed := "https://app.example.com"

	resp, body := do(t, http.MethodPost, s.srv.URL+"/acp", "Origin", listed, "Authorization", "Bearer "+testToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listed origin with a bearer: %d %s", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("Access-Control-Allow-Origin") != listed {
		t.Errorf("Access-Control-Allow-Origin = %q", h.Get("Access-Control-Allow-Origin"))
	}
	for _, want := range []string{"Acp-Connection-Id", "Acp-Session-Id"} {
		if !strings.Contains(h.Get("Access-Control-Expose-Headers"), want) {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", h.Get("Access-Control-Expose-Headers"), want)
		}
	}

	// CORS sits before auth on the mount: the browser can read the 401.
	resp, _ = do(t, http.MethodPost, s.srv.URL+"/acp", "Origin", listed)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != listed {
		t.Errorf("without a bearer: %d, Allow-Origin %q; want a readable 401", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	// A foreign origin never gets through, credential or not.
	resp, body = do(t, http.MethodPost, s.srv.URL+"/acp", "Origin", "http://evil.example.com", "Authorization", "Bearer "+testToken)
	if resp.StatusCode != http.StatusForbidden || errorCode(body) != "origin_not_allowed" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("foreign origin: %d %s", resp.StatusCode, body)
	}

	// No Origin (an editor, a CLI): no CORS headers, normal auth.
	resp, _ = do(t, http.MethodPost, s.srv.URL+"/acp", "Authorization", "Bearer "+testToken)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no Origin: %d, Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	// OPTIONS that is not a preflight is an ordinary request: it needs auth.
	resp, _ = do(t, http.MethodOptions, s.srv.URL+"/acp")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bare OPTIONS: %d, want 401", resp.StatusCode)
	}

	// A rebound Host is refused by CORS itself.
	resp, body = do(t, http.MethodOptions, s.srv.URL+"/acp", "Host", "evil.example.com", "Origin", "http://evil.example.com", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != http.StatusForbidden || errorCode(body) != "host_not_allowed" {
		t.Errorf("rebound preflight: %d %s", resp.StatusCode, body)
	}
}

// TestPreflightAnsweredByMiddleware mounts the gates globally and CORS
// after them (as a router-wide e.Use does): preflights still work and
// never reach a handler unauthenticated.
func TestPreflightAnsweredByMiddleware(t *testing.T) {
	g, err := New(Config{Addr: "127.0.0.1:7800", Token: testToken, BrowserOrigins: []string{"https://app.example.com"}, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(g.Middleware(nil))
	reached := false
	e.Any("/acp", func(c echo.Context) error { reached = true; return c.NoContent(http.StatusOK) }, g.CORS())
	req, _ := http.NewRequest(http.MethodOptions, "http://127.0.0.1:7800/acp", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "DELETE")
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "https://app.example.com" || reached {
		t.Fatalf("got %d %v (handler reached %v)", w.Code, w.Header(), reached)
	}
}
