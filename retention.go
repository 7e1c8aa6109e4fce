package surfaced

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// notifyTimeout bounds telling a session about an artifact.
const notifyTimeout = 5 * time.Second

// notifyArtifact tells a session that one of its artifacts was added or
// deleted, so that it emits the artifact frame (artifact.Config.Notify).
// On one node only a live session is told: one that is not live has no
// clients. In a cluster the request goes to wherever the session lives
// (the cluster places it if it is not live anywhere).
func (r *Runtime) notifyArtifact(ctx context.Context, sessionID string, ev *pb.ArtifactEvent) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	msg := &pb.ArtifactNotice{Caller: &pb.Caller{System: true}, Event: ev}
	var res any
	var err error
	if r.local != nil {
		pid := r.local.Lookup(sessionID)
		if pid == nil {
			return
		}
		res, err = r.System().Root.RequestFuture(pid, msg, notifyTimeout).Result()
	} else {
		res, err = r.Request(ctx, sessionID, msg)
	}
	if e, ok := res.(*pb.ArtifactNoticeResult); ok && e.GetError() != nil {
		err = fmt.Errorf("%s: %s", e.GetError().GetCode(), e.GetError().GetMessage())
	}
	// A session that stopped meanwhile (a dead letter) or is gone has no
	// clients to tell.
	if err != nil && !errors.Is(err, session.ErrNotFound) && !errors.Is(err, actor.ErrDeadLetter) {
		// The artifact is stored; only the frame is lost (clients list).
		r.log.Warn("a session could not be told of an artifact", "session", sessionID, "artifact", ev.GetArtifact().GetId(),
			"event", ev.GetEvent(), "err", err)
	}
}

// ErrSessionNotFound is PurgeSession's error for a session the store does
// not hold.
var ErrSessionNotFound = errors.New("no such session")

// PurgeSession deletes a session and everything of it: its actor stops
// (its clients get end{reason:"deleted"}), the writes it queued land, then
// the store deletes its rows and its artifacts. It does not check who asks:
// the caller did. ErrSessionNotFound when there is no such session.
//
// The deletion is a write like any other (store.Writer.Do): while the
// store cannot be written the purge is refused before anything happens,
// with an error wrapping store.ErrUnavailable; a deletion the store did
// not take wraps it too (the session was not deleted; a live one has
// stopped, and wakes at its next request); one whose answer never came
// wraps store.ErrOutcomeUnknown.
func (r *Runtime) PurgeSession(ctx context.Context, id string) error {
	if !r.writer.Available() {
		return fmt.Errorf("purge session %s: %w", id, store.ErrUnavailable)
	}
	if err := r.stopForPurge(ctx, id); err != nil {
		return err
	}
	if err := r.writer.FlushSession(ctx, id); err != nil {
		return fmt.Errorf("purge session %s: flush its writes: %w", id, err)
	}
	// Idempotent: an attempt after one whose answer was lost deletes the
	// session, or finds it gone.
	err := r.writer.Do(ctx, id, "session purge", true, func(c context.Context) error {
		return r.cfg.Store.DeleteSession(c, id)
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && errors.Is(err, store.ErrOutcomeUnknown):
		// Gone after an attempt whose answer was lost: deleted.
	case errors.Is(err, store.ErrNotFound):
		return ErrSessionNotFound
	case errors.Is(err, store.ErrOutcomeUnknown), errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("purge session %s: %w", id, err)
	case err != nil:
		// Not deleted: the store could not take it.
		return fmt.Errorf("purge session %s: %w: %w", id, store.ErrUnavailable, err)
	}
	// A request that woke the session between the stop and the delete
	// found its rows; it stops now (a later one finds none).
	if err := r.stopForPurge(ctx, id); err != nil {
		r.log.Warn("a session woken while it was purged did not stop", "session", id, "err", err)
	}
	r.forgetPurged(ctx, id)
	r.log.Info("session deleted", "session", id)
	return nil
}

// forgetPurged makes every member of a cluster forget its route to the
// purged session's grain, and its owner, before the purge answers: the
// next request about it, through any node, reads the store and answers not
// found, rather than asking a grain that is gone (a request caught in a
// stopping grain's mailbox is dropped, and waits out its deadline).
func (r *Runtime) forgetPurged(ctx context.Context, id string) {
	r.swap.RLock()
	n := r.node
	r.swap.RUnlock()
	if n == nil {
		return
	}
	if err := n.dir.Forget(ctx, id); err != nil {
		r.log.Warn("purge: members that did not answer may route a request about the purged session to its gone grain once",
			"session", id, "err", err)
	}
}

// stopForPurge stops the session's actor for a purge: on one node the live
// one, if any; in a cluster wherever it lives (a session that is not live
// is placed, ends at once and stops).
func (r *Runtime) stopForPurge(ctx context.Context, id string) error {
	msg := &pb.Stop{Caller: &pb.Caller{System: true}, Reason: session.StopDeleted}
	if r.local != nil {
		pid := r.local.Lookup(id)
		if pid == nil {
			return nil
		}
		timeout := session.DefaultRequestTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		_, err := r.System().Root.RequestFuture(pid, msg, timeout).Result()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			// Stopped meanwhile (a dead letter): nothing to stop.
			return nil
		}
		return err
	}
	_, err := r.Request(ctx, id, msg)
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

// janitor runs the runtime's sweeps on its clock: the bytes of artifact
// puts that never got their record (every artifactSweepEvery), and, with a
// retention, the ended sessions older than it. In a cluster every node
// runs it; a session two nodes purge at once is purged once.
type janitor struct {
	r     *Runtime
	every time.Duration

	mu        sync.Mutex
	timer     clock.Timer
	stopped   bool
	lastSweep time.Time
	done      chan struct{} // closed by each run, for tests
}

// artifactSweepEvery is how often the orphaned bytes of artifacts are swept.
const artifactSweepEvery = 15 * time.Minute

// purgeBatch is how many ended sessions a run asks the store for at once.
const purgeBatch = 100

func (r *Runtime) startJanitor() *janitor {
	j := &janitor{r: r, every: artifactSweepEvery, lastSweep: r.clock.Now(), done: make(chan struct{})}
	if ret := r.cfg.EndedRetention; ret > 0 {
		// Ended sessions go within a quarter of the retention after it
		// passed (within the sweep's period for a long one).
		j.every = min(max(ret/4, time.Second), artifactSweepEvery)
	}
	j.mu.Lock()
	j.timer = r.clock.AfterFunc(j.every, j.run)
	j.mu.Unlock()
	return j
}

func (j *janitor) stop() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	if j.timer != nil {
		j.timer.Stop()
	}
}

