package agentproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/surfaced/surfaced/internal/testkit"
)

func TestMain(m *testing.M) {
	// The spawner thread lives as long as the process, by design.
	goleak.VerifyTestMain(m)
}

// waitLimit bounds every wait in these tests. It is a hang guard, not a speed check: each event it
// guards happens in milliseconds, or, when the code under test is wrong, only after a 100 s sleep.
const waitLimit = 10 * time.Second

// event is one Handler call.
type event struct {
	kind string // "line", "invalid" or "exited"
	env  Envelope
	line []byte
	diag Diagnostic
	st   ExitStatus
}

// recorder is a Handler that records every call and checks the Handler contract.
type recorder struct {
	mu         sync.Mutex
	events     []event
	violations []string
	exited     int
	poke       chan struct{}
	onLine     func() // optional: runs at the start of every Line call
}

func newRecorder() *recorder { return &recorder{poke: make(chan struct{}, 1)} }

func (r *recorder) add(e event) {
	r.mu.Lock()
	if r.exited > 0 {
		r.violations = append(r.violations, fmt.Sprintf("%s after Exited", e.kind))
	}
	if e.kind == "exited" {
		r.exited++
	}
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

func (r *recorder) Line(env Envelope, line []byte) {
	if r.onLine != nil {
		r.onLine()
	}
	r.add(event{kind: "line", env: env, line: line})
}
func (r *recorder) Invalid(d Diagnostic) { r.add(event{kind: "invalid", diag: d}) }
func (r *recorder) Exited(st ExitStatus) { r.add(event{kind: "exited", st: st}) }

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitLines waits until n lines have arrived and returns them.
func (r *recorder) waitLines(t testing.TB, n int) []event {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		var lines []event
		for _, e := range r.snapshot() {
			if e.kind == "line" {
				lines = append(lines, e)
			}
		}
		if len(lines) >= n {
			return lines
		}
		select {
		case <-r.poke:
		case <-deadline:
			t.Fatalf("got %d lines, want %d: %+v", len(lines), n, r.snapshot())
		}
	}
}

// waitExit waits for the process to be done and checks that Exited came exactly once, last.
func waitExit(t *testing.T, p *Process, r *recorder) ExitStatus {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(waitLimit):
		t.Fatalf("no exit reported; events: %+v", r.snapshot())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Fatalf("Handler contract broken: %v", r.violations)
	}
	if r.exited != 1 || r.events[len(r.events)-1].kind != "exited" {
		t.Fatalf("Exited called %d times, or not last: %+v", r.exited, r.events)
	}
	return r.events[len(r.events)-1].st
}

