package agentproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// The agent subprocess: one child per session, in its own process group, with one writer for its
// stdin, one reader for its stdout (the protocol) and one for its stderr (the session log). Unix
// only: it relies on process groups.

// WriteQueueLimit is the default of Spec.StdinBytes: the bytes Process.Write queues for an agent
// that does not read its stdin. Past it Write fails with ErrWriteQueueFull instead of growing without
// end. Beyond the queue, the writer goroutine holds the one chunk it is writing (64 KiB, or one
// record if that is longer).
const WriteQueueLimit = 64 << 20

const (
	defaultStderrBytes = 64 << 10
	defaultKillAfter   = 2 * time.Second
	// After the child exits its pipes are drained while data keeps coming, waiting at most
	// drainIdle for each read, drainMax in all, and reading at most drainBytes: a process that
	// left the group and still holds a pipe must not delay the exit report. Only time spent
	// waiting on the pipe counts: what the child wrote before it exited sits in the pipe, and a
	// reader held back by the consumer (the output window) must still get all of it.
	drainIdle  = 50 * time.Millisecond
	drainMax   = 500 * time.Millisecond
	drainBytes = 4 << 20 // more than a pipe holds (1 MiB at most on Linux)
	// stderrTailBytes is how much of the stderr ring ExitStatus.StderrTail carries.
	stderrTailBytes = 4 << 10
	// stderrLineMax splits an endless stderr line for Spec.Stderr.
	stderrLineMax = 64 << 10
	// smallChunk is the first chunk of an idle queue: most sessions write a few short records
	// now and then, and each holds its queue's memory.
	smallChunk = 4 << 10
	// writeChunk is the unit of the stdin queue: records are appended to 64 KiB chunks, which the
	// writer takes one at a time and recycles, so a burst neither grows one huge buffer nor
	// allocates per record.
	writeChunk = 64 << 10
	// maxFreeChunks bounds the recycled chunks kept for reuse (1 MiB).
	maxFreeChunks = 16
	// excerptBytes is how much of a dropped line a Diagnostic quotes.
	excerptBytes = 64
)

// ErrClosed is returned by Process.Write after the process exited or Close was called.
var ErrClosed = errors.New("agentproc: process closed")

// ErrWriteQueueFull is returned by Process.Write when Spec.StdinBytes are already waiting for the
// agent to read them (so a single record longer than that is always refused).
var ErrWriteQueueFull = errors.New("agentproc: stdin queue full: the agent is not reading its input")

// Spec describes the agent process to start.
type Spec struct {
	Argv        []string      // program and arguments; Argv[0] is looked up in PATH when it has no slash
	Dir         string        // working directory; "" means the daemon's
	Env         []string      // "K=V" entries added to os.Environ() (later entries win)
	MaxLine     int           // cap on one stdout record in bytes; 0: DefaultMaxLine
	StderrBytes int           // size of the stderr ring buffer; 0: 64 KiB
	KillAfter   time.Duration // how long Close waits after SIGTERM before SIGKILL; 0: 2s
	StdinBytes  int           // bound of the stdin queue (records not yet read by the agent); 0: WriteQueueLimit
	// Stderr, when set, receives each stderr line (without "\n" and a trailing "\r"; a line longer
	// than 64 KiB arrives in pieces), for the session log. It is called from the stderr goroutine.
	Stderr func(line string)
	Logger *slog.Logger // optional; nil discards
	// Tap, when set, sees the process from the side (see Tap).
	Tap Tap
	// Tracker, when set, makes the agent's whole process tree end with it
	// (a cgroup where the machine allows one, an environment mark, a
	// record for the sweep after a daemon crash); see Tracker. Without it
	// the agent's process group ends with it, and the agent dies with the
	// daemon (parent-death signal).
	Tracker *Tracker
}

