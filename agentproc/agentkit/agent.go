package agentkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// DefaultMaxSteps bounds the model calls of one prompt (model → tools → model …).
const DefaultMaxSteps = 8

// shutdownGrace is how long Run waits, after its input ends, for the cancelled
// turn and in-flight dispatches to write their last lines.
const shutdownGrace = 5 * time.Second

// Options configure an Agent. The zero value is usable: a scripted model, the
// name "agentkit", logs as text on stderr.
type Options struct {
	// Name is announced in agent_ready.
	Name string
	// System is the system prompt given to the model.
	System string
	// Model answers prompts; nil means &ScriptedModel{}. Use ModelFromEnv to
	// honour SURFACED_LLM_*.
	Model Model
	// MaxSteps bounds the model calls per prompt; 0 means DefaultMaxSteps.
	MaxSteps int
	// MaxLineBytes caps one input line; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// Images announces in agent_ready that prompts may carry images.
	Images bool
	// SessionID is reported by get_state; empty means $SURFACED_SESSION_ID.
	SessionID string
	// Logger receives diagnostics; nil means text on stderr. Never stdout: that
	// is the protocol.
	Logger *slog.Logger
	// OnStateChanged, if set, is called for every state_changed line (a
	// session KV key such as a UI preference changed). It runs on the input
	// loop, in order, after Pref reflects the change: it must not block.
	OnStateChanged func(agentproc.StateChanged)
	// OnReady, if set, runs once on its own goroutine after agent_ready is
	// written, with the agent's context: work that needs the daemon (a
	// surface command, an artifact list) without delaying readiness, such as
	// rebuilding a domain's snapshot after a restart.
	OnReady func(ctx context.Context)
	// OnAgentEnd, if set, runs on its own goroutine after each agent_end is
	// written, with the agent's context: turn-end convergence, such as
	// rebuilding a snapshot from what the turn's tools stored. It may call
	// the daemon; the next run does not wait for it.
	OnAgentEnd func(ctx context.Context)
}

// Agent is a surfaced/1 agent: it speaks pi's RPC mode plus the surface lines
// on a pair of streams. Register tools and surfaces, then call Run once.
type Agent struct {
	opts  Options
	log   *slog.Logger
	model Model

	tools    map[string]Tool
	toolList []string
	surfaces map[string]surfaceHost
	surfList []string
	started  atomic.Bool

	out    atomic.Pointer[lineWriter] // set by Run
	nextID atomic.Uint64
	base   context.Context // Run's context, parent of turns and dispatches
	closed chan struct{}   // closed when Run returns; releases every waiter

	pendMu  sync.Mutex
	pending map[string]chan json.RawMessage

	prefMu sync.RWMutex
	prefs  map[string]json.RawMessage

	mu       sync.Mutex
	history  []agentproc.AgentMessage
	turn     *turn // nil while idle
	steering []userInput
	followUp []userInput

	workMu   sync.Mutex
	stopping bool           // set by shutdown; no new work starts after it
	work     sync.WaitGroup // dispatches and deferred responses in flight
	jobs     chan func()    // unbuffered: a send succeeds only to an idle worker
}

// goWork runs f on a goroutine of its own, tracked for shutdown; it reports
// false, and does not run f, once shutdown has begun. The goroutine is a
// warm one when one is idle: a worker that ran work before keeps its grown
// stack for the next and waits workerIdle for it. A fresh goroutine's 2 KiB
// stack grew by copying on every surface dispatch (JSON through reflection
// needs several times that): a tenth of the agent's CPU per dispatch.
func (a *Agent) goWork(f func()) bool {
	a.workMu.Lock()
	if a.stopping {
		a.workMu.Unlock()
		return false
	}
	a.work.Add(1)
	a.workMu.Unlock()
	select {
	case a.jobs <- f: // an idle worker took it
	default:
		go a.worker(f)
	}
	return true
}

// workerIdle is how long a goWork goroutine waits for more work before it
// ends.
const workerIdle = 10 * time.Second

func (a *Agent) worker(f func()) {
	var idle *time.Timer
	for {
		f()
		a.work.Done()
		if idle == nil {
			idle = time.NewTimer(workerIdle)
			defer idle.Stop()
		} else {
			idle.Reset(workerIdle)
		}
		select {
		case f = <-a.jobs:
		case <-idle.C:
			return
		case <-a.closed:
			return
		}
	}
}

