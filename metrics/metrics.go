// Package metrics holds the daemon's Prometheus collectors. One *Metrics per
// runtime (registered on the registry it is given), so that tests can run
// several daemons in one process.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/surfaced/surfaced/actors/dispatch"
)

// Metrics are the daemon's collectors. A nil *Metrics is valid and records
// nothing, so that code paths never need to check.
type Metrics struct {
	SessionsActive   prometheus.Gauge
	SessionsCreated  prometheus.Counter
	Clients          *prometheus.GaugeVec   // kind: sse, ws, acp, chat
	Frames           *prometheus.CounterVec // kind of frame
	Subscriptions    *prometheus.CounterVec // mode: fresh, resumed, resync
	SlowConsumerCuts *prometheus.CounterVec // client kind
	AgentRestarts    prometheus.Counter
	AgentExits       *prometheus.CounterVec // reason: crashed, exit_before_ready, stopped
	JSONLErrors      *prometheus.CounterVec // code: invalid_json, not_an_object, missing_type, line_too_long
	Commands         *prometheus.CounterVec // hosted: native, agent; outcome: ok, error code
	Prompts          prometheus.Counter
	RateLimited      prometheus.Counter
}

// New creates the collectors and registers them on reg (nil: not registered).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		SessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "surfaced_sessions_active", Help: "Session actors active on this node."}),
		SessionsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surfaced_sessions_created_total", Help: "Sessions created through this node."}),
		Clients: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "surfaced_clients", Help: "Connected stream clients by kind."}, []string{"kind"}),
		Frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_frames_total", Help: "Frames appended to session frame logs, by kind."}, []string{"kind"}),
		Subscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_subscriptions_total", Help: "Stream subscriptions by how they began: fresh, resumed (Last-Event-ID replayed), resync; live, turn (per-turn chat streams)."}, []string{"mode"}),
		SlowConsumerCuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_slow_consumer_cuts_total", Help: "Clients disconnected because they fell too far behind."}, []string{"kind"}),
		AgentRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surfaced_agent_restarts_total", Help: "Agent subprocesses restarted by the restart policy."}),
		AgentExits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_agent_exits_total", Help: "Agent subprocess exits by reason."}, []string{"reason"}),
		JSONLErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_jsonl_errors_total", Help: "Agent stdout lines dropped, by code."}, []string{"code"}),
		Commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_surface_commands_total", Help: "Surface commands by outcome (ok or the error code)."}, []string{"outcome"}),
		Prompts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surfaced_prompts_total", Help: "Prompts accepted."}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "surfaced_rate_limited_total", Help: "Commands refused by the per-session rate limit."}),
	}
	if reg != nil {
		reg.MustRegister(m.SessionsActive, m.SessionsCreated, m.Clients, m.Frames, m.Subscriptions,
			m.SlowConsumerCuts, m.AgentRestarts, m.AgentExits, m.JSONLErrors, m.Commands, m.Prompts, m.RateLimited)
		// The warm goroutines that run actor mailboxes (shared by every
		// runtime in the process).
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "surfaced_dispatch_workers", Help: "Goroutines of the actor dispatcher pool, idle or running a mailbox.",
			}, func() float64 { return float64(dispatch.Shared.Stats().Live) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "surfaced_dispatch_workers_started_total", Help: "Goroutines the actor dispatcher pool has started (a cold start each).",
			}, func() float64 { return float64(dispatch.Shared.Stats().Started) }),
		)
	}
	return m
}

// Frame counts one appended frame.
func (m *Metrics) Frame(kind string) {
	if m != nil {
		m.Frames.WithLabelValues(kind).Inc()
	}
}

// Subscribed counts a subscription by mode.
func (m *Metrics) Subscribed(mode string) {
	if m != nil {
		m.Subscriptions.WithLabelValues(mode).Inc()
	}
}

// SessionUp / SessionDown track active session actors.
func (m *Metrics) SessionUp() {
	if m != nil {
		m.SessionsActive.Inc()
	}
}

func (m *Metrics) SessionDown() {
	if m != nil {
		m.SessionsActive.Dec()
	}
}

// AgentExit counts an agent exit by reason.
func (m *Metrics) AgentExit(reason string) {
	if m != nil {
		m.AgentExits.WithLabelValues(reason).Inc()
	}
}

// Restart counts an agent restart.
func (m *Metrics) Restart() {
	if m != nil {
		m.AgentRestarts.Inc()
	}
}

// JSONLError counts a dropped agent line.
func (m *Metrics) JSONLError(code string) {
	if m != nil {
		m.JSONLErrors.WithLabelValues(code).Inc()
	}
}

// Command counts a command outcome ("ok" or the error code).
func (m *Metrics) Command(outcome string) {
	if m != nil {
		m.Commands.WithLabelValues(outcome).Inc()
	}
}

// Prompt counts an accepted prompt.
func (m *Metrics) Prompt() {
	if m != nil {
		m.Prompts.Inc()
	}
}

// Limited counts a rate-limited command.
func (m *Metrics) Limited() {
	if m != nil {
		m.RateLimited.Inc()
	}
}

// ClientUp / ClientDown track stream clients by kind.
func (m *Metrics) ClientUp(kind string) {
	if m != nil {
		m.Clients.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) ClientDown(kind string) {
	if m != nil {
		m.Clients.WithLabelValues(kind).Dec()
	}
}

// SlowConsumer counts a slow-consumer cut.
func (m *Metrics) SlowConsumer(kind string) {
	if m != nil {
		m.SlowConsumerCuts.WithLabelValues(kind).Inc()
	}
}