// start starts a process that the test closes when it ends.
func start(t *testing.T, spec Spec, h Handler) *Process {
	t.Helper()
	p, err := Start(spec, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestProcessEchoRoundTrip(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: []string{"cat"}}, r)
	if p.Pid() <= 0 {
		t.Fatalf("Pid() = %d", p.Pid())
	}

	var want []string
	rec, err := AppendRecord(nil, SimpleCommand{ID: "id-1", Type: CmdGetState})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(rec); err != nil { // AppendRecord's output, '\n' included
		t.Fatal(err)
	}
	want = append(want, strings.TrimSuffix(string(rec), "\n"))
	const n = 5000
	for i := range n {
		line := fmt.Sprintf(`{"type":"message_update","id":"%d","pad":"%s"}`, i, strings.Repeat("p", i%300))
		if err := p.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		want = append(want, line)
	}
	lines := r.waitLines(t, len(want))
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d", len(lines), len(want))
	}
	// Lines are the handler's to keep: the early ones are intact after thousands more were read.
	for i, e := range lines {
		if string(e.line) != want[i] {
			t.Fatalf("line %d = %q, want %q", i, e.line, want[i])
		}
	}
	if lines[0].env != (Envelope{Type: CmdGetState, ID: "id-1"}) || lines[1].env != (Envelope{Type: EventMessageUpdate, ID: "0"}) {
		t.Fatalf("envelopes %+v, %+v", lines[0].env, lines[1].env)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := waitExit(t, p, r)
	// cat exits on end of input or on the SIGTERM that follows it at once.
	if !(st.Code == 0 || st.Signal == "SIGTERM") || st.Err != nil {
		t.Fatalf("exit status %+v", st)
	}
	if err := p.Write([]byte(`{"type":"late"}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v, want ErrClosed", err)
	}
}

// A record written to an idle queue goes to the pipe at once; one larger
// than the pipe holds is written in part and the rest queued, ahead of the
// records written after it: the agent reads each whole, in order.
func TestProcessIdleWriteLargerThanThePipe(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: []string{"cat"}}, r)
	big := fmt.Sprintf(`{"type":"big","pad":"%s"}`, strings.Repeat("b", 1<<20))
	want := []string{big}
	if err := p.Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		line := fmt.Sprintf(`{"type":"small","id":"%d"}`, i)
		if err := p.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		want = append(want, line)
	}
	// Idle again (the queue drained), then more.
	r.waitLines(t, len(want))
	for i := range 3 {
		line := fmt.Sprintf(`{"type":"later","id":"%d"}`, i)
		if err := p.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		want = append(want, line)
	}
	lines := r.waitLines(t, len(want))
	for i, e := range lines {
		if string(e.line) != want[i] {
			t.Fatalf("line %d = %.80q (%d bytes), want %.80q (%d bytes)", i, e.line, len(e.line), want[i], len(want[i]))
		}
	}
}

func TestProcessWriteRejectsNewline(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: []string{"cat"}}, r)
	for _, bad := range []string{"{\"type\":\"a\"}\n{\"type\":\"b\"}", "{\"type\":\"a\"}\n\n", "\n\n"} {
		if err := p.Write([]byte(bad)); !errors.Is(err, ErrNewlineInRecord) {
			t.Fatalf("Write(%q) = %v, want ErrNewlineInRecord", bad, err)
		}
	}
	if err := p.Write([]byte("{\"type\":\"ok\"}\n")); err != nil {
		t.Fatal(err)
	}
	if lines := r.waitLines(t, 1); lines[0].env.Type != "ok" {
		t.Fatalf("got %+v", lines)
	}
	p.Close()
	for _, e := range r.snapshot() {
		if e.kind == "line" && e.env.Type != "ok" {
			t.Fatalf("a rejected record reached the agent: %q", e.line)
		}
	}
}

func TestProcessEnvAndDir(t *testing.T) {
	t.Setenv("SURFACED_T_KEEP", "from-daemon")
	t.Setenv("SURFACED_T_OVERRIDE", "from-daemon")
	dir := t.TempDir()
	r := newRecorder()
	p := start(t, Spec{
		Argv: sh(`printf '{"type":"env","keep":"%s","override":"%s","dup":"%s","cwd":"%s"}\n' ` +
			`"$SURFACED_T_KEEP" "$SURFACED_T_OVERRIDE" "$SURFACED_T_DUP" "$(pwd -P)"`),
		Dir: dir,
		Env: []string{"SURFACED_T_OVERRIDE=from-spec", "SURFACED_T_DUP=first", "SURFACED_T_DUP=second"},
	}, r)
	waitExit(t, p, r)
	lines := r.waitLines(t, 1)
	var got map[string]string
	if err := json.Unmarshal(lines[0].line, &got); err != nil {
		t.Fatal(err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"type": "env", "keep": "from-daemon", "override": "from-spec", "dup": "second", "cwd": realDir}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestProcessStderr(t *testing.T) {
	var mu sync.Mutex
	var stderrLines []string
	r := newRecorder()
	p := start(t, Spec{
		Argv: sh(`echo 'starting up' >&2; printf 'windows\r\n' >&2; echo '{"type":"from_stderr"}' >&2; ` +
			`echo '{"type":"from_stdout"}'; printf 'no newline' >&2`),
		Stderr: func(line string) {
			mu.Lock()
			stderrLines = append(stderrLines, line)
			mu.Unlock()
		},
	}, r)
	st := waitExit(t, p, r)
	for _, e := range r.snapshot() {
		if e.kind != "exited" && e.env.Type != "from_stdout" {
			t.Fatalf("stderr leaked into the protocol: %+v", e)
		}
	}
	if lines := r.waitLines(t, 1); len(lines) != 1 {
		t.Fatalf("got %d stdout lines, want 1", len(lines))
	}
	wantRing := "starting up\nwindows\r\n{\"type\":\"from_stderr\"}\nno newline"
	if got := string(p.Stderr()); got != wantRing {
		t.Fatalf("Stderr() = %q, want %q", got, wantRing)
	}
	if st.StderrTail != wantRing {
		t.Fatalf("StderrTail = %q, want %q", st.StderrTail, wantRing)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"starting up", "windows", `{"type":"from_stderr"}`, "no newline"}
	if fmt.Sprint(stderrLines) != fmt.Sprint(want) {
		t.Fatalf("Spec.Stderr got %q, want %q", stderrLines, want)
	}
}

func TestProcessStderrRingKeepsTail(t *testing.T) {
	var pieces, total atomic.Int64
	r := newRecorder()
	p := start(t, Spec{
		// 300 kB of stderr: one 200 kB line, then numbered lines.
		Argv:        sh(`head -c 200000 /dev/zero | tr '\0' x >&2; echo >&2; i=0; while [ $i -lt 1000 ]; do echo "line $i" >&2; i=$((i+1)); done`),
		StderrBytes: 100,
		Stderr: func(line string) {
			pieces.Add(1)
			total.Add(int64(len(line)))
			if len(line) > stderrLineMax+32<<10 {
				t.Errorf("stderr piece of %d bytes", len(line))
			}
		},
	}, r)
	st := waitExit(t, p, r)
	got := string(p.Stderr())
	if len(got) != 100 || !strings.HasSuffix(got, "line 998\nline 999\n") {
		t.Fatalf("Stderr() = %q, want the last 100 bytes", got)
	}
	if !strings.HasSuffix(st.StderrTail, "line 999") || strings.HasPrefix(st.StderrTail, "ine") {
		t.Fatalf("StderrTail = %q", st.StderrTail)
	}
	// The long line arrives in pieces; nothing is lost on the way to Spec.Stderr.
	wantBytes := int64(200000)
	for i := range 1000 {
		wantBytes += int64(len(fmt.Sprintf("line %d", i)))
	}
	if total.Load() != wantBytes || pieces.Load() < 1000+3 {
		t.Fatalf("Spec.Stderr got %d bytes in %d pieces, want %d bytes, the long line split", total.Load(), pieces.Load(), wantBytes)
	}
}

func TestProcessInvalidLines(t *testing.T) {
	long := strings.Repeat("L", 100)
	r := newRecorder()
	p := start(t, Spec{
		Argv: sh(`printf '%s\n' '{"type":"a"}' 'garbage here' '[1,2]' '{"x":1}' '{"type":1}' '` + long + `' '' '   ' '{"type":"b"}'; ` +
			`printf '{"type":"c"}'`),
		MaxLine: 64,
	}, r)
	waitExit(t, p, r)
	var got []string
	for _, e := range r.snapshot() {
		switch e.kind {
		case "line":
			got = append(got, "line:"+e.env.Type)
		case "invalid":
			got = append(got, fmt.Sprintf("invalid:%s:%d", e.diag.Code, e.diag.Len))
			if e.diag.Message == "" {
				t.Errorf("diagnostic without a message: %+v", e.diag)
			}
		}
	}
	want := []string{
		"line:a", "invalid:invalid_json:12", "invalid:not_an_object:5", "invalid:missing_type:7",
		"invalid:missing_type:10", "invalid:line_too_long:100", "line:b", "line:c",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	for _, e := range r.snapshot() {
		if e.kind == "invalid" && e.diag.Code == CodeInvalidJSON && !strings.Contains(e.diag.Message, `"garbage here"`) {
			t.Fatalf("diagnostic %q does not quote the line", e.diag.Message)
		}
	}
}

// tapRecorder is a Tap that records what it sees, in order.
type tapRecorder struct {
	mu     sync.Mutex
	seen   []string
	exited chan ExitStatus
}

func (r *tapRecorder) add(s string) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}
func (r *tapRecorder) Sent(line []byte)     { r.add("sent " + string(line)) }
func (r *tapRecorder) Received(line []byte) { r.add("received " + string(line)) }
func (r *tapRecorder) Stderr(line string)   { r.add("stderr " + line) }
func (r *tapRecorder) Exited(st ExitStatus) {
	r.add(fmt.Sprintf("exited %d", st.Code))
	r.exited <- st
}

func TestProcessTap(t *testing.T) {
	tap := &tapRecorder{exited: make(chan ExitStatus, 1)}
	r := newRecorder()
	// The agent echoes one line, writes an invalid one and a line over the
	// cap, says something on stderr, and exits 5 when it is closed.
	p := start(t, Spec{
		Argv:    sh(`trap 'exit 5' TERM; echo oops >&2; read l; echo "$l"; echo 'not json'; echo '{"type":"` + strings.Repeat("x", 80) + `"}'; read l; exit 5`),
		MaxLine: 64,
		Tap:     tap,
	}, r)
	if err := p.Write([]byte(`{"type":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	r.waitLines(t, 1)
	// Both dropped lines have been read (the invalid one and the one over the cap).
	deadline := time.After(waitLimit)
	for invalid := 0; invalid < 2; {
		invalid = 0
		for _, e := range r.snapshot() {
			if e.kind == "invalid" {
				invalid++
			}
		}
		if invalid < 2 {
			select {
			case <-r.poke:
			case <-deadline:
				t.Fatalf("events: %+v", r.snapshot())
			}
		}
	}
	p.Close()
	st := waitExit(t, p, r)
	if st.Code != 5 {
		t.Fatalf("exit %+v, want code 5", st)
	}
	select {
	case <-tap.exited:
	default:
		t.Fatal("Tap.Exited was not called before Handler.Exited")
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	// stderr runs on its own goroutine: compare it apart from the ordered stdin/stdout lines.
	var ordered []string
	var stderr []string
	for _, s := range tap.seen {
		if strings.HasPrefix(s, "stderr ") {
			stderr = append(stderr, s)
		} else {
			ordered = append(ordered, s)
		}
	}
	want := []string{`sent {"type":"ping"}`, `received {"type":"ping"}`, "received not json", "exited 5"}
	if fmt.Sprint(ordered) != fmt.Sprint(want) {
		t.Fatalf("tap saw\n%q\nwant\n%q", ordered, want)
	}
	if fmt.Sprint(stderr) != fmt.Sprint([]string{"stderr oops"}) {
		t.Fatalf("tap stderr %q", stderr)
	}
}

func TestProcessExitStatus(t *testing.T) {
	cases := []struct {
		script string
		code   int
		signal string
	}{
		{`exit 0`, 0, ""},
		{`exit 7`, 7, ""},
		{`kill -KILL $$`, -1, "SIGKILL"},
		{`kill -TERM $$`, -1, "SIGTERM"},
		{`kill -USR1 $$`, -1, "SIGUSR1"},
	}
	for _, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			r := newRecorder()
			p := start(t, Spec{Argv: sh(tc.script)}, r)
			st := waitExit(t, p, r)
			if st.Code != tc.code || st.Signal != tc.signal || st.Err != nil {
				t.Fatalf("status %+v, want code %d signal %q", st, tc.code, tc.signal)
			}
		})
	}
	t.Run("Kill", func(t *testing.T) {
		r := newRecorder()
		p := start(t, Spec{Argv: sh(`echo '{"type":"up"}'; exec sleep 100`)}, r)
		r.waitLines(t, 1)
		p.Kill()
		if st := waitExit(t, p, r); st.Signal != "SIGKILL" {
			t.Fatalf("status %+v, want SIGKILL", st)
		}
		p.Kill() // after the exit: a no-op
	})
}

func TestProcessGroup(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: sh(`echo "{\"type\":\"pid\",\"pid\":$$}"; exec sleep 100`)}, r)
	line := r.waitLines(t, 1)[0]
	var msg struct{ Pid int }
	if err := json.Unmarshal(line.line, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Pid != p.Pid() {
		t.Fatalf("the child says pid %d, Pid() = %d", msg.Pid, p.Pid())
	}
	if pgid, err := syscall.Getpgid(p.Pid()); err != nil || pgid != p.Pid() {
		t.Fatalf("pgid = %d, %v; want a group of its own (%d)", pgid, err, p.Pid())
	}
}

