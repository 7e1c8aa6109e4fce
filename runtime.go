// Package surfaced is the embeddable runtime of the surfaced daemon: the actor
// system, the configured agents, the native surface domains, the session
// directory and the store. The daemon (cmd/surfaced) puts the HTTP gateway
// and ACP in front of it; a Go program can embed it the same way
// (examples/embedded).
package surfaced

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/tracing"
	"github.com/surfaced/surfaced/metrics"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Version is the build version and Commit the short hash of the commit it
// was built from. `make build` sets both with the linker (-X); a binary built
// without them (go run, go build, go install) fills them in at start from
// what the Go toolchain recorded (see version.go), and says "dev" and ""
// when it recorded nothing.
var (
	Version = "dev"
	Commit  = ""
)

// AgentSpec is a configured agent.
type AgentSpec = session.AgentSpec

// Limits are the per-session limits.
type Limits = session.Limits

// IdempotencyLimits bound each surface domain's memory of the commands it
// applied (Limits.Idempotency).
type IdempotencyLimits = surface.IdempotencyLimits

// DomainBinding registers a native domain for the sessions of some agents.
type DomainBinding struct {
	Domain surface.Domain
	// Agents the domain applies to; empty means every agent.
	Agents []string
}

// Config configures a Runtime. Store is required; the rest has defaults.
type Config struct {
	Store   store.Store
	Agents  []AgentSpec
	Domains []DomainBinding
	Limits  Limits
	// Quotas bound the sessions CreateSession starts.
	Quotas Quotas
	// Access says which subjects may use which agents (config access);
	// nil: every agent for every subject. An agent a caller may not use is
	// one that does not exist for it: AgentsFor leaves it out, AgentFor
	// and CreateSession answer ErrNoAgent.
	Access *identity.Access
	Logger *slog.Logger
	// Registry receives the daemon's metrics (nil: a private registry).
	Registry *prometheus.Registry
	// WorkspaceRoots, when set, bound the working directories sessions may use.
	WorkspaceRoots []string
	// NodeID names this node in logs and the inspector (default: hostname).
	NodeID string
	// Props adds props options to every actor of a session (the inspector).
	Props func(kind, sessionID, domain string) []actor.PropsOption
	// StoreWorkers is the number of store writer goroutines (default: as
	// many as the store writes at once, store.ConcurrentWrites, else 4).
	StoreWorkers int
	// Cluster, when set, makes this runtime a member of a protoactor cluster:
	// sessions are grains placed by the cluster and fenced by leases in the
	// (shared) store, which must implement store.Leaser.
	Cluster *ClusterConfig
	// AgentTap, when set, gives every agent process a tap that sees its
	// lines both ways, its stderr and its exit: for tools that study an
	// agent (surfaced agent check). The daemon runs without one.
	AgentTap func(sessionID string) agentproc.Tap
	// AgentDir is where the runtime records the agent processes it starts
	// (the daemon uses <data_dir>/agents), so that a restart after a crash
	// ends what the crash left behind; New sweeps it. Empty: no records
	// (every agent's process tree still ends with it while the runtime
	// runs, and agents die with the process).
	AgentDir string
	// Artifacts bound the sessions' artifacts (config limits.artifact_bytes,
	// limits.session_artifact_bytes, limits.artifact_url_ttl).
	Artifacts artifact.Limits
	// EndedRetention, when set, deletes ended sessions (their rows and
	// artifacts) once they have been ended this long (config
	// limits.ended_retention); 0 keeps them.
	EndedRetention time.Duration
	// Clock runs the runtime's sweeps (orphaned artifact bytes, ended
	// sessions) and dates signed URLs (nil: the wall clock). Sessions keep
	// the wall clock unless SessionClock is set.
	Clock clock.Clock
	// SessionClock runs the sessions' timers: readiness, the restart
	// back-off and its window, the idle clock and the ended linger, the
	// settle window, abort grace, lease renewal (nil: the wall clock). A
	// test sets a fake one to hold a session at a point of its life.
	SessionClock clock.Clock
	// TracerProvider, when set, turns tracing on for the process (the
	// daemon sets it up from its tracing: section instead): spans of the
	// HTTP requests, the session and domain actors, the agent round trips,
	// the store writes, the artifacts and the cluster hops
	// (docs/tracing.md).
	TracerProvider trace.TracerProvider
	// ScratchDir holds the sessions' scratch directories, where agents
	// write the files they put as artifacts and read the ones they get
	// (SURFACED_ARTIFACT_DIR). Empty: surfaced-scratch in the system's
	// temporary directory.
	ScratchDir string
}

