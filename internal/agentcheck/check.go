// Package agentcheck checks an agent against the agent protocol
// (docs/agent-protocol.md) the way the daemon runs it: it starts the agent
// in a session of a real runtime (the daemon's session and surface actors,
// on a memory store), watches its lines both ways through the runtime's
// agent tap and the session's frames through a subscriber, and tells a
// person writing an agent, in plain sentences, what is wrong: what was
// expected and what came, with a line of the agent's stderr when it helps.
//
// The steps: start (readiness through agent_ready or get_commands, within
// the ready timeout, and the surfaces announced), the probe command
// surface:<domain> of each declared domain, optionally one declared command,
// a prompt (the turn's events, and whether it ends properly), optionally an
// abort, and a restart (the agent stopped as the daemon stops it, started
// again, ready again, its surfaces continuing at their revs). surfaced agent
// check (cmd/surfaced) is its command line.
package agentcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

// Defaults of Options.
const (
	DefaultReadyTimeout = 30 * time.Second
	DefaultSettleWindow = 15 * time.Second
	DefaultTimeout      = 60 * time.Second
	DefaultPrompt       = "Hello! This is surfaced agent check. Please answer in one short sentence."
	// maxAbortGrace bounds how long an aborted turn may take to end.
	maxAbortGrace = 10 * time.Second
	// killAfter is how long the daemon waits after SIGTERM before SIGKILL
	// (agentproc's default).
	killAfter = 2 * time.Second
	// slack is added to the daemon's own timers when the check waits for
	// what they decide, so that the daemon decides first.
	slack = 5 * time.Second
	// owner is the subject the check's session belongs to.
	owner = "agent-check"
)

// Options configure a check. Agent is required.
type Options struct {
	// Agent is how to start the agent, as the daemon has it from the
	// agent's manifest.
	Agent surfaced.AgentSpec
	// ReadyTimeout is how long the agent has to become ready (0:
	// DefaultReadyTimeout, the daemon's default).
	ReadyTimeout time.Duration
	// SettleWindow is how long an agent-hosted command may take (0:
	// DefaultSettleWindow).
	SettleWindow time.Duration
	// Timeout bounds the prompt's turn and the aborted turn (0:
	// DefaultTimeout).
	Timeout time.Duration
	// Prompt is the prompt's text (empty: DefaultPrompt).
	Prompt string
	// Command, "domain/action", is a declared command to run (empty: none),
	// with Args (JSON; empty: none).
	Command string
	Args    json.RawMessage
	// Abort adds the abort step: a prompt (AbortPrompt, empty: Prompt)
	// aborted as soon as its turn starts.
	Abort       bool
	AbortPrompt string
	// Trace, when set, receives every line both ways, the agent's stderr
	// and its exits as they happen.
	Trace io.Writer
	// Logger receives the runtime's log (nil: discarded).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.SettleWindow <= 0 {
		o.SettleWindow = DefaultSettleWindow
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Prompt == "" {
		o.Prompt = DefaultPrompt
	}
	if o.AbortPrompt == "" {
		o.AbortPrompt = o.Prompt
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// abortGrace is how long the check lets an aborted turn take.
func (o Options) abortGrace() time.Duration { return min(o.Timeout, maxAbortGrace) }

// SplitCommand splits "domain/action".
func SplitCommand(s string) (domain, action string, err error) {
	domain, action, ok := strings.Cut(s, "/")
	if !ok || domain == "" || action == "" || strings.Contains(action, "/") {
		return "", "", fmt.Errorf("--command %q: want domain/action, e.g. demo/increment", s)
	}
	return domain, action, nil
}

// Run checks the agent. The error is for a check that could not run at all
// (bad options, a runtime that does not start); everything the agent does
// wrong is in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	if o.Command != "" {
		if _, _, err := SplitCommand(o.Command); err != nil {
			return nil, err
		}
	}
	if len(o.Args) > 0 && !json.Valid(o.Args) {
		return nil, errors.New("--args is not JSON")
	}
	tl := newTimeline(o.Trace)
	rt, err := surfaced.New(surfaced.Config{
		Store:  memstore.New(),
		Agents: []surfaced.AgentSpec{o.Agent},
		Limits: surfaced.Limits{
			ReadyTimeout: o.ReadyTimeout,
			SettleWindow: o.SettleWindow,
			AbortGrace:   o.abortGrace(),
		},
		Logger:   o.Logger,
		NodeID:   "agent-check",
		AgentTap: tl.newTap,
	})
	if err != nil {
		return nil, fmt.Errorf("agent check: starting the runtime: %w", err)
	}
	c := &checker{o: o, rt: rt, tl: tl, rep: &Report{Agent: o.Agent.Name, Argv: o.Agent.Argv}, reported: map[int]bool{}, problems: map[string]bool{}}
	c.sub = rt.System().Root.Spawn(tl.subscriberProps())
	c.run(ctx)
	c.shutdown()
	return c.rep, nil
}

