package session

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// DaemonKeyPrefix starts the idempotency keys the daemon makes up for the
// commands a client sent without one.
const DaemonKeyPrefix = "daemon:"

// WithIdempotencyKey returns msg with an idempotency key of the daemon's own
// when it is a command without one, so that a command the directory sends
// again (its node died before answering) is answered with what happened to
// it rather than run twice. Other messages come back as they are.
func WithIdempotencyKey(msg proto.Message) proto.Message {
	c, ok := msg.(*pb.RunCommand)
	if !ok || c.GetIdempotencyKey() != "" {
		return msg
	}
	c = proto.Clone(c).(*pb.RunCommand)
	c.IdempotencyKey = DaemonKeyPrefix + NewID()
	return c
}
