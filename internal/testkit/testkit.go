// Package testkit holds helpers for the daemon's own tests: building the
// fake and example agents once per test binary, and a frame collector actor.
package testkit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/internal/wire"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

var (
	buildMu  sync.Mutex
	built    = map[string]string{}
	buildDir string
)

// RepoRoot is the repository root (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build compiles a main package of this module (e.g. "./internal/fakeagent")
// once per test binary and returns the path of the binary.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "surfaced-testbin-")
		if err != nil {
			t.Fatalf("temp dir: %v", err)
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_"))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// FakeAgent returns the argv of the fake agent with flags.
func FakeAgent(t testing.TB, flags ...string) []string {
	return append([]string{Build(t, "./internal/fakeagent")}, flags...)
}

// Frame is a received frame with its data decoded.
type Frame struct {
	Kind string
	ID   string
	Seq  uint64
	Data map[string]any
	Raw  []byte
}

// Collector is an actor that subscribes like a gateway actor and collects
// the frames it receives.
type Collector struct {
	PID *actor.PID
	ch  chan Frame
	mu  sync.Mutex
	all []Frame
	sys *actor.ActorSystem
}

// NewCollector spawns a collector in sys.
func NewCollector(sys *actor.ActorSystem) *Collector {
	c := &Collector{ch: make(chan Frame, 100000), sys: sys}
	c.PID = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if fs, ok := ctx.Message().(*pb.Frames); ok {
			for _, f := range fs.GetFrames() {
				var data map[string]any
				raw := wire.Data(f.GetEvent())
				_ = json.Unmarshal(raw, &data)
				fr := Frame{Kind: pb.KindOf(f.GetEvent()), ID: f.GetId(), Seq: f.GetSeq(), Data: data, Raw: raw}
				c.mu.Lock()
				c.all = append(c.all, fr)
				c.mu.Unlock()
				c.ch <- fr
			}
		}
	}))
	return c
}

// Pid is the collector as a wire Pid.
func (c *Collector) Pid() *pb.Pid { return pb.PidOf(c.PID) }

// Stop stops the collector actor.
func (c *Collector) Stop() { c.sys.Root.Stop(c.PID) }

// All returns every frame received so far.
func (c *Collector) All() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.all...)
}

// Wait returns the next frame that satisfies pred, failing the test after timeout.
func (c *Collector) Wait(t testing.TB, timeout time.Duration, what string, pred func(Frame) bool) Frame {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case f := <-c.ch:
			if pred(f) {
				return f
			}
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s; frames so far:\n%s", timeout, what, c.dump())
			return Frame{}
		}
	}
}

func (c *Collector) dump() string {
	var b strings.Builder
	for _, f := range c.All() {
		fmt.Fprintf(&b, "  %s %s %s\n", f.ID, f.Kind, f.Raw)
	}
	return b.String()
}

// Chat matches a chat frame whose chunk type is typ.
func Chat(typ string) func(Frame) bool {
	return func(f Frame) bool { return f.Kind == "chat" && f.Data["type"] == typ }
}

// Status matches a session frame with the status.
func Status(status string) func(Frame) bool {
	return func(f Frame) bool { return f.Kind == "session" && f.Data["status"] == status }
}

// State matches a state frame of key (and rev when rev > 0).
func State(key string, rev float64) func(Frame) bool {
	return func(f Frame) bool {
		return f.Kind == "state" && f.Data["key"] == key && (rev == 0 || f.Data["rev"] == rev)
	}
}

// LockSQLite makes another process (internal/testkit/sqlitelock) take the
// write lock of the SQLite database at path and returns once it holds it.
// release (also run at the end of the test) makes it let go and waits for
// it to exit.
func LockSQLite(t testing.TB, path string) (release func()) {
	t.Helper()
	cmd := exec.Command(Build(t, "./internal/testkit/sqlitelock"), path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("locked\n"))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "locked\n" {
		_ = cmd.Wait()
		t.Fatalf("sqlitelock did not take the lock: %q %v: %s", line, err, stderr.String())
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("sqlitelock: %v: %s", err, stderr.String())
			}
		})
	}
	t.Cleanup(release)
	return release
}

// PythonAgent writes src to a file of the test's and returns the argv that
// runs it with python3: a tiny agent that misbehaves in exactly the way a
// test needs (floods, never reads, answers too long).
func PythonAgent(t testing.TB, src string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.py")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"python3", path}
}

// BlockedWritingPipe reports whether process pid is asleep in a write to a
// full pipe (its kernel wait channel): the barrier that shows an agent is
// held back by its reader.
func BlockedWritingPipe(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	return err == nil && strings.Contains(string(b), "pipe_write")
}

// Missing ends a test that cannot run here for want of something the
// machine lacks: it fails on CI (CI set), where everything the tests need
// is installed and a skip would hide a test that never ran, and skips
// elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