// New returns an agent configured by opts.
func New(opts Options) *Agent {
	if opts.Name == "" {
		opts.Name = "agentkit"
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.SessionID == "" {
		opts.SessionID = os.Getenv("SURFACED_SESSION_ID")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	model := opts.Model
	if model == nil {
		model = &ScriptedModel{}
	}
	return &Agent{
		opts:     opts,
		log:      log.With("agent", opts.Name),
		model:    model,
		tools:    map[string]Tool{},
		surfaces: map[string]surfaceHost{},
		closed:   make(chan struct{}),
		jobs:     make(chan func()),
		pending:  map[string]chan json.RawMessage{},
		prefs:    map[string]json.RawMessage{},
	}
}

// AddTool registers a tool the model may call. It panics on an empty or
// duplicate name, a nil Run, or a call after Run.
func (a *Agent) AddTool(t Tool) {
	if a.started.Load() {
		panic("agentkit: AddTool after Run")
	}
	if t.Name == "" || t.Run == nil {
		panic("agentkit: AddTool needs a Name and a Run function")
	}
	if _, dup := a.tools[t.Name]; dup {
		panic(fmt.Sprintf("agentkit: tool %q registered twice", t.Name))
	}
	a.tools[t.Name] = t
	a.toolList = append(a.toolList, t.Name)
}

func (a *Agent) addSurface(domain string, h surfaceHost) {
	if a.started.Load() {
		panic("agentkit: AddSurface after Run")
	}
	if _, dup := a.surfaces[domain]; dup {
		panic(fmt.Sprintf("agentkit: surface %q registered twice", domain))
	}
	a.surfaces[domain] = h
	a.surfList = append(a.surfList, domain)
}

// Run speaks the protocol: it writes agent_ready, then serves lines from in
// until in ends or ctx is done. Every line goes to out whole, with one Write.
// At the end of in, the running turn is cancelled and Run waits (up to a few
// seconds) for its last events before returning nil. If ctx ends first Run
// returns ctx.Err(); a goroutine blocked reading in stays until in returns.
// Run may be called once.
func (a *Agent) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agentkit: Run called twice")
	}
	base, cancelBase := context.WithCancel(ctx)
	defer cancelBase()
	a.base = base
	lw := &lineWriter{w: out}
	a.out.Store(lw)

	ready := agentproc.AgentReady{
		Type: agentproc.TypeAgentReady, Protocol: agentproc.Protocol, Name: a.opts.Name, Images: a.opts.Images,
	}
	for _, d := range a.surfList {
		ready.Surfaces = append(ready.Surfaces, a.surfaces[d].decl())
	}
	if err := lw.send(ready); err != nil {
		return err
	}
	info := modelInfo(a.model)
	a.log.Info("agent ready", "protocol", agentproc.Protocol, "surfaces", a.surfList, "tools", a.toolList,
		"model", info.ID, "provider", info.Provider)
	if f := a.opts.OnReady; f != nil {
		a.goWork(func() { f(base) })
	}

	readErr := make(chan error, 1)
	src, release := pollable(in)
	defer release()
	go func() { readErr <- a.readLoop(src) }()

	var err error
	select {
	case err = <-readErr:
	case <-ctx.Done():
		err = ctx.Err()
	}
	a.shutdown(cancelBase)
	if werr := lw.close(); err == nil && werr != nil {
		err = werr
	}
	return err
}

// shutdown cancels the turn, waits a bounded time for it and the in-flight
// dispatches, then releases every waiter.
func (a *Agent) shutdown(cancelBase context.CancelFunc) {
	a.workMu.Lock()
	a.stopping = true
	a.workMu.Unlock()
	a.mu.Lock()
	t := a.turn
	a.steering, a.followUp = nil, nil
	a.mu.Unlock()
	if t != nil {
		t.cancel()
	}
	close(a.closed)
	cancelBase()
	done := make(chan struct{})
	go func() {
		if t != nil {
			<-t.done
		}
		a.work.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		a.log.Warn("shutdown: the turn or a surface command did not end in time; leaving it behind",
			"grace", shutdownGrace)
	}
}

func (a *Agent) readLoop(in io.Reader) error {
	rd := agentproc.NewReader(in, a.opts.MaxLineBytes)
	for {
		line, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			var tl *agentproc.LineTooLongError
			if errors.As(err, &tl) {
				a.log.Error("input line dropped", "reason", err.Error())
				continue
			}
			return fmt.Errorf("agentkit: read from daemon: %w", err)
		}
		a.handleLine(line) // line is valid until the next Next: handleLine copies what it keeps
	}
}

// envelope is the part of every input line the router needs.
type envelope struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// Traceparent is the daemon's trace context, on lines sent while
	// tracing (docs/agent-protocol.md, "Trace context").
	Traceparent string `json:"traceparent"`
}

