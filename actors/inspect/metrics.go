package inspect

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// kindMetrics are the inspector's Prometheus collectors, labelled by actor
// kind only: per-actor labels (PIDs, session ids) would grow without bound.
type kindMetrics struct {
	depth       *prometheus.HistogramVec
	handling    *prometheus.HistogramVec
	deadLetters *prometheus.CounterVec
	restarts    *prometheus.CounterVec
	actors      *prometheus.GaugeVec
}

// kindStats are one kind's children of the collectors, resolved once so that
// the per-message path does no label lookup.
type kindStats struct {
	name        string
	depth       prometheus.Observer
	handling    prometheus.Observer
	deadLetters prometheus.Counter
	restarts    prometheus.Counter
	live        prometheus.Gauge
}

func newKindMetrics() *kindMetrics {
	return &kindMetrics{
		depth: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "surfaced_actor_mailbox_depth",
			Help: "Messages waiting in an actor's mailbox when it takes the next one, by actor kind (dev mode).",
			// 0, 1, 2, 4, ... 4096
			Buckets: append([]float64{0}, prometheus.ExponentialBuckets(1, 2, 13)...),
		}, []string{"kind"}),
		handling: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "surfaced_actor_handling_seconds",
			Help:    "Time an actor's handler ran for one message, by actor kind (dev mode).",
			Buckets: prometheus.ExponentialBucketsRange(10e-6, 10, 13),
		}, []string{"kind"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_actor_dead_letters_total",
			Help: "Messages sent to actors that had stopped, by the kind of the stopped actor (other: unknown target) (dev mode).",
		}, []string{"kind"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surfaced_actor_restarts_total",
			Help: "Actor restarts by their supervisor after a panic, by actor kind (dev mode).",
		}, []string{"kind"}),
		actors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "surfaced_actors",
			Help: "Live inspected actors by kind (dev mode).",
		}, []string{"kind"}),
	}
}

func (m *kindMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.depth, m.handling, m.deadLetters, m.restarts, m.actors} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("inspect: register metrics: %w", err)
		}
	}
	return nil
}

func (m *kindMetrics) forKind(kind string) *kindStats {
	return &kindStats{
		name:        kind,
		depth:       m.depth.WithLabelValues(kind),
		handling:    m.handling.WithLabelValues(kind),
		deadLetters: m.deadLetters.WithLabelValues(kind),
		restarts:    m.restarts.WithLabelValues(kind),
		live:        m.actors.WithLabelValues(kind),
	}
}
