package storetest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// Bench runs the store benchmarks as sub-benchmarks of b. open returns a new,
// empty store; Bench closes it. Run it for several implementations in one
// benchmark so that their numbers come from the same run.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("PutKV1KiB", func(b *testing.B) { benchPutKV(b, open) })
	b.Run("PutKV1KiBParallel8", func(b *testing.B) { benchPutKVParallel(b, open, 8) })
	b.Run("AppendTranscript1", func(b *testing.B) { benchAppend(b, open, 1) })
	b.Run("AppendTranscript10", func(b *testing.B) { benchAppend(b, open, 10) })
	b.Run("GetSession", func(b *testing.B) { benchGet(b, open) })
	b.Run("ListSessions10k", func(b *testing.B) { benchList(b, open, 10_000) })
	b.Run("CountSessions10k", func(b *testing.B) { benchCount(b, open, 10_000) })
	b.Run("PutKV1KiBFenced", func(b *testing.B) { benchPutKVFenced(b, open) })
	b.Run("LeaseAcquireRelease", func(b *testing.B) { benchLeaseAcquire(b, open) })
	b.Run("LeaseRenew", func(b *testing.B) { benchLeaseRenew(b, open) })
}

// benchLeaser opens a store and its Leaser, or skips b.
func benchLeaser(b *testing.B, open func(b *testing.B) store.Store) (store.Store, store.Leaser) {
	s := benchOpen(b, open)
	ls, ok := s.(store.Leaser)
	if !ok {
		b.Skipf("%T is not a store.Leaser", s)
	}
	return s, ls
}