// Lines still in the pipe when the child exits are all delivered, even when the Handler is busy
// for longer than the drain wait at that moment.
func TestProcessNoLinesLostAtExit(t *testing.T) {
	const n = 1000 // about 20 kB: fits in the pipe, so the child exits while the Handler is stuck
	r := newRecorder()
	stuck, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	r.onLine = func() { first.Do(func() { close(stuck); <-release }) }
	p := start(t, Spec{Argv: sh(`echo '{"type":"first"}'; read go; i=0; while [ $i -lt ` + fmt.Sprint(n) + ` ]; ` +
		`do echo "{\"type\":\"n\",\"i\":$i}"; i=$((i+1)); done; echo '{"type":"last"}'`)}, r)
	// The reader holds only the first line (the child waits for "go"), and is stuck in Line.
	<-stuck
	if err := p.Write([]byte(`{"type":"go"}`)); err != nil {
		t.Fatal(err)
	}
	// Wait until the child has written everything into the pipe, exited and been reaped, then stay
	// stuck well past drainIdle.
	testkit.Eventually(t, waitLimit, func() bool { return errors.Is(syscall.Kill(p.Pid(), 0), syscall.ESRCH) }, "the child to exit and be reaped")
	// The adverse condition itself, not a wait for a result: the Handler
	// stays stuck for several drain waits after the exit.
	time.Sleep(3 * drainIdle)
	close(release)
	st := waitExit(t, p, r)
	lines := r.waitLines(t, n+2)
	if len(lines) != n+2 || lines[n+1].env.Type != "last" || st.Code != 0 {
		t.Fatalf("got %d lines (last %q), status %+v; want %d", len(lines), lines[len(lines)-1].line, st, n+2)
	}
}

