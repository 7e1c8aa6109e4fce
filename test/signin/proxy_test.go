package signin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// fromAddr is an HTTP client whose connections come from a loopback
// address other than 127.0.0.1 (the proxy's), as a machine other than the
// proxy would.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// logLines is a log the guard writes to and the test reads.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestTrustedProxy: oauth2-proxy (a real build) signs alice in with the
// provider and passes her upstream as X-Forwarded-User and
// X-Forwarded-Groups; the daemon takes them from the proxy's address only.
// The same headers sent straight to the daemon from anywhere else are
// refused with the answer a wrong token gets, and logged.
func TestTrustedProxy(t *testing.T) {
	op := idptest.StartOP(t, people)
	logs := &logLines{}
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.TrustedProxy = &guard.TrustedProxy{Header: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups",
			From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}))
	px := idptest.StartOAuth2Proxy(t, op, d.URL)

	// Through the proxy: sign in at the provider, then the daemon's API.
	jar := idptest.NewJar()
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), op.Issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(px.URL + "/oauth2/start?rd=" + "%2Fauth%2Fme")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authURL := resp.Header.Get("Location")
	if !strings.HasPrefix(authURL, op.Issuer) {
		t.Fatalf("oauth2-proxy did not send us to the provider: %d %q", resp.StatusCode, authURL)
	}
	back, err := op.SignIn(jar, authURL, "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	resp, err = c.Get(back.String()) // oauth2-proxy's callback, then /auth/me upstream
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m guard.Me
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &m) != nil {
		t.Fatalf("/auth/me through the proxy: %d %s", resp.StatusCode, body)
	}
	if !m.SignedIn || m.Via != "proxy" || m.Subject == "" || len(m.Groups) != 1 || m.Groups[0] != "staff" {
		t.Fatalf("/auth/me through the proxy: %+v", m)
	}
	resp, err = c.Get(px.URL + "/api/agents")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the API through the proxy: %d", resp.StatusCode)
	}

	// Straight to the daemon, forging the headers, from another address.
	ref := do(t, http.MethodGet, d.URL+"/api/agents", "not-a-token", "")
	forged := fromAddr("127.0.0.2")
	for _, h := range []http.Header{
		{"X-Forwarded-User": {m.Subject}},
		{"X-Forwarded-User": {m.Subject}, "Authorization": {"Bearer " + d.Token}},
		{"X-Forwarded-Groups": {"staff"}, "Authorization": {"Bearer " + d.Token}},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, d.URL+"/api/agents", nil)
		req.Header = h
		resp, err := forged.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{resp.StatusCode, resp.Header, b}
		if a.status != http.StatusUnauthorized || a.errorCode(t) != "unauthorized" || a.errorShape(t) != ref.errorShape(t) {
			t.Fatalf("forged %v: %d %s", h, a.status, a.body)
		}
	}
	// Each forgery is logged: the header, where it came from, what it
	// claimed.
	if n := strings.Count(logs.String(), "refused: the trusted proxy's header from an address that is not the proxy's"); n != 3 {
		t.Fatalf("%d forgeries logged, want 3:\n%s", n, logs)
	}
	if l := logs.String(); !strings.Contains(l, "remote=127.0.0.2:") || !strings.Contains(l, "claimed_subject="+m.Subject) {
		t.Fatalf("the log does not say where from and as whom:\n%s", l)
	}
	// From the proxy's address without the header: any other credential.
	if a := do(t, http.MethodGet, d.URL+"/api/agents", d.Token, ""); a.status != http.StatusOK {
		t.Fatalf("a token from the proxy's address: %d %s", a.status, a.body)
	}
	// From another address without the headers: as usual.
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/api/agents", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if resp, err := forged.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a token from another address: %v %v", err, resp)
	}
}
