package guard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestTrustedProxyHeaders: the proxy's rule on every shape of its headers,
// from the proxy's address and from anywhere else.
func TestTrustedProxyHeaders(t *testing.T) {
	log, logs := newLogger()
	g, err := New(Config{Addr: "127.0.0.1:7000", Token: testToken, Logger: log, TrustedProxy: &TrustedProxy{
		Header: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups",
		From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, tc := range []struct {
		name    string
		remote  string
		headers []string
		subject string   // "" with message: refused
		groups  []string // on success
		message string   // a fragment of the 401 message
		logged  string   // a fragment of the log, on a refusal
	}{
		{"from the proxy", "10.1.2.3:5555", []string{"X-Forwarded-User", "alice@example.com"}, "alice@example.com", nil, "", ""},
		{"from the proxy over IPv6", "[::1]:5555", []string{"X-Forwarded-User", "alice"}, "alice", nil, "", ""},
		{"groups, comma-separated, trimmed, empties dropped", "10.1.2.3:5555",
			[]string{"X-Forwarded-User", "alice", "X-Forwarded-Groups", " staff, ,ops ,", "X-Forwarded-Groups", "admins"}, "alice", []string{"staff", "ops", "admins"}, "", ""},
		{"a group that is not a valid subject is dropped", "10.1.2.3:5555",
			[]string{"X-Forwarded-User", "alice", "X-Forwarded-Groups", "staff,bad\x01group"}, "alice", []string{"staff"}, "", ""},
		{"from the proxy, no header: the token", "10.1.2.3:5555", []string{"Authorization", "Bearer " + testToken}, "local", nil, "", ""},
		{"from the proxy, groups alone prove nothing: the token", "10.1.2.3:5555",
			[]string{"X-Forwarded-Groups", "staff", "Authorization", "Bearer " + testToken}, "local", nil, "", ""},
		{"from the proxy, the header wins over a token", "10.1.2.3:5555",
			[]string{"X-Forwarded-User", "bob", "Authorization", "Bearer " + testToken}, "bob", nil, "", ""},
		{"two subject headers", "10.1.2.3:5555", []string{"X-Forwarded-User", "alice", "X-Forwarded-User", "bob"}, "", nil, "more than one", ""},
		{"an empty subject", "10.1.2.3:5555", []string{"X-Forwarded-User", ""}, "", nil, "not a valid subject", "trusted proxy's subject is not valid"},
		{"a control character in the subject", "10.1.2.3:5555", []string{"X-Forwarded-User", "ali\x7fce"}, "", nil, "not a valid subject", "trusted proxy's subject is not valid"},
		{"forged from elsewhere", "192.168.1.9:4444", []string{"X-Forwarded-User", "alice"}, "", nil, "does not come from the trusted proxy", "remote=192.168.1.9:4444"},
		{"forged beside a good token", "192.168.1.9:4444", []string{"X-Forwarded-User", "alice", "Authorization", "Bearer " + testToken}, "", nil, "does not come from the trusted proxy", "claimed_subject=alice"},
		{"forged groups alone beside a good token", "192.168.1.9:4444", []string{"X-Forwarded-Groups", "staff", "Authorization", "Bearer " + testToken}, "", nil, "does not come from the trusted proxy", "path=/api/whoami"},
		{"an IPv4-mapped proxy address", "[::ffff:10.0.0.1]:5555", []string{"X-Forwarded-User", "alice"}, "alice", nil, "", ""},
		{"a remote address that does not parse", "somewhere", []string{"X-Forwarded-User", "alice"}, "", nil, "does not come from the trusted proxy", "remote=somewhere"},
		{"elsewhere without the headers: the token", "192.168.1.9:4444", []string{"Authorization", "Bearer " + testToken}, "local", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/whoami", nil)
			r.RemoteAddr = tc.remote
			for i := 0; i+1 < len(tc.headers); i += 2 {
				r.Header.Add(tc.headers[i], tc.headers[i+1])
			}
			id, err := g.Authenticate(r)
			if tc.message != "" {
				var ae *AuthError
				if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != "unauthorized" || !strings.Contains(ae.Message, tc.message) {
					t.Fatalf("got %+v %v, want 401 unauthorized saying %q", id, err, tc.message)
				}
				if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) {
					t.Fatalf("the log does not say %q:\n%s", tc.logged, logs)
				}
				return
			}
			if err != nil || id.Subject != tc.subject || !slices.Equal(id.Groups, tc.groups) {
				t.Fatalf("got %+v %v, want %q %q", id, err, tc.subject, tc.groups)
			}
		})
	}
}

// TestTrustedProxyConfig: a proxy that cannot work is an error from New.
func TestTrustedProxyConfig(t *testing.T) {
	from := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	for _, tc := range []struct {
		name string
		p    TrustedProxy
		want string
	}{
		{"no header", TrustedProxy{From: from}, "no header"},
		{"no address", TrustedProxy{Header: "X-User"}, "no proxy address"},
		{"a header name with a space", TrustedProxy{Header: "X User", From: from}, "not a header name"},
		{"a groups header name with a colon", TrustedProxy{Header: "X-User", GroupsHeader: "X:G", From: from}, "not a header name"},
		{"Authorization", TrustedProxy{Header: "authorization", From: from}, "cannot carry the subject"},
		{"Cookie", TrustedProxy{Header: "Cookie", From: from}, "cannot carry the subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			_, err := New(Config{Addr: "127.0.0.1:7000", Token: testToken, Logger: discard(), TrustedProxy: &p})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