// Tap observes an agent process from the side: every record written to its stdin, every record read
// from its stdout, every stderr line and its exit. The daemon runs without one; tools that study an
// agent (surfaced agent check) use it to say what the agent did. Sent is called by Process.Write,
// Received and Exited on the stdout reader goroutine (Received before the record is decoded or handed
// to the Handler, Exited before Handler.Exited), Stderr on the stderr reader goroutine. The methods
// must return quickly and must not keep line.
type Tap interface {
	Sent(line []byte)     // a record queued for stdin, without its '\n'
	Received(line []byte) // a stdout record as read; invalid ones included, records over the cap not
	Stderr(line string)   // a stderr line, as Spec.Stderr gets it
	Exited(st ExitStatus) // once, after the last Received
}

// Diagnostic describes a stdout line that was dropped because it is not a protocol line.
type Diagnostic struct {
	Code    string // CodeInvalidJSON, CodeNotAnObject, CodeMissingType or CodeLineTooLong
	Message string // what is wrong, with a quoted excerpt of the line when it was kept
	Len     int64  // length of the dropped line in bytes
	// Type and ID of a line too long to keep, read from its first bytes (LeadingEnvelope):
	// the answer it was may still be matched to its command. Empty otherwise.
	Type, ID string
}

// ExitStatus is how the agent process ended.
type ExitStatus struct {
	Code       int    // exit code; -1 when killed by a signal or when the status is unknown
	Signal     string // the signal that killed the process, e.g. "SIGKILL"; "" when it exited
	Err        error  // a failure of waiting for or reading from the process; nil normally
	StderrTail string // the last lines of stderr (at most 4 KiB), which usually say why it ended
}

// Handler receives what the agent writes on stdout, and its exit. Line and Invalid are called from
// the one reader goroutine, in stdout order; they should return quickly (a slow Handler slows the
// agent down, through the pipe). No Handler method may call Process.Close: it waits for Exited to
// return.
type Handler interface {
	Line(env Envelope, line []byte) // from the reader goroutine, in stdout order; line is the handler's to keep
	Invalid(d Diagnostic)           // a dropped line (not logged here: a flood of them is the Handler's to summarise); the stream goes on
	Exited(st ExitStatus)           // exactly once, after the last Line/Invalid
}

// Flusher is implemented by a Handler that batches lines: Flush is called on
// the reader goroutine whenever no further complete line is buffered (before
// a read that may block, and before Exited), so a batch never waits for the
// agent's next write.
type Flusher interface {
	Flush()
}

// Process is a running agent subprocess, created by Start. Its methods are safe for concurrent use.
type Process struct {
	thread    *spawnerThread // the spawner thread that started it (released once reaped)
	cmd       *exec.Cmd
	pid       int
	h         Handler
	flusher   Flusher // h, when it batches
	log       *slog.Logger
	maxLine   int
	maxQueue  int // Spec.StdinBytes
	killAfter time.Duration
	stderrCB  func(string)
	tap       Tap

	stdin    *os.File
	stdinRaw syscall.RawConn // stdin's, for writeNow
	stdout   *childPipe
	stderr   *childPipe
	ring     *ring
	tree     *tree // with a Tracker: the rest of the agent's process tree

	readErr error // a stdout read failure, set by the reader before readerDone is closed
	done    chan struct{}

	// stdin writer state, guarded by wmu.
	wmu     sync.Mutex
	wq      [][]byte // chunks of records waiting for the writer goroutine, each record ending in '\n'
	wqBytes int      // bytes in wq
	wfree   [][]byte // empty chunks of cap writeChunk, for reuse
	wclosed bool     // the process exited or Close was called
	werr    error    // a write failure (broken pipe); sticky
	writing bool     // a writeLoop goroutine is running
	wstop   chan struct{}
	stopped sync.Once

	// sigMu orders signals against reaping: once the child is reaped its pid may be reused, so no
	// signal is sent to its group after that.
	sigMu  sync.Mutex
	reaped bool

	closing sync.Once
}

