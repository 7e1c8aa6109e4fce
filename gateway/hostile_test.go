package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/gorilla/websocket"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// liveHeap is the heap in use after a collection: what the process keeps.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapSampler records the largest heap in use while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > h.peak.Load() {
				h.peak.Store(m.HeapAlloc)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// goroutines counts the process's goroutines but the dispatch pool's
// workers, which stay warm for a while after a burst by design.
func goroutines() int {
	return runtime.NumGoroutine() - int(dispatch.Shared.Stats().Live)
}

// goroutinesBackTo waits until goroutines() is back to base (and a little
// slack for the runtime's own), dumping them if not.
func goroutinesBackTo(t *testing.T, base int) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})
	testkit.Eventually(t, 20*time.Second, func() bool { return goroutines() <= base+2 }, "goroutines back to %d", base)
}

// warmProcessRegistry registers and removes enough processes that every
// one of protoactor's 32,768 registry maps has been used once. A Go map
// keeps the group it allocated for its first entry, so until then the
// registry grows by a few hundred bytes for each map an actor's id lands
// in for the first time (about 10 MiB in all, bounded, whatever the
// clients do): a test of what connections leave behind starts after it.
func warmProcessRegistry(sys *actor.ActorSystem) {
	reg := sys.ProcessRegistry
	for i := range 600_000 {
		pid, _ := reg.Add(nopProcess{}, "warm-"+strconv.Itoa(i))
		reg.Remove(pid)
	}
}

type nopProcess struct{}

func (nopProcess) SendUserMessage(*actor.PID, any)   {}
func (nopProcess) SendSystemMessage(*actor.PID, any) {}
func (nopProcess) Stop(*actor.PID)                   {}

// clientsGauge reads surfaced_clients{kind}.
func clientsGauge(t *testing.T, d *daemon.Daemon, kind string) string {
	t.Helper()
	_, out := d.JSON("GET", "/metrics", nil)
	for _, line := range strings.Split(out["_raw"].(string), "\n") {
		if v, ok := strings.CutPrefix(line, `surfaced_clients{kind="`+kind+`"} `); ok {
			return v
		}
	}
	return ""
}

// dialStalledWS opens a session's WebSocket with a tiny receive buffer; the
// caller decides whether it ever reads.
func dialStalledWS(t *testing.T, d *daemon.Daemon, id string) *websocket.Conn {
	t.Helper()
	dialer := websocket.Dialer{NetDialContext: testkit.StalledDialer().DialContext, HandshakeTimeout: 10 * time.Second}
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	conn, resp, err := dialer.Dial(u, d.Auth())
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Finding 4: sockets that never read and send small invalid requests as
// fast as they can. Every reply waits in the connection's queue and counts
// toward its byte bound, so each socket is cut (slow_consumer) once a
// bounded backlog builds up; in-flight requests are capped per connection
// (the rest answered too_many_requests at once); and once the sockets are
// gone the heap and the goroutines are back where they were.
func TestWebSocketFloodOfRepliesIsBounded(t *testing.T) {
	const queueBytes = 1 << 20
	d := daemon.Start(t, daemon.SlowDomain(time.Second), daemon.Gateway(gateway.Limits{QueueBytes: queueBytes, QueueAge: 4 * time.Second, WSInflight: 4}))
	id := d.Create(nil)
	warm := d.WS(id, "")
	warm.Wait("ready", event("session", func(d map[string]any) bool { return d["status"] == "ready" }))
	warm.Conn.Close()
	testkit.Eventually(t, 10*time.Second, func() bool { return clientsGauge(t, d, "ws") == "0" }, "the warm-up client gone")

	baseHeap := liveHeap()
	baseG := goroutines()
	peak := sampleHeap()
	const sockets = 4
	sent := make([]int, sockets)
	var wg sync.WaitGroup
	for i := range sockets {
		conn := dialStalledWS(t, d, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A few requests that stay in flight (the slow domain takes a
			// second each), then invalid ones as fast as the socket takes
			// them, until the daemon cuts the connection.
			for j := range 8 {
				msg := fmt.Sprintf(`{"id":"w%d","type":"command","domain":"slow","action":"work"}`, j)
				if conn.WriteMessage(websocket.TextMessage, []byte(msg)) != nil {
					return
				}
			}
			for {
				_ = conn.SetWriteDeadline(time.Now().Add(time.Minute))
				if err := conn.WriteMessage(websocket.TextMessage, []byte("x")); err != nil {
					return
				}
				sent[i]++
			}
		}()
	}
	wg.Wait()
	top := peak.Stop()
	for i, n := range sent {
		// A reply to "x" is about 200 bytes: the socket was cut by the
		// byte bound, after its backlog passed it.
		if n < queueBytes/400 {
			t.Errorf("socket %d was cut after %d requests: before its replies could have passed the bound", i, n)
		}
	}
	t.Logf("requests sent per socket: %v; heap %s before, %s at the peak", sent, mib(baseHeap), mib(top))
	// What the four backlogs hold at most, with the garbage a collection
	// cycle leaves and the reader's buffers: far below what an unbounded
	// backlog reaches in the same time (hundreds of MiB).
	if limit := baseHeap + 4*sockets*queueBytes + 32<<20; top > limit {
		t.Errorf("heap peaked at %s with %d flooding sockets (at most %s expected)", mib(top), sockets, mib(limit))
	}
	cuts := ""
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, out := d.JSON("GET", "/metrics", nil)
		cuts = out["_raw"].(string)
		return clientsGauge(t, d, "ws") == "0" && strings.Contains(cuts, fmt.Sprintf(`surfaced_slow_consumer_cuts_total{kind="ws"} %d`, sockets))
	}, "the sockets' streams gone and counted as cut")
	// Nothing of the connections outlives them: their requests in flight
	// end with them, their queues and replies are released.
	goroutinesBackTo(t, baseG)
	var after uint64
	testkit.Eventually(t, 20*time.Second, func() bool {
		after = liveHeap()
		return after < baseHeap+2<<20
	}, "the heap back to the baseline")
	t.Logf("heap after the sockets closed: %s (baseline %s)", mib(after), mib(baseHeap))
}

