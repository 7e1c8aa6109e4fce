package agentproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// An agent's process tree ends with the agent. Its process group is not
// enough: a child may leave the group (setsid), and when the daemon itself
// is killed nobody is left to signal the group. So, from the strongest to
// the weakest:
//
//   - every agent starts with a parent-death signal (SIGKILL), from a
//     thread that never exits, so that the agent dies with the daemon;
//   - where the machine allows it, every agent starts in a cgroup (v2) of
//     its own, created under one cgroup per daemon run: no descendant can
//     leave it, and cgroup.kill ends the whole tree at once;
//   - every agent and its descendants carry an environment mark
//     (EnvMark=<run>/<n>), and a run's agents are recorded in the data
//     directory (pid, start time, mark, cgroup). When an agent ends, what
//     is left of its tree is killed (its cgroup, or the processes that
//     carry its mark); when the daemon starts, the runs of daemons that are
//     gone are swept the same way.
//
// A process is only ever killed when it is still ours: it carries the mark
// (read again through a pidfd just before the signal, so that a reused pid
// is never hit), it is in our cgroup, or it is a recorded agent whose start
// time matches.

// EnvMark is the environment variable that marks every process of an
// agent's tree: <run>/<n>, where run names the daemon's run.
const EnvMark = "SURFACED_AGENT_MARK"

// Tracker makes every process an agent starts end with it, and sweeps what
// a previous run of the daemon left behind. It is safe for concurrent use.
// The zero value is not usable; use NewTracker.
type Tracker struct {
	log    *slog.Logger
	run    string // this run: <pid>-<start ticks>-<random>
	dir    string // this run's records; "" when none are kept
	seq    atomic.Uint64
	mu     sync.Mutex
	cgroup string // this run's cgroup; "" when cgroups are not available
	// live counts the agents started and not ended; idle, when set, is
	// closed when it drops to 0 (Close waits on it). Not a WaitGroup: an
	// agent may start while Close waits.
	live int
	idle chan struct{}
}

// runRecord is a run's file "run": where its cgroup is.
type runRecord struct {
	Cgroup string `json:"cgroup,omitempty"`
}

// agentRecord is one agent of a run.
type agentRecord struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"` // start time in clock ticks since boot (/proc/<pid>/stat)
	Mark   string `json:"mark"`
	Cgroup string `json:"cgroup,omitempty"`
}

// NewTracker returns the Tracker of this daemon run. root is where runs
// are recorded (the daemon uses <data_dir>/agents); "" keeps no records,
// so that what a crash leaves behind is not swept at the next start.
// Before it returns it sweeps the runs recorded under root whose daemon is
// gone.
func NewTracker(root string, log *slog.Logger) (*Tracker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("agentproc: tracker: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	t := &Tracker{log: log, run: fmt.Sprintf("%d-%d-%s", os.Getpid(), start, hex.EncodeToString(rnd[:]))}
	if root != "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, fmt.Errorf("agentproc: tracker: %w", err)
		}
		t.Sweep(root)
		t.dir = filepath.Join(root, "run-"+t.run)
		if err := os.Mkdir(t.dir, 0o700); err != nil {
			return nil, fmt.Errorf("agentproc: tracker: %w", err)
		}
	}
	t.cgroup = makeRunCgroup(t.run)
	if t.cgroup == "" {
		log.Info("agent process trees are tracked without cgroups (none can be created here): by process group, parent-death signal and environment mark")
	} else {
		log.Debug("agent process trees are tracked in cgroups", "cgroup", t.cgroup)
	}
	if t.dir != "" {
		if err := writeJSON(filepath.Join(t.dir, "run"), runRecord{Cgroup: t.cgroup}); err != nil {
			return nil, fmt.Errorf("agentproc: tracker: %w", err)
		}
	}
	return t, nil
}

// Close ends this run: it waits until every agent has ended (or ctx ends:
// agents stopped at shutdown get their grace), then kills what is left of
// any agent's tree, removes the run's cgroup and deletes its records.
func (t *Tracker) Close(ctx context.Context) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.live > 0 && t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
	prefix := t.run + "/"
	killMarked(func(m string) bool { return strings.HasPrefix(m, prefix) })
	t.mu.Lock()
	cg := t.cgroup
	t.cgroup = ""
	t.mu.Unlock()
	if cg != "" {
		removeCgroup(cg)
	}
	if t.dir != "" {
		_ = os.RemoveAll(t.dir)
	}
}