// Start starts the agent process described by spec and the goroutines that serve it; h receives
// its output and exit. Errors: empty argv, nil h, or the exec failure (wrapped).
func Start(spec Spec, h Handler) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("agentproc: start: empty argv")
	}
	if h == nil {
		return nil, errors.New("agentproc: start: nil Handler")
	}
	logger := spec.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	if spec.Dir != "" {
		// exec reports a bad directory as the program's "no such file or directory": say which.
		if fi, err := os.Stat(spec.Dir); err != nil {
			return nil, fmt.Errorf("agentproc: start %q: working directory: %w", spec.Argv[0], err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("agentproc: start %q: working directory %s: %w", spec.Argv[0], spec.Dir, syscall.ENOTDIR)
		}
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
		cmd.Dir = spec.Dir
		cmd.Env = append(os.Environ(), spec.Env...) // exec keeps the last of duplicate keys
		// A group of its own, so that Close and the exit clean-up reach the
		// grandchildren too; and death with the daemon (see spawn).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	cmd := newCmd()
	var tr *tree
	if spec.Tracker != nil {
		tr = spec.Tracker.prepare(cmd)
	}

	// *os.File pipes, not cmd.StdoutPipe & co: with files exec starts no copying goroutines, so
	// cmd.Wait returns when the child exits even if a grandchild still holds a pipe. Our ends stay
	// non-blocking and support deadlines; os.Pipe sets close-on-exec so other sessions' children do
	// not inherit them.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("agentproc: start %q: stdin pipe: %w", spec.Argv[0], err)
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("agentproc: start %q: stdout pipe: %w", spec.Argv[0], err)
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("agentproc: start %q: stderr pipe: %w", spec.Argv[0], err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	thread, err := spawn(cmd)
	if err != nil && tr != nil && tr.cgroup != "" && !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) {
		// Starting in a cgroup is what failed (the machine does not allow
		// it after all): again without one.
		tr.withoutCgroup(cmd.SysProcAttr, err)
		env := cmd.Env
		cmd = newCmd()
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
		thread, err = spawn(cmd)
	}
	if err != nil {
		if tr != nil {
			tr.failed()
		}
		closeAll()
		return nil, fmt.Errorf("agentproc: start %q: %w", spec.Argv[0], err)
	}
	if tr != nil {
		tr.started(cmd.Process.Pid)
	}
	// The child has its copies; ours of its ends would keep the pipes open.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()

	p := &Process{
		thread:    thread,
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		h:         h,
		flusher:   flusherOf(h),
		log:       logger.With("pid", cmd.Process.Pid),
		maxLine:   spec.MaxLine,
		maxQueue:  spec.StdinBytes,
		killAfter: spec.KillAfter,
		stderrCB:  spec.Stderr,
		tap:       spec.Tap,
		tree:      tr,
		stdin:     stdinW,
		stdout:    &childPipe{f: stdoutR},
		stderr:    &childPipe{f: stderrR},
		done:      make(chan struct{}),
		wstop:     make(chan struct{}),
	}
	if p.stdinRaw, err = stdinW.SyscallConn(); err != nil {
		// An *os.File from os.Pipe always has one.
		closeAll()
		return nil, fmt.Errorf("agentproc: start %q: stdin pipe: %w", spec.Argv[0], err)
	}
	if p.killAfter <= 0 {
		p.killAfter = defaultKillAfter
	}
	if p.maxQueue <= 0 {
		p.maxQueue = WriteQueueLimit
	}
	size := spec.StderrBytes
	if size <= 0 {
		size = defaultStderrBytes
	}
	p.ring = newRing(size)

	readerDone := make(chan struct{})
	stderrDone := make(chan struct{})
	go p.readStdout(readerDone)
	go p.readStderr(stderrDone)
	go p.watch(readerDone, stderrDone)
	p.log.Debug("agent started", "argv", spec.Argv, "dir", spec.Dir)
	return p, nil
}

// spawners start agents from a few OS threads, each of which lives while
// any agent it started does. The parent-death signal (Pdeathsig) fires when
// the thread that forked the child ends, not when the daemon does, and a
// goroutine may otherwise be on a thread that the runtime ends (one locked
// by a goroutine that returned). A start waits on its thread until the
// child has exec'd, which under load takes milliseconds: with one thread,
// fifty sessions woken at once started their agents one after the other
// (docs/benchmarks.md, sleeping sessions). A start goes to an idle thread,
// a new one while fewer than maxSpawners run, else the least busy. When a
// thread's last agent has been reaped the thread ends too, so that a
// process without agents holds no thread for them.
var spawners struct {
	mu      sync.Mutex
	threads [maxSpawners]*spawnerThread // nil: not running
}

// maxSpawners bounds the spawner threads (and the agents started at once).
const maxSpawners = 8

// spawnerThread is one spawner thread's state, guarded by spawners.mu.
type spawnerThread struct {
	live     int           // agents started (or being started) and not yet reaped
	starting int           // starts waiting for or running on it
	reqs     chan spawnReq // closed when live drops to 0
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// spawn starts cmd on a spawner thread. Unless it fails, the caller calls
// spawned with the thread once cmd has been waited for.
func spawn(cmd *exec.Cmd) (*spawnerThread, error) {
	spawners.mu.Lock()
	var t *spawnerThread
	free := -1
	for i, s := range spawners.threads {
		switch {
		case s == nil:
			if free < 0 {
				free = i
			}
		case t == nil || s.starting < t.starting:
			t = s
		}
	}
	if free >= 0 && (t == nil || t.starting > 0) {
		t = &spawnerThread{reqs: make(chan spawnReq)}
		spawners.threads[free] = t
		go spawnLoop(t.reqs)
	}
	t.live++ // keeps the thread: reqs stays open until spawned
	t.starting++
	spawners.mu.Unlock()
	done := make(chan error, 1)
	t.reqs <- spawnReq{cmd: cmd, done: done}
	err := <-done
	spawners.mu.Lock()
	t.starting--
	spawners.mu.Unlock()
	if err != nil {
		spawned(t)
		return nil, err
	}
	return t, nil
}

// spawned releases thread t from one agent: it has been reaped (or never
// started). Its last release ends the thread.
func spawned(t *spawnerThread) {
	spawners.mu.Lock()
	defer spawners.mu.Unlock()
	t.live--
	if t.live == 0 {
		close(t.reqs)
		for i, s := range spawners.threads {
			if s == t {
				spawners.threads[i] = nil
			}
		}
	}
}

// spawnLoop is a spawner thread's goroutine.
func spawnLoop(reqs <-chan spawnReq) {
	// Never unlocked: when this goroutine returns, the runtime ends the
	// thread with it, and only then (no agent of it is left).
	runtime.LockOSThread()
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}

// Pid is the process id of the agent, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Done is closed after Handler.Exited has returned.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stderr returns a copy of the stderr ring buffer: the last Spec.StderrBytes bytes of stderr.
func (p *Process) Stderr() []byte { return p.ring.Bytes() }

// Write queues one record for the agent's stdin and returns without waiting for the agent. line is
// one record without its '\n' (a single trailing '\n' is accepted, so AppendRecord's output can be
// passed as is). When nothing is queued it is written at once, in one non-blocking write that
// takes what the pipe has room for; the rest, and records that arrive while a write is queued,
// go to the writer goroutine, which writes the queue in chunks until it drains. line is copied. Errors: ErrNewlineInRecord for a '\n' inside line; ErrClosed after
// exit or Close; the write error (wrapping syscall.EPIPE when the agent closed its stdin) once a
// write has failed; ErrWriteQueueFull when Spec.StdinBytes are waiting.
func (p *Process) Write(line []byte) error {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if bytes.IndexByte(line, '\n') >= 0 {
		return ErrNewlineInRecord
	}
	p.wmu.Lock()
	switch {
	case p.wclosed:
		p.wmu.Unlock()
		return ErrClosed
	case p.werr != nil:
		err := p.werr
		p.wmu.Unlock()
		return err
	case p.wqBytes+len(line)+1 > p.maxQueue:
		queued := p.wqBytes
		p.wmu.Unlock()
		return fmt.Errorf("%w (%d bytes waiting, record of %d bytes)", ErrWriteQueueFull, queued, len(line)+1)
	}
	if p.tap != nil {
		p.tap.Sent(line)
	}
	n := len(line) + 1
	if !p.writing {
		record := make([]byte, n)
		copy(record, line)
		record[n-1] = '\n'
		return p.writeNow(record)
	}
	if k := len(p.wq); k > 0 && cap(p.wq[k-1])-len(p.wq[k-1]) >= n {
		p.wq[k-1] = append(append(p.wq[k-1], line...), '\n')
	} else {
		var c []byte
		switch {
		case len(p.wfree) > 0 && n <= writeChunk:
			k := len(p.wfree)
			c, p.wfree = p.wfree[k-1], p.wfree[:k-1]
		case len(p.wq) == 0:
			// An idle queue: a small chunk, dropped once written.
			c = make([]byte, 0, max(n, smallChunk))
		default:
			// A burst: full-size chunks, recycled while it lasts.
			c = make([]byte, 0, max(n, writeChunk))
		}
		p.wq = append(p.wq, append(append(c, line...), '\n'))
	}
	p.wqBytes += n
	start := !p.writing
	p.writing = true
	p.wmu.Unlock()
	if start {
		// The writer runs only while there is something to write: an idle
		// session holds no writer goroutine.
		go p.writeLoop()
	}
	return nil
}

// writeNow writes record (ending in '\n') to an idle queue from the
// caller's goroutine: one non-blocking write, which a pipe with room takes
// whole, with no goroutine started and none woken. What the pipe does not
// take is queued for a writeLoop, as Write queues a record. Called with
// wmu held and p.writing false; returns with it released.
func (p *Process) writeNow(record []byte) error {
	// Writes arriving meanwhile queue behind this one (p.writing).
	p.writing = true
	p.wmu.Unlock()
	n, err := p.writeOnce(record)
	p.wmu.Lock()
	if err != nil {
		p.writing = false
		p.wmu.Unlock()
		select {
		case <-p.wstop:
			return ErrClosed
		default:
		}
		p.writeFailed(err)
		p.wmu.Lock()
		err = p.werr
		p.wmu.Unlock()
		return err
	}
	if rest := record[n:]; len(rest) > 0 {
		p.wq = append([][]byte{rest}, p.wq...)
		p.wqBytes += len(rest)
	}
	if len(p.wq) == 0 || p.wclosed || p.werr != nil {
		p.writing = false
		p.wq, p.wqBytes = nil, 0
		p.wmu.Unlock()
		return nil
	}
	p.wmu.Unlock()
	go p.writeLoop()
	return nil
}

// writeOnce makes one non-blocking write of b to stdin: how much the pipe
// took (0 when it is full), or the write's error.
func (p *Process) writeOnce(b []byte) (int, error) {
	var n int
	var werr error
	err := p.stdinRaw.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), b)
			if werr != syscall.EINTR {
				break
			}
		}
		return true // one attempt: never wait for room here
	})
	switch {
	case err != nil:
		return 0, err // closed
	case werr == syscall.EAGAIN:
		return 0, nil
	case werr != nil:
		return 0, &os.PathError{Op: "write", Path: p.stdin.Name(), Err: werr}
	}
	return n, nil
}