// openSSEOnce opens a session's event stream on a fresh connection, reads
// its first event and closes the connection.
func openSSEOnce(addr, path, token string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\n\r\n", path, addr, token); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.Contains(status, " 200 ") {
		return fmt.Errorf("status %q", strings.TrimSpace(status))
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, "data: ") {
			return nil
		}
	}
}

// openWSOnce opens a session's WebSocket, reads its first message and
// closes the connection.
func openWSOnce(d *daemon.Daemon, id string) error {
	u := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	conn, _, err := websocket.DefaultDialer.Dial(u, d.Auth())
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	return err
}

// Finding 5: thousands of clients that connect, read and leave while the
// session lives (idle_timeout 0: it never sleeps) leave nothing behind: not
// in the session's hub or watcher set, not in the gateway. (A subscriber
// that stayed in the session's watcher set kept 2.5 KiB per connection.)
// The test measures the whole process's heap, clients included.
func TestConnectDisconnectCyclesLeaveNothing(t *testing.T) {
	d := daemon.Start(t)
	warmProcessRegistry(d.Runtime.System())
	id := d.Create(nil)
	for _, kind := range []string{"sse", "ws"} {
		t.Run(kind, func(t *testing.T) {
			path := "/api/sessions/" + id + "/events"
			cycles := func(n int) {
				t.Helper()
				for i := range n {
					var err error
					if kind == "sse" {
						err = openSSEOnce(d.Addr, path, d.Token)
					} else {
						err = openWSOnce(d, id)
					}
					if err != nil {
						t.Fatalf("cycle %d: %v", i, err)
					}
				}
				testkit.Eventually(t, 20*time.Second, func() bool { return clientsGauge(t, d, kind) == "0" }, "every stream closed")
			}
			// Warm up: pools, maps and the session's sets reach their
			// working size.
			cycles(500)
			before := liveHeap()
			const n = 4000
			cycles(n)
			after := liveHeap()
			perConn := (float64(after) - float64(before)) / n
			t.Logf("heap %s before %d cycles, %s after: %+.1f bytes per connection", mib(before), n, mib(after), perConn)
			// Anything a connection keeps shows well above the noise of a
			// collection.
			if perConn > 64 {
				t.Errorf("each connection left %.0f bytes behind", perConn)
			}
		})
	}
	if st, _ := d.JSON("GET", "/api/sessions/"+id, nil); st != http.StatusOK {
		t.Fatalf("the session is gone: %d", st)
	}
}

