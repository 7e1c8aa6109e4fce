package agent

import (
	"bytes"

	"go.opentelemetry.io/otel/attribute"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/tracing"
)

// The agent round trip, traced: a line sent while handling a traced message
// carries a traceparent (docs/agent-protocol.md, "Trace context"). A line
// that waits for an answer (surface_dispatch, surface_fetch, a request with
// an expected id) is a span from its write until its answer is read; a
// prompt is a span until the agent's turn ends, with the turn's first text
// delta as an event. Any other line carries the trace context it was sent
// in. Nothing of a line's content goes on a span: its type and id only.

// traced returns line with the trace context of the span it starts (a
// round trip or a prompt), or of the message being handled (tp).
func (a *agentActor) traced(tp string, line []byte, expect bool) ([]byte, tracing.Span) {
	env := proc.LeadingEnvelope(line[:min(len(line), 256)])
	kv := []attribute.KeyValue{tracing.AttrNode.String(a.cfg.Node), tracing.AttrSession.String(a.cfg.SessionID),
		tracing.AttrAgent.String(a.cfg.Agent), tracing.AttrMessage.String(env.Type)}
	switch {
	case env.Type == proc.CmdPrompt:
		_, span := tracing.StartFrom(tp, "", "agent prompt", tracing.Client, kv...)
		if !span.Valid() {
			return tracing.WithTraceparent(line, tp), tracing.Span{}
		}
		a.endTurn("superseded")
		a.mu.Lock()
		a.turn, a.turnDelta = span, false
		a.mu.Unlock()
		a.tracingTurn.Store(true)
		return tracing.WithTraceparent(line, span.Traceparent()), tracing.Span{}
	case expect:
		_, span := tracing.StartFrom(tp, "", "agent "+env.Type, tracing.Client, kv...)
		if span.Valid() {
			return tracing.WithTraceparent(line, span.Traceparent()), span
		}
	}
	return tracing.WithTraceparent(line, tp), tracing.Span{}
}

// turnLine watches the lines of a traced prompt's turn (the reader's
// goroutine): the first text delta is an event, agent_end ends the span.
func (a *agentActor) turnLine(env proc.Envelope, line []byte) {
	switch env.Type {
	case proc.EventMessageUpdate:
		a.mu.Lock()
		if !a.turnDelta && bytes.Contains(line, []byte(`"`+proc.AMETextDelta+`"`)) {
			a.turnDelta = true
			a.turn.Event("first text delta")
		}
		a.mu.Unlock()
	case proc.EventAgentEnd:
		a.endTurn("")
	}
}

// endTurn ends the prompt's span, failed with why unless why is "".
func (a *agentActor) endTurn(why string) {
	a.mu.Lock()
	s := a.turn
	a.turn = tracing.Span{}
	a.mu.Unlock()
	a.tracingTurn.Store(false)
	if why != "" {
		s.Fail(why)
	}
	s.End()
}
