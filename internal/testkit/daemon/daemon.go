package daemon

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/agui"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/debug"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/mcpgw"
	"github.com/surfaced/surfaced/store/memstore"
)

// Token is the daemon's launch token unless an option sets another (or a
// tokens file, or no authentication).
const Token = "launch-token-xxxxxxxxxxxxxxxx"

// NodeID is the daemon's node id.
const NodeID = "test-node"

// setup is what the options set.
type setup struct {
	cfg     surfaced.Config
	gateway gateway.Limits
	agentUI map[string]gateway.AgentUI
	guard   guard.Config
	guardAt func(url string, c *guard.Config)
	acp     acpgw.Options
	mcp     mcpgw.Options
	dev     bool
	webRoot fs.FS
}

// Option configures Start.
type Option func(*setup)

// Agents replaces the default agent (the fake agent, named "fake").
func Agents(a ...surfaced.AgentSpec) Option { return func(s *setup) { s.cfg.Agents = a } }

// Limits are the runtime's per-session limits.
func Limits(l surfaced.Limits) Option { return func(s *setup) { s.cfg.Limits = l } }

// Quotas are the runtime's session quotas.
func Quotas(q surfaced.Quotas) Option { return func(s *setup) { s.cfg.Quotas = q } }

// Domains add native surface domains.
func Domains(d ...surfaced.DomainBinding) Option {
	return func(s *setup) { s.cfg.Domains = append(s.cfg.Domains, d...) }
}

// Config adjusts the runtime's config in any other way (its store, its
// logger, ...).
func Config(f func(*surfaced.Config)) Option { return func(s *setup) { f(&s.cfg) } }

// Gateway sets the browser gateway's limits.
func Gateway(l gateway.Limits) Option { return func(s *setup) { s.gateway = l } }

// AgentUI serves an agent's UI folder and panels, as the manifest's
// "panels" does for the daemon.
func AgentUI(agent string, ui gateway.AgentUI) Option {
	return func(s *setup) {
		if s.agentUI == nil {
			s.agentUI = map[string]gateway.AgentUI{}
		}
		s.agentUI[agent] = ui
	}
}

// Guard adjusts the guard's config (Addr is set by Start; a token is set
// unless the config has one, a tokens file or NoAuth).
func Guard(f func(*guard.Config)) Option { return func(s *setup) { f(&s.guard) } }

// GuardAt adjusts the guard's config knowing the daemon's URL
// (http://127.0.0.1:port), after Guard: for what names the daemon's own
// address (an OpenID redirect URL).
func GuardAt(f func(url string, c *guard.Config)) Option { return func(s *setup) { s.guardAt = f } }

// ACP adjusts the ACP mount's options (Runtime, Revoker and Logger are set
// by Start).
func ACP(f func(*acpgw.Options)) Option { return func(s *setup) { f(&s.acp) } }

// MCP adjusts the MCP mount's options (Runtime, Revoker and Logger are set
// by Start).
func MCP(f func(*mcpgw.Options)) Option { return func(s *setup) { f(&s.mcp) } }

// WebRoot serves a web app at /app/, as the daemon's --web-root does.
func WebRoot(dir fs.FS) Option { return func(s *setup) { s.webRoot = dir } }

// Dev mounts the inspector as the daemon's --dev does: the actors' mailboxes
// inspected, /debug served.
func Dev() Option { return func(s *setup) { s.dev = true } }

// SlowDomainName is the native domain SlowDomain adds; its one command is
// "work".
const SlowDomainName = "slow"

// SlowDomain adds a native domain whose "work" command takes delay: a
// domain actor a test can keep busy.
func SlowDomain(delay time.Duration) Option {
	slow := surface.Define(SlowDomainName, struct{ N int }{}, map[string]surface.Command[struct{ N int }]{
		"work": func(ctx *surface.Ctx[struct{ N int }], _ json.RawMessage) (any, error) {
			time.Sleep(delay) // the work a busy domain does
			ctx.SetState(func(s struct{ N int }) struct{ N int } { s.N++; return s })
			return nil, nil
		},
	})
	return Domains(surfaced.DomainBinding{Domain: slow})
}