// Finding 14, on a WebSocket: a client whose socket stops taking data is
// cut when a write has been blocked for the queue's age, counted at once,
// and finds end{slow_consumer} behind what was blocked when it reads again.
func TestWebSocketSlowConsumerGetsTheEndFrame(t *testing.T) {
	d := daemon.Start(t, daemon.Gateway(gateway.Limits{QueueBytes: 64 << 20, QueueAge: 2 * time.Second}))
	id := d.Create(nil)
	fast := d.WS(id, "")
	fast.Wait("ready", event("session", func(d map[string]any) bool { return d["status"] == "ready" }))
	slow := dialStalledWS(t, d, id)
	big := strings.Repeat("x", 100<<10)
	for range 60 {
		if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/fill", map[string]any{"args": map[string]any{"text": big}}); st != 200 {
			t.Fatalf("fill: %d %v", st, out)
		}
	}
	fast.Wait("the last fill", event("state", func(d map[string]any) bool { return d["key"] == "surface:demo" && d["rev"] == 61.0 }))
	testkit.Eventually(t, 15*time.Second, func() bool {
		_, out := d.JSON("GET", "/metrics", nil)
		return strings.Contains(out["_raw"].(string), `surfaced_slow_consumer_cuts_total{kind="ws"} 1`)
	}, "the cut counted")
	// Reading again: the frames that were blocked, then the end frame and
	// the close.
	_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	var last string
	for {
		_, data, err := slow.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
				t.Fatalf("the stream ended with %v, not a policy-violation close", err)
			}
			break
		}
		last = string(data)
	}
	if last != `{"event":"end","data":{"reason":"slow_consumer"}}` {
		t.Fatalf("the last message before the close was %.200q, not end{slow_consumer}", last)
	}
}

// trickle sends a request whose body (of n bytes, as Content-Length says)
// comes one byte every 200 ms, and returns the connection and a reader of
// the answer. The trickle stops when the daemon closes the connection.
func trickle(t *testing.T, addr, head string, n int) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "%sContent-Length: %d\r\nContent-Type: application/json\r\n\r\n", head, n); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for range n {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
			<-tick.C
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return conn, bufio.NewReader(conn)
}

// Finding 9: a request whose body trickles in (one byte every 200 ms) is
// answered 408 body_timeout once the read timeout passes, and its
// connection closed, where it was held for ever; a body a handler never
// reads is bounded the same way. Streams, which read no body, and a
// request that waits on the session longer than the read timeout after
// its body came, are not cut.
func TestSlowBodiesAreCutAndStreamsAreNot(t *testing.T) {
	d := daemon.Start(t, daemon.SlowDomain(2*time.Second), daemon.Gateway(gateway.Limits{ReadTimeout: time.Second}))
	id := d.Create(nil)
	sse := d.SSE(id, "")
	sse.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	ws := d.WS(id, "")
	ws.Wait("ready", event("session", func(d map[string]any) bool { return d["status"] == "ready" }))
	acp := d.ACPClient()
	acp.Initialize()

	auth := "Authorization: Bearer " + d.Token + "\r\n"
	for _, tc := range []struct{ name, head, status string }{
		{"a state write", "POST /api/sessions/" + id + "/state HTTP/1.1\r\nHost: " + d.Addr + "\r\n" + auth, "408"},
		{"an ACP message", "POST " + d.ACP.Path() + " HTTP/1.1\r\nHost: " + d.Addr + "\r\n" + auth, "408"},
		// The handler answers without reading the body; what is left of it
		// is read within the same timeout, then the connection goes.
		{"a GET with a body", "GET /api/sessions HTTP/1.1\r\nHost: " + d.Addr + "\r\n" + auth, "200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, r := trickle(t, d.Addr, tc.head, 1000)
			status, err := r.ReadString('\n')
			if err != nil || !strings.Contains(status, " "+tc.status+" ") {
				t.Fatalf("answer %q, %v; want %s", status, err, tc.status)
			}
			resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(status), r)), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if tc.status == "408" && !strings.Contains(string(body), "body_timeout") && !strings.Contains(string(body), "did not arrive in time") {
				t.Fatalf("408 body: %s", body)
			}
			// The connection is closed: the rest of the body is not awaited.
			if _, err := r.ReadByte(); err == nil {
				t.Fatalf("the connection stayed open")
			}
			conn.Close()
		})
	}

	// A command waits two seconds for the slow domain, after its body came.
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/slow/work", map[string]any{}); st != http.StatusOK {
		t.Fatalf("a command longer than the read timeout: %d %v", st, out)
	}
	// The streams opened before all this still deliver.
	if st, _ := d.JSON("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "ui.after", "value": 1}); st != http.StatusOK {
		t.Fatalf("state: %d", st)
	}
	sse.Wait(t, 10*time.Second, "the state frame on SSE", testkit.IsState("ui.after", 1))
	ws.Wait("the state frame on the WebSocket", event("state", func(d map[string]any) bool { return d["key"] == "ui.after" }))
	if res := acp.Call("session/list", map[string]any{}); res["result"] == nil {
		t.Fatalf("session/list on the ACP connection stream: %v", res)
	}
}

