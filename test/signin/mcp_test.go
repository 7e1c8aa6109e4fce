package signin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity/idp"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/internal/testkit/idptest"
)

// TestMCPClientSignsInByItself: the official Go SDK's MCP client, told
// nothing but the daemon's /mcp URL and a client registered at the
// provider, is answered 401 with the resource metadata (RFC 9728), finds
// the provider there, signs the person in (the login page, driven here
// without a browser), and lists the agents with the access token it got.
func TestMCPClientSignsInByItself(t *testing.T) {
	op := idptest.StartOP(t, people)
	const redirect = "http://127.0.0.1:1/mcp-client/callback" // never reached: the fetcher stops there
	op.JWTClient("mcp-client", "mcp-secret", redirect)
	iss, err := idp.Discover(context.Background(), idp.IssuerConfig{URL: op.Issuer, Clock: clock.Real{}, Logger: daemon.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	// The provider's access tokens for this client have its id as aud.
	b, err := idp.NewBearer([]idp.BearerIssuer{{Issuer: iss, Audience: "mcp-client"}})
	if err != nil {
		t.Fatal(err)
	}
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) {
		c.Bearer, c.ProtectedResources = b, []string{"/mcp"}
	}))

	// The 401 names the metadata; the metadata names the provider.
	a := do(t, http.MethodPost, d.MCPURL, "", `{}`)
	challenges, err := oauthex.ParseWWWAuthenticate(a.header.Values("WWW-Authenticate"))
	if a.status != http.StatusUnauthorized || err != nil || len(challenges) != 1 {
		t.Fatalf("401 challenge: %d %v %v", a.status, a.header.Values("WWW-Authenticate"), err)
	}
	metaURL := challenges[0].Params["resource_metadata"]
	if metaURL != d.URL+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("resource_metadata %q", metaURL)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(context.Background(), metaURL, d.MCPURL, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != op.Issuer {
		t.Fatalf("metadata %+v", prm)
	}
	// The root document describes the same resource (clients that look there).
	var root map[string]any
	ra := do(t, http.MethodGet, d.URL+"/.well-known/oauth-protected-resource", "", "")
	if ra.status != http.StatusOK || json.Unmarshal(ra.body, &root) != nil || root["resource"] != d.MCPURL {
		t.Fatalf("root metadata: %d %s", ra.status, ra.body)
	}

	jar := idptest.NewJar()
	fetched := 0
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "mcp-client", ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "mcp-secret"}},
		RedirectURL:         redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			fetched++
			back, err := op.SignIn(jar, args.URL, "alice", "alice-pw")
			if err != nil {
				return nil, err
			}
			q := back.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
		AcceptUnadvertisedIss: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "signin-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.MCPURL, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect with sign-in: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_agents"})
	if err != nil || res.IsError {
		t.Fatalf("list_agents: %v %+v", err, res)
	}
	if fetched != 1 {
		t.Fatalf("the person was sent to sign in %d times", fetched)
	}
	out, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(out), `"fake"`) {
		t.Fatalf("agents %s", out)
	}
}
