package turn

import (
	"encoding/json"
	"fmt"
	"strings"

	proc "github.com/surfaced/surfaced/agentproc"
)

// What the real pi agent (pi --mode rpc, 0.73) does that a turn must follow:
//
//   - A prompt is answered before its run starts, and when it is an
//     extension command (or input an extension handled) it is answered
//     with no run at all.
//   - A failed run ends with agent_end like any other; when the failure is
//     transient pi then announces a retry (auto_retry_start … another run)
//     or, for a context overflow, a compaction that runs again. agent_end
//     carries no willRetry in 0.73.
//   - pi writes the events that follow agent_end in the same go as agent_end
//     itself, and the command that answers isStreaming is read only after.
//
// So where the event stream alone cannot tell whether more is coming, the
// machine sends get_state as a barrier: its answer arrives after everything
// pi wrote for the events before it, and isStreaming says whether a run is
// active. Agents that do not know get_state answer it with a failure, which
// the barrier reads as "nothing more is coming" after a failed run and as
// "wait for the run" after a prompt.

// settleReason is what a barrier's answer decides.
type settleReason int

const (
	// settleRun: the prompt was accepted and no run has started yet.
	settleRun settleReason = iota + 1
	// settleEnd: a run failed; does another one follow?
	settleEnd
)

// Reply takes the agent's answer to a command the machine sent with a
// ReplyID (the prompt, the get_state barrier): line is the response record;
// failed says the agent exited before answering. An answer for a turn that
// has ended since is ignored.
func (m *Machine) Reply(id string, line []byte, failed bool) {
	t := m.cur
	if t == nil || id == "" {
		return
	}
	switch id {
	case t.promptReq:
		m.promptAnswered(line, failed)
	case t.settleID:
		m.settled(line, failed)
	}
}

// Lost says that the command with this id (the prompt, the get_state
// barrier) will get no answer although the agent runs: it could not be
// written to the agent, or the agent's answer was too long to keep. why
// says which, for people. The turn ends with that error rather than wait
// for an answer (or an exit) that will not come. An id of a turn that has
// ended since is ignored.
func (m *Machine) Lost(id, why string) {
	t := m.cur
	if t == nil || id == "" || (id != t.promptReq && id != t.settleID) {
		return
	}
	if id == t.settleID {
		t.settleID = ""
	}
	m.log.Warn("a turn's command got no answer", "turn", t.id, "id", id, "why", why)
	if id == t.promptReq {
		m.endTurn("error", "The prompt did not reach the agent: "+why+".")
		return
	}
	m.endTurn("error", "The agent's state could not be read: "+why+".")
}

// promptAnswered reads the answer to the turn's prompt command.
func (m *Machine) promptAnswered(line []byte, failed bool) {
	if failed {
		return // the agent is gone; its exit ends the turn
	}
	var r proc.Response
	if err := json.Unmarshal(line, &r); err != nil {
		m.endTurn("error", "The agent answered the prompt with an invalid response.")
		return
	}
	if !r.Success {
		// The agent refused the prompt (no model, bad request): say so,
		// rather than wait for a turn that will never come.
		msg := r.Error
		if msg == "" {
			msg = "the agent refused the prompt"
		}
		m.endTurn("error", msg)
		return
	}
	if m.cur.runs == 0 {
		// Accepted, and no run has started: pi answers an extension
		// command (or input an extension handled) this way, with no run at
		// all. The barrier tells which.
		m.settle(settleRun)
	}
}

// settle sends the get_state barrier for the current turn.
func (m *Machine) settle(why settleReason) {
	t := m.cur
	t.settleID = m.reqID("settle")
	t.settleFor = why
	m.send(proc.SimpleCommand{ID: t.settleID, Type: proc.CmdGetState}, t.settleID)
}

// settled reads a barrier's answer.
func (m *Machine) settled(line []byte, failed bool) {
	t := m.cur
	t.settleID = ""
	if failed {
		return // the agent is gone; its exit ends the turn
	}
	var r proc.Response
	var st proc.SessionState
	known := json.Unmarshal(line, &r) == nil && r.Success && json.Unmarshal(r.Data, &st) == nil
	if known && st.Model != nil {
		m.out.Model(st.Model)
	}
	switch t.settleFor {
	case settleRun:
		if known && !st.IsStreaming && t.runs == 0 {
			m.log.Info("the agent handled the prompt without a run", "turn", t.id)
			m.endTurn("end_turn", "")
		}
	case settleEnd:
		if t.retrying || (known && st.IsStreaming) {
			return // another run follows; its agent_end decides
		}
		m.failRun(t.endErr, t.retries)
	}
}

// failRun ends the turn after a failed run: cancelled when the user asked,
// else one error message.
func (m *Machine) failRun(msg string, retries int) {
	if t := m.cur; t != nil && t.aborted {
		m.endTurn("cancelled", "")
		return
	}
	m.endTurn("error", modelError(msg, retries))
}

// runOutcome is the stop reason of a run that ended with messages (pi's
// agent_end), and the raw error message when it failed.
func runOutcome(t *turn, messages []proc.AgentMessage) (stop, errText string) {
	last, lastErr := t.lastStop, t.lastError
	for i := len(messages) - 1; i >= 0; i-- {
		if messages[i].Role == "assistant" {
			last, lastErr = messages[i].StopReason, messages[i].ErrorMessage
			break
		}
	}
	switch {
	case t.aborted || last == "aborted":
		return "cancelled", ""
	case last == "length":
		return "max_tokens", ""
	case last == "error":
		return "error", lastErr
	}
	return "end_turn", ""
}

// modelError is the one message a user sees for a failed turn.
func modelError(msg string, retries int) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = "the model failed without saying why"
	}
	out := "The model request failed: " + msg
	switch {
	case retries == 1:
		out += " (after 1 retry)"
	case retries > 1:
		out += fmt.Sprintf(" (after %d retries)", retries)
	}
	return out
}