// Finding 8: one subject cannot hold more event streams or WebSockets than
// its caps (the daemon's file descriptors are everyone's): past them a new
// one is answered 429 too_many_streams; another subject is not affected,
// and a slot comes back when a stream closes.
func TestStreamsPerSubjectAreCapped(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": "alice-secret-token", "bob": "bob-secret-token-1"})
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }),
		daemon.Gateway(gateway.Limits{SSEPerSubject: 3, WSPerSubject: 2}))
	alice, bob := d.As("alice-secret-token"), d.As("bob-secret-token-1")
	aliceID, bobID := alice.Create(nil), bob.Create(nil)
	url := func(id string) string { return d.URL + "/api/sessions/" + id + "/events" }

	var held []*testkit.SSE
	for range 3 {
		held = append(held, testkit.OpenSSE(t, url(aliceID), alice.Auth()))
	}
	if _, st, body := testkit.TryOpenSSE(url(aliceID), alice.Auth()); st != http.StatusTooManyRequests || !strings.Contains(body, `"too_many_streams"`) {
		t.Fatalf("a fourth event stream: %d %s", st, body)
	}
	// Another session of hers counts too: the cap is the subject's.
	alice2 := alice.Create(nil)
	if _, st, _ := testkit.TryOpenSSE(url(alice2), alice.Auth()); st != http.StatusTooManyRequests {
		t.Fatalf("an event stream of another session of hers: %d", st)
	}
	bobStream := testkit.OpenSSE(t, url(bobID), bob.Auth())
	bobStream.Wait(t, 10*time.Second, "bob's first frame", testkit.IsKind("session"))
	held[0].Close()
	testkit.Eventually(t, 10*time.Second, func() bool {
		s, st, _ := testkit.TryOpenSSE(url(aliceID), alice.Auth())
		if s != nil {
			t.Cleanup(s.Close)
		}
		return st == http.StatusOK
	}, "alice's slot back")

	wsURL := strings.Replace(d.URL, "http://", "ws://", 1) + "/api/sessions/" + aliceID + "/ws"
	for range 2 {
		c, _, err := websocket.DefaultDialer.Dial(wsURL, alice.Auth())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	_, resp, err := websocket.DefaultDialer.Dial(wsURL, alice.Auth())
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third WebSocket: %v %v", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"too_many_streams"`) {
		t.Fatalf("a third WebSocket's refusal: %s", body)
	}
	if st, _ := alice.Do("GET", "/metrics", nil); st != http.StatusOK {
		t.Fatalf("/metrics: %d", st)
	}
}

// countingStore counts session reads.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) GetSession(ctx context.Context, id string) (store.Session, error) {
	s.reads.Add(1)
	return s.Store.GetSession(ctx, id)
}