// grandchildPid reads the {"type":"grandchild","pid":N} line.
func grandchildPid(t *testing.T, r *recorder) int {
	t.Helper()
	for _, e := range r.waitLines(t, 1) {
		if e.env.Type == "grandchild" {
			var msg struct{ Pid int }
			if err := json.Unmarshal(e.line, &msg); err != nil {
				t.Fatal(err)
			}
			return msg.Pid
		}
	}
	t.Fatal("no grandchild line")
	return 0
}

// gone reports whether pid no longer runs. A zombie counts as gone: the container's init may never
// reap an orphan.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	testkit.Eventually(t, waitLimit, func() bool { return gone(pid) }, "process %d to end", pid)
}

// The child exits while a grandchild still holds its stdout: the exit is reported anyway, the
// lines written before it are delivered, and a grandchild in the group is killed.
func TestProcessExitWithGrandchildHoldingStdout(t *testing.T) {
	t.Run("in the group", func(t *testing.T) {
		r := newRecorder()
		p := start(t, Spec{Argv: sh(`sleep 100 & echo "{\"type\":\"grandchild\",\"pid\":$!}"; exit 3`)}, r)
		pid := grandchildPid(t, r)
		if st := waitExit(t, p, r); st.Code != 3 {
			t.Fatalf("status %+v, want code 3", st)
		}
		waitGone(t, pid)
	})
	t.Run("outside the group", func(t *testing.T) {
		r := newRecorder()
		// setsid puts the grandchild out of reach of group signals; it keeps stdout and stderr open.
		p := start(t, Spec{Argv: sh(`setsid sleep 100 & echo "{\"type\":\"grandchild\",\"pid\":$!}"; read go; echo bye >&2; exit 4`)}, r)
		pid := grandchildPid(t, r)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		// Let the child exit only once the grandchild has left the group.
		testkit.Eventually(t, waitLimit, func() bool {
			pgid, err := syscall.Getpgid(pid)
			return err == nil && pgid != p.Pid()
		}, "the grandchild to leave the group")
		if err := p.Write([]byte(`{"type":"go"}`)); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		st := waitExit(t, p, r)
		t.Logf("exit reported %v after the child was told to exit, grandchild still holding stdout", time.Since(began))
		if st.Code != 4 || st.StderrTail != "bye" {
			t.Fatalf("status %+v, want code 4 and the stderr tail", st)
		}
		if gone(pid) {
			t.Fatal("the escaped grandchild died: the test does not test what it says")
		}
	})
}

