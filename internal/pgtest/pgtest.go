// Package pgtest runs throwaway PostgreSQL servers for tests: initdb into a
// temporary directory, postgres on a free loopback port with its own socket
// directory, stopped and removed at the end. It never touches a system
// service or its cluster.
//
// A package shares one server among its tests by calling Main from its
// TestMain; Start then hands each test a fresh database on it:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.Start(t)
//		...
//	}
//
// Without Main, Start runs a server for the calling test alone.
//
// When PostgreSQL's binaries are missing, Start skips the test, or fails it
// when the CI environment variable is set: CI must not pass by skipping.
// The binaries are looked for in /usr/lib/postgresql/*/bin (Debian's
// postgresql package), the newest version first, then initdb on the PATH.
//
// PostgreSQL refuses to run as root; as root, the server runs as the
// "postgres" user that Debian's package creates.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/surfaced/surfaced/internal/testkit"
)

// User is the superuser of every server; its password is random per server.
const User = "pgtest"

// BinDir returns the directory holding initdb and postgres.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: "15" sorts after "9" numerically.
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL binaries not found (no initdb and postgres in /usr/lib/postgresql/*/bin or on the PATH; apt-get install postgresql)")
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Options configures NewServer.
type Options struct {
	// Durable keeps PostgreSQL's defaults: fsync, full page writes and
	// synchronous commit, for benchmarks that should price them. Otherwise
	// the server skips them, which is much faster and safe for data that
	// dies with the test.
	Durable bool
	// Settings are extra server settings (name → value), as in
	// postgresql.conf.
	Settings map[string]string
}

// Server is a running PostgreSQL server. Its zero value is not usable; use
// NewServer.
type Server struct {
	BinDir   string
	Port     int
	Password string

	base    string // removed by Stop: data, socket directory, log
	cred    *syscall.Credential
	opts    Options
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	frozen  []int // the processes Freeze stopped

	stopOnce sync.Once
	stopErr  error
	dbSeq    int
	dbMu     sync.Mutex
}

// NewServer creates a cluster in a new temporary directory and starts a
// server on it. The caller must Stop it.
func NewServer(ctx context.Context, opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{BinDir: bin, base: base, cred: cred, opts: opts}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(base)
		}
	}()
	if err := chown(base, cred); err != nil {
		return nil, err
	}
	var pw [16]byte
	rand.Read(pw[:])
	s.Password = hex.EncodeToString(pw[:])
	pwfile := filepath.Join(base, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := chown(pwfile, cred); err != nil {
		return nil, err
	}
	// Local (socket) connections trust, TCP ones need the password: the
	// tests of wrong credentials need a server that checks them.
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", filepath.Join(base, "data"),
		"-U", User, "--pwfile="+pwfile, "--auth-local=trust", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = base
	initdb.SysProcAttr = sysProcAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	os.Remove(pwfile)

	// A port found free may be taken before postgres binds it; try again.
	for attempt := 1; ; attempt++ {
		err := s.start(ctx, cred, opts)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "could not") {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// freePort returns a loopback TCP port that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(ctx context.Context, cred *syscall.Credential, opts Options) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pgtest: find a free port: %w", err)
	}
	s.Port = port
	return s.run(ctx, cred, opts)
}

// run starts postgres on s.Port and waits until it answers.
func (s *Server) run(ctx context.Context, cred *syscall.Credential, opts Options) error {
	port := s.Port
	sock := filepath.Join(s.base, "sock")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := chown(sock, cred); err != nil {
		return err
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": sock,
		"max_connections":         "100",
		"log_min_messages":        "warning",
	}
	if !opts.Durable {
		settings["fsync"] = "off"
		settings["full_page_writes"] = "off"
		settings["synchronous_commit"] = "off"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	args := []string{"-D", filepath.Join(s.base, "data")}
	for k, v := range settings {
		args = append(args, "-c", k+"="+v)
	}
	logPath := filepath.Join(s.base, "log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close()
	// Not CommandContext: the server outlives ctx, which only bounds the start.
	cmd := exec.Command(filepath.Join(s.BinDir, "postgres"), args...)
	cmd.Dir = s.base
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	// Ready when it answers a connection.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgconn.Connect(cctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgtest: postgres exited at start (%v): %s", s.waitErr, tail(logPath))
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("pgtest: waiting for postgres: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("pgtest: postgres not ready after 30s: %v: %s", err, tail(logPath))
		}
	}
}

// tail returns the end of the file at path, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// kill stops the server at once.
func (s *Server) kill() {
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Freeze stops the server's processes (SIGSTOP: the postmaster first, so
// that it starts no new backend, then its children), as a host that hangs
// would: connections stay open and nothing answers. Thaw resumes them.
func (s *Server) Freeze() error {
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgtest: freeze postmaster: %w", err)
	}
	s.frozen = []int{pid}
	kids, err := children(pid)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if syscall.Kill(k, syscall.SIGSTOP) == nil {
			s.frozen = append(s.frozen, k)
		}
	}
	return nil
}

// Thaw resumes what Freeze stopped (SIGCONT).
func (s *Server) Thaw() error {
	var errs []error
	for i := len(s.frozen) - 1; i >= 0; i-- {
		if err := syscall.Kill(s.frozen[i], syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	s.frozen = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pgtest: thaw: %w", err)
	}
	return nil
}

// StopImmediate stops the server as "pg_ctl stop -m immediate" does (it
// sends the postmaster SIGQUIT): every backend exits at once, without a
// checkpoint, and the next start recovers from the WAL. Restart starts it
// again.
func (s *Server) StopImmediate() error {
	if err := s.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Errorf("pgtest: stop: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return errors.New("pgtest: postgres did not stop within 30s of SIGQUIT; killed")
	}
}

// Restart starts a stopped server again on the same data and port, and
// waits until it answers.
func (s *Server) Restart(ctx context.Context) error {
	return s.run(ctx, s.cred, s.opts)
}

// DSN returns the URL of database on the server, over TCP with the password.
func (s *Server) DSN(database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", User, s.Password, s.Port, database)
}

// CreateDatabase creates a new, empty database with a unique name and
// returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	s.dbMu.Lock()
	s.dbSeq++
	name := fmt.Sprintf("test_%d", s.dbSeq)
	s.dbMu.Unlock()
	conn, err := pgconn.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name).ReadAll(); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// Stop shuts the server down (a fast shutdown: clients are disconnected)
// and removes its directory.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.kill()
			s.stopErr = errors.New("pgtest: postgres did not stop within 10s of SIGINT; killed")
		}
		if err := os.RemoveAll(s.base); err != nil && s.stopErr == nil {
			s.stopErr = fmt.Errorf("pgtest: %w", err)
		}
	})
	return s.stopErr
}

// shared is the server of a package whose TestMain calls Main, started by
// the first Start.
var shared struct {
	mu     sync.Mutex
	inMain bool
	srv    *Server
	err    error
}

// Main runs the tests of m and stops the server they shared, if any started.
// It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
		shared.srv = nil
	}
	return code
}

// Start returns the DSN of a new, empty database for t: on the package's
// shared server under Main, else on a server of t's own, stopped when t
// ends. It skips t when PostgreSQL is not installed, or fails it if the CI
// environment variable is set.
func Start(t testing.TB) string {
	t.Helper()
	srv := ServerFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// ServerFor returns the server Start creates t's database on, with the
// same skipping and failing.
func ServerFor(t testing.TB) *Server {
	t.Helper()
	Require(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		srv, err := NewServer(context.Background(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
		})
		return srv
	}
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = NewServer(context.Background(), Options{})
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// Require ends t unless PostgreSQL's binaries are here: a failure on CI, a
// skip elsewhere (testkit.Missing).
func Require(t testing.TB) {
	t.Helper()
	if _, err := BinDir(); err != nil {
		testkit.Missing(t, "PostgreSQL is not installed: %v", err)
	}
}

// FaultServer is a PostgreSQL server of t's own, for a fault test to freeze
// and stop, with synchronous commit on (a committed write survives the
// server's immediate stop), and the DSN of a new database on it. A frozen
// server never finishes a connection's start: the DSN gives up connecting
// after connectTimeout (whole seconds, at least one). The server is thawed
// and stopped when t ends.
func FaultServer(t testing.TB, connectTimeout time.Duration) (*Server, string) {
	t.Helper()
	Require(t)
	srv, err := NewServer(context.Background(), Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Thaw()
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	dsn, err := srv.CreateDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return srv, dsn + "&connect_timeout=" + strconv.Itoa(max(1, int(connectTimeout/time.Second)))
}
