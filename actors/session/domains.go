package session

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/surface"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// domainRef is the session's view of one surface domain actor (a child).
type domainRef struct {
	pid      *actor.PID
	hosted   string
	commands []string
	// schemas are the args schemas an agent-hosted domain declared (the
	// ones that compile), by action.
	schemas map[string][]byte
	rev     uint64
	// incarnation is the agent incarnation that declared an agent-hosted
	// domain.
	incarnation uint32
	// registered is false for an agent-hosted domain that the running agent
	// has not declared (again). Its actor lives on so that its snapshot and
	// rev continue if the domain comes back.
	registered bool
	// data is the domain's data plane actor (nil: none yet); hasData says
	// whether the domain serves pages now (an agent-hosted domain declares
	// it each time).
	data    *actor.PID
	hasData bool
}

// spawnNativeDomains starts the native domains of the session's agent: they
// exist before the agent can declare anything.
func (s *sessionActor) spawnNativeDomains(ctx actor.Context) {
	if s.deps.Domains == nil {
		return
	}
	for _, d := range s.deps.Domains(s.rec.Agent) {
		name := d.Name()
		if _, dup := s.domains[name]; dup {
			s.diagnostic(proc.CodeDuplicateDomain, fmt.Sprintf("native domain %q is registered twice; the first registration is kept", name))
			continue
		}
		s.spawnDomain(ctx, surface.Config{Domain: name, Hosted: surface.HostedNative, Native: d}, d.Commands(), 0)
		if surface.HasData(d) {
			s.spawnFetcher(ctx, s.domains[name], surface.FetcherConfig{Domain: name, Hosted: surface.HostedNative, Native: d.(surface.DataDomain)})
		}
	}
}

// declareDomains registers the domains a surfaced/1 agent announced. A
// domain already registered (natively, or earlier in the same announcement)
// is refused with a diagnostic; one the previous incarnation hosted is
// handed to the new agent with its snapshot and rev.
func (s *sessionActor) declareDomains(ctx actor.Context, decls []proc.SurfaceDecl) {
	inc := s.agent.incarnation
	for _, decl := range decls {
		if decl.Domain == "" {
			s.diagnostic(codes.InvalidLine, "agent_ready declares a surface without a domain")
			continue
		}
		d, exists := s.domains[decl.Domain]
		if exists && d.registered && (d.hosted != surface.HostedAgent || d.incarnation == inc) {
			who := "natively"
			if d.hosted == surface.HostedAgent {
				who = "earlier in agent_ready"
			}
			msg := fmt.Sprintf("domain %q is already registered %s; the first registration is kept", decl.Domain, who)
			s.sendLine(ctx, proc.SurfaceRegisterResult{Type: proc.TypeSurfaceRegisterResult, Domain: decl.Domain, OK: false,
				Error: &proc.ErrorBody{Code: proc.CodeDuplicateDomain, Message: msg}}, false)
			s.diagnostic(proc.CodeDuplicateDomain, msg)
			continue
		}
		cmds := append([]string(nil), decl.Commands...)
		schemas := s.declaredSchemas(decl)
		if exists && d.hosted == surface.HostedAgent {
			// The restarted agent hosts its domain again: same actor, same
			// snapshot and rev, new agent.
			d.incarnation = inc
			d.commands = cmds
			d.schemas = schemas
			d.registered = true
			ctx.Send(d.pid, &pb.AgentAvailable{Agent: pb.PidOf(s.agent.pid), Incarnation: inc, Commands: cmds, Schemas: schemas})
			s.agentData(ctx, d, decl)
			continue
		}
		s.spawnDomain(ctx, surface.Config{Domain: decl.Domain, Hosted: surface.HostedAgent, Commands: cmds, Schemas: schemas, Initial: decl.InitialState}, cmds, inc)
		s.agentData(ctx, s.domains[decl.Domain], decl)
	}
}

