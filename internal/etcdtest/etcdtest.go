// Package etcdtest runs a throwaway etcd server for tests: Debian's etcd on
// free loopback ports with its own data directory, never the system service.
// It can be stopped and started again on the same ports and data (an etcd
// outage).
package etcdtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Server is one etcd member.
type Server struct {
	t        testing.TB
	bin      string
	dir      string
	client   int
	peer     int
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	Endpoint string // 127.0.0.1:port
}

func binary() string {
	for _, p := range []string{"/usr/bin/etcd", "/usr/local/bin/etcd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	return ""
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start runs an etcd server for the test. Without the etcd binary the test
// is skipped, or fails when CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary()
	if bin == "" {
		testkit.Missing(t, "etcd not installed (Debian's etcd-server)")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), client: freePort(t), peer: freePort(t)}
	s.Endpoint = fmt.Sprintf("127.0.0.1:%d", s.client)
	s.Up()
	t.Cleanup(s.Down)
	return s
}

// Up starts the server (again) on its ports and data directory and waits
// until it answers.
func (s *Server) Up() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", s.client)
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peer)
	cmd := exec.Command(s.bin, "--name", "test", "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--log-level", "error", "--logger", "zap")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(client + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-exited:
			s.t.Fatalf("etcd exited at start")
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("etcd did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Down stops the server (keeping its data), like an outage.
func (s *Server) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}
