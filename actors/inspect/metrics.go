package inspect

import (
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// kindMetrics are the inspector's Prometheus collectors, labelled by actor
// kind only: per-actor labels (PIDs, session ids) would grow without bound.
type kindMetrics struct {
	depth       *histogramVec // messages waiting
	handling    *histogramVec // nanoseconds
	deadLetters *prometheus.CounterVec
	restarts    *prometheus.CounterVec
	actors      *prometheus.GaugeVec
}

// kindStats are one kind's children of the collectors, resolved once so that
// the per-message path does no label lookup.
type kindStats struct {
	name        string
	depth       *histogram
	handling    *histogram
	deadLetters prometheus.Counter
	restarts    prometheus.Counter
	live        prometheus.Gauge
}

func newKindMetrics() *kindMetrics {
	return &kindMetrics{
		depth: newHistogramVec("surfaced_actor_mailbox_depth",
			"Messages waiting in an actor's mailbox when it takes the next one, by actor kind (dev mode).",
			depthBounds(), 1),
		handling: newHistogramVec("surfaced_actor_handling_seconds",
			"Time an actor's handler ran for one message, by actor kind (dev mode).",
			handlingBounds(), 1e9),
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

// depthBounds: 0, 1, 2, 4, ... 4096 messages.
func depthBounds() []int64 {
	b := []int64{0}
	for v := int64(1); v <= 4096; v *= 2 {
		b = append(b, v)
	}
	return b
}

// handlingBounds: 13 buckets from 10 µs to 10 s, evenly spaced on a log
// scale (a factor of √10), in nanoseconds.
func handlingBounds() []int64 {
	var b []int64
	for _, s := range prometheus.ExponentialBucketsRange(10e-6, 10, 13) {
		b = append(b, int64(math.Round(s*1e9)))
	}
	return b
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
		depth:       m.depth.forKind(kind),
		handling:    m.handling.forKind(kind),
		deadLetters: m.deadLetters.WithLabelValues(kind),
		restarts:    m.restarts.WithLabelValues(kind),
		live:        m.actors.WithLabelValues(kind),
	}
}