// writeLoop is the only writer of stdin while it runs (Write starts it when the queue was idle; it
// ends when the queue is empty again). It writes the queue a chunk at a time: each chunk holds every
// record that arrived while the previous one was written, so a burst costs one write per 64 KiB.
func (p *Process) writeLoop() {
	var written []byte // the chunk just written, to recycle
	for {
		p.wmu.Lock()
		if written != nil && cap(written) == writeChunk && len(p.wfree) < maxFreeChunks {
			p.wfree = append(p.wfree, written[:0])
		}
		written = nil
		if len(p.wq) == 0 || p.wclosed || p.werr != nil {
			// Idle again: an idle session keeps no write buffers.
			p.writing = false
			p.wfree = nil
			p.wmu.Unlock()
			return
		}
		chunk := p.wq[0]
		p.wq[0] = nil
		p.wq = p.wq[1:]
		p.wqBytes -= len(chunk)
		p.wmu.Unlock()
		if _, err := p.stdin.Write(chunk); err != nil {
			p.writeFailed(err) // the next round sees werr (or wclosed) and stops
			continue
		}
		written = chunk
	}
}

// writeFailed makes every later Write fail with err, and says so once in the log.
func (p *Process) writeFailed(err error) {
	select {
	case <-p.wstop:
		return // we closed stdin ourselves
	default:
	}
	err = fmt.Errorf("agentproc: write to agent stdin: %w", err)
	p.wmu.Lock()
	p.werr = err
	p.wq, p.wqBytes, p.wfree = nil, 0, nil
	p.wmu.Unlock()
	p.log.Warn("agent stdin is broken; later writes fail", "err", err)
}

