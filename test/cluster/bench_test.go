package cluster_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The cluster benchmarks run real daemon processes on this machine (all
// nodes share its cores), on the PostgreSQL store, with the scripted agent
// and its agent-hosted demo domain. See docs/benchmarks.md.

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}

func (nd *node) post(path string) (int, error) {
	req, _ := http.NewRequest("POST", nd.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := benchClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// benchConfig is the daemons' flags for a benchmark: one session takes
// commands as fast as a client sends them (the default
// limits.commands_per_second, 1000 per session, is below what one client
// sends one after the other on a quiet machine, and its 429s would end the
// benchmark).
func benchConfig(b testing.TB) []string {
	p := filepath.Join(b.TempDir(), "bench.yaml")
	if err := os.WriteFile(p, []byte("limits:\n  commands_per_second: 1000000\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return []string{"--config", p}
}

// demoRev is the current rev of the session's demo surface.
func demoRev(b testing.TB, nd *node, id string) int {
	_, rev := finalCount(b, nd, id)
	return rev
}

// Command→snapshot latency: from the POST of a command to its state frame
// on an SSE stream open on the same node as the client. same-node: the
// session lives on that node; cross-node: on another one (the command and
// every frame cross the cluster). single: one daemon without a cluster, on
// the same store, for reference. remote-hop and local-hop: protoactor's own
// request/response to another process and within this one, the baseline of
// what cross-node adds.
func BenchmarkClusterCommandToSnapshot(b *testing.B) {
	e := newEnv(b, "automanaged", 3)
	e.extra = benchConfig(b)
	e.startAll(3)
	a := e.nodes[0]
	local, remote := e.localAndRemote(b, a)
	s := newEnv(b, "", 1)
	s.dsn = e.dsn
	s.extra = benchConfig(b)
	single := s.start(0)
	alone := single.create(b)
	b.Run("same-node", func(b *testing.B) { commandToSnapshot(b, a, local) })
	b.Run("cross-node", func(b *testing.B) { commandToSnapshot(b, a, remote) })
	b.Run("single", func(b *testing.B) { commandToSnapshot(b, single, alone) })
	// The baseline of cross-node − same-node (remotehop_bench_test.go).
	b.Run("remote-hop", func(b *testing.B) { remoteHop(b, true) })
	b.Run("local-hop", func(b *testing.B) { remoteHop(b, false) })
}

func commandToSnapshot(b *testing.B, nd *node, id string) {
	req, _ := http.NewRequest("GET", nd.base+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := benchClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("events: %v %v", err, resp)
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	rev := demoRev(b, nd, id)
	want := []byte(`"key":"surface:demo"`)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if st, err := nd.post("/api/sessions/" + id + "/surfaces/demo/increment"); st != 200 || err != nil {
			b.Fatalf("command: %d %v", st, err)
		}
		rev++
		mark := []byte(`"rev":` + strconv.Itoa(rev) + `}`)
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(line, want) && bytes.Contains(line, mark) {
				break
			}
		}
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, samples)
}

// reportLatency reports the p50 and p99 of samples.
func reportLatency(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	q := func(p float64) float64 { return float64(samples[int(float64(len(samples)-1)*p)].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// localAndRemote creates sessions through node a until it has one a hosts
// and one another node hosts.
func (e *env) localAndRemote(b testing.TB, a *node) (local, remote string) {
	for local == "" || remote == "" {
		id := a.create(b)
		if e.hostOf(b, a, id) == a {
			if local == "" {
				local = id
			}
		} else if remote == "" {
			remote = id
		}
	}
	return local, remote
}

// Throughput of a 3-node cluster against a 1-node cluster (same code path,
// same store): sessions created and made ready per second, and commands per
// second from concurrent clients spread over every node (on 3 nodes, two
// commands in three cross the cluster). Every node runs on this one machine,
// so this measures what the cluster costs, not what more machines add.
func BenchmarkClusterThroughput(b *testing.B) {
	// Enough sessions that the daemons' own footprint does not dominate the
	// per-session memory; commands from 24 concurrent clients.
	sessions, clients := 96, 24
	if v, _ := strconv.Atoi(os.Getenv("CLUSTER_BENCH_SESSIONS")); v > 0 {
		sessions = v
	}
	for _, n := range []int{1, 3} {
		e := newEnv(b, "automanaged", n)
		e.extra = benchConfig(b)
		e.startAll(n)
		base := 0
		for _, nd := range e.nodes {
			base += rssKiB(nd.cmd.Process.Pid)
		}
		t0 := time.Now()
		ids := make([]string, sessions)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i] = e.nodes[i%n].create(b)
			}()
		}
		wg.Wait()
		created := time.Since(t0)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			t1 := time.Now()
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						nd := e.nodes[int(i)%n]
						id := ids[(int(i)/n+c)%len(ids)]
						if st, err := nd.post("/api/sessions/" + id + "/surfaces/demo/increment"); st != 200 || err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(t1)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d commands failed", f, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
			b.ReportMetric(float64(sessions)/created.Seconds(), "sessions/s")
			rss := 0
			for _, nd := range e.nodes {
				rss += rssKiB(nd.cmd.Process.Pid)
			}
			// What the sessions added to the daemons (commands included).
			b.ReportMetric(float64(rss-base)/float64(sessions), "daemon-KiB/session")
		})
		for _, nd := range e.nodes {
			nd.stop()
		}
	}
}

// rssKiB is a process's resident set (its agents are separate processes and
// not counted).
func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}
