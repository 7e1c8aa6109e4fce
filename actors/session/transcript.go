package session

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

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
	sender, root, st, id := ctx.Sender(), s.root, s.deps.Writer.Store(), s.rec.ID
	read := func() {
		// Read off the actor's goroutine: a long transcript must not stall it.
		go func() {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			entries, err := st.Transcript(c, id)
			if err != nil {
				root.Send(sender, &pb.Transcript{Error: pb.Err(CodeInternal, "the transcript could not be read")})
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

func transcriptOf(entries []store.Entry) *pb.Transcript {
	out := &pb.Transcript{Entries: make([]*pb.TranscriptEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, &pb.TranscriptEntry{Role: e.Role, Text: e.Text, ToolCallId: e.ToolCallID,
			ToolName: e.ToolName, ToolArgs: e.ToolArgs, ToolResult: e.ToolResult, IsError: e.IsError,
			AtMs: e.At.UnixMilli(), Via: e.Via, TurnId: e.TurnID, PromptId: e.PromptID})
	}
	return out
}