// Sweep ends what the runs recorded under root left behind, for every run
// whose daemon is gone (a run whose daemon still runs, another daemon on
// the same data directory, is left alone), and deletes their records. It
// returns the number of processes it killed.
func (t *Tracker) Sweep(root string) int {
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	killed := 0
	for _, e := range ents {
		run, ok := strings.CutPrefix(e.Name(), "run-")
		if !ok || !e.IsDir() || run == t.run {
			continue
		}
		if runAlive(run) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		n := sweepRun(dir, run)
		killed += n
		if n > 0 {
			t.log.Warn("killed agent processes a previous run of the daemon left behind", "run", run, "processes", n)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.log.Warn("removing a previous run's agent records", "dir", dir, "err", err)
		}
	}
	return killed
}

// runAlive reports whether the daemon of run (<pid>-<start>-<random>)
// still runs: its pid is alive and started when it did.
func runAlive(run string) bool {
	parts := strings.SplitN(run, "-", 3)
	if len(parts) < 2 {
		return false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	got, err := procStart(pid)
	return err == nil && got == start
}

// sweepRun kills what a dead run left: its cgroup's processes, the
// processes that carry its mark, and recorded agents still running.
func sweepRun(dir, run string) int {
	killed := 0
	var rr runRecord
	if readJSON(filepath.Join(dir, "run"), &rr) == nil && rr.Cgroup != "" {
		killed += removeCgroup(rr.Cgroup)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		var ar agentRecord
		if e.Name() == "run" || readJSON(filepath.Join(dir, e.Name()), &ar) != nil {
			continue
		}
		if ar.Cgroup != "" {
			killed += removeCgroup(ar.Cgroup)
		}
		// The agent itself, if its start time says it is the one recorded:
		// its group goes with it (the group id is the agent's pid, reserved
		// while the agent lives).
		if got, err := procStart(ar.PID); err == nil && got == ar.Start {
			if syscall.Kill(-ar.PID, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	prefix := run + "/"
	killed += killMarked(func(m string) bool { return strings.HasPrefix(m, prefix) })
	return killed
}

// tree is one agent's part of a Tracker.
type tree struct {
	t      *Tracker
	mark   string
	cgroup string   // the agent's cgroup; "" when none
	cgfd   *os.File // open while the agent starts
	record string   // its record file; "" when none
}

// prepare marks cmd (its environment) and, where cgroups are available,
// makes it start in a cgroup of its own. cmd.SysProcAttr must be set.
func (t *Tracker) prepare(cmd *exec.Cmd) *tree {
	n := t.seq.Add(1)
	tr := &tree{t: t, mark: t.run + "/" + strconv.FormatUint(n, 10)}
	cmd.Env = append(cmd.Env, EnvMark+"="+tr.mark)
	t.mu.Lock()
	t.live++
	runCg := t.cgroup
	t.mu.Unlock()
	if runCg != "" {
		dir := filepath.Join(runCg, "agent-"+strconv.FormatUint(n, 10))
		if err := os.Mkdir(dir, 0o755); err == nil {
			if f, err := os.Open(dir); err == nil {
				tr.cgroup, tr.cgfd = dir, f
				cmd.SysProcAttr.UseCgroupFD = true
				cmd.SysProcAttr.CgroupFD = int(f.Fd())
			} else {
				_ = os.Remove(dir)
			}
		}
	}
	return tr
}

// withoutCgroup gives up the agent's cgroup (starting in it failed: the
// machine does not allow it after all), and cgroups for the rest of the
// run.
func (tr *tree) withoutCgroup(attr *syscall.SysProcAttr, err error) {
	tr.t.log.Info("agents start without cgroups: starting one in its cgroup failed", "err", err)
	attr.UseCgroupFD, attr.CgroupFD = false, 0
	tr.cgfd.Close()
	tr.cgfd = nil
	_ = os.Remove(tr.cgroup)
	tr.cgroup = ""
	tr.t.mu.Lock()
	cg := tr.t.cgroup
	tr.t.cgroup = ""
	tr.t.mu.Unlock()
	if cg != "" {
		removeCgroup(cg)
	}
}

// started records the agent once it runs.
func (tr *tree) started(pid int) {
	if tr.cgfd != nil {
		tr.cgfd.Close()
		tr.cgfd = nil
	}
	if tr.t.dir == "" {
		return
	}
	start, _ := procStart(pid)
	rec := filepath.Join(tr.t.dir, strconv.Itoa(pid))
	if err := writeJSON(rec, agentRecord{PID: pid, Start: start, Mark: tr.mark, Cgroup: tr.cgroup}); err != nil {
		tr.t.log.Warn("recording an agent process", "pid", pid, "err", err)
		return
	}
	tr.record = rec
}

// ended counts an agent of prepare's out: it ended, or never started.
func (t *Tracker) ended() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live--
	if t.live == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// failed undoes prepare for an agent that did not start.
func (tr *tree) failed() {
	defer tr.t.ended()
	if tr.cgfd != nil {
		tr.cgfd.Close()
		tr.cgfd = nil
	}
	if tr.cgroup != "" {
		_ = os.Remove(tr.cgroup)
	}
}

// end kills what is left of the agent's tree (the agent has exited and its
// group was killed): its cgroup, or the processes that carry its mark. It
// returns the number of processes it killed.
func (tr *tree) end() int {
	defer tr.t.ended()
	killed := 0
	if tr.cgroup != "" {
		killed = removeCgroup(tr.cgroup)
	} else {
		killed = killMarked(func(m string) bool { return m == tr.mark })
	}
	if tr.record != "" {
		_ = os.Remove(tr.record)
	}
	return killed
}

// ---------------------------------------------------------------------------
// cgroups

// makeRunCgroup creates this run's cgroup under the daemon's own cgroup
// (v2), or returns "" when that is not possible here. On the way it removes
// the empty cgroups of runs that are gone (a daemon killed with no data
// directory to sweep leaves one); a populated one is its own daemon's to
// sweep.
func makeRunCgroup(run string) string {
	own, ok := ownCgroup()
	if !ok {
		return ""
	}
	if ents, err := os.ReadDir(own); err == nil {
		for _, e := range ents {
			if r, ok := strings.CutPrefix(e.Name(), "surfaced-"); ok && e.IsDir() && !runAlive(r) {
				if d := filepath.Join(own, e.Name()); countProcs(d) == 0 {
					removeTree(d)
				}
			}
		}
	}
	dir := filepath.Join(own, "surfaced-"+run)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return ""
	}
	return dir
}

// ownCgroup is the directory of the daemon's cgroup in the cgroup v2
// hierarchy (a hybrid system mounts it beside the v1 controllers).
func ownCgroup() (string, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	var path string
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", false
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(mi), "\n") {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(l, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		root, mnt := f[3], f[4]
		rel, ok := strings.CutPrefix(path, root)
		if !ok {
			continue
		}
		return filepath.Join(mnt, rel), true
	}
	return "", false
}

// cgroupWait bounds how long removeCgroup waits for a killed cgroup to
// empty before it gives up on removing it (a later sweep tries again).
const cgroupWait = 2 * time.Second

// removeCgroup kills every process in the cgroup dir and its descendants,
// waits for them to be gone and removes the directories. It returns how
// many processes were in it.
func removeCgroup(dir string) int {
	n := countProcs(dir)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(dir); serr != nil {
				return 0 // gone already
			}
		}
		// No cgroup.kill (Linux before 5.14): kill what is listed, a few
		// rounds, for what forks meanwhile.
		for range 10 {
			if killListed(dir) == 0 {
				break
			}
		}
	}
	waitEmpty(dir)
	removeTree(dir)
	return n
}

// countProcs counts the processes in a cgroup and its descendants.
func countProcs(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		n += len(strings.Fields(string(b)))
		return nil
	})
	return n
}

