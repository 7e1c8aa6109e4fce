package inspect

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The inspector's histogram exports what a prometheus.Histogram with the
// same buckets exports for the same observations, including from several
// goroutines at once.
func TestHistogramMatchesPrometheus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bounds []int64
		unit   float64
		gen    func(r *rand.Rand) int64
	}{
		{"depth", depthBounds(), 1, func(r *rand.Rand) int64 { return int64(r.ExpFloat64() * 50) }},
		{"handling", handlingBounds(), 1e9, func(r *rand.Rand) int64 {
			return int64(math.Pow(10, 3+r.Float64()*8)) // 1 µs .. 100 s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vec := newHistogramVec("test_"+tc.name, "test", tc.bounds, tc.unit)
			var upper []float64
			for _, b := range tc.bounds {
				upper = append(upper, float64(b)/tc.unit)
			}
			want := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "want", Buckets: upper})
			h := vec.forKind("k")
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for range 5000 {
						v := tc.gen(r)
						h.observe(v)
						mu.Lock()
						want.Observe(float64(v) / tc.unit)
						mu.Unlock()
					}
				}()
			}
			// The exact bounds fall in their own bucket (le is inclusive).
			for _, b := range tc.bounds {
				h.observe(b)
				want.Observe(float64(b) / tc.unit)
			}
			wg.Wait()

			got := collectOne(t, vec)
			var w dto.Metric
			if err := want.Write(&w); err != nil {
				t.Fatal(err)
			}
			gh, wh := got.GetHistogram(), w.GetHistogram()
			if gh.GetSampleCount() != wh.GetSampleCount() {
				t.Fatalf("count %d, want %d", gh.GetSampleCount(), wh.GetSampleCount())
			}
			if d := math.Abs(gh.GetSampleSum()-wh.GetSampleSum()) / wh.GetSampleSum(); d > 1e-9 {
				t.Fatalf("sum %g, want %g", gh.GetSampleSum(), wh.GetSampleSum())
			}
			if len(gh.GetBucket()) != len(wh.GetBucket()) {
				t.Fatalf("%d buckets, want %d", len(gh.GetBucket()), len(wh.GetBucket()))
			}
			for i, b := range wh.GetBucket() {
				g := gh.GetBucket()[i]
				if g.GetUpperBound() != b.GetUpperBound() || g.GetCumulativeCount() != b.GetCumulativeCount() {
					t.Fatalf("bucket %d: le=%g %d, want le=%g %d", i, g.GetUpperBound(), g.GetCumulativeCount(),
						b.GetUpperBound(), b.GetCumulativeCount())
				}
			}
			if l := got.GetLabel(); len(l) != 1 || l[0].GetName() != "kind" || l[0].GetValue() != "k" {
				t.Fatalf("labels %v", l)
			}
		})
	}
}

func TestHandlingBounds(t *testing.T) {
	b := handlingBounds()
	if len(b) != 13 || b[0] != 10_000 || b[12] != 10_000_000_000 {
		t.Fatalf("%v", b)
	}
	if d := depthBounds(); len(d) != 14 || d[0] != 0 || d[1] != 1 || d[13] != 4096 {
		t.Fatalf("%v", d)
	}
}

func collectOne(t *testing.T, c prometheus.Collector) *dto.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric, 8)
	c.Collect(ch)
	close(ch)
	var out []*dto.Metric
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, &d)
	}
	if len(out) != 1 {
		t.Fatalf("%d series", len(out))
	}
	return out[0]
}

func BenchmarkObserve(b *testing.B) {
	b.Run("prometheus", func(b *testing.B) {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.ExponentialBucketsRange(10e-6, 10, 13)})
		for b.Loop() {
			h.Observe(3e-6)
		}
	})
	b.Run("inspector", func(b *testing.B) {
		h := newHistogram(handlingBounds())
		for b.Loop() {
			h.observe(3000)
		}
	})
}