// stopWriter ends the agent's stdin: later writes fail with ErrClosed, queued records are dropped,
// and a write stuck on a full pipe returns.
func (p *Process) stopWriter() {
	p.stopped.Do(func() {
		p.wmu.Lock()
		p.wclosed = true
		p.wq, p.wqBytes, p.wfree = nil, 0, nil
		p.wmu.Unlock()
		close(p.wstop)
		p.stdin.Close()
	})
}

// readStdout turns stdout into Handler calls until EOF, a read error, or the drain limit after exit.
func (p *Process) readStdout(done chan<- struct{}) {
	defer close(done)
	rd := NewReader(p.stdout, p.maxLine)
	for {
		line, err := rd.Next()
		if err != nil && p.flusher != nil {
			p.flusher.Flush()
		}
		if err != nil {
			if tl, ok := err.(*LineTooLongError); ok {
				p.h.Invalid(Diagnostic{Code: CodeLineTooLong, Message: tl.Error(), Len: tl.Len, Type: tl.Type, ID: tl.ID})
				continue
			}
			switch {
			case errors.Is(err, io.EOF):
			case errors.Is(err, os.ErrDeadlineExceeded):
				p.log.Warn("agent stdout still open after the agent exited (held by a process outside its group); stopped reading")
			default:
				p.readErr = err
			}
			return
		}
		if p.tap != nil {
			p.tap.Received(line)
		}
		env, err := DecodeEnvelope(line)
		if err != nil {
			il := err.(*InvalidLineError)
			p.h.Invalid(Diagnostic{Code: il.Code, Message: il.Reason + ": " + excerpt(line), Len: int64(len(line))})
			continue
		}
		p.h.Line(env, bytes.Clone(line))
		if p.flusher != nil && !rd.Pending() {
			// Nothing more is buffered: the next read may block, so the
			// handler passes on what it batched.
			p.flusher.Flush()
		}
	}
}

