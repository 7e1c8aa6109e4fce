package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Node scenarios: a script of an npm fixture (testdata/npm/<fixture>) that
// drives an official SDK against a real daemon and talks to its Go test in
// lines: it writes one JSON object per line on stdout ({"step": ...}), and
// reads a line on stdin where the test acts in between.

// Scenario is one running node scenario.
type Scenario struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any
	stderr *lockedBuffer
	done   chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// NodeFixture is NPM for testdata/npm/<fixture> with the npm package pkg
// installed: without node or the fixture installed, Missing.
func NodeFixture(t *testing.T, fixture, pkg string) string {
	t.Helper()
	return NPM(t, "testdata/npm/"+fixture, pkg+"/package.json")
}

// StartScenario runs `node scenarios.mjs <scenario>` in dir with env.
func StartScenario(t *testing.T, dir, scenario string, env ...string) *Scenario {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "node", "scenarios.mjs", scenario)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	s := &Scenario{t: t, cmd: cmd, lines: make(chan map[string]any, 16), stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsed": sc.Text()}
			}
			s.lines <- m
		}
		close(s.lines)
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = s.stdin.Close()
		_ = cmd.Process.Kill()
	})
	return s
}

// Next is the scenario's next line, which must be step.
func (s *Scenario) Next(step string) map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.lines:
		if !ok {
			err := <-s.done
			s.t.Fatalf("the scenario ended before %q: %v\nstderr:\n%s", step, err, s.stderr.String())
		}
		if m["step"] != step {
			s.t.Fatalf("the scenario said %v, want step %q\nstderr:\n%s", m, step, s.stderr.String())
		}
		return m
	case <-time.After(2 * time.Minute):
		s.t.Fatalf("the scenario said nothing for 2 min (waiting for %q)\nstderr:\n%s", step, s.stderr.String())
	}
	return nil
}

// Go tells the scenario to go on.
func (s *Scenario) Go() {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, "go\n"); err != nil {
		s.t.Fatal(err)
	}
}

// Wait waits for the scenario to exit 0.
func (s *Scenario) Wait() {
	s.t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Fatalf("the scenario failed: %v\nstderr:\n%s", err, s.stderr.String())
		}
	case <-time.After(time.Minute):
		s.t.Fatalf("the scenario did not exit\nstderr:\n%s", s.stderr.String())
	}
}
