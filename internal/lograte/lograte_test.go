package lograte

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
)

// records is a slog handler that keeps what it is given.
type records struct {
	mu      sync.Mutex
	all     []slog.Record
	handled chan struct{} // one token per record, when made with a channel
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
	if r.handled != nil {
		r.handled <- struct{}{}
	}
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) snapshot() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.all...)
}

func suppressedOf(rec slog.Record) int64 {
	var n int64 = -1
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			n = a.Value.Int64()
		}
		return true
	})
	return n
}

func TestFirstLinesThenOneSummaryPerInterval(t *testing.T) {
	h := &records{handled: make(chan struct{}, 16)}
	c := clock.NewFake(time.Unix(1000, 0))
	l := New(slog.New(h), "agent stderr", Config{Lines: 3, Interval: time.Second, Clock: c})
	logged := 0
	for range 100000 {
		if l.Log(slog.LevelInfo, "agent stderr", "line", "x") {
			logged++
		}
	}
	if logged != 3 || len(h.snapshot()) != 3 || l.Suppressed() != 99997 {
		t.Fatalf("logged %d, records %d, suppressed %d", logged, len(h.snapshot()), l.Suppressed())
	}
	// The interval ends: the summary comes without another line.
	if !c.WaitPending(1, 5*time.Second) {
		t.Fatal("no summary timer")
	}
	for range 3 {
		<-h.handled
	}
	c.Advance(time.Second)
	select {
	case <-h.handled:
	case <-time.After(10 * time.Second):
		t.Fatal("no summary after the interval")
	}
	recs := h.snapshot()
	if s := recs[3]; s.Level != slog.LevelWarn || suppressedOf(s) != 99997 {
		t.Fatalf("summary %v suppressed=%d", s.Message, suppressedOf(s))
	}
	// A new interval logs again.
	if !l.Log(slog.LevelInfo, "agent stderr", "line", "y") {
		t.Fatal("the next interval logged nothing")
	}
	l.Log(slog.LevelInfo, "agent stderr", "line", "y")
	l.Log(slog.LevelInfo, "agent stderr", "line", "y")
	l.Log(slog.LevelInfo, "agent stderr", "line", "z") // suppressed
	for range 3 {
		<-h.handled
	}
	l.Close()
	<-h.handled
	recs = h.snapshot()
	if len(recs) != 8 || suppressedOf(recs[7]) != 1 {
		t.Fatalf("after Close: %d records, last suppressed=%d", len(recs), suppressedOf(recs[len(recs)-1]))
	}
	if l.Log(slog.LevelInfo, "agent stderr", "line", "late") || len(h.snapshot()) != 8 {
		t.Fatal("a closed limiter logged")
	}
}

func TestConcurrentSources(t *testing.T) {
	h := &records{}
	l := New(slog.New(h), "x", Config{Lines: 10, Interval: time.Hour})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				l.Log(slog.LevelInfo, "m")
			}
		}()
	}
	wg.Wait()
	l.Close()
	recs := h.snapshot()
	if len(recs) != 11 || suppressedOf(recs[10]) != 3990 {
		t.Fatalf("%d records, summary suppressed=%d", len(recs), suppressedOf(recs[len(recs)-1]))
	}
}