func (j *janitor) run() {
	r := j.r
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	now := r.clock.Now()
	if now.Sub(j.lastSweep) >= artifactSweepEvery {
		j.lastSweep = now
		if n, err := r.arts.Sweep(ctx); err != nil {
			r.log.Warn("artifact sweep failed", "err", err)
		} else if n > 0 {
			r.log.Info("artifact sweep: orphaned bytes deleted", "blobs", n)
		}
	}
	if ret := r.cfg.EndedRetention; ret > 0 {
		r.purgeEnded(ctx, now.Add(-ret))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.stopped && !r.stopping.Load() {
		j.timer = r.clock.AfterFunc(j.every, j.run)
	}
	// After the next run is armed: a test that advances the clock once
	// this is closed advances it past that run.
	close(j.done)
	j.done = make(chan struct{})
}

// purgeEnded deletes the sessions that ended before before.
func (r *Runtime) purgeEnded(ctx context.Context, before time.Time) {
	for {
		ids, err := r.cfg.Store.EndedSessions(ctx, before, purgeBatch)
		if err != nil {
			r.log.Warn("retention: the ended sessions could not be listed", "err", err)
			return
		}
		purged := 0
		for _, id := range ids {
			if r.stopping.Load() {
				return
			}
			switch err := r.PurgeSession(ctx, id); {
			case err == nil:
				purged++
			case errors.Is(err, ErrSessionNotFound): // another node was first
			default:
				r.log.Warn("retention: a session could not be deleted", "session", id, "err", err)
			}
		}
		if purged > 0 {
			r.log.Info("retention: ended sessions deleted", "sessions", purged, "endedBefore", before.UTC().Format(time.RFC3339))
		}
		if len(ids) < purgeBatch || purged == 0 {
			return
		}
	}
}

// ran returns a channel closed when the janitor next finishes a run.
func (j *janitor) ran() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done
}
