// Package cluster_test runs surfaced as several daemon processes of one
// protoactor cluster on a shared PostgreSQL store: separate processes,
// because the library's in-process multi-member mode trips the race
// detector.
package cluster_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The tests run under pgtest.Main, which stops the shared PostgreSQL after
// them; then every goroutine they started has ended.
func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) != "" {
		os.Exit(echoMain()) // the other process of BenchmarkClusterCommandToSnapshot/remote-hop
	}
	goleak.VerifyTestMain(mainRun{m})
}

type mainRun struct{ m *testing.M }

func (r mainRun) Run() int { return pgtest.Main(r.m) }

const token = "cluster-test-token-0123456789"

// env is one cluster under test: its store, its membership and its nodes.
type env struct {
	t        testing.TB
	bin      string
	dsn      string
	provider string   // automanaged | etcd
	etcd     []string // etcd endpoints
	amPorts  []int    // automanaged health ports, one per node
	agent    []string
	nodes    []*node
	extra    []string // more flags for every node
	dataDir  string   // the data directory of every start (empty: a new one each time)
}

type node struct {
	i      int
	env    *env
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	logMu  sync.Mutex
	log    bytes.Buffer
	exited chan struct{}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newEnv prepares a cluster of n nodes (not started).
func newEnv(t testing.TB, provider string, n int) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests start several daemons")
	}
	e := &env{t: t, bin: testkit.Build(t, "./cmd/surfaced"), dsn: pgtest.Start(t), provider: provider,
		agent: testkit.FakeAgent(t)}
	for i := 0; i < n; i++ {
		e.amPorts = append(e.amPorts, freePort(t))
	}
	t.Cleanup(func() {
		for _, nd := range e.nodes {
			nd.kill()
		}
		if t.Failed() {
			for _, nd := range e.nodes {
				t.Logf("---- node %d log ----\n%s", nd.i, nd.tail(6000))
			}
		}
		if dir := os.Getenv("CLUSTER_TEST_LOGS"); dir != "" {
			for _, nd := range e.nodes {
				_ = os.WriteFile(fmt.Sprintf("%s/%s-node%d.log", dir, t.Name(), nd.i), []byte(nd.tail(1<<30)), 0o644)
			}
		}
	})
	return e
}

// logLevel is debug for tests (their logs are shown on failure) and info for
// benchmarks (a debug line per commit would be part of what is measured).
func (e *env) logLevel() string {
	if _, ok := e.t.(*testing.B); ok {
		return "info"
	}
	return "debug"
}

func (e *env) args(i int) []string {
	dir := e.dataDir
	if dir == "" {
		dir = e.t.TempDir()
	}
	a := []string{"run", "--addr", "127.0.0.1:0", "--data-dir", dir, "--store", e.dsn, "--token", token,
		"--log-level", e.logLevel()}
	if e.provider != "" { // "" is one daemon without a cluster
		a = append(a, "--cluster-name", "test", "--cluster-provider", e.provider, "--cluster-bind", "127.0.0.1:0")
	}
	switch e.provider {
	case "automanaged":
		var peers []string
		for _, p := range e.amPorts {
			peers = append(peers, "localhost:"+strconv.Itoa(p))
		}
		a = append(a, "--automanaged-port", strconv.Itoa(e.amPorts[i]), "--automanaged-peers", strings.Join(peers, ","))
	case "etcd":
		a = append(a, "--etcd-endpoints", strings.Join(e.etcd, ","))
	}
	a = append(a, e.extra...)
	return append(append(a, "--"), e.agent...)
}

// start starts node i (again, after a kill) and waits for its start line.
func (e *env) start(i int) *node {
	e.t.Helper()
	nd := &node{i: i, env: e, exited: make(chan struct{})}
	nd.cmd = exec.Command(e.bin, e.args(i)...)
	nd.cmd.Dir = testkit.RepoRoot()
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := nd.cmd.StdoutPipe()
	nd.cmd.Stderr = &logWriter{nd: nd}
	if err := nd.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = nd.cmd.Wait(); close(nd.exited) }()
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case l := <-line:
		u, ok := strings.CutPrefix(strings.TrimSpace(l), "surfaced: open ")
		if !ok {
			e.t.Fatalf("node %d: start line %q\n%s", i, l, nd.tail(4000))
		}
		nd.base = strings.TrimSuffix(u, "/")
	case <-nd.exited:
		e.t.Fatalf("node %d exited at start:\n%s", i, nd.tail(4000))
	case <-time.After(60 * time.Second):
		e.t.Fatalf("node %d did not start:\n%s", i, nd.tail(4000))
	}
	if i < len(e.nodes) {
		e.nodes[i] = nd
	} else {
		e.nodes = append(e.nodes, nd)
	}
	return nd
}

// startAll starts every node and waits until each sees all of them.
func (e *env) startAll(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.start(i)
	}
	e.waitMembers(n)
}

