package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Errors a cluster grain answers instead of the request's own answer; the
// cluster directory turns them into ErrNotFound or a retry elsewhere.
const (
	CodeMoved = "session_moved" // the lease is (or went) elsewhere: ask again
)

// submit writes op for this session, under the session's lease when it has
// one. A write refused because the lease moved stops the session.
func (s *sessionActor) submit(op store.Op) {
	op.SessionID = s.rec.ID
	op.Fence = s.fence
	if s.fence != 0 {
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
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.CheckSessionID(id); err != nil {
		s.unusableFor(ctx, pb.Err(CodeNotFound, "no such session"))
		return
	}
	// Writes this node queued for the session before (a previous activation
	// here) land before the new activation reads.
	_ = s.deps.Writer.FlushSession(c, id)
	rec, err := s.deps.Writer.Store().GetSession(c, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.unusableFor(ctx, pb.Err(CodeNotFound, "no such session"))
		return
	case err != nil:
		s.log.Error("session could not be loaded", "err", err)
		s.unusableFor(ctx, pb.Err(CodeMoved, "the session could not be loaded; try again"))
		return
	}
	if s.deps.Leaser != nil {
		lease, err := s.deps.Leaser.AcquireLease(c, id, s.deps.NodeID, s.deps.leaseTTL())
		if err != nil {
			// Another node still holds it (it is alive, or its lease has not
			// expired yet): this activation must not write. The directory
			// asks again; the holder answers, or the lease expires.
			s.log.Info("session lease held elsewhere; not activating here", "err", err)
			if errors.Is(err, store.ErrLeaseHeld) && s.deps.LeaseConflict != nil {
				s.deps.LeaseConflict(id, lease.Node)
			}
			s.unusableFor(ctx, pb.Err(CodeMoved, "the session is active on another node; try again"))
			return
		}
		s.fence = lease.Token
		self, root := s.self, s.root
		s.leaseTimer = time.AfterFunc(s.deps.leaseTTL()/3, func() { root.Send(self, &renewLease{}) })
		s.log.Info("session lease taken", "node", s.deps.NodeID, "token", lease.Token)
	}
	s.rec = rec
	s.cfg.Record = rec
	s.started(ctx)
}

// unusableFor makes this activation answer every request with e, then go.
func (s *sessionActor) unusableFor(ctx actor.Context, e *pb.Error) {
	s.unusable = e
	// Requests already queued are answered first (poison is a user message).
	ctx.Poison(ctx.Self())
}

// refuse answers a request with s.unusable; it reports whether the message
// was handled.
func (s *sessionActor) refuse(ctx actor.Context) bool {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *cluster.ClusterInit,
		*actor.ReceiveTimeout, *actor.Terminated:
		return false
	}
	if _, ok := ctx.Message().(proto.Message); ok && ctx.Sender() != nil {
		ctx.Respond(s.unusable)
	}
	return true
}

func (s *sessionActor) renewLease(ctx actor.Context) {
	if s.fence == 0 || s.deps.Leaser == nil {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.deps.leaseTTL()/3)
	defer cancel()
	_, err := s.deps.Leaser.RenewLease(c, s.rec.ID, s.fence, s.deps.leaseTTL())
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
	self, root := s.self, s.root
	s.leaseTimer = time.AfterFunc(s.deps.leaseTTL()/3, func() { root.Send(self, &renewLease{}) })
}

// lostLease stops a session whose lease moved to another node (this node was
// cut off, or too slow): it must not write another byte. Its clients
// reconnect and find the session where it lives now.
func (s *sessionActor) lostLease(ctx actor.Context, err error) {
	if s.unusable != nil {
		return
	}
	s.log.Error("session lease lost: another node owns the session now; stopping this activation", "err", err, "token", s.fence)
	s.fence = 0
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
	s.emitEnd("moved")
	s.flush(ctx)
	s.stopAgent(ctx)
	s.unusable = pb.Err(CodeMoved, fmt.Sprintf("session %s moved to another node; try again", s.rec.ID))
	ctx.Stop(ctx.Self())
}

// releaseLease gives the lease back when the activation stops, so that the
// next one (here or elsewhere) need not wait for it to expire.
func (s *sessionActor) releaseLease() {
	if s.leaseTimer != nil {
		s.leaseTimer.Stop()
	}
	if s.fence == 0 || s.deps.Leaser == nil {
		return
	}
	id, token, leaser, w := s.rec.ID, s.fence, s.deps.Leaser, s.deps.Writer
	go func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Release only once our queued writes landed (they carry the token).
		_ = w.FlushSession(c, id)
		_ = leaser.ReleaseLease(c, id, token)
	}()
}
