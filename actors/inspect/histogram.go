package inspect

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// histogram is a Prometheus histogram cut down for the per-message path: it
// records integers (a queue depth, nanoseconds) with one atomic add to a
// bucket and one to the sum. prometheus.Histogram costs more per
// observation (a float sum updated by compare-and-swap, a hot/cold swap
// counter, a binary search) and the inspector observes twice per message.
// The buckets are few and the values nearly always fall in the first one
// or two, so a linear scan finds the bucket.
//
// A scrape reads the buckets one by one while observations go on, so the
// count, the sum and the buckets of one scrape may disagree by the
// observations made during it; the next scrape catches up.
type histogram struct {
	bounds []int64         // bucket upper bounds (inclusive), recorded unit
	counts []atomic.Uint64 // one per bound, then +Inf
	sum    atomic.Int64
}

func newHistogram(bounds []int64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v int64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	if v != 0 { // most mailboxes are empty when their actor takes a message
		h.sum.Add(v)
	}
}

// histogramVec is a family of histograms by actor kind, exported as
// Prometheus histograms with the recorded values divided by unit (1e9 for
// nanoseconds exported as seconds; a division keeps 10 µs exactly 1e-05).
type histogramVec struct {
	desc   *prometheus.Desc
	bounds []int64
	unit   float64

	mu    sync.Mutex
	kinds map[string]*histogram
}

func newHistogramVec(name, help string, bounds []int64, unit float64) *histogramVec {
	return &histogramVec{
		desc:   prometheus.NewDesc(name, help, []string{"kind"}, nil),
		bounds: bounds,
		unit:   unit,
		kinds:  map[string]*histogram{},
	}
}

// forKind returns the kind's histogram, creating it on first use.
func (v *histogramVec) forKind(kind string) *histogram {
	v.mu.Lock()
	defer v.mu.Unlock()
	h, ok := v.kinds[kind]
	if !ok {
		h = newHistogram(v.bounds)
		v.kinds[kind] = h
	}
	return h
}

// Describe implements prometheus.Collector.
func (v *histogramVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector.
func (v *histogramVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	kinds := slices.Sorted(maps.Keys(v.kinds))
	hs := make([]*histogram, len(kinds))
	for i, k := range kinds {
		hs[i] = v.kinds[k]
	}
	v.mu.Unlock()
	for i, h := range hs {
		buckets := make(map[float64]uint64, len(v.bounds))
		var cum uint64
		for j, b := range v.bounds {
			cum += h.counts[j].Load()
			buckets[float64(b)/v.unit] = cum
		}
		cum += h.counts[len(v.bounds)].Load()
		ch <- prometheus.MustNewConstHistogram(v.desc, cum, float64(h.sum.Load())/v.unit, buckets, kinds[i])
	}
}
