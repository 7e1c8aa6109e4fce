package agentcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// start creates the session (its agent starts) and waits until it is ready.
func (c *checker) start(ctx context.Context) bool {
	s := c.rep.step("start")
	from := c.tl.mark()
	began := time.Now()
	id, err := c.rt.CreateSession(ctx, surfaced.CreateOptions{Owner: owner, Title: "agent check"})
	if err != nil {
		c.fail(s, Problem{What: "The daemon could not start a session for the agent.", Expected: "a session", Came: err.Error()})
		return false
	}
	c.id = id
	if err := c.subscribe(ctx); err != nil {
		c.fail(s, Problem{What: "The session did not answer.", Expected: "its frames", Came: err.Error()})
		return false
	}
	st, readyIn, ok := c.awaitReady(ctx, s, from, began, c.inc())
	if ok {
		c.domains = agentHosted(st.GetSurfaces())
		s.Summary = fmt.Sprintf("ready in %s; %s", took(readyIn), c.announcement(from, c.inc()))
	}
	c.finish(s, from)
	return ok
}

// agentHosted are the registered agent-hosted domains.
func agentHosted(all []*pb.SurfaceInfo) []*pb.SurfaceInfo {
	var out []*pb.SurfaceInfo
	for _, d := range all {
		if d.GetHosted() == "agent" {
			out = append(out, d)
		}
	}
	return out
}

// awaitReady waits for agent process inc, started at began, to make the
// session ready, and says what went wrong when it did not.
func (c *checker) awaitReady(ctx context.Context, s *Step, from int, began time.Time, inc int) (*pb.StatusEvent, time.Duration, bool) {
	e, ok := c.tl.wait(ctx, c.o.ReadyTimeout+slack, from, isStatus("ready", "error", "ended"))
	es := c.tl.since(from)
	if !ok {
		c.fail(s, Problem{What: fmt.Sprintf("The session reported neither ready nor an error within %s.", c.o.ReadyTimeout+slack),
			Expected: "ready, or an error the daemon explains", Came: stdout(es, inc), Stderr: lastStderr(es, inc)})
		return nil, 0, false
	}
	st := e.event.GetStatus()
	if st.GetStatus() == "ready" {
		c.checkAnnouncement(s, es, inc)
		return st, e.at.Sub(began), true
	}
	switch st.GetCode() {
	case "ready_timeout":
		came, stderrLine := stdout(es, inc), lastStderr(es, inc)
		if came == "nothing on stdout" && stderrLine == "" {
			came = "nothing on stdout, nor on stderr (if the agent is only slow to start, give it longer: --ready-timeout)"
		}
		c.fail(s, Problem{
			What:     fmt.Sprintf("The agent did not become ready within %s.", c.o.ReadyTimeout),
			Expected: `agent_ready as its first line (a surfaced/1 agent), or an answer to get_commands with "success": true (a plain pi agent)`,
			Came:     came,
			Stderr:   stderrLine,
		})
	case "exit_before_ready":
		how := "it exited"
		if x, ok := c.tl.wait(ctx, slack, from, isExit(inc)); ok {
			how = exitText(x.exit)
		}
		c.fail(s, Problem{
			What:     fmt.Sprintf("The agent exited before it was ready (%s).", how),
			Expected: "agent_ready (or an answer to get_commands), then the agent runs until its stdin ends",
			Came:     stdout(c.tl.since(from), inc),
			Stderr:   lastStderr(c.tl.since(from), inc),
		})
	case "spawn_failed":
		c.fail(s, Problem{
			What:     "The agent could not be started.",
			Expected: "a program the daemon can run: " + strings.Join(c.o.Agent.Argv, " "),
			Came:     st.GetDetail(),
		})
	default:
		c.fail(s, Problem{
			What:     fmt.Sprintf("The session reported %s before the agent was ready.", st.GetStatus()),
			Expected: "ready",
			Came:     strings.TrimSpace(st.GetCode() + " " + st.GetDetail()),
			Stderr:   lastStderr(es, inc),
		})
	}
	return st, 0, false
}

