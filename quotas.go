package surfaced

import (
	"context"
	"fmt"

	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/store"
)

// Quotas bound the sessions CreateSession starts. The zero value of a field
// takes its default.
type Quotas struct {
	// SessionsPerSubject bounds the sessions one subject owns that have not
	// ended (100; config limits.sessions_per_subject).
	SessionsPerSubject int
	// SessionsTotal bounds the sessions active on this node (1000; config
	// limits.sessions_total).
	SessionsTotal int
}

// Defaults of Quotas.
const (
	DefaultSessionsPerSubject = 100
	DefaultSessionsTotal      = 1000
)

func (q Quotas) withDefaults() Quotas {
	if q.SessionsPerSubject <= 0 {
		q.SessionsPerSubject = DefaultSessionsPerSubject
	}
	if q.SessionsTotal <= 0 {
		q.SessionsTotal = DefaultSessionsTotal
	}
	return q
}

// ErrTooManySessions is what a QuotaError is (errors.Is); it is the
// session package's, so that a refused activation is one too.
var ErrTooManySessions = session.ErrTooManySessions

// Scopes of a QuotaError.
const (
	QuotaSubject = "subject" // the caller's own sessions
	QuotaTotal   = "total"   // the sessions on this node
)

// QuotaError is CreateSession's refusal when a quota is reached; the
// gateways answer it (HTTP 429 too_many_sessions, ACP -32603 with that code).
type QuotaError struct {
	Scope string // QuotaSubject or QuotaTotal
	Count int    // sessions counted (at least Limit)
	Limit int
}

func (e *QuotaError) Error() string {
	if e.Scope == QuotaTotal {
		return fmt.Sprintf("too many sessions: this daemon already runs %d (the limit is %d)", e.Count, e.Limit)
	}
	return fmt.Sprintf("too many sessions: the owner already has %d open (the limit is %d)", e.Count, e.Limit)
}

// Is makes errors.Is(err, ErrTooManySessions) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrTooManySessions }

// admitSession is the directory's question before it activates a stored
// session on this node (a request woke it): sessions revived after a
// restart or a sleep count against the node's total like created ones.
func (r *Runtime) admitSession() error {
	if n := len(r.LiveSessions()); n >= r.quotas.SessionsTotal {
		return &QuotaError{Scope: QuotaTotal, Count: n, Limit: r.quotas.SessionsTotal}
	}
	return nil
}

// checkQuotas refuses a new session of owner past a quota.
func (r *Runtime) checkQuotas(ctx context.Context, owner string) error {
	q := r.quotas
	if n := len(r.LiveSessions()); n >= q.SessionsTotal {
		return &QuotaError{Scope: QuotaTotal, Count: n, Limit: q.SessionsTotal}
	}
	n, err := r.cfg.Store.CountSessions(ctx, store.CountQuery{Owner: owner, ExcludeEnded: true})
	if err != nil {
		return fmt.Errorf("count the sessions of %q: %w", owner, err)
	}
	if n >= q.SessionsPerSubject {
		return &QuotaError{Scope: QuotaSubject, Count: n, Limit: q.SessionsPerSubject}
	}
	return nil
}