// checker runs the steps of one check.
type checker struct {
	o   Options
	rt  *surfaced.Runtime
	tl  *timeline
	rep *Report
	sub *actor.PID
	id  string // the session
	// domains are the agent-hosted domains registered after the start.
	domains []*pb.SurfaceInfo
	// reported are the timeline positions of diagnostics already reported
	// and unknown is the line types already noted.
	reported map[int]bool
	unknown  []string
	// problems are the problems reported so far, by what and what came.
	problems map[string]bool
}

// fail adds a problem to a step, unless an earlier step reported the same
// one (an agent that misbehaves at its start does again after a restart):
// then a note says so.
func (c *checker) fail(s *Step, p Problem) {
	key := p.What + "\x00" + p.Came
	if c.problems[key] {
		s.note("Again: %s", p.What)
		return
	}
	c.problems[key] = true
	s.fail(p)
}

func (c *checker) run(ctx context.Context) {
	if !c.start(ctx) {
		c.skipRest("the agent never became ready")
		return
	}
	for _, d := range c.domains {
		c.probe(ctx, d)
	}
	if c.o.Command != "" {
		c.command(ctx)
	}
	c.prompt(ctx)
	if c.o.Abort {
		c.abort(ctx)
	}
	c.restart(ctx)
}

// skipRest adds the steps that could not run.
func (c *checker) skipRest(why string) {
	names := []string{"prompt"}
	if c.o.Command != "" {
		names = append([]string{"command " + c.o.Command}, names...)
	}
	if c.o.Abort {
		names = append(names, "abort")
	}
	names = append(names, "restart")
	for _, n := range names {
		s := c.rep.step(n)
		s.Outcome, s.Summary = Skipped, why
	}
}

// shutdown stops the runtime and waits for the last agent process to be
// gone: a check must not leave an agent behind.
func (c *checker) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), killAfter+slack)
	defer cancel()
	from := 0
	inc := c.inc()
	_ = c.rt.Shutdown(ctx)
	if inc > 0 {
		c.tl.wait(ctx, killAfter+slack, from, isExit(inc))
	}
}

// inc is the number of the agent process started last.
func (c *checker) inc() int {
	c.tl.mu.Lock()
	defer c.tl.mu.Unlock()
	return c.tl.incs
}

func system() *pb.Caller { return &pb.Caller{System: true, Via: "check"} }

// request sends msg to the session and waits for the answer.
func (c *checker) request(ctx context.Context, msg proto.Message, timeout time.Duration) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.rt.Request(ctx, c.id, msg)
}

// subscribe (re)subscribes from the first frame of the session's current
// activation (which wakes it up when it sleeps), so that nothing it said
// since it started is missed.
func (c *checker) subscribe(ctx context.Context) error {
	res, err := c.request(ctx, &pb.GetSummary{Caller: system()}, c.o.ReadyTimeout)
	if err != nil {
		return err
	}
	sum, ok := res.(*pb.SessionSummary)
	if !ok || sum.GetError() != nil {
		return fmt.Errorf("session summary: %v", sum.GetError().GetMessage())
	}
	res, err = c.request(ctx, &pb.Subscribe{Subscriber: pb.PidOf(c.sub), LastEventId: sum.GetEpoch() + "-0",
		ClientKind: "check", Subject: owner}, c.o.ReadyTimeout)
	if err != nil {
		return err
	}
	if sr, ok := res.(*pb.SubscribeResult); !ok || !sr.GetOk() {
		return fmt.Errorf("subscribe: %v", sr.GetError().GetMessage())
	}
	return nil
}

// runCommand runs a command on a domain of the session.
func (c *checker) runCommand(ctx context.Context, domain, action string, args json.RawMessage) (*pb.CommandResult, error) {
	res, err := c.request(ctx, &pb.RunCommand{Caller: system(), Domain: domain, Action: action, Args: args}, c.o.SettleWindow+slack)
	if err != nil {
		return nil, err
	}
	cr, ok := res.(*pb.CommandResult)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", res)
	}
	return cr, nil
}

// snapshot is the last state frame of a domain's snapshot since from.
func (c *checker) snapshot(domain string, from int) (rev uint64, value []byte, ok bool) {
	key := agentproc.SurfaceKey(domain)
	for _, e := range c.tl.since(from) {
		if e.kind == frame && e.event.GetState() != nil && e.event.GetState().GetKey() == key {
			st := e.event.GetState()
			rev, value, ok = st.GetRev(), st.GetValue(), true
		}
	}
	return rev, value, ok
}

// status is the session's last status frame since from (nil: none).
func (c *checker) status(from int) *pb.StatusEvent {
	var last *pb.StatusEvent
	for _, e := range c.tl.since(from) {
		if e.kind == frame && e.event.GetStatus() != nil {
			last = e.event.GetStatus()
		}
	}
	return last
}