// declaredSchemas are the args schemas a declaration carries that compile,
// for actions it declares; each one left out is a diagnostic (its action
// takes any object).
func (s *sessionActor) declaredSchemas(decl proc.SurfaceDecl) map[string][]byte {
	if len(decl.Schemas) == 0 {
		return nil
	}
	raw := make(map[string][]byte, len(decl.Schemas))
	for action, sch := range decl.Schemas {
		if !slices.Contains(decl.Commands, action) {
			s.diagnostic(codes.InvalidLine, fmt.Sprintf("agent_ready: surface %q declares a schema for %q, which is not one of its commands; it is ignored", decl.Domain, action))
			continue
		}
		raw[action] = sch
	}
	_, bad := surface.CompileSchemas(raw)
	for _, action := range slices.Sorted(maps.Keys(bad)) {
		s.diagnostic(codes.InvalidLine, fmt.Sprintf("agent_ready: the args schema of %s.%s is refused (%v); the command takes any object", decl.Domain, action, bad[action]))
		delete(raw, action)
	}
	return raw
}

// agentData gives an agent-hosted domain the data plane its agent declared
// (or takes it away: the actor stays, unasked, in case it comes back).
func (s *sessionActor) agentData(ctx actor.Context, d *domainRef, decl proc.SurfaceDecl) {
	d.hasData = decl.Data
	switch {
	case !decl.Data:
	case d.data == nil:
		s.spawnFetcher(ctx, d, surface.FetcherConfig{Domain: decl.Domain, Hosted: surface.HostedAgent})
	default:
		ctx.Send(d.data, &pb.AgentAvailable{Agent: pb.PidOf(s.agent.pid), Incarnation: s.agent.incarnation})
	}
}

// spawnFetcher starts a domain's data plane actor with the domain's
// current snapshot and agent.
func (s *sessionActor) spawnFetcher(ctx actor.Context, d *domainRef, cfg surface.FetcherConfig) {
	cfg.SessionID = s.rec.ID
	cfg.Timeout = s.lim.FetchTimeout
	cfg.Logger = s.deps.Logger
	cfg.Clock = s.clock
	props := surface.FetcherProps(cfg)
	pid, err := ctx.SpawnNamed(props, "data-"+cfg.Domain)
	if err != nil {
		pid = ctx.Spawn(props)
	}
	d.data, d.hasData = pid, true
	key := proc.SurfaceKey(cfg.Domain)
	if e, ok := s.kv.Durable(key); ok && !e.Deleted {
		ctx.Send(pid, &pb.StateCommitted{Key: key, Value: e.Value, Rev: e.Rev})
	}
	if cfg.Hosted == surface.HostedAgent && s.agent.pid != nil {
		ctx.Send(pid, &pb.AgentAvailable{Agent: pb.PidOf(s.agent.pid), Incarnation: s.agent.incarnation})
	}
}

func (s *sessionActor) spawnDomain(ctx actor.Context, cfg surface.Config, commands []string, inc uint32) {
	cfg.SessionID = s.rec.ID
	cfg.Writer = s.deps.Writer
	cfg.Fence = s.fence()
	cfg.SettleWindow = s.lim.SettleWindow
	cfg.MaxSnapshot = s.lim.MaxSnapshot
	cfg.QueueMax = s.lim.CommandQueue
	cfg.QueueBytes = s.lim.CommandQueueBytes
	cfg.Logger = s.deps.Logger
	cfg.Outcome = s.deps.Metrics.Command
	cfg.Clock = s.clock
	cfg.Idempotency = s.lim.Idempotency
	cfg.Applied = s.applied[cfg.Domain]
	delete(s.applied, cfg.Domain)
	key := proc.SurfaceKey(cfg.Domain)
	var rev uint64
	if e, ok := s.kv.Durable(key); ok {
		cfg.Stored = &store.KV{Key: key, Value: e.Value, Rev: e.Rev, Deleted: e.Deleted}
		rev = e.Rev
	}
	props := surface.Props(cfg, s.deps.props("surface", s.rec.ID, cfg.Domain)...)
	pid, err := ctx.SpawnNamed(props, "surface-"+cfg.Domain)
	if err != nil {
		pid = ctx.Spawn(props)
	}
	s.domains[cfg.Domain] = &domainRef{pid: pid, hosted: cfg.Hosted, commands: commands, schemas: cfg.Schemas, rev: rev, incarnation: inc, registered: true}
	if cfg.Hosted == surface.HostedAgent && s.agent.pid != nil {
		ctx.Send(pid, &pb.AgentAvailable{Agent: pb.PidOf(s.agent.pid), Incarnation: inc})
	}
}

