package store

import (
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"

	"github.com/surfaced/surfaced/internal/tracing"
)

// The store write, traced: an op that carries a trace context (Op.Trace)
// is a span from its submission until its outcome, so that the time it
// waited for its commit shows. Its attributes say which commit it joined:
// the commit's number on this node, how many ops and sessions it wrote,
// and whether it was one transaction for all of them (a Batcher's).

var commits atomic.Uint64

// Attribute keys of a store write's span.
const (
	attrCommit         = attribute.Key("surfaced.store.commit")
	attrCommitOps      = attribute.Key("surfaced.store.commit.ops")
	attrCommitSessions = attribute.Key("surfaced.store.commit.sessions")
	attrCommitBatched  = attribute.Key("surfaced.store.commit.batched")
	attrChain          = attribute.Key("surfaced.store.chain")
	attrKeys           = attribute.Key("surfaced.store.keys")
)

// SetNode names this node on the writer's spans (a cluster member's name
// is known once it has joined).
func (w *Writer) SetNode(name string) { w.node.Store(&name) }

func (w *Writer) startOpSpan(op Op) tracing.Span {
	if op.Trace == "" {
		return tracing.Span{}
	}
	node := ""
	if n := w.node.Load(); n != nil {
		node = *n
	}
	_, s := tracing.StartFrom(op.Trace, "", "store write", tracing.Client, tracing.AttrNode.String(node),
		tracing.AttrSession.String(op.SessionID), attrChain.String(op.Chain), attrKeys.Int(len(op.KV)))
	return s
}

// traceCommit names the commit a run of KV ops joined on their spans.
func traceCommit(run []Op, sessions int, batched bool) {
	if !tracing.On() {
		return
	}
	traced := false
	for _, op := range run {
		traced = traced || op.span.Valid()
	}
	if !traced {
		return
	}
	n := commits.Add(1)
	for _, op := range run {
		op.span.Set(attrCommit.Int64(int64(n)), attrCommitOps.Int(len(run)),
			attrCommitSessions.Int(sessions), attrCommitBatched.Bool(batched && sessions > 1))
	}
}

func endOpSpan(op Op, err error) {
	if !op.span.Valid() {
		return
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrFenced):
		op.span.Fail("fenced")
	case errors.Is(err, ErrOutcomeUnknown):
		op.span.Fail("outcome_unknown")
	case errors.Is(err, ErrAborted), errors.Is(err, ErrUnavailable):
		op.span.Fail("store_unavailable")
	default:
		op.span.Fail("failed")
	}
	op.span.End()
}
