package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/surfaced/surfaced/store"
)

// isDeadlock reports whether err is PostgreSQL's "deadlock detected".
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01" || err != nil && strings.Contains(err.Error(), "deadlock detected")
}

// Sessions are purged (DeleteSession, through one node's pool) while
// another node writes them under their leases — KV entries new and
// rewritten, transcript appends, session updates, lease renewals — and
// artifacts are put into them through a third pool, as a purge under load
// does in a cluster. No statement of either side may end in PostgreSQL's
// "deadlock detected": the purge takes its locks in the order the writes
// do (the lease, then the session, then its rows). Every purge succeeds,
// and every write fails once its session is gone (not found or fenced),
// never half-applied. Run under -race, many rounds.
func TestPurgeWhileOtherNodesWrite(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema()
	purger := mustOpen(t, dsn, WithSchema(schema))
	defer purger.Close()
	writer := mustOpen(t, dsn, WithSchema(schema))
	defer writer.Close()
	uploader := mustOpen(t, dsn, WithSchema(schema))
	defer uploader.Close()
	ctx := context.Background()

	rounds, sessions := 8, 24
	if testing.Short() {
		rounds = 2
	}
	var deadlocks []string
	var mu sync.Mutex
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if isDeadlock(err) {
			deadlocks = append(deadlocks, fmt.Sprintf("%s: %v", what, err))
			return
		}
		t.Errorf("%s: %v", what, err)
	}
	// gone is what a write of a purged session may fail with.
	gone := func(err error) bool {
		return err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrFenced) ||
			errors.Is(err, store.ErrBlobGone)
	}
	for round := 0; round < rounds; round++ {
		ids := make([]string, sessions)
		fences := make([]store.Fence, sessions)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-s%d", round, i)
			if err := purger.CreateSession(ctx, store.Session{ID: ids[i], Owner: "alice", Status: "ready"}); err != nil {
				t.Fatal(err)
			}
			l, err := writer.AcquireLease(ctx, ids[i], "10.0.0.2:7900#b", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			fences[i] = store.Fence(l.Token)
			if err := writer.PutKV(ctx, ids[i], fences[i], []store.KV{{Key: "a", Value: []byte("1"), Rev: 1}, {Key: "b", Value: []byte("1"), Rev: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, id := range ids {
			i, fence := i, fences[i]
			wg.Add(3)
			// The node holding the session writes it under its lease.
			go func() {
				defer wg.Done()
				<-start
				for n := uint64(2); n < 40; n++ {
					// A rewrite of existing rows and a new row in one statement.
					err := writer.PutKV(ctx, id, fence, []store.KV{{Key: "a", Value: []byte("2"), Rev: n}, {Key: fmt.Sprintf("k%d", n), Value: []byte("1"), Rev: 1},
						{Key: "b", Value: []byte("2"), Rev: n}})
					if !gone(err) {
						fail("put kv "+id, err)
						return
					}
					if err != nil {
						return
					}
					// Unfenced, as a single node writes (one statement, and
					// a batch of several sessions).
					err = writer.PutKV(ctx, id, 0, []store.KV{{Key: "b", Value: []byte("3"), Rev: n + 100}, {Key: fmt.Sprintf("u%d", n), Value: []byte("1"), Rev: 1}})
					if !gone(err) {
						fail("put kv unfenced "+id, err)
						return
					}
					errs, err := writer.PutKVBatch(ctx, []store.KVBatch{
						{SessionID: id, Entries: []store.KV{{Key: "a", Value: []byte("3"), Rev: n + 100}, {Key: fmt.Sprintf("v%d", n), Value: []byte("1"), Rev: 1}}},
						{SessionID: ids[(i+1)%len(ids)], Entries: []store.KV{{Key: "c", Value: []byte("3"), Rev: n}}},
					})
					for _, e := range append(errs, err) {
						if !gone(e) {
							fail("put kv batch "+id, e)
							return
						}
					}
					status := "ready"
					if err := writer.UpdateSession(ctx, id, fence, store.SessionUpdate{Status: &status}); !gone(err) {
						fail("update session "+id, err)
						return
					}
					if err := writer.AppendTranscript(ctx, id, fence, []store.Entry{{Role: "user", Text: "hi"}}); !gone(err) {
						fail("append transcript "+id, err)
						return
					}
					if _, err := writer.RenewLease(ctx, id, int64(fence), time.Minute); !gone(err) {
						fail("renew lease "+id, err)
						return
					}
				}
			}()
			// Another node puts artifacts into it.
			go func() {
				defer wg.Done()
				<-start
				for n := 0; n < 6; n++ {
					b, err := uploader.WriteBlob(ctx, bytes.NewReader([]byte(fmt.Sprintf("%s-%d", id, n%3))), -1)
					if err != nil {
						fail("write blob "+id, err)
						return
					}
					_, err = uploader.CommitArtifact(ctx, store.Artifact{ID: fmt.Sprintf("att_%s_%d", id, n), SessionID: id, MediaType: "text/plain"}, b, 1<<20)
					if err != nil {
						_ = uploader.DiscardBlob(ctx, b)
					}
					if !gone(err) {
						fail("commit artifact "+id, err)
						return
					}
					if err != nil {
						return
					}
				}
			}()
			// The purge, somewhere in the middle.
			go func() {
				defer wg.Done()
				<-start
				time.Sleep(time.Duration(len(id)%7) * time.Millisecond)
				if err := purger.DeleteSession(ctx, id); err != nil {
					fail("delete session "+id, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, id := range ids {
			if _, err := purger.GetSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("session %s after its purge: %v", id, err)
			}
			if kv, err := purger.LoadKV(ctx, id); !errors.Is(err, store.ErrNotFound) && (err != nil || len(kv) != 0) {
				t.Errorf("session %s's KV after its purge: %v %v", id, kv, err)
			}
			if page, _, err := purger.ListArtifacts(ctx, store.ArtifactQuery{SessionID: id}); err != nil || len(page) != 0 {
				t.Errorf("session %s's artifacts after its purge: %d %v", id, len(page), err)
			}
		}
		if len(deadlocks) > 0 {
			t.Fatalf("round %d: %d statements ended in a deadlock, e.g. %s", round, len(deadlocks), deadlocks[0])
		}
	}
}

// A failed write's outcome as the store classifies it: the store's own
// answers (a quota, a blob gone, too large, the source failing) and
// anything that failed before a transaction's commit was sent were not
// applied; a statement sent whose answer never came may have been.
func TestUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"over the quota", fmt.Errorf("commit: %w: 10 bytes stored, 5 more, quota 12", store.ErrQuotaExceeded), false},
		{"the blob is gone", store.ErrBlobGone, false},
		{"too large", fmt.Errorf("chunk 3: %w", store.ErrTooLarge), false},
		{"the source failed", fmt.Errorf("%w: connection reset by peer", store.ErrSourceFailed), false},
		{"a statement of a transaction before its commit", &rolledBack{err: errors.New("unexpected EOF")}, false},
		{"not found", store.ErrNotFound, false},
		{"the server's error for the statement", &pgconn.PgError{Code: "23505", Severity: "ERROR"}, false},
		{"the server shutting down", &pgconn.PgError{Code: "57P01", Severity: "FATAL"}, true},
		{"the connection lost with the statement sent", errors.New("unexpected EOF"), true},
	} {
		if got := unknownOutcome(tc.err); got != tc.want {
			t.Errorf("%s (%v): unknown = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