// killListed SIGKILLs the processes listed in a cgroup and its
// descendants; it returns how many it signalled.
func killListed(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
		return nil
	})
	return n
}

// waitEmpty waits until the cgroup has no process left (cgroup.events says
// populated 0), woken by the kernel's notification on that file, at most
// cgroupWait.
func waitEmpty(dir string) {
	f, err := os.Open(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return
	}
	defer f.Close()
	deadline := time.Now().Add(cgroupWait)
	buf := make([]byte, 256)
	for {
		n, err := f.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return
		}
		if bytes.Contains(buf[:n], []byte("populated 0")) {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(max(left/time.Millisecond, 1))); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// removeTree removes a cgroup directory and its children, deepest first.
func removeTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

// ---------------------------------------------------------------------------
// Marks

// killMarked SIGKILLs every process whose environment carries a mark that
// match accepts, and returns how many it killed. Each is opened as a pidfd
// and its environment read again before the signal goes through that pidfd:
// a pid reused between the scan and the signal is never hit.
func killMarked(match func(mark string) bool) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	killed := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if m, ok := markOf(pid); !ok || !match(m) {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone (or no pidfds: then the pid is not trusted either)
		}
		if m, ok := markOf(pid); ok && match(m) && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			killed++
		}
		unix.Close(fd)
	}
	return killed
}

// markOf reads the mark in a process's environment (our own processes
// only: the environment of another user's is not readable).
func markOf(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", false
	}
	key := []byte(EnvMark + "=")
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, key); ok {
			return string(v), true
		}
	}
	return "", false
}

// procStart is a process's start time in clock ticks since boot: with the
// pid it names one process for good.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ... : comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("agentproc: /proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// Fields after the command start at state (field 3); starttime is 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("agentproc: /proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func writeJSON(path string, v any) error {
	b, err := plainjson.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
