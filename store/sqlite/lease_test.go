package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// TestMigrateFromV1 opens a database of the first schema, as the first
// release wrote it, with this build: its transcript keeps its entries (turn
// and prompt ids 0, which it did not keep) and leases work.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := createAtVersion(t, dir, 1)
	for _, q := range []string{
		`INSERT INTO sessions VALUES ('s', 'alice', 'pi', '', '/', 'ready', 1, 2)`,
		`INSERT INTO transcript (session_id, seq, role, text, tool_call_id, tool_name, is_error, via, at)
			VALUES ('s', 1, 'user', 'hello', '', '', 0, 'browser', 3)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := mustOpen(t, dir)
	defer s.Close()
	more := store.Entry{Role: "assistant", Text: "hi", TurnID: 7, PromptID: 9, At: fromMillis(4)}
	if err := s.AppendTranscript(ctx, "s", 0, []store.Entry{more}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Transcript(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Text != "hello" || got[0].TurnID != 0 || got[1].TurnID != 7 || got[1].PromptID != 9 {
		t.Errorf("transcript after migrating: %+v", got)
	}
	l, err := s.AcquireLease(ctx, "s", "node-a", time.Minute)
	if err != nil || l.Token != 1 {
		t.Fatalf("acquire after migrating: %+v, %v", l, err)
	}
}

// TestLeasesAcrossHandles has two Stores on one file, as two daemons on one
// machine would: a lease held through one holds off the other, and a
// takeover through one fences the writes of the other, with nothing landing
// after it.
func TestLeasesAcrossHandles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := mustOpen(t, dir), mustOpen(t, dir)
	defer a.Close()
	defer b.Close()
	if err := a.CreateSession(ctx, store.Session{ID: "shared", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	la, err := a.AcquireLease(ctx, "shared", "node-a", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(ctx, "shared", "node-b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("acquire through the other handle: %v, want ErrLeaseHeld", err)
	}

	done := make(chan error, 1)
	go func() {
		fence := store.Fence(la.Token)
		for i := 1; i < 1_000_000; i++ {
			if err := a.PutKV(ctx, "shared", fence, []store.KV{{Key: "k", Value: []byte(fmt.Sprint(i)), Rev: uint64(i)}}); err != nil {
				done <- err
				return
			}
		}
		done <- errors.New("never fenced")
	}()
	var lb store.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		lb, err = b.AcquireLease(ctx, "shared", "node-b", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("takeover: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want, err := b.LoadKV(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrFenced) {
		t.Fatalf("node-a's writes ended with %v, want ErrFenced", err)
	}
	got, err := b.LoadKV(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a write landed after the takeover (token %d → %d): %v, then %v", la.Token, lb.Token, want, got)
	}
}