// benchPutKVFenced is PutKV1KiB under a fence: the price of the check.
func benchPutKVFenced(b *testing.B, open func(b *testing.B) store.Store) {
	ctx := context.Background()
	s, ls := benchLeaser(b, open)
	must(b, s.CreateSession(ctx, store.Session{ID: "bench", Owner: "alice"}))
	l, err := ls.AcquireLease(ctx, "bench", "node-a", time.Hour)
	must(b, err)
	fence := store.Fence(l.Token)
	b.SetBytes(int64(len(value1KiB)))
	b.ReportAllocs()
	rev := uint64(0)
	cpu := startCPU()
	for b.Loop() {
		rev++
		if err := s.PutKV(ctx, "bench", fence, []store.KV{{Key: "surface:canvas", Value: value1KiB, Rev: rev}}); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// benchLeaseAcquire takes a free lease and releases it: a session moving
// to a node, then leaving it. Each op is both calls.
func benchLeaseAcquire(b *testing.B, open func(b *testing.B) store.Store) {
	ctx := context.Background()
	_, ls := benchLeaser(b, open)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		l, err := ls.AcquireLease(ctx, "bench", "node-a", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.ReleaseLease(ctx, "bench", l.Token); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// benchLeaseRenew renews a held lease, as its holder does every few
// seconds for every session it runs.
func benchLeaseRenew(b *testing.B, open func(b *testing.B) store.Store) {
	ctx := context.Background()
	_, ls := benchLeaser(b, open)
	l, err := ls.AcquireLease(ctx, "bench", "node-a", time.Minute)
	must(b, err)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, err := ls.RenewLease(ctx, "bench", l.Token, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// value1KiB is a JSON document of about 1 KiB, a small surface snapshot.
var value1KiB = func() []byte {
	var sb strings.Builder
	sb.WriteString(`{"shapes":[`)
	for i := 0; sb.Len() < 1000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"s%d","x":%d,"y":%d,"fill":"#a0b0c0"}`, i, i*10, i*7)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}()

// cpuMeter reports the process CPU time per operation as cpu-ns/op.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{t, ok}
}

func (m cpuMeter) report(b *testing.B) {
	end, ok := processCPU()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64(end-m.start)/float64(b.N), "cpu-ns/op")
}

func benchOpen(b *testing.B, open func(b *testing.B) store.Store) store.Store {
	s := open(b)
	b.Cleanup(func() { s.Close() })
	return s
}

func benchPutKV(b *testing.B, open func(b *testing.B) store.Store) {
	ctx := context.Background()
	s := benchOpen(b, open)
	must(b, s.CreateSession(ctx, store.Session{ID: "bench", Owner: "alice"}))
	b.SetBytes(int64(len(value1KiB)))
	b.ReportAllocs()
	rev := uint64(0)
	cpu := startCPU()
	for b.Loop() {
		rev++
		if err := s.PutKV(ctx, "bench", 0, []store.KV{{Key: "surface:canvas", Value: value1KiB, Rev: rev}}); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// benchPutKVParallel has goroutines goroutines write one key each in their
// own session, as the domain actors of different sessions do.
func benchPutKVParallel(b *testing.B, open func(b *testing.B) store.Store, goroutines int) {
	ctx := context.Background()
	s := benchOpen(b, open)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((goroutines + procs - 1) / procs)
	var next atomic.Int64
	b.SetBytes(int64(len(value1KiB)))
	b.ReportAllocs()
	cpu := startCPU()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("par-%d", next.Add(1))
		if err := s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}); err != nil {
			b.Error(err)
			return
		}
		rev := uint64(0)
		for pb.Next() {
			rev++
			if err := s.PutKV(ctx, id, 0, []store.KV{{Key: "surface:canvas", Value: value1KiB, Rev: rev}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	cpu.report(b)
	b.ReportMetric(float64(next.Load()), "goroutines")
}

func benchAppend(b *testing.B, open func(b *testing.B) store.Store, batch int) {
	ctx := context.Background()
	s := benchOpen(b, open)
	must(b, s.CreateSession(ctx, store.Session{ID: "bench", Owner: "alice"}))
	entries := make([]store.Entry, batch)
	size := 0
	for i := range entries {
		entries[i] = store.Entry{Role: "assistant", Via: "agent", At: time.Now(),
			Text: strings.Repeat("A sentence the model streamed to the user. ", 6)}
		size += len(entries[i].Text)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if err := s.AppendTranscript(ctx, "bench", 0, entries); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

func benchGet(b *testing.B, open func(b *testing.B) store.Store) {
	ctx := context.Background()
	s := benchOpen(b, open)
	for i := range 1000 {
		must(b, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("get-%04d", i), Owner: "alice", Title: "a title"}))
	}
	b.ReportAllocs()
	i := 0
	cpu := startCPU()
	for b.Loop() {
		i++
		if _, err := s.GetSession(ctx, fmt.Sprintf("get-%04d", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// benchList lists pages of 50 out of n sessions of one owner (among as many
// of other owners): the first page, and a page in the middle reached by its
// cursor.
func benchList(b *testing.B, open func(b *testing.B) store.Store, n int) {
	ctx := context.Background()
	s := benchOpen(b, open)
	base := time.Now().Add(-time.Duration(2*n) * time.Second)
	for i := range 2 * n {
		owner := []string{"alice", "bob"}[i%2]
		must(b, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("list-%06d", i), Owner: owner, Agent: "pi",
			Title: "a session title", Cwd: "/home/alice/src", Status: "ended", Updated: base.Add(time.Duration(i) * time.Second)}))
	}
	// The cursor of the page in the middle.
	cursor := ""
	for range n / 2 / 500 {
		var err error
		_, cursor, err = s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 500, Cursor: cursor})
		must(b, err)
	}
	for _, tc := range []struct{ name, cursor string }{{"first", ""}, {"middle", cursor}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				page, _, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 50, Cursor: tc.cursor})
				if err != nil || len(page) != 50 {
					b.Fatalf("page of %d: %v", len(page), err)
				}
			}
			cpu.report(b)
		})
	}
}

// benchCount counts one owner's sessions among 2n, n of them the owner's,
// nine in ten of those ended (as they pile up): the live ones (a quota
// check), all of them, the live ones of one agent, and, as the baseline,
// the live ones by paging through the listing as a count did before
// CountSessions.
func benchCount(b *testing.B, open func(b *testing.B) store.Store, n int) {
	ctx := context.Background()
	s := benchOpen(b, open)
	live, livePi := 0, 0
	for i := range 2 * n {
		owner, agent, status := []string{"alice", "bob"}[i%2], []string{"pi", "hello"}[i/2%2], store.StatusEnded
		if i/2%10 == 0 {
			status = "ready"
			if owner == "alice" {
				live++
				if agent == "pi" {
					livePi++
				}
			}
		}
		must(b, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("count-%06d", i), Owner: owner, Agent: agent, Status: status}))
	}
	for _, tc := range []struct {
		name string
		want int
		run  func() (int, error)
	}{
		{"live", live, func() (int, error) { return s.CountSessions(ctx, store.CountQuery{Owner: "alice", ExcludeEnded: true}) }},
		{"all", n, func() (int, error) { return s.CountSessions(ctx, store.CountQuery{Owner: "alice"}) }},
		{"liveByAgent", livePi, func() (int, error) {
			return s.CountSessions(ctx, store.CountQuery{Owner: "alice", Agent: "pi", ExcludeEnded: true})
		}},
		{"livePaged", live, func() (int, error) {
			count, cursor := 0, ""
			for {
				page, next, err := s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: store.MaxListLimit, Cursor: cursor})
				if err != nil {
					return 0, err
				}
				for _, sess := range page {
					if sess.Status != store.StatusEnded {
						count++
					}
				}
				if next == "" {
					return count, nil
				}
				cursor = next
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				if got, err := tc.run(); err != nil || got != tc.want {
					b.Fatalf("count %d, %v; want %d", got, err, tc.want)
				}
			}
			cpu.report(b)
		})
	}
}