// retireUndeclaredDomains: agent-hosted domains the new incarnation did not
// declare again are no longer registered (their actors keep their state).
func (s *sessionActor) retireUndeclaredDomains() {
	for _, d := range s.domains {
		if d.hosted == surface.HostedAgent && d.incarnation != s.agent.incarnation {
			d.registered = false
		}
	}
}

// tellDomainsAgent tells agent-hosted domains where their agent is (nil:
// gone).
func (s *sessionActor) tellDomainsAgent(ctx actor.Context, agent *actor.PID) {
	for _, d := range s.domains {
		if d.hosted == surface.HostedAgent {
			ctx.Send(d.pid, &pb.AgentAvailable{Agent: pb.PidOf(agent), Incarnation: s.agent.incarnation})
			if d.data != nil {
				ctx.Send(d.data, &pb.AgentAvailable{Agent: pb.PidOf(agent), Incarnation: s.agent.incarnation})
			}
		}
	}
}

// splitApplied takes the rows of the domains' memories of applied commands
// out of the session's KV as loaded: they are the domains' (spawnDomain hands
// each its own), never state a client sees.
func (s *sessionActor) splitApplied(kvs []store.KV) []store.KV {
	state := kvs[:0:0]
	for _, e := range kvs {
		if domain, ok := surface.IsAppliedKey(e.Key); ok {
			if s.applied == nil {
				s.applied = map[string][]store.KV{}
			}
			s.applied[domain] = append(s.applied[domain], e)
			continue
		}
		state = append(state, e)
	}
	return state
}

// listEndedDomains lists the domains of a session that ended before this
// activation (no actor runs for them; they take no commands): the agent's
// native domains, and the agent-hosted ones whose snapshot the session
// keeps (their commands are not known any more).
func (s *sessionActor) listEndedDomains() {
	if s.deps.Domains != nil {
		for _, d := range s.deps.Domains(s.rec.Agent) {
			if _, dup := s.domains[d.Name()]; !dup {
				s.domains[d.Name()] = &domainRef{hosted: surface.HostedNative, commands: d.Commands(), registered: true}
			}
		}
	}
	for _, k := range s.kv.Keys() {
		domain, ok := strings.CutPrefix(k, proc.SurfaceKeyPrefix)
		if !ok {
			continue
		}
		e, _ := s.kv.Durable(k)
		if d, known := s.domains[domain]; known {
			d.rev = e.Rev
			continue
		}
		if !e.Deleted {
			s.domains[domain] = &domainRef{hosted: surface.HostedAgent, rev: e.Rev, registered: true}
		}
	}
}

// registered returns a registered domain.
func (s *sessionActor) registered(domain string) (*domainRef, bool) {
	d, ok := s.domains[domain]
	if !ok || !d.registered {
		return nil, false
	}
	return d, true
}

// available reports whether a registered domain takes commands now: none
// once the session has ended; a native one always before; an agent-hosted
// one while the agent that declared it runs and is ready.
func (s *sessionActor) available(d *domainRef) bool {
	if s.status.status == StatusEnded || d.pid == nil {
		return false
	}
	if d.hosted != surface.HostedAgent {
		return true
	}
	return s.agent.ready() && d.incarnation == s.agent.incarnation
}

func (s *sessionActor) surfaceInfos() []*pb.SurfaceInfo {
	out := make([]*pb.SurfaceInfo, 0, len(s.domains))
	for name, d := range s.domains {
		if d.registered {
			out = append(out, &pb.SurfaceInfo{Domain: name, Commands: d.commands, Hosted: d.hosted, Rev: d.rev, Available: s.available(d), Schemas: d.schemas})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}

func notRegistered(domain string) string {
	return fmt.Sprintf("no surface %q is registered in this session", domain)
}
