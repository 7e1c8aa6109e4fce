package session

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// unavailableReadTimeout bounds a transcript read while the writer says the
// store cannot be written.
const unavailableReadTimeout = 2 * time.Second

// transcriptLog counts the session's transcript appends, so that a read
// waits until every entry submitted before it is in the store: a reader
// always sees its own turns.
type transcriptLog struct {
	submitted, done uint64
	waiting         []func()
}

func (s *sessionActor) appendTranscript(entries []store.Entry) {
	if len(entries) == 0 {
		return
	}
	s.tr.submitted++
	self, root := s.self, s.root
	s.submit(store.Op{Transcript: entries, Done: func(err error) { root.Send(self, &trPersisted{err: err}) }})
}

func (s *sessionActor) trPersisted(m *trPersisted) {
	if m.err != nil {
		s.log.Error("transcript write failed", "err", m.err)
	}
	s.tr.done++
	if s.tr.done != s.tr.submitted {
		return
	}
	waits := s.tr.waiting
	s.tr.waiting = nil
	for _, f := range waits {
		f()
	}
}

// getMessages answers with the transcript from the store, once every entry
// this actor submitted is written.
func (s *sessionActor) getMessages(ctx actor.Context, m *pb.GetMessages) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.Transcript{Error: notFound()})
		return
	}
	sender, root, w, id, log := ctx.Sender(), s.root, s.deps.Writer, s.rec.ID, s.log
	read := func() {
		// Read off the actor's goroutine: a long transcript must not stall it.
		go func() {
			// A store known to be unavailable gets a short while: a read
			// may still work (another process holds SQLite's write lock),
			// but a frozen server would hold the reader to the bound.
			timeout := loadTimeout
			if !w.Available() {
				timeout = unavailableReadTimeout
			}
			c, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			entries, err := w.Store().Transcript(c, id)
			if err != nil {
				log.Warn("the transcript could not be read", "err", err)
				root.Send(sender, &pb.Transcript{Error: pb.Err(CodeStoreUnavailable, "the transcript could not be read from the store; try again")})
				return
			}
			root.Send(sender, transcriptOf(entries))
		}()
	}
	if s.tr.done == s.tr.submitted {
		read()
		return
	}
	s.tr.waiting = append(s.tr.waiting, read)
}

// transcriptOf is the transcript as clients read it: a prompt's user
// entry is written when the prompt is taken, and again by the turn that
// answers it when it had to wait (with that turn's id, after the turn
// before it): the last one stands.
func transcriptOf(entries []store.Entry) *pb.Transcript {
	last := map[uint64]int{}
	for i, e := range entries {
		if e.Role == "user" && e.PromptID != 0 {
			last[e.PromptID] = i
		}
	}
	out := &pb.Transcript{Entries: make([]*pb.TranscriptEntry, 0, len(entries))}
	for i, e := range entries {
		if e.Role == "user" && e.PromptID != 0 && last[e.PromptID] != i {
			continue
		}
		out.Entries = append(out.Entries, &pb.TranscriptEntry{Role: e.Role, Text: e.Text, ToolCallId: e.ToolCallID,
			ToolName: e.ToolName, ToolArgs: e.ToolArgs, ToolResult: e.ToolResult, IsError: e.IsError,
			AtMs: e.At.UnixMilli(), Via: e.Via, TurnId: e.TurnID, PromptId: e.PromptID, AttachmentIds: e.AttachmentIDs})
	}
	return out
}