// Runtime hosts sessions.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	sys     *actor.ActorSystem
	writer  *store.Writer
	dir     session.Directory
	local   *session.Local // single node (nil in a cluster)
	node    *clusterNode   // cluster member (nil on a single node)
	deps    *session.Deps
	metrics *metrics.Metrics
	tracker *agentproc.Tracker
	arts    *artifact.Service
	clock   clock.Clock
	janitor *janitor

	liveMu sync.Mutex
	live   map[string]*actor.PID // sessions active on this node

	// bus is the daemon's event bus; it outlives actor systems (a cluster
	// member that rejoins gets a new one).
	bus *eventstream.EventStream
	// swap guards sys, dir and node, which a rejoin replaces.
	swap   sync.RWMutex
	reg    *prometheus.Registry
	agents map[string]AgentSpec
	names  []string
	quotas Quotas

	stopping     atomic.Bool // Shutdown has begun
	shutdownOnce sync.Once
	shutdownErr  error
}

// Errors of CreateSession.
var (
	ErrNoAgent      = errors.New("no such agent")
	ErrAgentChoice  = errors.New("choose an agent")
	ErrBadCwd       = errors.New("invalid working directory")
	ErrNoAgents     = errors.New("no agent is configured")
	ErrShuttingDown = errors.New("shutting down")
	// ErrSessionExists: CreateOptions.ID names a session the store holds
	// already (wraps store.ErrExists).
	ErrSessionExists = fmt.Errorf("session exists: %w", store.ErrExists)
)

// New starts a runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.Store == nil {
		return nil, errors.New("surfaced: Config.Store is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.NodeID == "" {
		cfg.NodeID, _ = os.Hostname()
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	r := &Runtime{cfg: cfg, log: log, reg: reg, agents: map[string]AgentSpec{}, live: map[string]*actor.PID{},
		bus: eventstream.NewEventStream(), quotas: cfg.Quotas.withDefaults()}
	for _, a := range cfg.Agents {
		if a.Name == "" {
			return nil, errors.New("surfaced: an agent has no name")
		}
		if len(a.Argv) == 0 {
			return nil, fmt.Errorf("surfaced: agent %q has no command", a.Name)
		}
		if _, dup := r.agents[a.Name]; dup {
			return nil, fmt.Errorf("surfaced: agent %q is configured twice", a.Name)
		}
		r.agents[a.Name] = a
		r.names = append(r.names, a.Name)
	}
	sort.Strings(r.names)
	tracker, err := agentproc.NewTracker(cfg.AgentDir, log)
	if err != nil {
		return nil, fmt.Errorf("surfaced: agent processes: %w", err)
	}
	r.tracker = tracker
	r.metrics = metrics.New(reg)
	if cfg.TracerProvider != nil {
		tracing.Use(cfg.TracerProvider)
	}
	r.clock = cfg.Clock
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	r.writer = store.NewWriter(cfg.Store, cfg.StoreWorkers, log)
	r.writer.SetNode(cfg.NodeID)
	actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	arts, err := artifact.New(actx, artifact.Config{Store: cfg.Store, Writer: r.writer, Limits: cfg.Artifacts, Clock: r.clock, Logger: log,
		Notify: r.notifyArtifact})
	cancel()
	if err != nil {
		r.writer.Close()
		tracker.Close(context.Background())
		return nil, fmt.Errorf("surfaced: %w", err)
	}
	r.arts = arts
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "surfaced_store_available", Help: "1 while the store can be written; 0 while changes are refused (store_unavailable).",
	}, func() float64 {
		if r.writer.Available() {
			return 1
		}
		return 0
	}))
	r.deps = &session.Deps{
		NodeID:      cfg.NodeID,
		Writer:      r.writer,
		Agent:       r.Agent,
		Domains:     r.domainsFor,
		Logger:      log,
		Metrics:     r.metrics,
		Limits:      cfg.Limits,
		Props:       cfg.Props,
		Publish:     r.Publish,
		AgentTap:    cfg.AgentTap,
		Artifacts:   r.arts,
		ScratchRoot: cfg.ScratchDir,
		Activated:   r.activated,
		Deactivated: r.deactivated,
		Tracker:     tracker,
		Admit:       r.admitSession,
		Clock:       cfg.SessionClock,
	}
	if cfg.Cluster != nil {
		if err := r.startCluster(); err != nil {
			r.writer.Close()
			tracker.Close(context.Background())
			r.arts.Close()
			return nil, err
		}
		r.janitor = r.startJanitor()
		return r, nil
	}
	r.sys = newActorSystem(log)
	r.local = session.NewLocal(r.sys, r.deps)
	r.dir = r.local
	r.janitor = r.startJanitor()
	return r, nil
}

