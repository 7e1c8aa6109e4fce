package acpgw

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Events of the mount, published on the daemon's event bus
// (Runtime.Publish; tests and the inspector subscribe with Runtime.Subscribe),
// logged as structured lines and counted in surfaced_acp_events_total.

// ConnectionOpened is acp.connection.opened.
type ConnectionOpened struct {
	ConnectionID string `json:"connectionId"`
	Subject      string `json:"subject,omitempty"`
	ClientName   string `json:"clientName,omitempty"`
}

// ConnectionClosed is acp.connection.closed; Fault is set when the connection
// broke (its backlog bound, abandonment, a revoked credential) rather than
// closed (DELETE, shutdown).
type ConnectionClosed struct {
	ConnectionID string `json:"connectionId"`
	Fault        string `json:"fault,omitempty"`
}

// SessionAttached is acp.session.attached; How is new, load or resume.
type SessionAttached struct {
	ConnectionID string `json:"connectionId"`
	SessionID    string `json:"sessionId"`
	Agent        string `json:"agent"`
	How          string `json:"how"`
}

// EventName returns the event's name.
func (ConnectionOpened) EventName() string { return "acp.connection.opened" }

// EventName returns the event's name.
func (ConnectionClosed) EventName() string { return "acp.connection.closed" }

// EventName returns the event's name.
func (SessionAttached) EventName() string { return "acp.session.attached" }

type eventCounter struct {
	total *prometheus.CounterVec
}

func newEventCounter(reg *prometheus.Registry) *eventCounter {
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "surfaced_acp_events_total", Help: "ACP mount events: connections opened and closed (fault or not), sessions attached (by how)."},
		[]string{"event", "detail"})
	if reg != nil {
		if err := reg.Register(cv); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					cv = existing
				}
			}
		}
	}
	return &eventCounter{total: cv}
}

func (s *Server) publish(ev interface{ EventName() string }) {
	detail := ""
	switch e := ev.(type) {
	case ConnectionClosed:
		if e.Fault != "" {
			detail = "fault"
		}
	case SessionAttached:
		detail = e.How
	}
	s.events.total.WithLabelValues(ev.EventName(), detail).Inc()
	s.rt.Publish(ev)
}
