package mcpgw

import (
	"context"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// sink takes a session's frames for the mount: a prompt's turn, the
// revs of subscribed resources, the pending dialogs. Its callbacks run on
// the subscriber actor's goroutine, one at a time.
type sink struct {
	frames func(frames []*pb.Frame, final bool)
	gone   func()
}

func (k *sink) Frames(_ actor.Context, b *pb.Frames) bool {
	k.frames(b.GetFrames(), b.GetFinal())
	return true
}

func (k *sink) Gone(actor.Context) {
	if k.gone != nil {
		k.gone()
	}
}

// watch subscribes a sink to a session's frames as the caller (a session
// the caller does not own answers not_found, as a missing one does). The
// returned stop ends the subscription.
func (s *Server) watch(ctx context.Context, sessionID, subject string, from pb.SubscribeFrom, k *sink) (stop func(), e *toolError) {
	root := s.rt.System().Root
	pid := root.Spawn(delivery.Props(k, nil))
	stop = func() { root.Stop(pid) }
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	r, err := delivery.Subscribe(ctx, s.rt, sessionID, pid, &pb.Subscribe{ClientKind: "mcp", Subject: subject, From: from})
	if err != nil {
		stop()
		return nil, s.requestErr(sessionID, err)
	}
	if r.GetError() != nil {
		stop()
		if r.GetError().GetCode() == codes.SessionEnded {
			return nil, fail(codes.SessionEnded, "session %q has ended", sessionID)
		}
		return nil, refused(sessionID, r.GetError())
	}
	return stop, nil
}

// dialog is an agent dialog waiting for an answer.
type dialog struct {
	ID      string   `json:"id"`
	Method  string   `json:"method"`
	Title   string   `json:"title,omitempty"`
	Message string   `json:"message,omitempty"`
	Options []string `json:"options,omitempty"`
}

func dialogOf(u *pb.UIRequestEvent) (dialog, bool) {
	switch u.GetMethod() {
	case "select", "confirm", "input", "editor":
		return dialog{ID: u.GetId(), Method: u.GetMethod(), Title: u.GetTitle(), Message: u.GetMessage(), Options: u.GetOptions()}, true
	}
	return dialog{}, false
}

// pendingDialogs are the session's dialogs that wait for an answer: the
// sticky state of a fresh subscription holds them until they are resolved.
func (s *Server) pendingDialogs(ctx context.Context, sessionID string) ([]dialog, *toolError) {
	type batch struct{ frames []*pb.Frame }
	got := make(chan batch, 1)
	k := &sink{frames: func(frames []*pb.Frame, _ bool) {
		select {
		case got <- batch{frames: slices.Clone(frames)}:
		default:
		}
	}}
	stop, e := s.watch(ctx, sessionID, subject(ctx), pb.SubscribeFrom_SUBSCRIBE_FROM_UNSPECIFIED, k)
	if e != nil {
		return nil, e
	}
	defer stop()
	out := []dialog{}
	select {
	case b := <-got:
		for _, f := range b.frames {
			if u := f.GetEvent().GetUiRequest(); u != nil && !u.GetResolved() {
				if d, ok := dialogOf(u); ok {
					out = append(out, d)
				}
			}
		}
	case <-ctx.Done():
		return nil, s.requestErr(sessionID, ctx.Err())
	}
	return out, nil
}