func TestProcessCloseKillsGrandchildren(t *testing.T) {
	for name, script := range map[string]string{
		"grandchild dies of SIGTERM":   `sleep 100 & echo "{\"type\":\"grandchild\",\"pid\":$!}"; wait`,
		"grandchild ignores SIGTERM":   `(trap '' TERM; exec sleep 100) & echo "{\"type\":\"grandchild\",\"pid\":$!}"; wait`,
		"child exits, grandchild runs": `(trap '' TERM; exec sleep 100) & echo "{\"type\":\"grandchild\",\"pid\":$!}"; exec sleep 100`,
	} {
		t.Run(name, func(t *testing.T) {
			r := newRecorder()
			p := start(t, Spec{Argv: sh(script), KillAfter: time.Minute}, r)
			pid := grandchildPid(t, r)
			if gone(pid) {
				t.Fatal("grandchild not running")
			}
			p.Close() // KillAfter is long: the group is cleaned up when the child exits, not by escalation
			waitExit(t, p, r)
			waitGone(t, pid)
		})
	}
}

func TestProcessCloseEscalatesToSIGKILL(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{
		Argv:      sh(`trap '' TERM; echo '{"type":"ready"}'; while :; do sleep 1; done`),
		KillAfter: 100 * time.Millisecond,
	}, r)
	r.waitLines(t, 1)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := waitExit(t, p, r); st.Signal != "SIGKILL" {
		t.Fatalf("status %+v, want SIGKILL", st)
	}

	// A child that honours SIGTERM is not escalated.
	r2 := newRecorder()
	p2 := start(t, Spec{Argv: sh(`echo '{"type":"ready"}'; exec sleep 100`), KillAfter: time.Minute}, r2)
	r2.waitLines(t, 1)
	p2.Close()
	if st := waitExit(t, p2, r2); st.Signal != "SIGTERM" {
		t.Fatalf("status %+v, want SIGTERM", st)
	}
}

