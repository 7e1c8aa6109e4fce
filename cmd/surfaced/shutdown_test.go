package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// loadResult is what the load saw: every answer by status and code, and
// every request that got none.
type loadResult struct {
	mu         sync.Mutex
	answers    map[string]int // "200", "503 shutting_down", ...
	unanswered []string       // requests sent and never answered
	refused    int            // connections the daemon no longer accepted
}

func (r *loadResult) add(key string) {
	r.mu.Lock()
	r.answers[key]++
	r.mu.Unlock()
}

// Finding 11 of issue 14: SIGTERM while 32 clients write state, run
// commands and read summaries as fast as they can. Every request sent gets
// an answer (its result, or 503 shutting_down), never a dropped connection
// or a 500; the daemon exits well before its 15 s shutdown deadline; and
// after a restart every acknowledged write is there.
func TestSIGTERMUnderLoadAnswersEveryRequest(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, "run", "--addr", "127.0.0.1:0", "--data-dir", data, "./examples/surface-demo-agent")
	call := func(c *http.Client, base, token, method, path, body string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	var sessions []string
	for range 4 {
		resp, body, err := call(http.DefaultClient, p.base, p.token, "POST", "/api/sessions", "{}")
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %v %s", err, body)
		}
		var out struct{ SessionID string }
		_ = json.Unmarshal(body, &out)
		sessions = append(sessions, out.SessionID)
	}

	res := &loadResult{answers: map[string]int{}}
	const workers = 32
	ackState := make([]int, workers)        // the last value each worker's key was acknowledged with
	ackInc := make([]int, workers)          // increments acknowledged per worker
	started := make(chan struct{}, workers) // each worker has had an answer
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 60 * time.Second}
			sid := sessions[w%len(sessions)]
			once := sync.OnceFunc(func() { started <- struct{}{} })
			for i := 1; ; i++ {
				var method, path, body string
				switch i % 3 {
				case 0:
					method, path, body = "POST", "/api/sessions/"+sid+"/state", fmt.Sprintf(`{"key":"ui.w%d","value":%d}`, w, i)
				case 1:
					method, path, body = "POST", "/api/sessions/"+sid+"/surfaces/demo/increment", "{}"
				default:
					method, path = "GET", "/api/sessions/"+sid
				}
				resp, raw, err := call(c, p.base, p.token, method, path, body)
				if err != nil {
					var op *net.OpError
					if errors.As(err, &op) && op.Op == "dial" {
						res.mu.Lock()
						res.refused++
						res.mu.Unlock()
						return
					}
					res.mu.Lock()
					res.unanswered = append(res.unanswered, fmt.Sprintf("%s %s: %v", method, path, err))
					res.mu.Unlock()
					return
				}
				once()
				var e struct {
					Error struct{ Code string }
					OK    bool `json:"ok"`
				}
				_ = json.Unmarshal(raw, &e)
				key := fmt.Sprint(resp.StatusCode)
				if e.Error.Code != "" {
					key += " " + e.Error.Code
				}
				res.add(key)
				switch {
				case resp.StatusCode == http.StatusServiceUnavailable && e.Error.Code == "shutting_down":
					return // a well-behaved client stops asking
				case resp.StatusCode != http.StatusOK:
					res.mu.Lock()
					res.unanswered = append(res.unanswered, fmt.Sprintf("%s %s: %d %s", method, path, resp.StatusCode, raw))
					res.mu.Unlock()
					return
				case i%3 == 0:
					ackState[w] = i
				case i%3 == 1 && e.OK:
					ackInc[w]++
				}
			}
		}()
	}
	for range workers {
		<-started
	}
	// The load runs a while (a thousand answers) before the signal.
	testkit.Eventually(t, 30*time.Second, func() bool {
		res.mu.Lock()
		defer res.mu.Unlock()
		return res.answers["200"] >= 1000
	}, "a thousand answers")
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after SIGTERM; stderr:\n%s", p.stderr.String())
	}
	exitTook := time.Since(t0)
	wg.Wait()
	t.Logf("exit %v after %s; answers %v; connections refused after the listener closed: %d", exitErr, exitTook.Round(time.Millisecond), res.answers, res.refused)
	if exitErr != nil {
		t.Fatalf("exit: %v; stderr:\n%s", exitErr, p.stderr.String())
	}
	if len(res.unanswered) > 0 {
		t.Fatalf("%d requests without a proper answer, e.g. %s", len(res.unanswered), strings.Join(res.unanswered[:min(5, len(res.unanswered))], "; "))
	}
	if res.answers["503 shutting_down"] == 0 {
		t.Fatalf("no request was answered shutting_down: the load did not overlap the shutdown (%v)", res.answers)
	}
	// The daemon's own deadline is 15 s: no request held it there.
	if exitTook >= 15*time.Second {
		t.Errorf("the daemon took %s to exit", exitTook)
	}

	// Every acknowledged write survived.
	q := startBinary(t, "run", "--addr", "127.0.0.1:0", "--data-dir", data, "./examples/surface-demo-agent")
	counts := map[string]int{}
	for w := range workers {
		sid := sessions[w%len(sessions)]
		counts[sid] += ackInc[w]
		resp, body, err := call(http.DefaultClient, q.base, q.token, "GET", "/api/sessions/"+sid+"/state", "")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("state after the restart: %v %s", err, body)
		}
		var st struct {
			Entries map[string]struct {
				Value json.RawMessage
			}
		}
		_ = json.Unmarshal(body, &st)
		var v int
		_ = json.Unmarshal(st.Entries[fmt.Sprintf("ui.w%d", w)].Value, &v)
		if v < ackState[w] {
			t.Errorf("worker %d's key is %d after the restart; %d was acknowledged", w, v, ackState[w])
		}
		if w < len(sessions) {
			var demo struct {
				Count int `json:"count"`
			}
			_ = json.Unmarshal(st.Entries["surface:demo"].Value, &demo)
			defer func(sid string, count int) {
				if count < counts[sid] {
					t.Errorf("session %s counts %d after the restart; %d increments were acknowledged", sid, count, counts[sid])
				}
			}(sid, demo.Count)
		}
	}
}
