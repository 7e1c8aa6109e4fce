package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// A request whose context ends is withdrawn at once: the caller gets the
// context's error, and the request's future leaves the process registry,
// which is how a domain actor knows the command's caller is gone.
func TestRequestWithdrawnWhenTheCallerLeaves(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	senders := make(chan *actor.PID, 1)
	silent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*pb.RunCommand); ok {
			senders <- ctx.Sender() // and never answer
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := request(ctx, sys.Root, silent, &pb.RunCommand{Domain: "d", Action: "a"}, time.Hour)
		errc <- err
	}()
	sender := <-senders
	if _, ok := sys.ProcessRegistry.GetLocal(sender.Id); !ok {
		t.Fatal("the request's future is not registered while it waits")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not return when its context ended")
	}
	if _, ok := sys.ProcessRegistry.GetLocal(sender.Id); ok {
		t.Fatal("the withdrawn request's future is still registered")
	}
}

func TestWithDeadline(t *testing.T) {
	dl := time.Now().Add(30 * time.Second)
	cmd := &pb.RunCommand{Domain: "d"}
	got := WithDeadline(cmd, dl).(*pb.RunCommand)
	if cmd.GetDeadlineMs() != 0 {
		t.Fatal("the caller's message was changed")
	}
	if want := dl.Add(-time.Second).UnixMilli(); got.GetDeadlineMs() != want {
		t.Fatalf("deadline %d, want %d (a second before the caller's)", got.GetDeadlineMs(), want)
	}
	short := time.Now().Add(2 * time.Second)
	if ms := WithDeadline(cmd, short).(*pb.RunCommand).GetDeadlineMs(); ms > short.Add(-150*time.Millisecond).UnixMilli() || ms < short.Add(-300*time.Millisecond).UnixMilli() {
		t.Fatalf("a 2 s request's command is due %d ms before its caller's deadline, want about a tenth", short.UnixMilli()-ms)
	}
	set := &pb.RunCommand{DeadlineMs: 42}
	if WithDeadline(set, dl) != set {
		t.Fatal("a command with a deadline got another")
	}
	other := &pb.Prompt{}
	if WithDeadline(other, dl) != other {
		t.Fatal("a prompt was stamped")
	}
}

// An answer that arrives as the caller leaves: one of the two wins, and
// nothing is written twice (run with -race; a protoactor future completed
// from both sides raced on its result here).
func TestRequestAnsweredAsTheCallerLeaves(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	answer := &pb.Error{Code: "answered"}
	echo := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*pb.RunCommand); ok {
			ctx.Respond(answer)
		}
	}))
	for range 500 {
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		res, err := request(ctx, sys.Root, echo, &pb.RunCommand{Domain: "d", Action: "a"}, time.Hour)
		switch {
		case err == nil && res != answer:
			t.Fatalf("answered with %v", res)
		case err != nil && !errors.Is(err, context.Canceled):
			t.Fatalf("err = %v", err)
		}
		cancel()
	}
}

// An idle session may leave only when no request is on its way to it; once
// it may, the directory has forgotten it, so the next request starts a new
// activation instead of reaching a stopping mailbox (whose last messages
// protoactor drops unanswered).
func TestIdleSessionLeavesOnlyWithNoRequestOnItsWay(t *testing.T) {
	pid := actor.NewPID("nonhost", "session-x-1")
	l := &Local{active: map[string]*liveSession{"x": {pid: pid, owner: "o"}}, activating: map[string]*sync.Mutex{}}
	got, err := l.activate(context.Background(), "x", "o", false, true)
	if err != nil || !got.Equal(pid) {
		t.Fatalf("activate: %v %v", got, err)
	}
	if l.mayLeave("x", pid) {
		t.Fatal("the session may leave with a request on its way")
	}
	if l.Lookup("x") == nil {
		t.Fatal("the refused leave forgot the activation")
	}
	l.arrived("x", pid)
	if !l.mayLeave("x", pid) {
		t.Fatal("the session may not leave once the request was answered")
	}
	if l.Lookup("x") != nil {
		t.Fatal("the directory still sends requests to the leaving activation")
	}
	// A request counted against an activation that left is not counted
	// against the next one.
	l.arrived("x", pid)
	if !l.mayLeave("x", actor.NewPID("nonhost", "session-x-2")) {
		t.Fatal("an activation the directory does not know may always leave")
	}
}

// A session actor runs as soon as it is spawned, before the directory has
// recorded it with the request that spawned it. Should it go idle in that
// moment (its idle timer due at once), the directory must say no: the
// request is on its way to it and would reach a stopping actor. Once the
// activation is recorded the usual rule answers; an activation the
// directory forgot may leave.
func TestMayLeaveIsNoWhileTheActivationIsBeingRecorded(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	l := NewLocal(sys, &Deps{})
	spawned := actor.NewPID(sys.Address(), "session-s-1")

	l.mu.Lock()
	l.activating["s"] = &sync.Mutex{}
	l.mu.Unlock()
	if l.mayLeave("s", spawned) {
		t.Fatal("an activation not recorded yet may leave while its first request is on its way")
	}

	l.mu.Lock()
	delete(l.activating, "s")
	l.active["s"] = &liveSession{pid: spawned, inFlight: 1}
	l.mu.Unlock()
	if l.mayLeave("s", spawned) {
		t.Fatal("an activation may leave with a request on its way")
	}
	l.arrived("s", spawned)
	if !l.mayLeave("s", spawned) {
		t.Fatal("an activation with nothing on its way may not leave")
	}
	if !l.mayLeave("s", spawned) {
		t.Fatal("a forgotten activation may not leave")
	}
}