// waitMembers waits until every running node has n members in its view.
func (e *env) waitMembers(n int) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, nd := range e.nodes {
		if nd.dead() {
			continue
		}
		var h struct {
			Members []string `json:"members"`
			Ready   bool     `json:"ready"`
		}
		testkit.Eventually(e.t, time.Until(deadline), func() bool {
			h.Members, h.Ready = nil, false
			st, _ := nd.get("/healthz", &h)
			return st == 200 && len(h.Members) == n && h.Ready
		}, "node %d to see %d members, ready; it sees %v\n%s", nd.i, n, later(func() string { return fmt.Sprintf("%v ready=%v", h.Members, h.Ready) }),
			later(func() string { return nd.tail(4000) }))
	}
}

type logWriter struct{ nd *node }

func (w *logWriter) Write(p []byte) (int, error) {
	w.nd.logMu.Lock()
	defer w.nd.logMu.Unlock()
	return w.nd.log.Write(p)
}

func (nd *node) tail(n int) string {
	nd.logMu.Lock()
	defer nd.logMu.Unlock()
	s := nd.log.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

func (nd *node) dead() bool {
	select {
	case <-nd.exited:
		return true
	default:
		return false
	}
}

// kill9 kills the node's process group without warning.
func (nd *node) kill9() {
	if nd.cmd.Process != nil {
		_ = syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-nd.exited
}

// goroutines makes the node print every goroutine's stack and exit
// (SIGQUIT), and returns what it printed: what a hung node was doing.
func (nd *node) goroutines() string {
	if nd.dead() {
		return "(the node had exited)"
	}
	nd.logMu.Lock()
	from := nd.log.Len()
	nd.logMu.Unlock()
	_ = nd.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-nd.exited:
	case <-time.After(10 * time.Second):
		nd.kill9()
	}
	nd.logMu.Lock()
	defer nd.logMu.Unlock()
	return nd.log.String()[from:]
}

// stop asks the node to shut down (SIGTERM) and waits.
func (nd *node) stop() {
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.exited:
	case <-time.After(30 * time.Second):
		nd.kill9()
	}
}

func (nd *node) kill() {
	if !nd.dead() {
		nd.kill9()
	}
}

func (nd *node) do(method, path string, body any, out any) (int, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, nd.base+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

func (nd *node) get(path string, out any) (int, error) { return nd.do("GET", path, nil, out) }

func (nd *node) create(t testing.TB) string {
	t.Helper()
	var out struct {
		SessionID string `json:"sessionId"`
	}
	if st, err := nd.do("POST", "/api/sessions", map[string]any{}, &out); st != 201 || err != nil {
		t.Fatalf("create on node %d: %d %v", nd.i, st, err)
	}
	return out.SessionID
}

// summary returns a session's summary through this node.
func (nd *node) summary(t testing.TB, id string) map[string]any {
	t.Helper()
	var out map[string]any
	if st, err := nd.get("/api/sessions/"+id, &out); st != 200 || err != nil {
		t.Fatalf("summary via node %d: %d %v %v", nd.i, st, err, out)
	}
	return out
}

// command runs a surface command through this node.
func (nd *node) command(id, domain, action string) (int, map[string]any, error) {
	var out map[string]any
	st, err := nd.do("POST", "/api/sessions/"+id+"/surfaces/"+domain+"/"+action, nil, &out)
	return st, out, err
}

// hostOf is the node whose remote address hosts the session.
func (e *env) hostOf(t testing.TB, via *node, id string) *node {
	t.Helper()
	addr := strings.SplitN(via.summary(t, id)["node"].(string), "#", 2)[0]
	for _, nd := range e.nodes {
		if nd.dead() {
			continue
		}
		var h struct {
			Node string `json:"node"`
		}
		nd.get("/healthz", &h)
		if strings.SplitN(h.Node, "#", 2)[0] == addr {
			return nd
		}
	}
	t.Fatalf("no node has address %s", addr)
	return nil
}

// remoteSession creates sessions through node 0 until one lives on another
// node; it returns it, its host and the nodes that do not host it.
func (e *env) remoteSession(t testing.TB) (id string, host *node, others []*node) {
	t.Helper()
	for {
		id = e.nodes[0].create(t)
		if host = e.hostOf(t, e.nodes[0], id); host.i != 0 {
			break
		}
	}
	for _, nd := range e.nodes {
		if nd != host {
			others = append(others, nd)
		}
	}
	return id, host, others
}

// ws opens a WebSocket on the session through this node.
func (nd *node) ws(t testing.TB, id string) *websocket.Conn {
	t.Helper()
	u := strings.Replace(nd.base, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	c, resp, err := websocket.DefaultDialer.Dial(u, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatalf("websocket via node %d: %v %v", nd.i, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (nd *node) sse(t testing.TB, id, last string) *testkit.SSE {
	h := http.Header{"Authorization": {"Bearer " + token}}
	if last != "" {
		h.Set("Last-Event-ID", last)
	}
	return testkit.OpenSSE(t, nd.base+"/api/sessions/"+id+"/events", h)
}
