package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/surfaced/surfaced/actors/session/internal/lease"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Errors a cluster grain answers instead of the request's own answer; the
// cluster directory turns them into ErrNotFound or a retry elsewhere.
const (
	CodeMoved = codes.SessionMoved // the lease is (or went) elsewhere: ask again
)

// fence is the lease token this activation's writes carry (zero on a single
// node).
func (s *sessionActor) fence() store.Fence { return s.lease.Fence() }

// submit writes op for this session, under the session's lease when it has
// one. A write refused because the lease moved stops the session.
func (s *sessionActor) submit(op store.Op) {
	op.SessionID = s.rec.ID
	op.Fence = s.fence()
	if op.Fence != 0 {
		done := op.Done
		self, root := s.self, s.root
		op.Done = func(err error) {
			if errors.Is(err, store.ErrFenced) {
				root.Send(self, &fencedOut{err: err})
			}
			if done != nil {
				done(err)
			}
		}
	}
	s.deps.Writer.Submit(op)
}

// clusterInit runs when the cluster names this grain: load the session, take
// its lease, then start as a single-node activation does.
func (s *sessionActor) clusterInit(ctx actor.Context, m *cluster.ClusterInit) {
	id := m.Identity.GetIdentity()
	s.self, s.root = ctx.Self(), ctx.ActorSystem().Root
	s.log = s.log.With("session", id)
	s.diagLog = s.newDiagLog()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.CheckSessionID(id); err != nil {
		s.refuseFor(ctx, notFound())
		return
	}
	// Writes this node queued for the session before (a previous activation
	// here) land before the new activation reads.
	_ = s.deps.Writer.FlushSession(c, id)
	rec, err := s.deps.Writer.Store().GetSession(c, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.refuseFor(ctx, notFound())
		return
	case err != nil:
		s.log.Error("session could not be loaded", "err", err)
		s.refuseFor(ctx, pb.Err(CodeMoved, "the session could not be loaded; try again"))
		return
	}
	// A session woken here counts against this node's session limit.
	if err := s.deps.admit(); err != nil {
		s.log.Warn("session not activated: this node runs as many sessions as it may", "err", err)
		s.refuseFor(ctx, pb.Err(CodeTooManySessions, "this node runs as many sessions as it may; try again later"))
		return
	}
	if s.deps.Leaser != nil {
		h, err := lease.Acquire(c, s.deps.Leaser, id, s.deps.NodeID, s.deps.leaseTTL())
		if err != nil {
			// Another node still holds it (it is alive, or its lease has not
			// expired yet): this activation must not write. The directory
			// asks again; the holder answers, or the lease expires.
			s.log.Info("session lease held elsewhere; not activating here", "err", err)
			var held *lease.ErrHeld
			if errors.As(err, &held) && s.deps.LeaseConflict != nil {
				s.deps.LeaseConflict(id, held.Holder, held.Expires)
			}
			s.refuseFor(ctx, pb.Err(CodeMoved, "the session is active on another node; try again"))
			return
		}
		s.lease = h
		s.scheduleRenewal()
		s.log.Info("session lease taken", "node", s.deps.NodeID, "token", h.Fence())
	}
	s.rec = rec
	s.cfg.Record = rec
	s.behavior.Become(s.live)
	s.started(ctx)
}

func (s *sessionActor) scheduleRenewal() {
	self, root := s.self, s.root
	s.leaseTimer = s.clock.AfterFunc(s.lease.RenewEvery(), func() { root.Send(self, &renewLease{}) })
}

func (s *sessionActor) renewLease(ctx actor.Context) {
	if s.lease == nil {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.lease.RenewEvery())
	defer cancel()
	err := s.lease.Renew(c)
	switch {
	case errors.Is(err, store.ErrFenced):
		s.lostLease(ctx, err)
		return
	case err != nil:
		// The store is unreachable: keep trying. Writes fail meanwhile and
		// nothing unwritten is acknowledged; if another node takes over, the
		// first write or renewal after the store comes back says so.
		s.log.Warn("session lease renewal failed; retrying", "err", err)
	}
	if s.strayed(ctx) {
		return
	}
	s.scheduleRenewal()
}

// strayRenewals is how many renewals in a row (a lease's lifetime) must find
// the session placed on another node before it gives itself up: views of the
// members differ for a moment while a node joins or leaves.
const strayRenewals = 3

// strayed stops an activation that lives where the cluster does not place
// the session, and reports whether it did. The placement activates a session
// wherever it is asked to, and stops it when the topology changes and the
// session belongs elsewhere; a request that reaches a node whose view has
// changed already (a node joining, seen here and not yet by the sender)
// activates the session on a node that does not own it, and no later change
// stops it: every other node sends the session's requests to its owner, which
// cannot take the lease this activation renews. Stopping releases the lease,
// so the owner takes the session at its next request.
func (s *sessionActor) strayed(ctx actor.Context) bool {
	if s.deps.Owns == nil || s.deps.Owns(s.rec.ID) {
		s.stray = 0
		return false
	}
	s.stray++
	if s.stray < strayRenewals {
		return false
	}
	s.log.Warn("the session is placed on another node now; stopping this activation so that the owner takes it", "renewals", s.stray)
	ctx.Poison(ctx.Self())
	return true
}

// lostLease stops a session whose lease moved to another node (this node was
// cut off, or too slow): it must not write another byte. Its clients
// reconnect and find the session where it lives now.
func (s *sessionActor) lostLease(ctx actor.Context, err error) {
	if s.refusal != nil || s.lease == nil {
		return
	}
	s.log.Error("session lease lost: another node owns the session now; stopping this activation", "err", err, "token", s.lease.Fence())
	s.lease = nil
	if s.leaseTimer != nil {
		s.leaseTimer.Stop()
	}
	// Writes waiting for durability were refused: their callers ask again
	// (the cluster directory does, and finds the new owner).
	for _, w := range s.kv.RefuseAll() {
		if r := w.Reply.(kvReply); r.sender != nil {
			ctx.Send(r.sender, &pb.SetStateResult{Error: pb.Err(CodeMoved, "the session moved to another node; try again")})
		}
	}
	s.answerPrompts(ctx, pb.Err(CodeMoved, "the session moved to another node; send the prompt again"))
	s.refuseWaiting(ctx, pb.Err(CodeMoved, "the session moved to another node; try again"))
	s.endStream("moved")
	s.flush(ctx)
	s.stopAgent(ctx)
	s.refusal = pb.Err(CodeMoved, fmt.Sprintf("session %s moved to another node; try again", s.rec.ID))
	s.behavior.Become(s.refusing)
	s.leave(ctx)
}

// releaseLease gives the lease back when the activation stops, so that the
// next one (here or elsewhere) need not wait for it to expire.
func (s *sessionActor) releaseLease() {
	if s.leaseTimer != nil {
		s.leaseTimer.Stop()
	}
	id, w := s.rec.ID, s.deps.Writer
	s.lease.Release(func(c context.Context) error { return w.FlushSession(c, id) })
	s.lease = nil
}