// ensureReady makes sure the agent is ready before a step: an agent that
// crashed in an earlier step is being restarted by the daemon, and the step
// waits for it; a step that finds it not ready is skipped. The session's
// summary is asked for, not the frames seen so far: it answers after
// everything the session has done.
func (c *checker) ensureReady(ctx context.Context, s *Step) bool {
	mark := c.tl.mark()
	res, err := c.request(ctx, &pb.GetSummary{Caller: system()}, c.o.ReadyTimeout)
	sum, _ := res.(*pb.SessionSummary)
	if err == nil && sum.GetStatus() == "ready" {
		return true
	}
	if _, ok := c.tl.wait(ctx, c.o.ReadyTimeout+slack, mark, isStatus("ready")); ok {
		return true
	}
	st := c.status(0)
	s.Outcome = Skipped
	s.Summary = fmt.Sprintf("the agent is not ready (the session's status is %s", st.GetStatus())
	if st.GetDetail() != "" {
		s.Summary += ": " + st.GetDetail()
	}
	s.Summary += ")"
	return false
}

// afterExit waits until the session has seen agent process inc exit (its
// status changed after the exit): the next step's ensureReady then waits for
// the restart.
func (c *checker) afterExit(ctx context.Context, inc int) {
	x, ok := c.tl.wait(ctx, slack, 0, isExit(inc))
	if !ok {
		return
	}
	c.tl.wait(ctx, slack, x.pos, isStatus("error", "starting", "ended"))
}

// finish ends a step: the daemon's diagnostics and the line types it does
// not know, since from, are the step's problems and notes.
func (c *checker) finish(s *Step, from int) {
	known := knownAgentTypes()
	for i, e := range c.tl.since(from) {
		pos := from + i
		switch {
		case e.kind == frame && e.event.GetDiagnostic() != nil && !c.reported[pos]:
			c.reported[pos] = true
			c.fail(s, diagnosticProblem(e.event.GetDiagnostic()))
		case e.kind == received && e.typ != "" && !known[e.typ] && !slices.Contains(c.unknown, e.typ):
			c.unknown = append(c.unknown, e.typ)
			s.note("The agent wrote a line of type %q, which the daemon does not know; it ignores it: %s", e.typ, excerpt(e.line, 120))
		}
	}
}

// diagnosticProblem says what a diagnostic of the daemon means for the
// agent.
func diagnosticProblem(d *pb.DiagnosticEvent) Problem {
	p := Problem{Came: d.GetMessage()}
	switch d.GetCode() {
	case "invalid_line":
		p.What = "The daemon dropped or refused a line of the agent."
		p.Expected = `every line on stdout one JSON object with a string "type", of a type and with the fields the protocol gives it (logs go to stderr)`
	case "line_too_long":
		p.What = "The agent wrote a line longer than the daemon's line cap; the daemon dropped it."
		p.Expected = "lines shorter than the cap (limits.max_line, 16 MiB by default); large data belongs in artifacts"
	case agentproc.CodeDuplicateDomain:
		p.What = "The daemon refused a domain the agent declared."
		p.Expected = "each domain declared once in agent_ready, and none the daemon hosts natively"
	case "state_refused":
		p.What = "The daemon refused a state write of the agent."
		p.Expected = "state_set and state_delete only for keys outside surface:*, with values up to 1 MiB"
	default:
		p.What = fmt.Sprintf("The daemon reported %s.", d.GetCode())
		p.Expected = "no diagnostics"
	}
	return p
}

// knownAgentTypes are the line types the daemon reads from an agent.
func knownAgentTypes() map[string]bool {
	known := map[string]bool{}
	for _, t := range []string{
		agentproc.TypeResponse, agentproc.TypeExtensionUIRequest,
		agentproc.TypeAgentReady, agentproc.TypeSurfaceCommand, agentproc.TypeSurfaceGet, agentproc.TypeStateSet,
		agentproc.TypeStateDelete, agentproc.TypeSurfaceDispatchResult,
		agentproc.EventAgentStart, agentproc.EventAgentEnd, agentproc.EventTurnStart, agentproc.EventTurnEnd,
		agentproc.EventMessageStart, agentproc.EventMessageUpdate, agentproc.EventMessageEnd,
		agentproc.EventToolExecutionStart, agentproc.EventToolExecutionUpdate, agentproc.EventToolExecutionEnd,
		agentproc.EventQueueUpdate, agentproc.EventCompactionStart, agentproc.EventCompactionEnd,
		agentproc.EventAutoCompactionStart, agentproc.EventAutoCompactionEnd, agentproc.EventAutoRetryStart,
		agentproc.EventAutoRetryEnd, agentproc.EventExtensionError, agentproc.EventSessionInfoChanged,
		agentproc.EventThinkingLevelChanged,
	} {
		known[t] = true
	}
	return known
}