// Quiet is the tests' logger: discarded, or debug lines on stderr with
// SURFACED_TEST_LOG=1.
func Quiet() *slog.Logger {
	if os.Getenv("SURFACED_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Daemon is a real daemon in the test's process: the runtime, the browser
// gateway and the ACP mount (and in dev mode the inspector) behind the
// guard, on a real listener on 127.0.0.1:0. It stops at the end of the test.
type Daemon struct {
	t          testing.TB
	URL        string // http://127.0.0.1:port
	ACPURL     string // URL + the ACP mount's path
	MCPURL     string // URL + the MCP mount's path
	Addr       string
	Token      string
	TokensFile string
	Runtime    *surfaced.Runtime
	Gateway    *gateway.Server
	ACP        *acpgw.Server
	MCP        *mcpgw.Server
	AGUI       *agui.Server
	Guard      *guard.Guard
	Inspector  *inspect.Inspector // nil unless Dev
	Debug      *debug.Handler     // nil unless Dev
	Events     *EventLog          // the ACP mount's bus events

	mu   sync.Mutex
	hs   *http.Server
	stop func()
}

// Start starts a daemon.
func Start(t testing.TB, opts ...Option) *Daemon {
	t.Helper()
	s := &setup{}
	for _, o := range opts {
		o(s)
	}
	if s.cfg.Store == nil {
		s.cfg.Store = memstore.New()
	}
	if len(s.cfg.Agents) == 0 {
		s.cfg.Agents = []surfaced.AgentSpec{{Name: "fake", Title: "Fake", Argv: testkit.FakeAgent(t)}}
	}
	if s.cfg.Logger == nil {
		s.cfg.Logger = Quiet()
	}
	if s.cfg.NodeID == "" {
		s.cfg.NodeID = NodeID
	}
	d := &Daemon{t: t}
	if s.dev {
		d.Inspector = inspect.New(inspect.Options{})
		s.cfg.Props = d.Inspector.Props
	}
	rt, err := surfaced.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.Runtime = rt
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.Addr = ln.Addr().String()
	d.URL = "http://" + d.Addr
	gc := s.guard
	gc.Addr = d.Addr
	if gc.Logger == nil {
		gc.Logger = s.cfg.Logger
	}
	if s.guardAt != nil {
		s.guardAt(d.URL, &gc)
	}
	if gc.Token == "" && !gc.NoAuth && gc.TokensFile == "" {
		gc.Token = Token
	}
	g, err := guard.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	d.Guard, d.Token, d.TokensFile = g, gc.Token, gc.TokensFile

	ao := s.acp
	ao.Runtime, ao.Revoker = rt, g
	if ao.RequestTimeout == 0 {
		ao.RequestTimeout = s.gateway.RequestTimeout
	}
	if ao.Logger == nil {
		ao.Logger = s.cfg.Logger
	}
	mounts := map[string]http.Handler{}
	gopts := gateway.Options{Runtime: rt, Guard: g, Logger: s.cfg.Logger, Limits: s.gateway, AgentUI: s.agentUI, WebRoot: s.webRoot}
	var stopDead func()
	if s.dev {
		if err := d.Inspector.Register(rt.Registry()); err != nil {
			t.Fatal(err)
		}
		stopDead = d.Inspector.WatchDeadLetters(rt.System())
		d.Debug = debug.New(debug.Options{Inspector: d.Inspector, Node: rt.NodeID(), Guard: g, Logger: s.cfg.Logger})
		gopts.Props = d.Inspector.GatewayProps
		if ao.Props == nil {
			ao.Props = d.Inspector.GatewayProps
		}
		mounts[debug.Prefix] = d.Debug
	}
	d.ACP = acpgw.New(ao)
	d.ACPURL = d.URL + d.ACP.Path()
	mounts[d.ACP.Path()] = d.ACP.Handler()
	mo := s.mcp
	mo.Runtime, mo.Revoker = rt, g
	if mo.Logger == nil {
		mo.Logger = s.cfg.Logger
	}
	d.MCP = mcpgw.New(mo)
	d.MCPURL = d.URL + d.MCP.Path()
	mounts[d.MCP.Path()] = d.MCP.Handler()
	// The AG-UI mount: its runs count against the gateway's stream caps.
	gopts.Slots = gateway.NewSlots(s.gateway)
	gl := s.gateway
	d.AGUI = agui.New(agui.Options{Runtime: rt, Logger: s.cfg.Logger, Slots: gopts.Slots, Revoker: g, Props: gopts.Props,
		BodyBytes: gl.PromptBodyBytes, QueueBytes: gl.QueueBytes, QueueAge: gl.QueueAge, KeepAlive: gl.KeepAlive,
		RequestTimeout: gl.RequestTimeout})
	mounts[d.AGUI.Path()] = d.AGUI.Handler()
	gopts.SessionMounts = map[string]http.Handler{"ag-ui": d.AGUI.Handler()}
	gopts.Mounts, gopts.CORSMounts = mounts, []string{d.ACP.Path()}
	d.Gateway = gateway.New(gopts)
	d.Events = newEventLog(rt)
	d.serve(ln)
	d.stop = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Gateway.Shutdown(ctx)
		d.AGUI.Shutdown()
		_ = rt.Shutdown(ctx)
		d.Gateway.Close(ctx)
		d.AGUI.Close(ctx)
		d.ACP.Close(ctx)
		d.MCP.Close()
		d.mu.Lock()
		hs := d.hs
		d.mu.Unlock()
		if hs != nil {
			_ = hs.Shutdown(ctx)
			hs.Close()
		}
		g.Close()
		d.Events.stop()
		if stopDead != nil {
			stopDead()
		}
	})
	t.Cleanup(d.stop)
	return d
}