// readyLine is agent process inc's agent_ready among es, decoded.
func readyLine(es []entry, inc int) (*agentproc.AgentReady, entry, bool) {
	for _, e := range es {
		if isReceived(inc, agentproc.TypeAgentReady)(e) {
			var r agentproc.AgentReady
			if json.Unmarshal(e.line, &r) != nil {
				return nil, e, false
			}
			return &r, e, true
		}
	}
	return nil, entry{}, false
}

// checkAnnouncement checks a ready agent's agent_ready: the protocol it
// names, and that it came first.
func (c *checker) checkAnnouncement(s *Step, es []entry, inc int) {
	r, line, ok := readyLine(es, inc)
	if !ok {
		return // a plain pi agent, or an agent_ready the daemon could not read (a diagnostic says so)
	}
	if r.Protocol != agentproc.Protocol {
		c.fail(s, Problem{
			What:     fmt.Sprintf("agent_ready announces the protocol %q.", r.Protocol),
			Expected: fmt.Sprintf(`"protocol": %q`, agentproc.Protocol),
			Came:     excerpt(line.line, 200),
		})
	}
	var before []entry
	for _, e := range es {
		if e.kind == received && e.inc == inc {
			if e.typ == agentproc.TypeAgentReady {
				break
			}
			if e.typ != "" { // an invalid line is a diagnostic of its own
				before = append(before, e)
			}
		}
	}
	if len(before) > 0 {
		c.fail(s, Problem{
			What:     "agent_ready was not the agent's first line.",
			Expected: "agent_ready before anything else on stdout (until it comes the daemon takes the agent for a plain pi agent)",
			Came:     "before it: " + strings.TrimPrefix(stdout(before, inc), fmt.Sprintf("%d lines on stdout: ", len(before))),
		})
	}
}

// announcement says how agent process inc announced itself.
func (c *checker) announcement(from, inc int) string {
	r, _, ok := readyLine(c.tl.since(from), inc)
	if !ok {
		return "a plain pi agent (it answered get_commands and sent no agent_ready): no surfaces"
	}
	out := "agent_ready (" + r.Protocol
	if r.Name != "" {
		out += fmt.Sprintf(", name %q", r.Name)
	}
	if r.Images {
		out += ", images"
	}
	out += ") declares "
	if len(r.Surfaces) == 0 {
		return out + "no surfaces"
	}
	var ds []string
	for _, d := range r.Surfaces {
		ds = append(ds, fmt.Sprintf("%s [%s]", d.Domain, strings.Join(d.Commands, " ")))
	}
	return out + strings.Join(ds, ", ")
}

// probe runs a domain's probe command surface:<domain>.
func (c *checker) probe(ctx context.Context, d *pb.SurfaceInfo) {
	domain := d.GetDomain()
	s := c.rep.step("surface " + domain)
	from := c.tl.mark()
	if !c.ensureReady(ctx, s) {
		return
	}
	probe := agentproc.SurfaceKey(domain)
	res, err := c.runCommand(ctx, domain, probe, nil)
	switch {
	case err != nil:
		c.fail(s, Problem{What: fmt.Sprintf("The probe %s got no answer.", probe), Expected: `{"ok": true}`, Came: err.Error()})
	case !res.GetOk():
		e := res.GetError()
		if res.GetRefused() != nil {
			e = res.GetRefused()
		}
		c.fail(s, Problem{What: fmt.Sprintf("The probe %s failed.", probe), Expected: `{"ok": true}: every registered domain answers its probe`,
			Came: e.GetCode() + ": " + e.GetMessage()})
	default:
		// The snapshot's frame and the probe's answer travel apart.
		c.tl.wait(ctx, slack, 0, isState(probe))
		rev, value, ok := c.snapshot(domain, 0)
		if !ok {
			c.fail(s, Problem{What: fmt.Sprintf("The session published no snapshot of %s.", domain),
				Expected: "a state frame " + probe + " with the domain's initialState at rev 1", Came: "none"})
			break
		}
		s.Summary = fmt.Sprintf("the probe %s answered ok; snapshot rev %d %s", probe, rev, excerpt(value, 80))
	}
	c.finish(s, from)
}

// command runs the declared command the person chose.
func (c *checker) command(ctx context.Context) {
	s := c.rep.step("command " + c.o.Command)
	from := c.tl.mark()
	if !c.ensureReady(ctx, s) {
		return
	}
	_, s.Summary = c.runChosen(ctx, s, from)
	c.finish(s, from)
}