func TestProcessCloseConcurrent(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: sh(`exec sleep 100`)}, r)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
			select {
			case <-p.Done():
			default:
				t.Error("Close returned before Done")
			}
		})
	}
	wg.Wait()
	waitExit(t, p, r)
	p.Close()
}

func TestProcessWriteAfterExit(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: sh(`exit 0`)}, r)
	waitExit(t, p, r)
	if err := p.Write([]byte(`{"type":"x"}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after exit = %v, want ErrClosed", err)
	}
}

// syncBuffer is an io.Writer for slog that tests can read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProcessBrokenPipe(t *testing.T) {
	var logs syncBuffer
	r := newRecorder()
	p := start(t, Spec{
		Argv:   sh(`exec 0<&-; echo '{"type":"ready"}'; exec sleep 100`),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}, r)
	r.waitLines(t, 1)
	var err error
	testkit.Eventually(t, waitLimit, func() bool {
		err = p.Write([]byte(`{"type":"prompt","message":"hello"}`))
		return err != nil
	}, "a write to the closed stdin to fail")
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write = %v, want a broken pipe", err)
	}
	for range 10 {
		if err := p.Write([]byte(`{"type":"abort"}`)); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("later Write = %v, want the broken pipe again", err)
		}
	}
	if n := strings.Count(logs.String(), "agent stdin is broken"); n != 1 {
		t.Fatalf("broken pipe logged %d times, want once:\n%s", n, logs.String())
	}
	p.Close()
	if err := p.Write([]byte(`{"type":"abort"}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v, want ErrClosed", err)
	}
}

func TestProcessWriteQueueBounded(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: sh(`exec sleep 100`)}, r) // never reads stdin
	record := bytes.Repeat([]byte("q"), 1<<20)
	var accepted int
	var err error
	for accepted <= 3*WriteQueueLimit {
		if err = p.Write(record); err != nil {
			break
		}
		accepted += len(record) + 1
	}
	if !errors.Is(err, ErrWriteQueueFull) {
		t.Fatalf("after %d bytes Write = %v, want ErrWriteQueueFull", accepted, err)
	}
	// The queue holds WriteQueueLimit; the writer holds one more batch, stuck on the full pipe.
	if accepted < WriteQueueLimit-len(record) || accepted > 2*WriteQueueLimit+len(record) {
		t.Fatalf("accepted %d bytes before refusing, want about 1-2× %d", accepted, WriteQueueLimit)
	}
	// Close must not wait for the stuck writer.
	p.Close()
	waitExit(t, p, r)
}