// Finding 7: bob asking for alice's sleeping session gets the 404 of a
// missing id, for the same work (one store read), and alice's agent is not
// started; nor is it for a live one. Sessions woken by a request count
// against sessions_total.
func TestForeignSessionIDStartsNothing(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": "alice-secret-token", "bob": "bob-secret-token-1"})
	// The agent counts its starts in a file.
	starts := filepath.Join(t.TempDir(), "starts")
	agent := testkit.FakeAgent(t)
	st := &countingStore{Store: memstore.New()}
	d := daemon.Start(t, daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }),
		daemon.Config(func(c *surfaced.Config) { c.Store = st }),
		daemon.Quotas(surfaced.Quotas{SessionsTotal: 2}),
		daemon.Agents(surfaced.AgentSpec{Name: "fake", Argv: []string{"/bin/sh", "-c", `echo start >> "$0"; exec "$1"`, starts, agent[0]}}))
	started := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "start")
	}
	alice, bob := d.As("alice-secret-token"), d.As("bob-secret-token-1")
	s1, s2 := alice.Create(nil), alice.Create(nil)
	sleepAll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Runtime.Local().StopAll(ctx, "idle")
		testkit.Eventually(t, 10*time.Second, func() bool { return len(d.Runtime.LiveSessions()) == 0 }, "every session asleep")
	}
	// Both agents are up (past their start line) before they are stopped.
	testkit.Eventually(t, 10*time.Second, func() bool {
		_, a := alice.JSON("GET", "/api/sessions/"+s1, nil)
		_, b := alice.JSON("GET", "/api/sessions/"+s2, nil)
		return a["status"] == "ready" && b["status"] == "ready"
	}, "both agents ready")
	sleepAll()
	if n := started(); n != 2 {
		t.Fatalf("%d agent starts for two sessions", n)
	}

	missing := "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	probe := func(id string) (reads int64) {
		t.Helper()
		before := st.reads.Load()
		for _, r := range []struct{ method, path string }{
			{"GET", "/api/sessions/" + id},
			{"GET", "/api/sessions/" + id + "/messages"},
			{"POST", "/api/sessions/" + id + "/prompt"},
			{"POST", "/api/sessions/" + id + "/surfaces/demo/increment"},
			{"DELETE", "/api/sessions/" + id},
		} {
			var body any
			if r.method == "POST" {
				body = map[string]any{"message": "hi"}
				if strings.Contains(r.path, "surfaces") {
					body = map[string]any{}
				}
			}
			code, out := bob.JSON(r.method, r.path, body)
			if code != http.StatusNotFound || daemon.ErrCode(out) != "not_found" {
				t.Fatalf("bob %s %s: %d %v", r.method, r.path, code, out)
			}
		}
		if _, code, body := testkit.TryOpenSSE(d.URL+"/api/sessions/"+id+"/events", bob.Auth()); code != http.StatusNotFound {
			t.Fatalf("bob's event stream of %s: %d %s", id, code, body)
		}
		return st.reads.Load() - before
	}
	missingReads := probe(missing)
	for range 20 {
		if reads := probe(s1); reads != missingReads {
			t.Fatalf("a foreign sleeping session cost %d store reads, a missing one %d", reads, missingReads)
		}
	}
	if n, live := started(), d.Runtime.LiveSessions(); n != 2 || len(live) != 0 {
		t.Fatalf("bob's requests started alice's agent: %d starts, live %v", n, live)
	}
	// A live session of alice's: the same answer, for the same reads.
	if code, _ := alice.JSON("GET", "/api/sessions/"+s1, nil); code != http.StatusOK {
		t.Fatalf("alice wakes her session: %d", code)
	}
	if reads := probe(s1); reads != missingReads {
		t.Fatalf("a foreign live session cost %d store reads, a missing one %d", reads, missingReads)
	}

	// sessions_total is 2: one live (s1) and one new make two; waking s2
	// would be a third.
	alice.Create(nil)
	code, out := alice.JSON("GET", "/api/sessions/"+s2, nil)
	if code != http.StatusTooManyRequests || daemon.ErrCode(out) != "too_many_sessions" {
		t.Fatalf("waking a third session past sessions_total: %d %v", code, out)
	}
	// s1 again and the new one: nothing else.
	testkit.Eventually(t, 10*time.Second, func() bool { return started() == 4 }, "four agent starts")
	if code, out := alice.JSON("GET", "/api/sessions/"+s2, nil); code != http.StatusTooManyRequests {
		t.Fatalf("waking a third session past sessions_total, again: %d %v", code, out)
	}
	if n := started(); n != 4 {
		t.Fatalf("%d agent starts, want 4 (s1, s2, s1 again, the new one)", n)
	}
}
