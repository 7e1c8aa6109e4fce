package cluster_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// keyedLoad runs increments on a session from several clients at once, each
// command with its own Idempotency-Key, sent again with the same key (through
// any node) until it gets a definite answer: a 200 with its result. So every
// command ends with what happened to it, and the final count must be exactly
// the number of increments answered ok.
type keyedLoad struct {
	mu       sync.Mutex
	answers  map[string]map[string]any // key -> the definite answer
	counts   []int                     // counts of the ok answers
	replayed int                       // answers marked as replays
	resent   int                       // attempts sent again (503, connection lost)
	failed   []string                  // ok:false answers
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commandWithKey sends one attempt.
func (nd *node) commandWithKey(id, domain, action, key string) (int, map[string]any, http.Header, error) {
	req, _ := http.NewRequest("POST", nd.base+"/api/sessions/"+id+"/surfaces/"+domain+"/"+action, bytes.NewReader([]byte("{}")))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return resp.StatusCode, nil, resp.Header, fmt.Errorf("%s: %w", b, err)
	}
	return resp.StatusCode, out, resp.Header, nil
}

func startKeyedLoad(id string, clients int, via func(client, attempt int) *node) *keyedLoad {
	l := &keyedLoad{answers: map[string]map[string]any{}, stop: make(chan struct{})}
	for c := 0; c < clients; c++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			attempt := 0
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				key := newKey()
				for {
					attempt++
					nd := via(c, attempt)
					if nd == nil || nd.dead() {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					st, out, h, err := nd.commandWithKey(id, "demo", "increment", key)
					if st == 200 && err == nil {
						l.record(key, out, h.Get("Idempotent-Replayed") == "true")
						break
					}
					// No definite answer (the node died, or the session did
					// not answer in time): the same command again.
					l.mu.Lock()
					l.resent++
					l.mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return l
}

func (l *keyedLoad) record(key string, out map[string]any, replayed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers[key] = out
	if replayed {
		l.replayed++
	}
	if out["ok"] == true {
		l.counts = append(l.counts, int(out["data"].(map[string]any)["count"].(float64)))
		return
	}
	b, _ := json.Marshal(out)
	l.failed = append(l.failed, string(b))
}

func (l *keyedLoad) okCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.counts)
}

func (l *keyedLoad) end() { close(l.stop); l.wg.Wait() }

// check: every command was answered with what happened to it. No failure
// (an increment cannot fail; a command answered surface_not_registered or
// agent_unavailable that had been applied is the bug this guards against),
// every increment answered ok saw its own count, and the final count is
// exactly the number of increments answered ok: none applied twice, none
// applied without an ok.
func (l *keyedLoad) check(t *testing.T, final int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d commands answered ok (%d of them replays of an earlier attempt), %d attempts sent again, final count %d",
		len(l.counts), l.replayed, l.resent, final)
	if len(l.failed) > 0 {
		t.Fatalf("%d commands answered with a failure: %v", len(l.failed), l.failed)
	}
	counts := append([]int(nil), l.counts...)
	sort.Ints(counts)
	for i, n := range counts {
		if n != i+1 {
			t.Fatalf("the increments answered ok saw counts %v: not 1..%d each once", counts, len(counts))
		}
	}
	if final != len(counts) {
		t.Fatalf("final count %d, but %d increments were answered ok: a command was applied twice or without an ok", final, len(counts))
	}
}

// Commands in flight when the node holding their session is killed
// (SIGKILL) are answered with what happened to them: the cluster directory
// sends them again to the session's new node, and clients send them again
// with the same Idempotency-Key through another node; the new node answers
// an applied one with its original result (remembered with the snapshot)
// and runs the others once, after its agent is ready. None is answered
// surface_not_registered, and the final state holds each exactly once.
func TestInFlightCommandsAcrossNodeKill(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.extra = []string{"--config", writeLeaseConfig(t, "2s")}
	e.startAll(3)
	id, host, _ := e.remoteSession(t)
	// Through every node, the doomed one included.
	l := startKeyedLoad(id, 4, func(client, attempt int) *node { return e.nodes[(client+attempt)%3] })
	testkit.Eventually(t, 60*time.Second, func() bool { return l.okCount() >= 40 }, "the load to start")
	host.kill9()
	n := l.okCount()
	t.Logf("killed node %d after %d increments", host.i, n)
	testkit.Eventually(t, 90*time.Second, func() bool { return l.okCount() >= n+40 }, "commands to go on after the kill")
	l.end()
	var via *node
	for _, nd := range e.nodes {
		if !nd.dead() {
			via = nd
		}
	}
	count, _ := finalCount(t, via, id)
	l.check(t, count)
}