// handleLine routes one input line. It never blocks on a tool, a turn or a
// surface command: those run on their own goroutines, so a dispatch the daemon
// sends while a tool waits for its surface_command_result is always served.
func (a *Agent) handleLine(line []byte) {
	select {
	case <-a.closed:
		return // Run has returned (its context ended); nobody serves this line
	default:
	}
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil || env.Type == "" {
		reason := "no string \"type\""
		if err != nil {
			reason = err.Error()
		}
		a.log.Error("input line dropped: not a JSON object with a string type", "reason", reason,
			"line", excerpt(line))
		return
	}
	switch env.Type {
	case agentproc.TypeSurfaceDispatch:
		var d agentproc.SurfaceDispatch
		if !a.decode(line, &d) {
			return
		}
		if !a.goWork(func() { a.serveDispatch(&d, env.Traceparent) }) {
			a.log.Warn("dispatch dropped: agent is stopping", "id", d.ID, "domain", d.Domain, "action", d.Action)
		}
	case agentproc.TypeSurfaceFetch:
		var f agentproc.SurfaceFetch
		if !a.decode(line, &f) {
			return
		}
		if !a.goWork(func() { a.serveFetch(&f) }) {
			a.log.Warn("fetch dropped: agent is stopping", "id", f.ID, "domain", f.Domain, "path", f.Path)
		}
	case agentproc.TypeSurfaceCommandResult, agentproc.TypeSurfaceGetResult, agentproc.TypeExtensionUIResponse,
		agentproc.TypeArtifactPutResult, agentproc.TypeArtifactGetResult, agentproc.TypeArtifactListResult, agentproc.TypeArtifactURLResult:
		if !a.resolve(env.Type, env.ID, bytes.Clone(line)) {
			a.log.Warn("answer for no pending request ignored", "type", env.Type, "id", env.ID)
		}
	case agentproc.TypeStateChanged:
		var sc agentproc.StateChanged
		if !a.decode(line, &sc) {
			return
		}
		a.applyStateChanged(sc)
	case agentproc.TypeSurfaceRegisterResult:
		var r agentproc.SurfaceRegisterResult
		if !a.decode(line, &r) {
			return
		}
		if !r.OK {
			code, msg := "", ""
			if r.Error != nil {
				code, msg = r.Error.Code, r.Error.Message
			}
			a.log.Warn("daemon rejected surface registration", "domain", r.Domain, "code", code, "message", msg)
		}
	case agentproc.CmdPrompt, cmdSteer, cmdFollowUp:
		var p agentproc.PromptCommand
		if !a.decode(line, &p) {
			return
		}
		a.handlePrompt(env.Type, &p, env.Traceparent)
	case agentproc.CmdAbort:
		a.handleAbort(env.ID)
	case agentproc.CmdGetState:
		a.respond(env.ID, env.Type, a.stateData())
	case agentproc.CmdGetMessages:
		a.mu.Lock()
		msgs := slices.Clone(a.history)
		a.mu.Unlock()
		if msgs == nil {
			msgs = []agentproc.AgentMessage{}
		}
		a.respond(env.ID, env.Type, map[string]any{"messages": msgs})
	case agentproc.CmdGetCommands:
		a.respond(env.ID, env.Type, map[string]any{"commands": a.commands()})
	default:
		// pi answers commands it does not know with an id-less failure; the id
		// is kept when the line had one so that a waiting caller is released.
		a.fail(env.ID, env.Type, "Unknown command: "+env.Type)
	}
}

// pi command types agentkit serves beyond those named in agentproc.
const (
	cmdSteer    = "steer"
	cmdFollowUp = "follow_up"
)

// decode unmarshals a routed line, logging a line that does not fit its type.
func (a *Agent) decode(line []byte, v any) bool {
	if err := json.Unmarshal(line, v); err != nil {
		a.log.Error("input line dropped: bad fields", "type", fmt.Sprintf("%T", v), "reason", err.Error(),
			"line", excerpt(line))
		return false
	}
	return true
}

