package main

import (
	"github.com/spf13/cobra"

	"github.com/surfaced/surfaced/config"
)

// daemonFlags are the flags of run and serve; they override the config file.
type daemonFlags struct {
	config     string
	addr       string
	dataDir    string
	store      string
	token      string
	tokensFile string
	noAuth     bool
	dev        bool
	pprofAddr  string
	logLevel   string
	logFormat  string
	webRoot    string

	oidcIssuer, oidcClientID, oidcSecretFile, oidcRedirectURL string
	proxyHeader                                               string
	proxyFrom                                                 []string

	clusterName      string
	clusterProvider  string
	etcdEndpoints    []string
	advertiseAddr    string
	clusterBind      string
	automanagedPort  int
	automanagedPeers []string
}

func (f *daemonFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.config, "config", "", "configuration file (YAML; see docs/configuration.md)")
	fs.StringVar(&f.addr, "addr", "", "listen address host:port (default "+config.DefaultAddr+"; loopback unless you say otherwise)")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory of the embedded store and built agents (default $SURFACED_DATA_DIR, else $XDG_DATA_HOME/surfaced)")
	fs.StringVar(&f.store, "store", "", "session store: empty for SQLite in --data-dir, or a postgres:// URL")
	fs.StringVar(&f.token, "token", "", "the bearer token (default $SURFACED_TOKEN, else a random per-launch token)")
	fs.StringVar(&f.tokensFile, "tokens-file", "", `JSON file of people and their token hashes: {"tokens":[{"subject":"alice","sha256":"..."}]}; reread on change`)
	fs.BoolVar(&f.noAuth, "no-auth", false, "turn authentication off (everyone is one anonymous user); the Host and Origin gates stay")
	fs.BoolVar(&f.dev, "dev", false, "development mode: the mailbox inspector at /debug/ (same auth)")
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address (off when empty)")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.StringVar(&f.logFormat, "log-format", "", "text or json (default text)")
	fs.StringVar(&f.webRoot, "web-root", "", "serve this directory (a built web app with its index.html) at /app/ on the daemon's origin")
	fs.StringVar(&f.oidcIssuer, "oidc-issuer", "", "sign browsers in with this OpenID provider (its issuer URL; with --oidc-client-id and --oidc-redirect-url)")
	fs.StringVar(&f.oidcClientID, "oidc-client-id", "", "the OpenID client registered at the provider")
	fs.StringVar(&f.oidcSecretFile, "oidc-client-secret-file", "", "file holding the OpenID client's secret (or $"+config.EnvOIDCClientSecret+")")
	fs.StringVar(&f.oidcRedirectURL, "oidc-redirect-url", "", "this daemon's sign-in callback as browsers reach it (https://surfaced.example.com/auth/callback)")
	fs.StringVar(&f.proxyHeader, "trusted-proxy-header", "", "behind an authenticating proxy: the header it puts the subject in (X-Forwarded-User)")
	fs.StringSliceVar(&f.proxyFrom, "trusted-proxy-from", nil, "the proxy's addresses or CIDRs, comma-separated; only they may send --trusted-proxy-header")
	fs.StringVar(&f.clusterName, "cluster-name", "", "join a cluster of this name (needs --cluster-provider and a postgres:// --store)")
	fs.StringVar(&f.clusterProvider, "cluster-provider", "", "cluster membership: etcd; k8s (binaries built with -tags k8s); or automanaged (several processes on one machine, development)")
	fs.StringSliceVar(&f.etcdEndpoints, "etcd-endpoints", nil, "etcd endpoints host:port, comma-separated (--cluster-provider etcd)")
	fs.StringVar(&f.advertiseAddr, "advertise-addr", "", "host:port other nodes reach this node's cluster transport at")
	fs.StringVar(&f.clusterBind, "cluster-bind", "", "host:port the cluster transport listens on (default 127.0.0.1:0)")
	fs.IntVar(&f.automanagedPort, "automanaged-port", 0, "this node's automanaged health port (--cluster-provider automanaged)")
	fs.StringSliceVar(&f.automanagedPeers, "automanaged-peers", nil, "every node's host:port of its automanaged health port, comma-separated")
}

// flags returns the config.Flags of the flags the user set.
func (f *daemonFlags) flags(cmd *cobra.Command) config.Flags {
	var out config.Flags
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	if set("addr") {
		out.Addr = &f.addr
	}
	if set("data-dir") {
		out.DataDir = &f.dataDir
	}
	if set("store") {
		out.Store = &f.store
	}
	if set("token") {
		out.Token = &f.token
	}
	if set("tokens-file") {
		out.TokensFile = &f.tokensFile
	}
	if set("no-auth") {
		out.NoAuth = &f.noAuth
	}
	if set("dev") {
		out.Dev = &f.dev
	}
	if set("pprof-addr") {
		out.PprofAddr = &f.pprofAddr
	}
	if set("log-level") {
		out.LogLevel = &f.logLevel
	}
	if set("log-format") {
		out.LogFormat = &f.logFormat
	}
	if set("web-root") {
		out.WebRoot = &f.webRoot
	}
	if set("oidc-issuer") {
		out.OIDCIssuer = &f.oidcIssuer
	}
	if set("oidc-client-id") {
		out.OIDCClientID = &f.oidcClientID
	}
	if set("oidc-client-secret-file") {
		out.OIDCClientSecretFile = &f.oidcSecretFile
	}
	if set("oidc-redirect-url") {
		out.OIDCRedirectURL = &f.oidcRedirectURL
	}
	if set("trusted-proxy-header") {
		out.TrustedProxyHeader = &f.proxyHeader
	}
	if set("trusted-proxy-from") {
		out.TrustedProxyFrom = &f.proxyFrom
	}
	if set("cluster-name") {
		out.ClusterName = &f.clusterName
	}
	if set("cluster-provider") {
		out.ClusterProvider = &f.clusterProvider
	}
	if set("etcd-endpoints") {
		out.EtcdEndpoints = &f.etcdEndpoints
	}
	if set("advertise-addr") {
		out.AdvertiseAddr = &f.advertiseAddr
	}
	if set("cluster-bind") {
		out.ClusterBind = &f.clusterBind
	}
	if set("automanaged-port") {
		out.AutomanagedPort = &f.automanagedPort
	}
	if set("automanaged-peers") {
		out.AutomanagedPeers = &f.automanagedPeers
	}
	return out
}
