package guard

import (
	"net/http"
	"strings"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// OAuth 2.0 Protected Resource Metadata (RFC 9728) for the protected
// resources (the MCP mount): an MCP client that is answered 401 finds the
// document through WWW-Authenticate's resource_metadata, learns the
// authorization servers (the issuers of Bearer) and signs in by itself.

// resourceMetadata answers the document of the resource at suffix (the
// path after the well-known prefix; "" is the first resource, for clients
// that look at the root). It reports false for a path that names no
// resource (the request goes on, and finds no route).
func (g *Guard) resourceMetadata(w http.ResponseWriter, r *http.Request, suffix string) bool {
	resource := ""
	switch {
	case suffix == "" || suffix == "/":
		resource = g.resources[0]
	default:
		for _, p := range g.resources {
			if suffix == p {
				resource = p
				break
			}
		}
	}
	if resource == "" {
		return false
	}
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ScopesSupported        []string `json:"scopes_supported"`
		ResourceName           string   `json:"resource_name"`
	}{
		ScopesSupported:        g.resourceScopes,
		Resource:               g.origin(r) + resource,
		AuthorizationServers:   g.bearer.Issuers(),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "surfaced",
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "max-age=300")
	h.Set("X-Content-Type-Options", "nosniff")
	g.corsHeaders(w, r)
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return true
	}
	if b, err := plainjson.Marshal(doc); err == nil {
		_, _ = w.Write(append(b, '\n'))
	}
	return true
}

// origin is the daemon's origin as the client reached it: PublicOrigin,
// else the request's scheme and Host (which passed the Host gate).
func (g *Guard) origin(r *http.Request) string {
	if g.publicOrigin != "" {
		return g.publicOrigin
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return scheme + r.Host
}

// challenge is the WWW-Authenticate of a 401 on path: Bearer, naming the
// resource metadata when path is under a protected resource.
func (g *Guard) challenge(r *http.Request) string {
	if g.bearer == nil {
		return "Bearer"
	}
	p := routePath(r)
	for _, res := range g.resources {
		if p == res || strings.HasPrefix(p, res+"/") {
			return `Bearer resource_metadata="` + g.origin(r) + resourceMetadataPath + res + `"`
		}
	}
	return "Bearer"
}