// newActorSystem makes an actor system that logs into the daemon's logger.
func newActorSystem(log *slog.Logger) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(sys *actor.ActorSystem) *slog.Logger {
		// protoactor logs a lot at Info; the daemon wants its warnings only.
		return slog.New(minLevel{h: log.Handler(), min: slog.LevelWarn}).With("lib", "protoactor")
	}))
}

func (r *Runtime) activated(id string, pid *actor.PID) {
	r.liveMu.Lock()
	r.live[id] = pid
	r.liveMu.Unlock()
}

func (r *Runtime) deactivated(id string, pid *actor.PID) {
	r.liveMu.Lock()
	if cur, ok := r.live[id]; ok && cur.Equal(pid) {
		delete(r.live, id)
	}
	r.liveMu.Unlock()
}

// LiveSessions returns the ids of the sessions active on this node.
func (r *Runtime) LiveSessions() []string {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	out := make([]string, 0, len(r.live))
	for id := range r.live {
		out = append(out, id)
	}
	return out
}

// Clustered reports whether this runtime is a cluster member.
func (r *Runtime) Clustered() bool {
	r.swap.RLock()
	defer r.swap.RUnlock()
	return r.node != nil
}

// Ready reports whether the runtime serves sessions: always on a single
// node; in a cluster, while this member is in step with the cluster (in its
// own view of the topology, not out of step, and not just back from a
// freeze the watchdog has not looked at yet).
func (r *Runtime) Ready() bool {
	r.swap.RLock()
	n := r.node
	r.swap.RUnlock()
	return n == nil || n.isReady()
}

// StoreHealth is what the store writer knows of the store: whether it can
// be written now, and since when and why not. While it cannot, changes are
// refused (store_unavailable) and the node is not ready.
func (r *Runtime) StoreHealth() store.Health { return r.writer.Health() }

// Agent returns a configured agent.
func (r *Runtime) Agent(name string) (AgentSpec, bool) {
	a, ok := r.agents[name]
	return a, ok
}

// AgentFor is Agent for a caller: an agent the caller may not use (Access)
// is not found.
func (r *Runtime) AgentFor(caller identity.Identity, name string) (AgentSpec, bool) {
	a, ok := r.agents[name]
	if !ok || !r.cfg.Access.Allows(caller, name) {
		return AgentSpec{}, false
	}
	return a, true
}

// AgentsFor returns the agents caller may use (Access), sorted by name:
// what every transport lists.
func (r *Runtime) AgentsFor(caller identity.Identity) []AgentSpec {
	out := make([]AgentSpec, 0, len(r.names))
	for _, n := range r.names {
		if r.cfg.Access.Allows(caller, n) {
			out = append(out, r.agents[n])
		}
	}
	return out
}

// Access is the runtime's access rules (nil: every agent is open).
func (r *Runtime) Access() *identity.Access { return r.cfg.Access }

// Agents returns the configured agents, sorted by name, whoever may use
// them (for the daemon's own use; a caller is shown AgentsFor).
func (r *Runtime) Agents() []AgentSpec {
	out := make([]AgentSpec, 0, len(r.names))
	for _, n := range r.names {
		out = append(out, r.agents[n])
	}
	return out
}

func (r *Runtime) domainsFor(agent string) []surface.Domain {
	var out []surface.Domain
	for _, b := range r.cfg.Domains {
		if len(b.Agents) == 0 {
			out = append(out, b.Domain)
			continue
		}
		for _, a := range b.Agents {
			if a == agent {
				out = append(out, b.Domain)
				break
			}
		}
	}
	return out
}

// System is the actor system (for gateway actors and the event bus).
func (r *Runtime) System() *actor.ActorSystem {
	r.swap.RLock()
	defer r.swap.RUnlock()
	return r.sys
}

// stopLiveSessions asks every session active on this node to stop for reason
// and waits for them.
func (r *Runtime) stopLiveSessions(ctx context.Context, reason string) {
	r.liveMu.Lock()
	pids := make([]*actor.PID, 0, len(r.live))
	for _, pid := range r.live {
		pids = append(pids, pid)
	}
	r.liveMu.Unlock()
	session.StopEach(ctx, r.System().Root, pids, reason)
}

// Directory addresses sessions by id.
func (r *Runtime) Directory() session.Directory {
	r.swap.RLock()
	defer r.swap.RUnlock()
	return r.dir
}

// Local is the single-node directory (nil in a cluster).
func (r *Runtime) Local() *session.Local { return r.local }