// runChosen runs the chosen command and judges its result: it returns the
// result when the command succeeded, and what happened in a few words when
// the agent answered.
func (c *checker) runChosen(ctx context.Context, s *Step, from int) (*pb.CommandResult, string) {
	domain, action, _ := SplitCommand(c.o.Command)
	beforeRev, _, _ := c.snapshot(domain, 0)
	began := time.Now()
	res, err := c.runCommand(ctx, domain, action, c.o.Args)
	if err != nil {
		c.fail(s, Problem{What: fmt.Sprintf("The command %s got no answer.", c.o.Command), Expected: "a command result", Came: err.Error()})
		return nil, ""
	}
	if r := res.GetRefused(); r != nil {
		c.fail(s, Problem{What: fmt.Sprintf("The session refused the command %s.", c.o.Command), Expected: "the command run", Came: r.GetCode() + ": " + r.GetMessage()})
		return nil, ""
	}
	es := c.tl.since(from)
	dispatch, hasDispatch := firstSent(es, agentproc.TypeSurfaceDispatch)
	inc := c.inc()
	if hasDispatch {
		inc = dispatch.inc // the agent process the command went to
	}
	if res.GetOk() {
		sum := fmt.Sprintf("ok in %s", took(time.Since(began)))
		if len(res.GetData()) > 0 {
			sum += ", data " + excerpt(res.GetData(), 80)
		}
		if res.GetRev() > 0 {
			sum += fmt.Sprintf("; %s rev %d → %d", domain, beforeRev, res.GetRev())
		} else {
			sum += fmt.Sprintf("; state unchanged (rev %d)", beforeRev)
		}
		return res, sum
	}
	e := res.GetError()
	switch e.GetCode() {
	case agentproc.CodeTimeout:
		came := fmt.Sprintf("no surface_dispatch_result with \"id\": %q within %s", dispatch.id, c.o.SettleWindow)
		for _, r := range es {
			if isReceived(inc, agentproc.TypeSurfaceDispatchResult)(r) && r.id != dispatch.id {
				came = fmt.Sprintf("a surface_dispatch_result with \"id\": %q, which answers no dispatch (the dispatch's id is %q)", r.id, dispatch.id)
				break
			}
		}
		c.fail(s, Problem{
			What:     fmt.Sprintf("The agent did not answer the surface_dispatch within the settle window (%s).", c.o.SettleWindow),
			Expected: "a surface_dispatch_result with the dispatch's id",
			Came:     came,
			Stderr:   lastStderr(es, inc),
		})
	case agentproc.CodeDispatchFailed:
		came := e.GetMessage()
		for _, r := range es {
			if isReceived(inc, agentproc.TypeSurfaceDispatchResult)(r) && hasDispatch && r.id == dispatch.id {
				came = excerpt(r.line, 300)
			}
		}
		c.fail(s, Problem{
			What:     "The command failed: " + e.GetMessage() + ".",
			Expected: `{"type":"surface_dispatch_result","id":…,"result":{"ok":true,"data":…},"state":…} or "result":{"ok":false,"error":{"code":…,"message":…}}`,
			Came:     came,
			Stderr:   lastStderr(es, inc),
		})
	case agentproc.CodeAgentUnavailable:
		c.afterExit(ctx, inc)
		c.fail(s, Problem{
			What:     "The agent was gone before it answered the command.",
			Expected: "a surface_dispatch_result; the agent keeps running",
			Came:     c.exitOf(es, inc),
			Stderr:   lastStderr(es, inc),
		})
	case agentproc.CodeUnknownAction, agentproc.CodeSurfaceNotRegistered:
		c.fail(s, Problem{
			What:     fmt.Sprintf("There is no command %s: %s.", c.o.Command, e.GetMessage()),
			Expected: "one of the declared commands: " + c.declared(),
			Came:     c.o.Command,
		})
	default:
		// The agent's own failure (or invalid_args): a valid answer.
		return nil, fmt.Sprintf("answered a failure in %s, %s: %s (a valid answer; the state is unchanged)", took(time.Since(began)), e.GetCode(), e.GetMessage())
	}
	return nil, ""
}