// Stop stops the daemon as its test's end would (a test that starts
// another daemon on the same store: a restart). Stopping twice is a no-op.
func (d *Daemon) Stop() { d.stop() }

func (d *Daemon) serve(ln net.Listener) {
	hs := d.Gateway.HTTPServer()
	if d.Debug != nil {
		// The inspector's streams end first, or Shutdown would wait for them.
		hs.RegisterOnShutdown(d.Debug.Close)
	}
	d.mu.Lock()
	d.hs = hs
	d.mu.Unlock()
	go func() { _ = hs.Serve(ln) }()
}

// Outage closes the listener and every HTTP connection: to a client the
// daemon is gone. The runtime and the mounts live on.
func (d *Daemon) Outage() {
	d.mu.Lock()
	hs := d.hs
	d.hs = nil
	d.mu.Unlock()
	hs.Close()
}

// Restore listens again on the same address.
func (d *Daemon) Restore() {
	d.t.Helper()
	var ln net.Listener
	var err error
	testkit.Eventually(d.t, 5*time.Second, func() bool {
		ln, err = net.Listen("tcp", d.Addr)
		return err == nil
	}, "the address free again")
	d.serve(ln)
}

// EventLog records the ACP mount's events on the daemon's bus.
type EventLog struct {
	mu    sync.Mutex
	all   []any
	ch    chan any
	unsub func()
}

func newEventLog(rt *surfaced.Runtime) *EventLog {
	l := &EventLog{ch: make(chan any, 10000)}
	l.unsub = rt.Subscribe(func(ev any) {
		switch ev.(type) {
		case acpgw.ConnectionOpened, acpgw.ConnectionClosed, acpgw.SessionAttached:
			l.mu.Lock()
			l.all = append(l.all, ev)
			l.mu.Unlock()
			select {
			case l.ch <- ev:
			default:
			}
		}
	})
	return l
}

func (l *EventLog) stop() { l.unsub() }

// Wait returns the next event that satisfies pred.
func (l *EventLog) Wait(t testing.TB, what string, pred func(any) bool) any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-l.ch:
			if pred(ev) {
				return ev
			}
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("timed out waiting for %s; events: %+v", what, l.all)
			return nil
		}
	}
}

// TempDir is a temporary directory with its symlinks resolved (a session's
// cwd is compared as the daemon resolves it).
func TempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