// Store is the session store.
func (r *Runtime) Store() store.Store { return r.cfg.Store }

// Artifacts are the sessions' artifacts.
func (r *Runtime) Artifacts() *artifact.Service { return r.arts }

// Metrics are the daemon's collectors.
func (r *Runtime) Metrics() *metrics.Metrics { return r.metrics }

// Registry is the Prometheus registry the metrics live in.
func (r *Runtime) Registry() *prometheus.Registry { return r.reg }

// Logger is the daemon's logger.
func (r *Runtime) Logger() *slog.Logger { return r.log }

// NodeID names this node: its configured name, or in a cluster its member
// address and id.
func (r *Runtime) NodeID() string {
	if r.Clustered() {
		return r.deps.NodeID
	}
	return r.cfg.NodeID
}

// Publish puts an event on the daemon's event bus.
func (r *Runtime) Publish(ev any) { r.bus.Publish(ev) }

// Subscribe calls fn for every event on the bus until the returned function
// is called.
func (r *Runtime) Subscribe(fn func(ev any)) (unsubscribe func()) {
	sub := r.bus.Subscribe(fn)
	return func() { r.bus.Unsubscribe(sub) }
}

// CreateOptions describe a new session.
type CreateOptions struct {
	// Owner is the caller's subject: the session's owner.
	Owner string
	// Groups are the caller's groups, for the access rules (Config.Access).
	// Nil takes them from the identity in ctx (identity.NewContext) when
	// that identity is Owner's.
	Groups []string
	Agent  string // may be empty when exactly one agent is configured
	Cwd    string // default: the agent's cwd, else the daemon's
	Title  string
	// ID is the new session's id when the caller derives it (an AG-UI
	// thread's session, see package agui); empty: a random one. An id the
	// store holds already fails with ErrSessionExists, whoever owns it.
	ID string
}

// ResolveAgent picks the agent for a new session, among every configured
// agent (ResolveAgentFor picks among a caller's).
func (r *Runtime) ResolveAgent(name string) (AgentSpec, error) {
	return r.resolveAgent(r.names, name)
}

// ResolveAgentFor picks the agent for a new session of caller: an agent
// the caller may not use is answered as one that does not exist, and the
// default (no name, one agent) and the lists in the errors count only the
// agents it may use.
func (r *Runtime) ResolveAgentFor(caller identity.Identity, name string) (AgentSpec, error) {
	if r.cfg.Access == nil {
		return r.resolveAgent(r.names, name)
	}
	names := make([]string, 0, len(r.names))
	for _, n := range r.names {
		if r.cfg.Access.Allows(caller, n) {
			names = append(names, n)
		}
	}
	return r.resolveAgent(names, name)
}

func (r *Runtime) resolveAgent(names []string, name string) (AgentSpec, error) {
	if name != "" {
		if !slices.Contains(names, name) {
			return AgentSpec{}, fmt.Errorf("%w %q; configured: %s", ErrNoAgent, name, strings.Join(names, ", "))
		}
		return r.agents[name], nil
	}
	switch len(names) {
	case 0:
		return AgentSpec{}, ErrNoAgents
	case 1:
		return r.agents[names[0]], nil
	default:
		return AgentSpec{}, fmt.Errorf("%w: several agents are configured: %s", ErrAgentChoice, strings.Join(names, ", "))
	}
}

// ResolveCwd checks a session's working directory: an existing directory,
// inside a workspace root when roots are configured.
func (r *Runtime) ResolveCwd(a AgentSpec, cwd string) (string, error) {
	if cwd == "" {
		cwd = a.Cwd
	}
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadCwd, err)
		}
		cwd = wd
	}
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("%w: %q is not an absolute path", ErrBadCwd, cwd)
	}
	cwd = filepath.Clean(cwd)
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: %q is not an existing directory", ErrBadCwd, cwd)
	}
	if len(r.cfg.WorkspaceRoots) > 0 {
		real, err := filepath.EvalSymlinks(cwd)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %w", ErrBadCwd, cwd, err)
		}
		for _, root := range r.cfg.WorkspaceRoots {
			rr, err := filepath.EvalSymlinks(root)
			if err != nil {
				continue
			}
			if rel, err := filepath.Rel(rr, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return cwd, nil
			}
		}
		return "", fmt.Errorf("%w: %q is outside the workspace roots (%s)", ErrBadCwd, cwd, strings.Join(r.cfg.WorkspaceRoots, ", "))
	}
	return cwd, nil
}