// excerpt quotes the start of a line for a diagnostic.
func excerpt(line []byte) string {
	if len(line) <= excerptBytes {
		return strconv.Quote(string(line))
	}
	cut := excerptBytes
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return strconv.Quote(string(line[:cut])) + "…"
}

// readStderr copies stderr into the ring and, line by line, to Spec.Stderr. It never parses it.
func (p *Process) readStderr(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 4<<10)
	var partial []byte
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			p.ring.Write(buf[:n])
			if p.stderrCB != nil || p.tap != nil {
				partial = p.stderrLines(partial, buf[:n])
			}
		}
		if err != nil {
			if len(partial) > 0 {
				p.emitStderr(partial)
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				p.log.Warn("reading agent stderr", "err", err)
			}
			return
		}
	}
}

// stderrLines emits the complete lines of chunk, prefixed by partial, and returns the new partial
// line.
func (p *Process) stderrLines(partial, chunk []byte) []byte {
	for {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			partial = append(partial, chunk...)
			if len(partial) >= stderrLineMax {
				p.emitStderr(partial)
				partial = partial[:0]
			}
			return partial
		}
		partial = append(partial, chunk[:i]...)
		p.emitStderr(partial)
		partial = partial[:0]
		chunk = chunk[i+1:]
	}
}

func (p *Process) emitStderr(line []byte) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	text := string(line)
	if p.stderrCB != nil {
		p.stderrCB(text)
	}
	if p.tap != nil {
		p.tap.Stderr(text)
	}
}

