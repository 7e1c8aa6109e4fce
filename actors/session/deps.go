// Package session is the session actor: one per session, the owner of its
// lifecycle, turn and inbox, KV, transcript and frame log, and the parent of
// its surface domain actors and its agent process actor. Directory addresses
// sessions by id (Local now; the cluster kind later).
package session

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"

	agentactor "github.com/surfaced/surfaced/actors/internal/agent"
	"github.com/surfaced/surfaced/actors/session/internal/framelog"
	"github.com/surfaced/surfaced/actors/session/internal/turn"
	"github.com/surfaced/surfaced/actors/surface"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/lograte"
	"github.com/surfaced/surfaced/internal/tracing"
	"github.com/surfaced/surfaced/metrics"
	"github.com/surfaced/surfaced/store"
)

// AgentSpec is a configured agent: how to start it for a session.
type AgentSpec struct {
	Name        string
	Title       string
	Description string
	Argv        []string
	Env         []string // KEY=VALUE, added to the daemon's environment
	Cwd         string   // default working directory
	// Images: prompts may carry images (the agent's model accepts them).
	Images bool
}

// Limits are the per-session limits and timings. Zero values take the defaults.
type Limits struct {
	ReplayFrames      int           // frame log window, frames (4096)
	ReplayBytes       int           // frame log window, bytes (4 MiB)
	MaxLine           int           // agent stdout line cap (16 MiB)
	StdinBytes        int           // agent stdin queue: records the agent has not read yet (64 MiB)
	ReadyTimeout      time.Duration // agent readiness (30 s)
	SettleWindow      time.Duration // agent-hosted command answer (15 s)
	FetchTimeout      time.Duration // a data page (15 s)
	RestartMax        int           // restarts allowed within RestartWindow (3); negative: never restart
	RestartWindow     time.Duration // (60 s)
	RestartBackoff    time.Duration // first backoff, doubled per restart (250 ms)
	CommandsPerSecond int           // per session (1000)
	InboxMax          int           // queued prompts (100)
	PromptBytes       int           // one prompt, text and images; also what one turn's prompt command joins (16 MiB)
	InboxBytes        int           // queued prompts, in bytes as PromptBytes counts them (32 MiB)
	AbortGrace        time.Duration // a cancelled turn that does not end is ended after this (10 s)
	IdleTimeout       time.Duration // a live session with no clients and no turn sleeps after this (0: never)
	EndedLinger       time.Duration // an ended session's actor stays this long after its last request (60 s)
	MaxSnapshot       int           // bytes of a surface snapshot (4 MiB)
	MaxKVValue        int           // bytes of a KV value (1 MiB)
	CommandQueue      int           // commands waiting for one surface domain; past it queue_full (64)
	CommandQueueBytes int           // ... and bytes of their args (8 MiB)

	// AgentWindowBytes bounds the agent output read and not yet processed
	// by the session; past it the daemon stops reading the agent's stdout
	// until the session catches up (4 MiB).
	AgentWindowBytes int
	// FloodRate and FloodBurst bound the lines an agent writes that nobody
	// asked for (unknown types, answers to nothing, invalid lines, events
	// outside a turn): FloodBurst at once, then FloodRate a second,
	// sustained. Past them the agent is stopped (agent_flooding). Defaults
	// 100/s and 10000; a negative FloodRate never stops an agent.
	FloodRate  int
	FloodBurst int
	// AgentLogLines of an agent's stderr lines (and as many of its dropped
	// lines) are logged per AgentLogInterval; the rest are counted in one
	// summary record (100 per 10 s).
	AgentLogLines    int
	AgentLogInterval time.Duration
	// Idempotency bounds each domain's memory of the commands it applied,
	// by idempotency key (10 min, 256 keys, 256 KiB).
	Idempotency surface.IdempotencyLimits
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.ReplayFrames, framelog.DefaultReplayFrames)
	def(&l.ReplayBytes, framelog.DefaultReplayBytes)
	def(&l.MaxLine, 16<<20)
	def(&l.StdinBytes, proc.WriteQueueLimit)
	defd(&l.ReadyTimeout, 30*time.Second)
	defd(&l.SettleWindow, surface.DefaultSettleWindow)
	defd(&l.FetchTimeout, surface.DefaultFetchTimeout)
	def(&l.RestartMax, 3)
	defd(&l.RestartWindow, 60*time.Second)
	defd(&l.RestartBackoff, 250*time.Millisecond)
	def(&l.CommandsPerSecond, 1000)
	def(&l.InboxMax, 100)
	def(&l.PromptBytes, turn.DefaultPromptBytes)
	def(&l.InboxBytes, turn.DefaultInboxBytes)
	defd(&l.AbortGrace, 10*time.Second)
	defd(&l.EndedLinger, 60*time.Second)
	def(&l.MaxSnapshot, surface.DefaultMaxSnapshot)
	def(&l.MaxKVValue, 1<<20)
	def(&l.CommandQueue, surface.DefaultQueueMax)
	def(&l.CommandQueueBytes, surface.DefaultQueueBytes)
	def(&l.AgentWindowBytes, agentactor.DefaultWindowBytes)
	def(&l.FloodRate, 100)
	def(&l.FloodBurst, 10000)
	def(&l.AgentLogLines, lograte.DefaultLines)
	defd(&l.AgentLogInterval, lograte.DefaultInterval)
	return l
}