// CreateSession stores a new session and starts it (its agent spawns now).
// Past a quota it answers a *QuotaError (errors.Is ErrTooManySessions).
// When the store cannot take it the error wraps store.ErrUnavailable (not
// created) or store.ErrOutcomeUnknown (it may have been).
func (r *Runtime) CreateSession(ctx context.Context, o CreateOptions) (string, error) {
	caller := identity.Identity{Subject: o.Owner, Groups: o.Groups}
	if o.Groups == nil {
		if id, ok := identity.FromContext(ctx); ok && id.Subject == o.Owner {
			caller.Groups = id.Groups
		}
	}
	a, err := r.ResolveAgentFor(caller, o.Agent)
	if err != nil {
		return "", err
	}
	cwd, err := r.ResolveCwd(a, o.Cwd)
	if err != nil {
		return "", err
	}
	if err := r.checkQuotas(ctx, o.Owner); err != nil {
		return "", err
	}
	now := time.Now()
	id := o.ID
	if id == "" {
		id = session.NewID()
	} else if err := store.CheckSessionID(id); err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	rec := store.Session{ID: id, Owner: o.Owner, Agent: a.Name, Title: o.Title, Cwd: cwd,
		Status: session.StatusStarting, Created: now, Updated: now}
	if !r.writer.Available() {
		return "", fmt.Errorf("create session: %w", store.ErrUnavailable)
	}
	if err := r.cfg.Store.CreateSession(ctx, rec); err != nil {
		if errors.Is(err, store.ErrExists) {
			return "", ErrSessionExists
		}
		if !errors.Is(err, store.ErrOutcomeUnknown) && !errors.Is(err, store.ErrInvalid) {
			// Not created: the store could not take it.
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return "", fmt.Errorf("create session: %w", err)
	}
	r.metrics.SessionsCreated.Inc()
	if _, err := r.Request(ctx, rec.ID, &pb.GetSummary{Caller: &pb.Caller{System: true}}); err != nil {
		return "", fmt.Errorf("start session %s: %w", rec.ID, err)
	}
	r.log.Info("session created", "session", rec.ID, "agent", a.Name, "owner", o.Owner, "cwd", cwd)
	return rec.ID, nil
}

// Request sends a request to a session. In a cluster, a request in flight
// when this node rejoins as a new member (its old member and directory are
// gone) is asked again through the new one, within the caller's deadline. In
// a cluster a command without an idempotency key gets one of the daemon's
// own, so that asking again never runs it twice. A single node never asks
// again a command that reached its session (the local directory retries
// only what was not delivered), so it spares the command the key and its
// remembered result: a write and an encoding per command.
func (r *Runtime) Request(ctx context.Context, id string, msg proto.Message) (proto.Message, error) {
	if r.node != nil {
		msg = session.WithIdempotencyKey(msg)
	}
	for {
		d := r.Directory()
		res, err := d.Request(ctx, id, msg)
		if err == nil || !errors.Is(err, session.ErrDirectoryClosed) {
			return res, err
		}
		if !r.awaitNewDirectory(ctx, d) {
			return nil, err
		}
		r.log.Debug("request asked again through the rejoined member", "session", id)
	}
}

// awaitNewDirectory waits until a rejoin has replaced old (true), or the
// deadline passes or the runtime shuts down (false).
func (r *Runtime) awaitNewDirectory(ctx context.Context, old session.Directory) bool {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, session.DefaultRequestTimeout)
		defer cancel()
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if r.stopping.Load() {
			return false
		}
		if r.Directory() != old {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// Shutdown stops every session (they sleep: their agents stop, their clients
// get end{shutdown}, they wake on the next request after a restart; in a
// cluster end{moved}, and they wake on another node) and writes what is
// queued. The store stays open; its owner closes it.
// Shutdown is idempotent; later calls return the first one's result.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.stopping.Store(true)
	r.shutdownOnce.Do(func() {
		r.janitor.stop()
		r.arts.Close()
		if r.local != nil {
			r.local.Close()
			r.local.StopAll(ctx, "shutdown")
		} else {
			// Another node takes the sessions over: clients reconnect now.
			r.stopLiveSessions(ctx, "moved")
			r.swap.RLock()
			node := r.node
			r.swap.RUnlock()
			node.shutdown()
		}
		r.shutdownErr = r.writer.Flush(ctx)
		r.writer.Close()
		// The agents had their grace (until ctx ends); what is left of
		// their trees goes now, with the run's records.
		r.tracker.Close(ctx)
		if r.local != nil {
			r.sys.Shutdown() // a cluster member's went with the cluster
		}
	})
	return r.shutdownErr
}

// minLevel drops records below min.
type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(a), min: m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{h: m.h.WithGroup(n), min: m.min} }
