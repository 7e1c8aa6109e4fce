// Package inspect is the mailbox inspector of development mode (--dev): a
// live record of every actor the daemon spawns (session, surface domain,
// agent process, gateway actors) with its queue depth, messages posted and
// processed, handling latency over a recent window, the message it is
// handling now and for how long; and per-kind Prometheus metrics (queue
// depth, handling latency, dead letters, restarts).
//
// An actor is inspected when its props carry the options Props returns:
//
//	insp := inspect.New(inspect.Options{})
//	rt, _ := surfaced.New(surfaced.Config{..., Props: insp.Props})
//	_ = insp.Register(rt.Registry())
//	defer insp.WatchDeadLetters(rt.System())()
//	srv := gateway.New(gateway.Options{..., Props: insp.GatewayProps})
//
// Nothing here runs unless those options are given: without --dev the daemon
// spawns its actors with their plain props and pays nothing.
//
// How it measures: the option wraps the actor's unbounded mailbox. The
// wrapper counts posts and reads the queue length; when protoactor registers
// the actor with its mailbox, the wrapper learns the PID and puts itself
// between the mailbox's message loop and the actor context (the
// MessageInvoker), so it times exactly the handler of each message.
// protoactor's MailboxMiddleware hooks are not used: they get no PID and run
// after the handler. A receiver middleware is not used either: it would cost
// an envelope allocation per message and deepen the stack of every handler
// (each mailbox run starts a fresh goroutine, and a deeper stack makes more
// of them grow theirs). The entry goes away once the actor's stop completes.
package inspect

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/surfaced/surfaced/internal/clock"
)

// The kinds of actor the daemon spawns. Props accepts any kind string; these
// are the ones the daemon uses.
const (
	KindSession   = "session"
	KindSurface   = "surface"
	KindAgentProc = "agentproc"
	KindSSE       = "sse"
	KindWS        = "ws"
	KindACP       = "acp"
)

// Kinds lists the daemon's actor kinds in display order.
var Kinds = []string{KindSession, KindSurface, KindAgentProc, KindSSE, KindWS, KindACP}

// kindOther labels dead letters whose target the inspector cannot place.
const kindOther = "other"

// Defaults of Options.
const (
	DefaultWindow    = 256
	DefaultWindowAge = 10 * time.Second
	// tombstones remembers this many stopped actors, to attribute the dead
	// letters sent to them to their kind.
	tombstones = 4096
)

// Options configure an Inspector. The zero value is ready to use.
type Options struct {
	// Window is how many recent messages per actor the latency percentiles
	// cover (DefaultWindow).
	Window int
	// WindowAge drops messages older than this from the percentiles
	// (DefaultWindowAge), so an actor that was slow a minute ago and idle
	// since does not look slow now.
	WindowAge time.Duration
	// Clock times the handlers, the latency window and "current for" (nil:
	// the wall clock). Tests pass a clock.Fake and move it themselves.
	Clock clock.Clock
}

// Inspector keeps the records of the inspected actors of one process. It is
// safe for concurrent use.
type Inspector struct {
	window int
	age    time.Duration
	clk    clock.Clock // nil: the wall clock, read with time.Since
	epoch  time.Time   // monotonic origin of the sample timestamps

	actors sync.Map // *actor.PID -> *record (live, registered actors)

	metrics *kindMetrics
	kmu     sync.Mutex
	kinds   map[string]*kindStats

	tmu   sync.Mutex
	dead  map[string]string // stopped actor id -> kind
	order []string          // dead ids, oldest first
}

// New returns an Inspector.
func New(o Options) *Inspector {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.WindowAge <= 0 {
		o.WindowAge = DefaultWindowAge
	}
	return &Inspector{
		window:  o.Window,
		age:     o.WindowAge,
		clk:     o.Clock,
		epoch:   now(o.Clock),
		metrics: newKindMetrics(),
		kinds:   map[string]*kindStats{},
		dead:    map[string]string{},
	}
}

