package main_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// pyFloodTurn answers a prompt with a turn of FLOOD_LINES agent lines
// (queue_update notices, which the session turns into frames), written as
// fast as the pipe takes them, then ends the turn.
const pyFloodTurn = `
import json, os, sys
n = int(os.environ["FLOOD_LINES"])
out = sys.stdout
def send(v):
    out.write(json.dumps(v, separators=(",", ":")) + "\n")
    out.flush()
send({"type": "agent_ready", "protocol": "surfaced/1", "surfaces": []})
for raw in sys.stdin:
    m = json.loads(raw)
    if m.get("type") != "prompt":
        continue
    send({"type": "response", "id": m["id"], "command": "prompt", "success": True})
    send({"type": "agent_start"})
    line = '{"type":"queue_update","steering":[],"followUp":["' + "x" * 80 + '"]}\n'
    chunk = line * 1000
    for _ in range(n // 1000):
        out.write(chunk)
    msg = {"role": "assistant", "content": [{"type": "text", "text": "done"}], "stopReason": "stop"}
    send({"type": "message_start", "message": {"role": "assistant", "content": []}})
    send({"type": "message_end", "message": msg})
    send({"type": "agent_end", "messages": [msg]})
`

// usage is what the daemon process holds.
type usage struct {
	rssKiB, heapKiB, goroutines, fds int
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %.1f MiB, heap in use %.1f MiB, %d goroutines, %d fds",
		float64(u.rssKiB)/1024, float64(u.heapKiB)/1024, u.goroutines, u.fds)
}

// measure reads a daemon process's RSS and fds from /proc and its heap and
// goroutines from its /metrics.
func measure(b *testing.B, p *daemonProc) usage {
	var u usage
	pid := p.cmd.Process.Pid
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			u.rssKiB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	u.fds = len(fds)
	req, _ := http.NewRequest("GET", p.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "go_goroutines":
			u.goroutines = int(v)
		case "go_memstats_heap_inuse_bytes":
			u.heapKiB = int(v / 1024)
		}
	}
	return u
}

// metric reads one unlabelled series from the daemon's /metrics.
func metric(b *testing.B, p *daemonProc, name string) float64 {
	req, _ := http.NewRequest("GET", p.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// The soak of the agent side: daemon RSS, heap, goroutines and fds before,
// during and after a turn of 1 000 000 agent lines from an agent that
// writes as fast as its pipe takes them (the daemon holds it back), and
// after the session is deleted. The real daemon binary, the real pipe.
func BenchmarkSoakAgentLines(b *testing.B) {
	const lines = 1_000_000
	dir := b.TempDir()
	script := filepath.Join(dir, "agent.py")
	os.WriteFile(script, []byte(pyFloodTurn), 0o644)
	// pprof, to collect the daemon's garbage before "after" is read.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	pprofAddr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "surfaced.yaml")
	os.WriteFile(cfg, []byte(`addr: 127.0.0.1:0
pprof_addr: `+pprofAddr+`
data_dir: `+filepath.Join(dir, "data")+`
agents:
  - name: flood
    command: [python3, `+script+`]
    env: {FLOOD_LINES: "`+strconv.Itoa(lines)+`"}
`), 0o644)
	p := startBinary(b, "serve", "--config", cfg)
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&sb)
		return resp.StatusCode, sb.String()
	}
	session := func() string {
		st, body := call("POST", "/api/sessions", `{"agent":"flood"}`)
		if st != 201 {
			b.Fatalf("create: %d %s", st, body)
		}
		id := body[strings.Index(body, `"sessionId":"`)+13:]
		id = id[:strings.IndexByte(id, '"')]
		testkit.Eventually(b, 60*time.Second, func() bool {
			_, s := call("GET", "/api/sessions/"+id, "")
			return strings.Contains(s, `"status":"ready"`)
		}, "the session ready")
		return id
	}

	// settled measures the daemon once no session actor is left (an ended
	// session's lingers 60 s, its replay window held for late readers) and
	// its garbage is collected.
	settled := func() usage {
		testkit.Eventually(b, 3*time.Minute, func() bool {
			return metric(b, p, "surfaced_sessions_active") == 0
		}, "the ended sessions' actors gone")
		if resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1"); err == nil {
			resp.Body.Close()
		}
		return measure(b, p)
	}
	// Warm up: one session, so that "before" is a daemon that has run one.
	warm := session()
	call("DELETE", "/api/sessions/"+warm, "")
	before := settled()

	var peak usage
	var took time.Duration
	for range b.N {
		id := session()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				u := measure(b, p)
				peak.rssKiB = max(peak.rssKiB, u.rssKiB)
				peak.heapKiB = max(peak.heapKiB, u.heapKiB)
				peak.goroutines = max(peak.goroutines, u.goroutines)
				peak.fds = max(peak.fds, u.fds)
			}
		}()
		start := time.Now()
		if st, body := call("POST", "/api/sessions/"+id+"/prompt", `{"message":"flood"}`); st != 202 {
			b.Fatalf("prompt: %d %s", st, body)
		}
		testkit.Eventually(b, 10*time.Minute, func() bool {
			_, s := call("GET", "/api/sessions/"+id, "")
			return strings.Contains(s, `"busy":false`) && strings.Contains(s, `"status":"ready"`)
		}, "the turn of a million lines to end")
		took += time.Since(start)
		close(stop)
		wg.Wait()
		if st, _ := call("DELETE", "/api/sessions/"+id, ""); st != 200 {
			b.Fatalf("delete: %d", st)
		}
	}
	// After: the session is deleted, its agent gone, its actor gone.
	after := settled()
	b.ReportMetric(float64(lines)*float64(b.N)/took.Seconds(), "lines/s")
	b.ReportMetric(float64(before.rssKiB)/1024, "MiB-rss-before")
	b.ReportMetric(float64(peak.rssKiB)/1024, "MiB-rss-peak")
	b.ReportMetric(float64(after.rssKiB)/1024, "MiB-rss-after")
	b.ReportMetric(float64(peak.heapKiB)/1024, "MiB-heap-peak")
	b.ReportMetric(float64(after.heapKiB)/1024, "MiB-heap-after")
	b.ReportMetric(float64(before.goroutines), "goroutines-before")
	b.ReportMetric(float64(peak.goroutines), "goroutines-peak")
	b.ReportMetric(float64(after.goroutines), "goroutines-after")
	b.ReportMetric(float64(before.fds), "fds-before")
	b.ReportMetric(float64(peak.fds), "fds-peak")
	b.ReportMetric(float64(after.fds), "fds-after")
	b.Logf("before: %s\npeak during %d lines: %s\nafter: %s", before, lines, peak, after)
}
