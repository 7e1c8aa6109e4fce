package config

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/conc/panics"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Builds run at most parallel at once, on at most parallel goroutines (no
// goroutine is started to wait for its turn), and their errors come back
// in the agents' order.
func TestBuildAllIsBounded(t *testing.T) {
	const n, parallel = 16, 2
	release := make(chan struct{})
	var running, most atomic.Int32
	base := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() {
		done <- buildAll(n, parallel, func(j int) error {
			now := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			<-release
			if j%5 == 0 {
				return fmt.Errorf("agent %d failed", j)
			}
			return nil
		})
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return running.Load() == parallel }, "%d builds running", parallel)
	// The caller of buildAll, the builds running, and a little slack for
	// the runtime's own; never a goroutine per agent.
	if extra := runtime.NumGoroutine() - base; extra > 1+parallel+2 {
		t.Errorf("%d goroutines for %d builds of which %d may run: one per agent waits for its turn", extra, n, parallel)
	}
	close(release)
	err := <-done
	if most.Load() != parallel {
		t.Errorf("at most %d builds ran at once, want %d", most.Load(), parallel)
	}
	want := errors.Join(errors.New("agent 0 failed"), errors.New("agent 5 failed"), errors.New("agent 10 failed"), errors.New("agent 15 failed"))
	if err == nil || err.Error() != want.Error() {
		t.Errorf("errors %q, want %q in the agents' order", err, want)
	}
}

// A build that panics does not crash the process from a goroutine of its
// own: the other builds finish, and the panic is raised in buildAll's
// caller with the stack of where it happened.
func TestBuildAllRaisesAPanicInTheCaller(t *testing.T) {
	var finished sync.Map
	r := panics.Try(func() {
		_ = buildAll(6, 2, func(j int) error {
			if j == 3 {
				explode()
			}
			finished.Store(j, true)
			return nil
		})
	})
	if r == nil {
		t.Fatal("the panic of a build vanished")
	}
	inner, ok := r.Value.(*panics.Recovered)
	if !ok {
		t.Fatalf("panic value %T %v, want the build's *panics.Recovered", r.Value, r.Value)
	}
	if inner.Value != "the compiler exploded" || !strings.Contains(string(inner.Stack), "config.explode") {
		t.Errorf("panic %v without the stack where it happened:\n%s", inner.Value, inner.Stack)
	}
	for j := range 6 {
		if _, ok := finished.Load(j); !ok && j != 3 {
			t.Errorf("build %d did not run", j)
		}
	}
}

//go:noinline
func explode() { panic("the compiler exploded") }
