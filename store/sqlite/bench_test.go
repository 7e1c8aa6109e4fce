package sqlite

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
	"github.com/surfaced/surfaced/store/storetest"
)

// BenchmarkStore runs the store benchmarks on memstore, the baseline, and
// on SQLite in the same run.
func BenchmarkStore(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		storetest.Bench(b, func(b *testing.B) store.Store { return memstore.New() })
	})
	b.Run("sqlite", func(b *testing.B) {
		storetest.Bench(b, func(b *testing.B) store.Store { return mustOpen(b, b.TempDir()) })
	})
}

// BenchmarkSynchronous prices synchronous=FULL (an fsync per commit) against
// the NORMAL that Open uses.
func BenchmarkSynchronous(b *testing.B) {
	for _, mode := range []string{"NORMAL", "FULL"} {
		b.Run(mode, func(b *testing.B) {
			s := mustOpen(b, b.TempDir(), func(c *config) { c.synchronous = mode })
			defer s.Close()
			ctx := context.Background()
			if err := s.CreateSession(ctx, store.Session{ID: "sync", Owner: "alice"}); err != nil {
				b.Fatal(err)
			}
			value := []byte(`{"v":"0123456789"}`)
			rev := uint64(0)
			for b.Loop() {
				rev++
				if err := s.PutKV(ctx, "sync", 0, []store.KV{{Key: "k", Value: value, Rev: rev}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPools compares the split pools of Open (one writer connection,
// a pool of readers) with a single one-connection pool for everything, under
// 8 goroutines that each write one KV entry per 4 reads.
func BenchmarkPools(b *testing.B) {
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"split", false}, {"shared", true}} {
		b.Run(tc.name, func(b *testing.B) {
			s := mustOpen(b, b.TempDir(), func(c *config) { c.sharedPool = tc.shared })
			defer s.Close()
			ctx := context.Background()
			for i := range 500 {
				if err := s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("pool-%03d", i), Owner: "alice"}); err != nil {
					b.Fatal(err)
				}
			}
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((8 + procs - 1) / procs)
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("pool-%03d", next.Add(1))
				rev := uint64(0)
				for i := 0; pb.Next(); i++ {
					var err error
					switch i % 5 {
					case 0:
						rev++
						err = s.PutKV(ctx, id, 0, []store.KV{{Key: "k", Value: []byte(`{"n":1}`), Rev: rev}})
					case 1, 2:
						_, err = s.GetSession(ctx, id)
					case 3:
						_, err = s.LoadKV(ctx, id)
					case 4:
						_, _, err = s.ListSessions(ctx, store.ListQuery{Owner: "alice", Limit: 20})
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkOpen measures Open and Close of a database of 10k sessions with a
// KV entry and 10 transcript entries each: PRAGMA quick_check reads it all.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	s := mustOpen(b, dir)
	ctx := context.Background()
	entries := make([]store.Entry, 10)
	for i := range entries {
		entries[i] = store.Entry{Role: "assistant", Text: "some streamed text of a reasonable length for a turn"}
	}
	for i := range 10_000 {
		id := fmt.Sprintf("open-%05d", i)
		if err := s.CreateSession(ctx, store.Session{ID: id, Owner: "alice"}); err != nil {
			b.Fatal(err)
		}
		if err := s.PutKV(ctx, id, 0, []store.KV{{Key: "surface:canvas", Value: []byte(`{"shapes":[1,2,3]}`), Rev: 1}}); err != nil {
			b.Fatal(err)
		}
		if err := s.AppendTranscript(ctx, id, 0, entries); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	for b.Loop() {
		s := mustOpen(b, dir)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(fileSize(b, s.Path()))/(1<<20), "file-MiB")
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