// Deps are the node services a session actor uses.
type Deps struct {
	NodeID string
	Writer *store.Writer
	// Agent looks up a configured agent by name.
	Agent func(name string) (AgentSpec, bool)
	// Domains returns the native domains for a session of the named agent.
	Domains func(agent string) []surface.Domain
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	Limits  Limits
	// Props adds props options (the mailbox inspector) to every actor the
	// session spawns, itself included; kind is session, surface or agentproc.
	Props func(kind, sessionID, domain string) []actor.PropsOption
	// Publish puts an event on the daemon's event bus (optional).
	Publish func(event any)
	// AgentTap, when set, gives each agent process a session starts a tap
	// that sees its lines both ways, its stderr and its exit (nil: none).
	AgentTap func(sessionID string) proc.Tap
	// Artifacts are the daemon's artifacts (optional): the agent lines of
	// a session put, get, list and sign its artifacts through it.
	Artifacts *artifact.Service
	// ScratchRoot holds the sessions' scratch directories
	// (<root>/<session id>, SURFACED_ARTIFACT_DIR in the agent's
	// environment) when Artifacts is set. Empty: surfaced-scratch in the
	// system's temporary directory.
	ScratchRoot string

	// Leaser, when set (a cluster), fences the session: an activation takes
	// the session's lease before it writes anything and writes under its
	// token, so that a session is never written by two nodes.
	Leaser   store.Leaser
	LeaseTTL time.Duration // 0: 6 s
	// LeaseConflict reports that the cluster placed a session here while
	// holder (a lease holder's node name) holds its lease until expires (by
	// the store's clock: a later expiry for the same holder means it renewed
	// the lease, so it is alive).
	LeaseConflict func(sessionID, holder string, expires time.Time)
	// Owns reports whether this node is where the cluster places the
	// session, in this node's own view of the members (nil: always). A
	// session active elsewhere gives itself up (lease.go).
	Owns func(sessionID string) bool
	// Clock is the session's time (nil: the wall clock).
	Clock clock.Clock
	// Tracker makes each agent's process tree end with it (nil: only its
	// process group does).
	Tracker *proc.Tracker
	// Activated / Deactivated track the sessions live on this node.
	Activated   func(id string, pid *actor.PID)
	Deactivated func(id string, pid *actor.PID)
	// Admit, when set, is asked before a stored session is activated on
	// this node (woken by a request after a restart, a sleep, or a move):
	// an error (errors.Is ErrTooManySessions) refuses the activation, so
	// that revived sessions count against the node's session limit as
	// created ones do.
	Admit func() error
}

// ErrTooManySessions is what an activation refused by Deps.Admit is
// (errors.Is): the node runs as many sessions as it may.
var ErrTooManySessions = errors.New("too many sessions")

func (d *Deps) admit() error {
	if d.Admit == nil {
		return nil
	}
	return d.Admit()
}

func (d *Deps) clock() clock.Clock {
	if d.Clock != nil {
		return d.Clock
	}
	return clock.Real{}
}

// scratchDir is the scratch directory of a session.
func (d *Deps) scratchDir(sessionID string) string {
	root := d.ScratchRoot
	if root == "" {
		root = filepath.Join(os.TempDir(), "surfaced-scratch")
	}
	return filepath.Join(root, sessionID)
}

func (d *Deps) leaseTTL() time.Duration {
	if d.LeaseTTL > 0 {
		return d.LeaseTTL
	}
	return 6 * time.Second
}

// props are the props options of an actor of the session: Deps.Props', and
// the tracing middleware while tracing is on (a cluster kind's props,
// shared by every session, name none).
func (d *Deps) props(kind, sessionID, domain string) []actor.PropsOption {
	var opts []actor.PropsOption
	if d.Props != nil {
		opts = d.Props(kind, sessionID, domain)
	}
	if tracing.On() {
		kv := []attribute.KeyValue{tracing.AttrNode.String(d.NodeID)}
		if sessionID != "" {
			kv = append(kv, tracing.AttrSession.String(sessionID))
		}
		if domain != "" {
			kv = append(kv, tracing.AttrDomain.String(domain))
		}
		opts = append(opts, tracing.ActorOptions(kind, kv...)...)
	}
	return opts
}
