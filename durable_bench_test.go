package surfaced_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/postgres"
)

// writeBehind is the benchmark's baseline: a store whose KV writes return
// at once and land later, from a goroutine of its own, as a daemon that
// acknowledged before the write was durable did. Benchmarks only: a crash
// loses what it acknowledged.
type writeBehind struct {
	store.Store
	ch   chan func()
	done chan struct{}
}

func newWriteBehind(s store.Store) *writeBehind {
	w := &writeBehind{Store: s, ch: make(chan func(), 1<<16), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for f := range w.ch {
			f()
		}
	}()
	return w
}

func (w *writeBehind) PutKV(_ context.Context, id string, fence store.Fence, entries []store.KV) error {
	entries = append([]store.KV(nil), entries...)
	w.ch <- func() { _ = w.Store.PutKV(context.Background(), id, fence, entries) }
	return nil
}

func (w *writeBehind) Close() error {
	close(w.ch)
	<-w.done
	return w.Store.Close()
}

// BenchmarkCommandLoadPostgres: 200 sessions, each with a client sending a
// native command every 50 ms (4,000 commands/s in all), on PostgreSQL with
// synchronous commit and fsync: the latency of each command and the
// throughput reached, acknowledged once the snapshot is durable
// (ack-after-durable), and, in the same run, acknowledged before the write
// lands (write-behind, the baseline). b.N is the number of commands.
func BenchmarkCommandLoadPostgres(b *testing.B) {
	pgtest.Require(b)
	srv, err := pgtest.NewServer(context.Background(), pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Stop() })
	const sessions, every = 200, 50 * time.Millisecond
	for _, mode := range []string{"ack-after-durable", "write-behind"} {
		b.Run(mode, func(b *testing.B) {
			dsn, err := srv.CreateDatabase(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			pg, err := postgres.Open(context.Background(), dsn, postgres.WithLogger(quietLogger()))
			if err != nil {
				b.Fatal(err)
			}
			var st store.Store = pg
			if mode == "write-behind" {
				st = newWriteBehind(pg)
			}
			defer st.Close()
			rt, err := surfaced.New(surfaced.Config{Store: st, Logger: quietLogger(),
				Agents:  []surfaced.AgentSpec{{Name: "fake", Argv: testkit.FakeAgent(b)}},
				Domains: []surfaced.DomainBinding{{Domain: counterDomain()}},
				Quotas:  surfaced.Quotas{SessionsPerSubject: sessions, SessionsTotal: sessions},
				Limits:  surfaced.Limits{CommandsPerSecond: 1 << 30}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = rt.Shutdown(ctx)
			}()
			ids := make([]string, sessions)
			for i := range ids {
				if ids[i], err = rt.CreateSession(context.Background(), surfaced.CreateOptions{Owner: owner}); err != nil {
					b.Fatal(err)
				}
			}
			per := max(1, b.N/sessions)
			samples := make([][]time.Duration, sessions)
			var failed sync.Once
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					msg := &pb.RunCommand{Caller: me, Domain: "counter", Action: "add"}
					// Spread the sessions' ticks over the period.
					next := start.Add(time.Duration(i) * every / sessions)
					out := make([]time.Duration, 0, per)
					for range per {
						time.Sleep(time.Until(next))
						t0 := time.Now()
						res, err := rt.Request(context.Background(), id, msg)
						out = append(out, time.Since(t0))
						if err != nil || !res.(*pb.CommandResult).GetOk() {
							failed.Do(func() { b.Errorf("command: %v %v", err, res) })
							return
						}
						next = next.Add(every)
					}
					samples[i] = out
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var all []time.Duration
			for _, s := range samples {
				all = append(all, s...)
			}
			reportLatencies(b, all)
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commands/s")
			b.ReportMetric(float64(sessions), "sessions")
			if testing.Verbose() {
				fmt.Fprintf(os.Stderr, "%s: %d commands in %s\n", mode, len(all), elapsed.Round(time.Millisecond))
			}
		})
	}
}
