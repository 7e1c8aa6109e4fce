package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/agui"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/tracing"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/postgres"
	"github.com/surfaced/surfaced/store/sqlite"

	"github.com/asynkron/protoactor-go/cluster"

	"github.com/surfaced/surfaced/membership"
)

// agentUIs are the panels the agents' manifests name, by agent.
func agentUIs(ms []config.Manifest) map[string]gateway.AgentUI {
	out := map[string]gateway.AgentUI{}
	for i := range ms {
		if dir, panels := ms[i].UI(); dir != "" {
			out[ms[i].Name] = gateway.AgentUI{Dir: dir, Panels: panels}
		}
	}
	return out
}

// runDaemon starts the daemon and blocks until ctx ends, then shuts down:
// streams get end{shutdown}, agents stop, the store is flushed and closed.
func runDaemon(ctx context.Context, f *config.File, ms []config.Manifest, out io.Writer) error {
	log := f.NewLogger(os.Stderr)
	slog.SetDefault(log)

	if f.Tracing.Enabled {
		host, _ := os.Hostname()
		stop, err := tracing.Setup(ctx, tracing.Config{SampleRatio: f.Tracing.SampleRatio, Node: host, Version: surfaced.Version})
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		// Last: the spans of the shutdown are flushed too.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := stop(sctx); err != nil {
				log.Warn("tracing: spans not flushed at exit", "err", err)
			}
		}()
		log.Info("tracing on", "sample_ratio", f.Tracing.SampleRatio)
	}

	if err := config.Build(ctx, ms, f.BinDir(), log); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("building agents: %w", err)}
	}
	specs, err := config.AgentSpecs(ms)
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	st, err := openStore(ctx, f)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer st.Close()

	// --dev: the mailbox inspector (nil, and free, otherwise).
	dev := newDevMode(f, log)
	defer dev.close()

	cc, err := clusterConfig(f, log)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// An evicted automanaged member cannot rejoin in process: it shuts down
	// and exits 75 (EX_TEMPFAIL) for its service manager to start it again.
	ctx, evict := context.WithCancelCause(ctx)
	defer evict(nil)
	if cc != nil && f.Cluster.Provider == config.ProviderAutomanaged {
		cc.Evicted = func() { evict(errEvicted) }
	}
	ids, err := newIdentitySources(ctx, f, log)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer ids.close()

	rt, err := surfaced.New(surfaced.Config{
		Access:         f.AccessRules(),
		Store:          st,
		Agents:         specs,
		Limits:         f.SessionLimits(),
		Quotas:         f.Quotas(),
		Artifacts:      f.ArtifactLimits(),
		EndedRetention: f.EndedRetention(),
		ScratchDir:     filepath.Join(f.DataDir, "scratch"),
		Logger:         log,
		WorkspaceRoots: f.WorkspaceRoots,
		Props:          dev.runtimeProps(),
		Cluster:        cc,
		AgentDir:       filepath.Join(f.DataDir, "agents"),
	})
	if errors.Is(err, surfaced.ErrClusterStart) {
		return &exitError{code: 1, err: err}
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	ln, err := net.Listen("tcp", f.Addr)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("listen on %s: %w", f.Addr, err)}
	}
	addr := ln.Addr().String()
	token := f.Token
	if token == "" && f.TokensFile == "" && !f.NoAuth && !ids.any() {
		token = guard.LaunchToken()
	}
	var resources []string
	if f.MCP.Enabled && ids.bearer != nil {
		resources = []string{f.MCP.Path}
	}
	_, port, _ := net.SplitHostPort(addr)
	g, err := guard.New(guard.Config{
		SignIn:             ids.signIn,
		Bearer:             ids.bearer,
		TrustedProxy:       ids.proxy,
		ProtectedResources: resources,
		ResourceScopes:     resourceScopes(f),
		PublicOrigin:       ids.origin,
		Addr:               addr,
		AllowedHostnames:   f.AllowedHostnames,
		BrowserOrigins:     f.BrowserOrigins,
		Token:              token,
		TokensFile:         f.TokensFile,
		NoAuth:             f.NoAuth,
		// Cookies ignore ports: two daemons on one host keep their own.
		CookieName: "surfaced_token_" + port,
		Logger:     log,
	})
	if err != nil {
		ln.Close()
		return &exitError{code: 2, err: err}
	}
	defer g.Close()
	if err := dev.attach(rt, g); err != nil {
		ln.Close()
		return &exitError{code: 1, err: err}
	}

	gl := f.GatewayLimits()
	var webRoot fs.FS
	if f.WebRoot != "" {
		webRoot = os.DirFS(f.WebRoot)
	}
	// The ACP mount for editors (nil, and free, when acp.enabled is false).
	acp := newACPMount(f, rt, g, gl, dev.gatewayProps(), log)
	// The MCP mount for MCP clients (nil, and free, when mcp.enabled is false).
	mcpm := newMCPMount(f, rt, g, gl, log)
	limits := gateway.Limits{
		BodyBytes:       gl.BodyBytes,
		PromptBodyBytes: gl.PromptBodyBytes,
		QueueBytes:      gl.ClientQueueBytes,
		QueueAge:        gl.ClientQueueAge,
		KeepAlive:       gl.SSEKeepalive,
		WSPing:          gl.WSPing,
		RequestTimeout:  gl.RequestTimeout,
		ReadTimeout:     gl.ReadTimeout,
		WSInflight:      gl.WSInflight,
		SSEPerSubject:   gl.SSEPerSubject,
		WSPerSubject:    gl.WSPerSubject,
	}
	// The AG-UI mount: its runs count against the browser's stream caps.
	slots := gateway.NewSlots(limits)
	ag := agui.New(agui.Options{Runtime: rt, Logger: log, Slots: slots, Revoker: g, Props: dev.gatewayProps(),
		BodyBytes: gl.PromptBodyBytes, QueueBytes: gl.ClientQueueBytes, QueueAge: gl.ClientQueueAge,
		KeepAlive: gl.SSEKeepalive, RequestTimeout: gl.RequestTimeout})
	mounts := map[string]http.Handler{ag.Path(): ag.Handler()}
	maps.Copy(mounts, acp.mounts())
	srv := gateway.New(gateway.Options{
		Runtime: rt,
		Guard:   g,
		Logger:  log,
		Props:   dev.gatewayProps(),
		AgentUI: agentUIs(ms),
		Mounts:  dev.mount(mcpm.add(mounts)),
		// POST /api/sessions/{id}/ag-ui: a run on an existing session.
		SessionMounts: map[string]http.Handler{"ag-ui": ag.Handler()},
		Slots:         slots,
		// CORS for the ACP mount: loopback and browser_origins may read it.
		CORSMounts: acp.corsMounts(),
		WebRoot:    webRoot,
		Limits:     limits,
	})
	hs := srv.HTTPServer()
	hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	// The inspector's streams end first, or Shutdown would wait for them.
	hs.RegisterOnShutdown(dev.close)
	// ACP streams end after the sessions said their last (cancelled prompts).
	hs.RegisterOnShutdown(acp.close)
	hs.RegisterOnShutdown(mcpm.close)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	if f.PprofAddr != "" {
		stopPprof, err := servePprof(f.PprofAddr, log)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		defer stopPprof()
	}

	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	log.Info("surfaced listening", "addr", addr, "agents", names, "store", storeName(f), "version", surfaced.Version)
	home := "/"
	if f.WebRoot != "" {
		log.Info("serving the web app", "dir", f.WebRoot, "path", gateway.AppPrefix)
		home = gateway.AppPrefix
	}
	if ids.signIn != nil && ids.origin != "" {
		// Browsers sign in with the identity provider.
		fmt.Fprintln(out, "surfaced: open "+ids.origin+home+" (sign in with "+ids.signIn.Issuer()+")")
	} else {
		fmt.Fprintln(out, "surfaced: open "+startURL(addr, token, f, home))
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down", "why", context.Cause(ctx))
	case err := <-serveErr:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("server failed", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	ag.Shutdown()
	if err := rt.Shutdown(sctx); err != nil {
		log.Error("session shutdown incomplete", "err", err)
	}
	srv.Close(sctx)
	ag.Close(sctx)
	_ = hs.Shutdown(sctx)
	if errors.Is(context.Cause(ctx), errEvicted) {
		return &exitError{code: 75, err: errEvicted}
	}
	return nil
}

var errEvicted = errors.New("this node was evicted from the cluster; exiting for the service manager to start it again")

// resourceScopes are the scopes the MCP mount's resource metadata tells a
// client to ask for: the browser sign-in's, when there is one.
func resourceScopes(f *config.File) []string {
	if f.OIDC.Enabled() {
		return f.OIDC.Scopes
	}
	return nil
}

func openStore(ctx context.Context, f *config.File) (store.Store, error) {
	switch f.StoreKind() {
	case config.StorePostgres:
		st, err := postgres.Open(ctx, f.Store)
		if err != nil {
			return nil, fmt.Errorf("opening the PostgreSQL store: %w", err)
		}
		return st, nil
	default:
		st, err := sqlite.Open(ctx, f.DataDir)
		if err != nil {
			return nil, fmt.Errorf("opening the store in %s: %w", f.DataDir, err)
		}
		return st, nil
	}
}

// clusterConfig turns the cluster section into the runtime's (nil: one node).
func clusterConfig(f *config.File, log *slog.Logger) (*surfaced.ClusterConfig, error) {
	c := f.Cluster
	if !c.Enabled() {
		return nil, nil
	}
	bind := c.BindAddr
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	host, port, err := surfaced.HostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("cluster.bind_addr: %w", err)
	}
	cc := &surfaced.ClusterConfig{Name: c.Name, Host: host, Port: port, AdvertiseAddr: c.AdvertiseAddr,
		LeaseTTL: time.Duration(c.LeaseTTL)}
	switch c.Provider {
	case config.ProviderEtcd:
		cc.Provider = func() (cluster.ClusterProvider, error) {
			return membership.NewEtcd(membership.EtcdConfig{Endpoints: c.EtcdEndpoints, Logger: log})
		}
	case config.ProviderKubernetes:
		cc.Provider = membership.Kubernetes
	case config.ProviderAutomanaged:
		cc.Provider = func() (cluster.ClusterProvider, error) {
			return membership.Automanaged(500*time.Millisecond, c.AutomanagedPort, c.AutomanagedPeers...), nil
		}
	}
	return cc, nil
}

func storeName(f *config.File) string {
	if f.StoreKind() == config.StorePostgres {
		return "postgres"
	}
	return "sqlite:" + f.DataDir
}

// startURL is the URL of path to open: with the launch token it logs the
// browser in.
func startURL(addr, token string, f *config.File, path string) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	u := "http://" + net.JoinHostPort(host, port) + path
	if token != "" && f.Token == "" {
		u += "?token=" + token
	}
	return u
}

func servePprof(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.Serve(ln) }()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() { s.Close() }, nil
}