func excerpt(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func (a *Agent) serveDispatch(d *agentproc.SurfaceDispatch, traceparent string) {
	var (
		res   agentproc.Result
		state json.RawMessage
	)
	if h, ok := a.surfaces[d.Domain]; ok {
		ctx, span := startSpan(withTrace(a.base, traceparent), "surface_dispatch "+d.Domain+"."+d.Action,
			attribute.String("surfaced.domain", d.Domain), attribute.String("surfaced.action", d.Action))
		defer span.End()
		if d.Deadline != nil {
			// The daemon ignores an answer after its deadline: the
			// command's context ends then.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, *d.Deadline)
			defer cancel()
		}
		res, state = h.dispatch(ctx, a, d)
		spanResult(span, res)
	} else {
		res = failure(agentproc.CodeSurfaceNotRegistered, fmt.Sprintf("this agent hosts no surface %q", d.Domain))
	}
	resBytes, err := plainjson.Marshal(res)
	if err != nil { // cannot happen: Result holds only encodable fields
		a.log.Error("encode dispatch result", "err", err)
		return
	}
	if err := a.send(agentproc.SurfaceDispatchResult{
		Type: agentproc.TypeSurfaceDispatchResult, ID: d.ID, Result: resBytes, State: state,
	}); err != nil {
		a.log.Error("send dispatch result", "id", d.ID, "err", err)
	}
}

// send writes one line; it fails once Run has returned.
func (a *Agent) send(v any) error {
	lw := a.out.Load()
	if lw == nil {
		return errClosed
	}
	return lw.send(v)
}

// respond answers a pi command with success and optional data.
func (a *Agent) respond(id, command string, data any) {
	r := agentproc.Response{ID: id, Type: agentproc.TypeResponse, Command: command, Success: true}
	if data != nil {
		b, err := plainjson.Marshal(data)
		if err != nil {
			a.fail(id, command, "encode response: "+err.Error())
			return
		}
		r.Data = b
	}
	if err := a.send(r); err != nil {
		a.log.Error("send response", "command", command, "err", err)
	}
}

// fail answers a pi command with success:false.
func (a *Agent) fail(id, command, message string) {
	if err := a.send(agentproc.Response{ID: id, Type: agentproc.TypeResponse, Command: command, Error: message}); err != nil {
		a.log.Error("send response", "command", command, "err", err)
	}
}

// commandInfo is one entry of pi's get_commands answer.
type commandInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source"`
}

// commands lists the probe command surface:<domain> of every hosted domain,
// the way pi-web's createSurface registers it, so a daemon that probes with
// get_commands sees the surfaces too.
func (a *Agent) commands() []commandInfo {
	out := make([]commandInfo, 0, len(a.surfList))
	for _, d := range a.surfList {
		out = append(out, commandInfo{
			Name: agentproc.SurfaceKey(d), Description: "agent-authoritative-surface probe: " + d, Source: "extension",
		})
	}
	return out
}

// sessionState is pi's RpcSessionState, as far as it applies to agentkit.
type sessionState struct {
	Model                 *ModelInfo `json:"model,omitempty"`
	ThinkingLevel         string     `json:"thinkingLevel"`
	IsStreaming           bool       `json:"isStreaming"`
	IsCompacting          bool       `json:"isCompacting"`
	SteeringMode          string     `json:"steeringMode"`
	FollowUpMode          string     `json:"followUpMode"`
	SessionID             string     `json:"sessionId"`
	SessionName           string     `json:"sessionName,omitempty"`
	AutoCompactionEnabled bool       `json:"autoCompactionEnabled"`
	MessageCount          int        `json:"messageCount"`
	PendingMessageCount   int        `json:"pendingMessageCount"`
}

func (a *Agent) stateData() sessionState {
	info := modelInfo(a.model)
	a.mu.Lock()
	defer a.mu.Unlock()
	return sessionState{
		Model:         &info,
		ThinkingLevel: "off",
		IsStreaming:   a.turn != nil,
		// Queued messages are delivered together at the next opportunity.
		SteeringMode:        "all",
		FollowUpMode:        "all",
		SessionID:           a.opts.SessionID,
		SessionName:         a.opts.Name,
		MessageCount:        len(a.history),
		PendingMessageCount: len(a.steering) + len(a.followUp),
	}
}

func modelInfo(m Model) ModelInfo {
	if d, ok := m.(interface{ Info() ModelInfo }); ok {
		return d.Info()
	}
	return ModelInfo{ID: fmt.Sprintf("%T", m), Provider: "custom"}
}

// pollable returns in read through the Go runtime's poller when it is a
// pipe or a socket (the daemon gives an agent pipes), and release, which
// closes what pollable opened. A read that waits then parks the goroutine
// instead of holding a thread in a blocking read(2): while a thread sits in
// a system call, the runtime's monitor (sysmon) wakes every 20 µs, backing
// off to 10 ms, until it takes that thread's P away, so an agent asked a
// few times a second paid that after every line it read, more CPU than the
// line itself (docs/benchmarks.md, "Command load"). The descriptor is
// duplicated and made non-blocking; the flag is the pipe's, which only this
// process reads. Anything else (a terminal, a file, an io.Reader) is
// returned as it is.
func pollable(in io.Reader) (io.Reader, func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return in, func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return in, func() {}
	}
	nfd := -1
	_ = rc.Control(func(fd uintptr) {
		d, err := syscall.Dup(int(fd))
		if err != nil {
			return
		}
		syscall.CloseOnExec(d)
		if err := syscall.SetNonblock(d, true); err != nil {
			syscall.Close(d)
			return
		}
		nfd = d
	})
	if nfd < 0 {
		return in, func() {}
	}
	nf := os.NewFile(uintptr(nfd), f.Name())
	return nf, func() { nf.Close() }
}
