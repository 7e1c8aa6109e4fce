package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	proc "github.com/surfaced/surfaced/agentproc"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
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
// session sends get_state as a barrier: its answer arrives after everything
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

// messageUpdateLine is a message_update line as far as a turn reads it:
// the delta, without the partial message pi repeats in "message" and
// "assistantMessageEvent.partial" (decoding those would copy the whole
// message for every token).
type messageUpdateLine struct {
	Event *struct {
		Type         string `json:"type"`
		ContentIndex int    `json:"contentIndex"`
		Delta        string `json:"delta"`
		Reason       string `json:"reason"`
		Error        *struct {
			ErrorMessage string `json:"errorMessage"`
		} `json:"error"`
	} `json:"assistantMessageEvent"`
}

func (u *messageUpdateLine) event() *proc.AssistantMessageEvent {
	e := &proc.AssistantMessageEvent{Type: u.Event.Type, ContentIndex: u.Event.ContentIndex, Delta: u.Event.Delta, Reason: u.Event.Reason}
	if u.Event.Error != nil {
		e.Error = &proc.AgentMessage{ErrorMessage: u.Event.Error.ErrorMessage}
	}
	return e
}

// newTurn makes the next turn the current one.
func (s *sessionActor) newTurn() *turn {
	s.turnID++
	return &turn{id: s.turnID, started: time.Now(), open: map[string]pb.PartKind{}, tools: map[string]json.RawMessage{}}
}

// startAgentTurn opens a turn for a run the agent started on its own (an
// extension's message, a retry or compaction after the turn had ended):
// clients see it like any turn, and queued prompts wait for it, since the
// agent would refuse a prompt while it runs.
func (s *sessionActor) startAgentTurn(ctx actor.Context) *turn {
	t := s.newTurn()
	s.turn = t
	s.emitStatus()
	s.emitChat(turnStart(t.id, nil))
	s.log.Info("turn started by the agent", "turn", t.id)
	return t
}

// settle sends the get_state barrier for the current turn.
func (s *sessionActor) settle(ctx actor.Context, why settleReason) {
	t := s.turn
	t.settleID = s.reqID("settle")
	t.settleFor = why
	s.send(ctx, proc.SimpleCommand{ID: t.settleID, Type: proc.CmdGetState}, true)
}

// settled reads a barrier's answer.
func (s *sessionActor) settled(ctx actor.Context, m *pb.AgentReply) {
	t := s.turn
	if t == nil || t.settleID != m.GetId() {
		return // an older barrier, or its turn has ended since
	}
	t.settleID = ""
	if m.GetFailed() {
		return // the agent is gone; its exit ends the turn
	}
	var r proc.Response
	var st proc.SessionState
	known := json.Unmarshal(m.GetLine(), &r) == nil && r.Success && json.Unmarshal(r.Data, &st) == nil
	if known && st.Model != nil && !s.announced {
		s.learnModel(st.Model)
	}
	switch t.settleFor {
	case settleRun:
		if known && !st.IsStreaming && t.runs == 0 {
			s.log.Info("the agent handled the prompt without a run", "turn", t.id)
			s.endTurn(ctx, "end_turn", "")
		}
	case settleEnd:
		if t.retrying || (known && st.IsStreaming) {
			return // another run follows; its agent_end decides
		}
		s.failRun(ctx, t.endErr, t.retries)
	}
}

// failRun ends the turn after a failed run: cancelled when the user asked,
// else one error message.
func (s *sessionActor) failRun(ctx actor.Context, msg string, retries int) {
	if t := s.turn; t != nil && t.aborted {
		s.endTurn(ctx, "cancelled", "")
		return
	}
	s.endTurn(ctx, "error", modelError(msg, retries))
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

// emitAgentEvent passes an agent event clients may show (retries,
// compaction, queue, extension errors) as a transient data chunk.
func (s *sessionActor) emitAgentEvent(line []byte) {
	s.emitChat(&pb.ChatEvent_AgentNotice{AgentNotice: &pb.AgentNotice{Line: line}})
}

// probeModel asks a plain pi agent for its state: the model tells whether
// prompts may carry images.
func (s *sessionActor) probeModel(ctx actor.Context) {
	s.send(ctx, proc.SimpleCommand{ID: s.reqID("model"), Type: proc.CmdGetState}, true)
}

func (s *sessionActor) modelProbed(m *pb.AgentReply) {
	if m.GetFailed() || s.announced {
		return
	}
	var r proc.Response
	var st proc.SessionState
	if json.Unmarshal(m.GetLine(), &r) != nil || !r.Success || json.Unmarshal(r.Data, &st) != nil {
		s.log.Info("the agent did not describe its model; images stay as configured", "images", s.images)
		return
	}
	s.learnModel(st.Model)
}

// learnModel sets whether prompts may carry images from the model a plain pi
// agent runs: its models.json input ["text","image"]. An agent configured
// with images: true keeps them whatever the model says.
func (s *sessionActor) learnModel(m *proc.Model) {
	images := s.spec.Images || m.AcceptsImages()
	if m != nil {
		s.log.Info("agent model", "provider", m.Provider, "model", m.ID, "images", images)
	}
	if images != s.images {
		s.images = images
		s.emitStatus()
	}
}
