package agentkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
)

// nonblocking reports whether f's descriptor is in non-blocking mode,
// without changing it (f.Fd would make it blocking).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		flags = int(r)
		if e != 0 {
			ferr = e
		}
	}); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&syscall.O_NONBLOCK != 0
}

// A pipe, as the daemon gives an agent its stdin (blocking), is read
// through the poller; a file or another reader is read as it is.
func TestPollable(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r.Fd() // blocking, as a child's inherited stdin is
	got, release := pollable(r)
	pf, ok := got.(*os.File)
	if !ok || pf == r {
		t.Fatalf("pollable(pipe) = %T %v, want a new *os.File", got, got)
	}
	if !nonblocking(t, pf) {
		t.Fatal("the pipe is read in blocking mode")
	}
	if _, err := w.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pf).ReadString('\n')
	if err != nil || line != "line\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	release()
	r.Close()

	file, err := os.CreateTemp(t.TempDir(), "input")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if got, release := pollable(file); got != file {
		t.Errorf("pollable(regular file) = %v, want the file itself", got)
	} else {
		release()
	}
	br := bytes.NewReader(nil)
	if got, release := pollable(br); got != br {
		t.Errorf("pollable(bytes.Reader) = %v, want it as it is", got)
	} else {
		release()
	}
}

// Run on the pipes a daemon gives an agent: dispatches are answered, and
// Run returns when its context ends even while a read waits (the
// descriptor pollable opened is closed).
func TestRunOnOSPipes(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	defer outR.Close()
	inR.Fd()
	a, logs := newTestAgent(Options{})
	AddSurface(a, counterSurface())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- a.Run(ctx, inR, outW)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	next := func() map[string]any {
		t.Helper()
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read: %v; log:\n%s", err, logs.String())
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}
	if m := next(); m["type"] != agentproc.TypeAgentReady {
		t.Fatalf("first line %v", m)
	}
	for i := range 3 {
		line, _ := json.Marshal(agentproc.SurfaceDispatch{Type: agentproc.TypeSurfaceDispatch, ID: "d" + strings.Repeat("x", i),
			Domain: "counter", Action: "increment", State: json.RawMessage(`{"count":1,"log":[]}`), Rev: 1})
		if _, err := inW.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
		if m := next(); m["type"] != agentproc.TypeSurfaceDispatchResult || m["result"].(map[string]any)["ok"] != true {
			t.Fatalf("dispatch %d answered %v", i, m)
		}
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil && err != context.Canceled {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	inR.Close()
}