// declared lists the agent-hosted commands as domain/action.
func (c *checker) declared() string {
	var out []string
	for _, d := range c.domains {
		for _, a := range d.GetCommands() {
			out = append(out, d.GetDomain()+"/"+a)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, ", ")
}

// exitOf says how agent process inc ended, if it did among es.
func (c *checker) exitOf(es []entry, inc int) string {
	for _, e := range es {
		if isExit(inc)(e) {
			return "the agent exited (" + exitText(e.exit) + ")"
		}
	}
	return "the agent stopped answering"
}

func firstSent(es []entry, typ string) (entry, bool) {
	for _, e := range es {
		if isSent(typ)(e) {
			return e, true
		}
	}
	return entry{}, false
}

// turnSeen is what the session said of one turn.
type turnSeen struct {
	started  bool
	stop     string // the finish's stopReason; "" before finish
	errText  string
	text     strings.Builder
	deltas   int
	tools    []string
	finished time.Time
}

// turnOf reads the chat frames of the turn that answers prompt id.
func turnOf(es []entry, promptID uint64) *turnSeen {
	t := &turnSeen{}
	var turnID uint64
	for _, e := range es {
		if e.kind != frame || e.event.GetChat() == nil {
			continue
		}
		ch := e.event.GetChat()
		switch {
		case ch.GetTurnStart() != nil && slices.Contains(ch.GetTurnStart().GetPromptIds(), promptID):
			t.started, turnID = true, ch.GetTurnStart().GetTurnId()
		case !t.started || t.stop != "":
		case ch.GetPartDelta() != nil && ch.GetPartDelta().GetKind() == pb.PartKind_PART_KIND_TEXT:
			t.text.WriteString(ch.GetPartDelta().GetDelta())
			t.deltas++
		case ch.GetToolInput() != nil:
			t.tools = append(t.tools, ch.GetToolInput().GetToolName())
		case ch.GetTurnError() != nil:
			t.errText = ch.GetTurnError().GetErrorText()
		case ch.GetTurnFinish() != nil && ch.GetTurnFinish().GetTurnId() == turnID:
			t.stop, t.finished = ch.GetTurnFinish().GetStopReason(), e.at
		}
	}
	return t
}

func isTurnFinish(promptID uint64) func(entry) bool {
	return func(e entry) bool {
		f := e.event.GetChat().GetTurnFinish()
		return e.kind == frame && f != nil && slices.Contains(f.GetPromptIds(), promptID)
	}
}

func isTurnStart(promptID uint64) func(entry) bool {
	return func(e entry) bool {
		f := e.event.GetChat().GetTurnStart()
		return e.kind == frame && f != nil && slices.Contains(f.GetPromptIds(), promptID)
	}
}

// sendPrompt sends a prompt; it returns its id.
func (c *checker) sendPrompt(ctx context.Context, s *Step, text string) (uint64, bool) {
	res, err := c.request(ctx, &pb.Prompt{Caller: system(), Message: text}, c.o.Timeout)
	if err != nil {
		c.fail(s, Problem{What: "The prompt got no answer from the session.", Expected: "accepted", Came: err.Error()})
		return 0, false
	}
	pr, _ := res.(*pb.PromptResult)
	if e := pr.GetError(); e != nil || !pr.GetAccepted() {
		c.fail(s, Problem{What: "The session refused the prompt.", Expected: "accepted", Came: e.GetCode() + ": " + e.GetMessage()})
		return 0, false
	}
	return pr.GetPromptId(), true
}

// prompt sends a prompt and follows its turn to its end.
func (c *checker) prompt(ctx context.Context) {
	s := c.rep.step("prompt")
	from := c.tl.mark()
	if !c.ensureReady(ctx, s) {
		return
	}
	defer c.finish(s, from)
	began := time.Now()
	pid, ok := c.sendPrompt(ctx, s, c.o.Prompt)
	if !ok {
		return
	}
	_, ended := c.tl.wait(ctx, c.o.Timeout, from, isTurnFinish(pid))
	es := c.tl.since(from)
	line, sentOK := firstSent(es, agentproc.CmdPrompt)
	after := entriesAfter(es, line)
	inc := c.inc()
	if sentOK {
		inc = line.inc // the agent process the prompt went to
	}
	if !ended {
		c.fail(s, Problem{
			What:     fmt.Sprintf("The turn did not end within %s.", c.o.Timeout),
			Expected: "agent_start, the turn's events, then agent_end",
			Came:     stdout(after, inc),
			Stderr:   lastStderr(es, inc),
		})
		c.endTurn(ctx, pid, from)
		return
	}
	t := turnOf(es, pid)
	if t.stop == "error" {
		c.fail(s, Problem{
			What:     "The turn failed: " + strings.TrimSuffix(t.errText, ".") + ".",
			Expected: `a run that ends with agent_end, its last assistant message with "stopReason": "stop"`,
			Came:     stdout(after, inc),
			Stderr:   lastStderr(es, inc),
		})
		return
	}
	c.checkRun(s, after, inc, line, sentOK)
	s.Seen = stdout(untilFinish(after), inc)
	s.Summary = fmt.Sprintf("the turn ended (%s) in %s", t.stop, took(t.finished.Sub(began)))
	if t.deltas > 0 {
		s.Summary += fmt.Sprintf(": %s (%d text deltas)", quote(t.text.String(), 80), t.deltas)
	} else {
		s.note("The turn ended without any assistant text.")
	}
	if len(t.tools) > 0 {
		s.Summary += "; tools: " + strings.Join(t.tools, ", ")
	}
}

// checkRun checks the agent's lines for a turn: an answer to the prompt,
// agent_start, then agent_end before the session ended the turn.
func (c *checker) checkRun(s *Step, after []entry, inc int, prompt entry, sentOK bool) {
	if !sentOK {
		return
	}
	var answered, started, endedByAgent bool
	for _, e := range after {
		switch {
		case isReceived(inc, agentproc.TypeResponse)(e) && e.id == prompt.id:
			answered = true
		case isReceived(inc, agentproc.EventAgentStart)(e):
			started = true
		case isReceived(inc, agentproc.EventAgentEnd)(e):
			endedByAgent = true
		}
		if e.kind == frame && e.event.GetChat().GetTurnFinish() != nil {
			break
		}
	}
	if !answered {
		s.note("The agent did not answer the prompt command (id %q); pi answers every command with a response.", prompt.id)
	}
	if !started {
		c.fail(s, Problem{
			What:     "The agent wrote no agent_start for the prompt.",
			Expected: "agent_start when the run begins: the daemon tells a run from a prompt handled without one by it",
			Came:     stdout(after, inc),
		})
	}
	if !endedByAgent {
		came := stdout(after, inc)
		if st, ok := firstSent(after, agentproc.CmdGetState); ok {
			for _, e := range after {
				if isReceived(inc, agentproc.TypeResponse)(e) && e.id == st.id {
					came = "the answer to get_state: " + excerpt(e.line, 200)
				}
			}
		}
		c.fail(s, Problem{
			What:     "The turn ended before the agent wrote agent_end.",
			Expected: `agent_end when the run is over; until then get_state answers "isStreaming": true`,
			Came:     came,
		})
	}
}

// entriesAfter are the entries of es after e (all of them when e is not
// among them).
func entriesAfter(es []entry, e entry) []entry {
	for i := range es {
		if es[i].kind != 0 && es[i].pos == e.pos && e.kind != 0 {
			return es[i+1:]
		}
	}
	return es
}

// endTurn aborts a turn that did not end, so that the next steps find the
// session idle; the session ends it itself after the abort grace.
func (c *checker) endTurn(ctx context.Context, pid uint64, from int) {
	if _, err := c.request(ctx, &pb.Abort{Caller: system()}, c.o.Timeout); err != nil {
		return
	}
	c.tl.wait(ctx, c.o.abortGrace()+slack, from, isTurnFinish(pid))
}

// abort sends a prompt and aborts its turn as soon as it starts.
func (c *checker) abort(ctx context.Context) {
	s := c.rep.step("abort")
	from := c.tl.mark()
	if !c.ensureReady(ctx, s) {
		return
	}
	defer c.finish(s, from)
	pid, ok := c.sendPrompt(ctx, s, c.o.AbortPrompt)
	if !ok {
		return
	}
	if _, ok := c.tl.wait(ctx, c.o.Timeout, from, isTurnStart(pid)); !ok {
		c.fail(s, Problem{What: fmt.Sprintf("The turn did not start within %s.", c.o.Timeout), Expected: "the turn starts", Came: "it waits in the inbox"})
		return
	}
	abortFrom := c.tl.mark()
	began := time.Now()
	res, err := c.request(ctx, &pb.Abort{Caller: system()}, c.o.Timeout)
	if err != nil {
		c.fail(s, Problem{What: "The abort got no answer from the session.", Expected: "ok", Came: err.Error()})
		return
	}
	wasBusy := res.(*pb.AbortResult).GetWasBusy()
	_, ended := c.tl.wait(ctx, c.o.abortGrace()+slack, from, isTurnFinish(pid))
	es := c.tl.since(abortFrom)
	inc := c.inc()
	if p, ok := firstSent(c.tl.since(from), agentproc.CmdPrompt); ok {
		inc = p.inc // the agent process the prompt went to
	}
	if !ended {
		c.fail(s, Problem{What: fmt.Sprintf("The aborted turn did not end within %s.", c.o.abortGrace()+slack), Expected: "the turn ends cancelled",
			Came: stdout(es, inc), Stderr: lastStderr(es, inc)})
		return
	}
	t := turnOf(c.tl.since(from), pid)
	if !wasBusy {
		s.Summary = fmt.Sprintf("the turn had ended (%s) before the abort came", t.stop)
		s.note("Nothing was aborted; --abort-prompt can ask for a turn that takes longer.")
		return
	}
	if t.stop == "error" {
		c.fail(s, Problem{What: "The aborted turn failed: " + strings.TrimSuffix(t.errText, ".") + ".", Expected: `the turn ends cancelled (agent_end with "stopReason": "aborted")`,
			Came: stdout(es, inc), Stderr: lastStderr(es, inc)})
		return
	}
	abortLine, sent := firstSent(es, agentproc.CmdAbort)
	var answered, endedByAgent bool
	var end agentproc.Event
	for _, e := range entriesAfter(es, abortLine) {
		switch {
		case isReceived(inc, agentproc.TypeResponse)(e) && sent && e.id == abortLine.id:
			answered = true
		case isReceived(inc, agentproc.EventAgentEnd)(e) && !endedByAgent:
			endedByAgent = true
			_ = json.Unmarshal(e.line, &end)
		}
	}
	if !endedByAgent {
		c.fail(s, Problem{
			What:     fmt.Sprintf("The agent did not end the turn within %s of the abort; the daemon ended it.", c.o.abortGrace()),
			Expected: `agent_end soon after {"type":"abort"}, its last assistant message with "stopReason": "aborted"`,
			Came:     stdout(entriesAfter(es, abortLine), inc),
			Stderr:   lastStderr(es, inc),
		})
		return
	}
	if !answered {
		s.note("The agent did not answer the abort command (id %q); pi answers it once the run has stopped.", abortLine.id)
	}
	if stop := lastAssistantStop(end.Messages); stop != "aborted" {
		s.note("The agent's agent_end after the abort ends with stopReason %q; an aborted run's last assistant message says \"aborted\" (or the run had ended before the abort reached it).", stop)
	}
	s.Seen = stdout(untilFinish(entriesAfter(es, abortLine)), inc)
	s.Summary = fmt.Sprintf("the turn ended (%s) %s after the abort", t.stop, took(t.finished.Sub(began)))
}

// restart stops the agent as the daemon stops it, wakes the session, and
// checks that the agent is ready again with its surfaces where they were.
func (c *checker) restart(ctx context.Context) {
	s := c.rep.step("restart")
	from := c.tl.mark()
	if !c.ensureReady(ctx, s) {
		return
	}
	defer c.finish(s, from)
	type snap struct {
		rev   uint64
		value []byte
	}
	before := map[string]snap{}
	for _, d := range c.domains {
		if rev, value, ok := c.snapshot(d.GetDomain(), 0); ok {
			before[d.GetDomain()] = snap{rev, value}
		}
	}
	inc := c.inc()
	began := time.Now()
	res, err := c.request(ctx, &pb.Stop{Caller: system(), Reason: "idle"}, c.o.Timeout)
	if err != nil || !res.(*pb.StopResult).GetOk() {
		c.fail(s, Problem{What: "The session could not be stopped.", Expected: "stopped", Came: fmt.Sprint(err)})
		return
	}
	x, ok := c.tl.wait(ctx, killAfter+slack, from, isExit(inc))
	es := c.tl.since(from)
	switch {
	case !ok:
		c.fail(s, Problem{What: "The agent did not exit when it was stopped.", Expected: "the agent exits when its stdin ends (or on SIGTERM)",
			Came: fmt.Sprintf("still running %s later, after SIGKILL", killAfter+slack), Stderr: lastStderr(es, inc)})
		return
	case x.exit.Signal == "SIGKILL":
		c.fail(s, Problem{
			What:     fmt.Sprintf("The agent did not exit when it was stopped; the daemon killed it (SIGKILL) %s after closing its stdin and sending SIGTERM.", killAfter),
			Expected: "the agent exits when its stdin ends (or on SIGTERM)",
			Came:     fmt.Sprintf("still running %s later", killAfter),
			Stderr:   lastStderr(es, inc),
		})
	case x.exit.Signal == "" && x.exit.Code != 0:
		s.note("The agent exited with %s when it was stopped; exit code 0 is usual (the daemon does not mind).", exitText(x.exit))
	}
	stopped := x.at.Sub(began)

	from2 := c.tl.mark()
	woke := time.Now()
	if err := c.subscribe(ctx); err != nil {
		c.fail(s, Problem{What: "The session did not wake up again.", Expected: "its frames", Came: err.Error()})
		return
	}
	inc = c.inc()
	st, readyIn, ok := c.awaitReady(ctx, s, from2, woke, inc)
	if !ok {
		return
	}
	c.domains = agentHosted(st.GetSurfaces())
	var kept []string
	for _, name := range sortedKeys(before) {
		b := before[name]
		if !slices.ContainsFunc(c.domains, func(d *pb.SurfaceInfo) bool { return d.GetDomain() == name }) {
			c.fail(s, Problem{
				What:     fmt.Sprintf("The agent did not declare %s again after the restart.", name),
				Expected: "the same surfaces in agent_ready after every start: the daemon keeps their snapshots and revs",
				Came:     c.announcement(from2, inc),
			})
			continue
		}
		rev, value, _ := c.snapshot(name, from2)
		if rev != b.rev || string(value) != string(b.value) {
			c.fail(s, Problem{
				What:     fmt.Sprintf("The snapshot of %s did not continue after the restart.", name),
				Expected: fmt.Sprintf("rev %d %s", b.rev, excerpt(b.value, 80)),
				Came:     fmt.Sprintf("rev %d %s", rev, excerpt(value, 80)),
			})
			continue
		}
		kept = append(kept, fmt.Sprintf("%s at rev %d", name, rev))
	}
	s.Summary = fmt.Sprintf("stopped in %s (%s), ready again in %s", took(stopped), exitText(x.exit), took(readyIn))
	if len(kept) > 0 {
		s.Summary += "; " + strings.Join(kept, ", ") + " as before"
	}
	if c.o.Command != "" {
		domain, _, _ := SplitCommand(c.o.Command)
		if b, ok := before[domain]; ok && s.Outcome != Failed {
			if res, _ := c.runChosen(ctx, s, from2); res != nil && res.GetRev() > 0 {
				if res.GetRev() != b.rev+1 {
					c.fail(s, Problem{What: fmt.Sprintf("The command %s after the restart did not continue the revs.", c.o.Command),
						Expected: fmt.Sprintf("rev %d", b.rev+1), Came: fmt.Sprintf("rev %d", res.GetRev())})
				} else {
					s.Summary += fmt.Sprintf("; %s then: rev %d → %d", c.o.Command, b.rev, res.GetRev())
				}
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lastAssistantStop is the stopReason of the last assistant message.
func lastAssistantStop(msgs []agentproc.AgentMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return msgs[i].StopReason
		}
	}
	return ""
}

// untilFinish are the entries of es up to the first turn's finish frame.
func untilFinish(es []entry) []entry {
	for i, e := range es {
		if e.kind == frame && e.event.GetChat().GetTurnFinish() != nil {
			return es[:i]
		}
	}
	return es
}