// watch waits for the child, cleans up after it and reports its exit.
func (p *Process) watch(readerDone, stderrDone <-chan struct{}) {
	waitErr := p.cmd.Wait()
	spawned(p.thread)
	exitedAt := time.Now()
	// Kill what is left of the group (grandchildren that may hold the pipes). The group id stays
	// reserved while it has members, so this cannot reach a stranger.
	p.sigMu.Lock()
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("killing the rest of the agent's process group", "err", err)
	}
	p.reaped = true
	p.sigMu.Unlock()
	if p.tree != nil {
		// Processes that left the group (setsid) end too.
		if n := p.tree.end(); n > 0 {
			p.log.Info("killed what was left of the agent's process tree", "processes", n)
		}
	}

	p.stopWriter()
	p.stdout.childExited(exitedAt)
	p.stderr.childExited(exitedAt)
	<-readerDone
	<-stderrDone
	p.stdout.f.Close()
	p.stderr.f.Close()

	st := exitStatus(p.cmd.ProcessState, waitErr)
	if st.Err == nil && p.readErr != nil {
		st.Err = fmt.Errorf("agentproc: reading agent stdout: %w", p.readErr)
	}
	st.StderrTail = stderrTail(p.ring)
	p.log.Debug("agent exited", "code", st.Code, "signal", st.Signal, "err", st.Err)
	if p.tap != nil {
		p.tap.Exited(st)
	}
	p.h.Exited(st)
	close(p.done)
}

func exitStatus(ps *os.ProcessState, waitErr error) ExitStatus {
	st := ExitStatus{Code: -1}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		st.Err = fmt.Errorf("agentproc: wait: %w", waitErr)
	}
	if ps == nil {
		return st
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = unix.SignalName(ws.Signal())
		if st.Signal == "" {
			st.Signal = ws.Signal().String()
		}
		return st
	}
	st.Code = ps.ExitCode()
	return st
}

// stderrTail is the end of the stderr ring; when older output was dropped it starts at a line
// boundary, so that it does not open with half a line.
func stderrTail(r *ring) string {
	b, cut := r.tail(stderrTailBytes)
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimRight(b, "\r\n"))
}

// signalGroup sends sig to the agent's process group unless the agent has been reaped.
func (p *Process) signalGroup(sig syscall.Signal) {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if p.reaped {
		return
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("signalling the agent's process group", "signal", unix.SignalName(sig), "err", err)
	}
}

// Close ends stdin, sends SIGTERM to the process group, sends SIGKILL to the group if the agent is
// still running after Spec.KillAfter, and waits until Handler.Exited has returned. It is idempotent
// and safe to call concurrently; every call waits. It returns nil: the outcome is the ExitStatus.
func (p *Process) Close() error {
	first := false
	p.closing.Do(func() {
		first = true
		p.stopWriter()
		p.signalGroup(syscall.SIGTERM)
	})
	if !first {
		<-p.done
		return nil
	}
	t := time.NewTimer(p.killAfter)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.log.Warn("agent still running after SIGTERM; sending SIGKILL", "after", p.killAfter)
		p.signalGroup(syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// Kill sends SIGKILL to the process group now, without waiting (tests, crash simulation).
func (p *Process) Kill() { p.signalGroup(syscall.SIGKILL) }

// childPipe is our read end of a child's stdout or stderr. While the child runs, reads block as
// long as they must; once it has exited, each read waits at most drainIdle for data, and reading
// stops once reads have waited drainMax in all or read drainBytes.
type childPipe struct {
	f        *os.File
	exitedAt atomic.Pointer[time.Time]
	// After the exit (one reader: no lock): the time reads waited, the bytes they read.
	waited    time.Duration
	drainRead int
}

func (c *childPipe) Read(b []byte) (int, error) {
	if c.exitedAt.Load() == nil {
		return c.f.Read(b)
	}
	if c.waited >= drainMax || c.drainRead >= drainBytes {
		return 0, os.ErrDeadlineExceeded
	}
	start := time.Now()
	c.f.SetReadDeadline(start.Add(min(drainIdle, drainMax-c.waited)))
	n, err := c.f.Read(b)
	c.waited += time.Since(start)
	c.drainRead += n
	return n, err
}

// childExited starts the drain; the deadline also wakes a read that is already waiting.
func (c *childPipe) childExited(at time.Time) {
	c.exitedAt.Store(&at)
	c.f.SetReadDeadline(at.Add(drainIdle))
}

func flusherOf(h Handler) Flusher {
	f, _ := h.(Flusher)
	return f
}