func TestProcessStdinBytesBoundsTheQueue(t *testing.T) {
	r := newRecorder()
	p := start(t, Spec{Argv: sh(`exec sleep 100`), StdinBytes: 256 << 10}, r) // never reads stdin
	record := bytes.Repeat([]byte("q"), 64<<10)
	var accepted int
	var err error
	for accepted <= 4<<20 {
		if err = p.Write(record); err != nil {
			break
		}
		accepted += len(record) + 1
	}
	if !errors.Is(err, ErrWriteQueueFull) || accepted > 1<<20 {
		t.Fatalf("after %d bytes Write = %v, want ErrWriteQueueFull within 256 KiB plus the pipe and one chunk", accepted, err)
	}
	if err := p.Write(bytes.Repeat([]byte("q"), 300<<10)); !errors.Is(err, ErrWriteQueueFull) {
		t.Fatalf("a record over the bound: %v", err)
	}
	p.Close()
	waitExit(t, p, r)
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestStartErrors(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		spec Spec
		h    Handler
		want string
		is   error
	}{
		{"empty argv", Spec{}, newRecorder(), "empty argv", nil},
		{"empty program", Spec{Argv: []string{""}}, newRecorder(), "empty argv", nil},
		{"nil handler", Spec{Argv: []string{"cat"}}, nil, "nil Handler", nil},
		{"not found", Spec{Argv: []string{"surfaced-no-such-agent"}}, newRecorder(), `"surfaced-no-such-agent"`, exec.ErrNotFound},
		{"not executable", Spec{Argv: []string{notExec}}, newRecorder(), notExec, os.ErrPermission},
		{"no such dir", Spec{Argv: []string{"cat"}, Dir: "/nonexistent/surfaced"}, newRecorder(), "/nonexistent/surfaced", os.ErrNotExist},
		{"dir is a file", Spec{Argv: []string{"cat"}, Dir: notExec}, newRecorder(), notExec, syscall.ENOTDIR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := openFDs(t)
			p, err := Start(tc.spec, tc.h)
			if err == nil {
				p.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("error %q, want it to mention %q and wrap %v", err, tc.want, tc.is)
			}
			if after := openFDs(t); after != before {
				t.Fatalf("%d file descriptors open after a failed Start, %d before", after, before)
			}
		})
	}
}

func TestRing(t *testing.T) {
	r := newRing(8)
	check := func(want string) {
		t.Helper()
		if got := string(r.Bytes()); got != want {
			t.Fatalf("ring = %q, want %q", got, want)
		}
	}
	check("")
	r.Write([]byte("abc"))
	check("abc")
	r.Write([]byte("defgh")) // exactly full
	check("abcdefgh")
	r.Write([]byte("ij")) // wraps
	check("cdefghij")
	r.Write([]byte("klmnopq")) // wraps across the end
	check("jklmnopq")
	r.Write([]byte("0123456789")) // longer than the ring
	check("23456789")
	r.Write(nil)
	check("23456789")
	zero := newRing(0)
	zero.Write([]byte("x"))
	if len(zero.Bytes()) != 0 {
		t.Fatal("a zero ring kept bytes")
	}
}

// countHandler counts message_update lines for the benchmarks. Only the reader goroutine touches
// lines; it publishes the count every 1024 lines, so the producer does not contend for a cache line
// on every line.
type countHandler struct {
	lines    int64
	n        atomic.Int64
	target   int64
	progress chan struct{}
	done     chan struct{}
	bad      atomic.Int64
}

func (c *countHandler) Line(env Envelope, line []byte) {
	if env.Type != EventMessageUpdate {
		c.bad.Add(1)
	}
	c.lines++
	if c.lines%1024 == 0 || c.lines == c.target {
		c.n.Store(c.lines)
		select {
		case c.progress <- struct{}{}:
		default:
		}
	}
	if c.lines == c.target {
		close(c.done)
	}
}
func (c *countHandler) Invalid(Diagnostic) { c.bad.Add(1) }
func (c *countHandler) Exited(ExitStatus)  {}

// cpuTime is the CPU time, in ns, used so far by this process and its waited-for children: the
// throughput benchmarks report it per line, a measure of cost that, unlike lines/s, does not depend
// on what else the machine is running.
func cpuTime(b *testing.B) int64 {
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	var ns int64
	for _, tv := range []syscall.Timeval{self.Utime, self.Stime, children.Utime, children.Stime} {
		ns += tv.Nano()
	}
	return ns
}