// Props returns the props options that make one actor inspected; its
// signature is surfaced.Config.Props. kind is session, surface, agentproc,
// sse, ws or acp; domain is set for surface actors. The props may spawn any
// number of actors: each gets its own record.
//
// The option sets the mailbox (an unbounded mailbox, protoactor's default);
// give it after any mailbox option of your own, which it replaces.
func (in *Inspector) Props(kind, sessionID, domain string) []actor.PropsOption {
	ks := in.kind(kind)
	return []actor.PropsOption{
		actor.WithMailbox(func() actor.Mailbox {
			r := &record{in: in, kind: ks, session: sessionID, domain: domain, samples: make([]atomic.Uint64, in.window)}
			r.mb = actor.Unbounded()()
			return &mailbox{Mailbox: r.mb, r: r}
		}),
	}
}

// GatewayProps is Props for the gateway actors (gateway.Options.Props):
// kind is sse, ws or acp.
func (in *Inspector) GatewayProps(kind, sessionID string) []actor.PropsOption {
	return in.Props(kind, sessionID, "")
}

// Register registers the per-kind metrics on reg.
func (in *Inspector) Register(reg prometheus.Registerer) error {
	return in.metrics.register(reg)
}

// WatchDeadLetters counts the dead letters of sys per kind of the actor they
// were sent to (a stopped inspected actor; "other" when unknown) until the
// returned function is called.
func (in *Inspector) WatchDeadLetters(sys *actor.ActorSystem) (stop func()) {
	sub := sys.EventStream.Subscribe(func(ev any) {
		if dl, ok := ev.(*actor.DeadLetterEvent); ok {
			in.kind(in.kindOfDead(dl.PID)).deadLetters.Inc()
		}
	})
	return func() { sys.EventStream.Unsubscribe(sub) }
}

// Len returns how many actors are inspected now.
func (in *Inspector) Len() int {
	n := 0
	in.actors.Range(func(_, _ any) bool { n++; return true })
	return n
}

func (in *Inspector) add(r *record) {
	in.actors.Store(r.pid, r)
	r.kind.live.Inc()
}

// remove forgets r (idempotent) and remembers its kind for dead letters.
// Both under tmu, as kindOfDead reads them: a dead letter looked up between
// the two would find the actor in neither and count as "other".
func (in *Inspector) remove(r *record) {
	in.tmu.Lock()
	defer in.tmu.Unlock()
	if _, loaded := in.actors.LoadAndDelete(r.pid); !loaded {
		return
	}
	r.kind.live.Dec()
	if _, ok := in.dead[r.id]; !ok {
		in.order = append(in.order, r.id)
	}
	in.dead[r.id] = r.kind.name
	if len(in.order) > tombstones {
		drop := len(in.order) - tombstones
		for _, id := range in.order[:drop] {
			delete(in.dead, id)
		}
		in.order = append(in.order[:0], in.order[drop:]...)
	}
}

func (in *Inspector) kindOfDead(pid *actor.PID) string {
	if pid == nil {
		return kindOther
	}
	in.tmu.Lock()
	defer in.tmu.Unlock()
	if k, ok := in.dead[pid.Id]; ok {
		return k
	}
	// A letter can reach a stopped actor before its record is removed.
	var kind string
	in.actors.Range(func(key, v any) bool {
		if key.(*actor.PID).Id == pid.Id {
			kind = v.(*record).kind.name
			return false
		}
		return true
	})
	if kind != "" {
		return kind
	}
	return kindOther
}

// clock is monotonic time since the inspector's epoch: one clock read, where
// time.Now takes two (wall and monotonic), and it runs twice per message.
func (in *Inspector) clock() time.Duration {
	if in.clk == nil {
		return time.Since(in.epoch)
	}
	return in.clk.Now().Sub(in.epoch)
}

// now is the time on c, the wall clock when c is nil.
func now(c clock.Clock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}

// kind returns the stats of a kind, creating them on first use.
func (in *Inspector) kind(name string) *kindStats {
	in.kmu.Lock()
	defer in.kmu.Unlock()
	ks, ok := in.kinds[name]
	if !ok {
		ks = in.metrics.forKind(name)
		in.kinds[name] = ks
	}
	return ks
}

// records returns the live records (and drops any whose actor is gone from
// the process registry without the inspector seeing its stop complete).
func (in *Inspector) records() []*record {
	var out []*record
	in.actors.Range(func(_, v any) bool {
		r := v.(*record)
		if !r.alive() {
			in.remove(r)
			return true
		}
		out = append(out, r)
		return true
	})
	return out
}