// BenchmarkReaderThroughCat writes pi message_update lines to a real cat through Process.Write and
// reads them back through Process's reader (Reader, DecodeEnvelope, a copy per line, Handler.Line).
func BenchmarkReaderThroughCat(b *testing.B) {
	line := []byte(sampleEvent)
	h := &countHandler{target: int64(b.N), progress: make(chan struct{}, 1), done: make(chan struct{})}
	cpu0 := cpuTime(b)
	p, err := Start(Spec{Argv: []string{"cat"}}, h)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	const inFlight = 1 << 16 // lines written but not read back: keeps the queue far below its limit
	b.SetBytes(int64(len(line) + 1))
	b.ResetTimer()
	for i := range int64(b.N) {
		for i-h.n.Load() >= inFlight {
			<-h.progress
		}
		if err := p.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	<-h.done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.StopTimer()
	p.Close() // cat's CPU time counts once it has been waited for
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/line")
	if h.bad.Load() != 0 {
		b.Fatalf("%d lines came back wrong", h.bad.Load())
	}
}

// BenchmarkRawCatPipe is the baseline: the same bytes through cat, written in large blocks and read
// with a plain bufio.Reader.ReadSlice loop, without framing rules, validation or copies.
func BenchmarkRawCatPipe(b *testing.B) {
	line := []byte(sampleEvent + "\n")
	block := bytes.Repeat(line, 512)
	cpu0 := cpuTime(b)
	cmd := exec.Command("cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	writeErr := make(chan error, 1)
	go func() {
		left := b.N
		for left > 0 {
			n := min(left, 512)
			if _, err := stdin.Write(block[:n*len(line)]); err != nil {
				writeErr <- err
				return
			}
			left -= n
		}
		writeErr <- stdin.Close()
	}()
	br := bufio.NewReaderSize(stdout, 64<<10)
	lines := 0
	for {
		l, err := br.ReadSlice('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(l) == len(line) {
			lines++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.StopTimer()
	if err := <-writeErr; err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/line")
	if lines != b.N {
		b.Fatalf("read %d lines, want %d", lines, b.N)
	}
}

// BenchmarkExitReport measures how long after the child is told to exit Handler.Exited returns:
// for a child alone (the baseline), with a grandchild in its group holding stdout (killed on exit),
// and with one that left the group (the reader waits drainIdle for it, then gives up).
func BenchmarkExitReport(b *testing.B) {
	for _, bc := range []struct {
		name, setup string
		escaped     bool
	}{
		{"alone", `true;`, false},
		{"grandchild in group", `sleep 100 &`, false},
		{"grandchild outside group", `setsid sleep 100 &`, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				r := newRecorder()
				p, err := Start(Spec{Argv: sh(bc.setup + ` echo "{\"type\":\"ready\",\"pid\":${!:-0}}"; read go; exit 0`)}, r)
				if err != nil {
					b.Fatal(err)
				}
				var msg struct{ Pid int }
				if err := json.Unmarshal(r.waitLines(b, 1)[0].line, &msg); err != nil {
					b.Fatal(err)
				}
				if bc.escaped {
					testkit.Eventually(b, waitLimit, func() bool {
						pgid, err := syscall.Getpgid(msg.Pid)
						return err == nil && pgid != p.Pid()
					}, "the grandchild to leave the group")
				}
				b.StartTimer()
				if err := p.Write([]byte(`{"type":"go"}`)); err != nil {
					b.Fatal(err)
				}
				<-p.Done()
				b.StopTimer()
				if bc.escaped {
					syscall.Kill(msg.Pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// Agents started at once are started from more than one spawner thread
// (one start waits for its child's exec), at most maxSpawners; once every
// agent has been reaped no spawner thread is left.
func TestConcurrentStartsSpreadOverSpawnerThreads(t *testing.T) {
	const n = 3 * maxSpawners
	procs := make([]*Process, n)
	recs := make([]*recorder, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			recs[i] = newRecorder()
			p, err := Start(Spec{Argv: []string{"cat"}}, recs[i])
			if err != nil {
				t.Error(err)
				return
			}
			procs[i] = p
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	threads := map[*spawnerThread]bool{}
	for _, p := range procs {
		threads[p.thread] = true
	}
	if len(threads) > maxSpawners {
		t.Fatalf("%d spawner threads, at most %d", len(threads), maxSpawners)
	}
	for i, p := range procs {
		_ = p.Close()
		waitExit(t, p, recs[i])
	}
	testkit.Eventually(t, waitLimit, func() bool {
		spawners.mu.Lock()
		defer spawners.mu.Unlock()
		for _, s := range spawners.threads {
			if s != nil {
				return false
			}
		}
		return true
	}, "every spawner thread gone once its agents were reaped")
}
