// Package lease is a session activation's claim on the session's writes in
// a cluster. The activation takes the lease before it writes anything,
// writes under its fence, renews it every third of its ttl, and gives it
// back when it stops, once its queued writes have landed. A write or renewal
// refused as fenced means another node owns the session now: the activation
// must stop at once.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/surfaced/surfaced/store"
)

// Holder is a lease held by this activation. A nil *Holder is a session
// without a lease (a single node): its Fence is zero and the rest are no-ops.
type Holder struct {
	leaser  store.Leaser
	session string
	node    string
	ttl     time.Duration
	fence   store.Fence
}

// ErrHeld wraps the error of Acquire while another node holds the lease:
// Holder names that node, Expires is when its lease ends unless renewed (by
// the store's clock).
type ErrHeld struct {
	Holder  string
	Expires time.Time
	Err     error
}

func (e *ErrHeld) Error() string { return fmt.Sprintf("session lease held by %s: %v", e.Holder, e.Err) }
func (e *ErrHeld) Unwrap() error { return e.Err }

// Acquire takes the session's lease for node.
func Acquire(ctx context.Context, leaser store.Leaser, session, node string, ttl time.Duration) (*Holder, error) {
	l, err := leaser.AcquireLease(ctx, session, node, ttl)
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			return nil, &ErrHeld{Holder: l.Node, Expires: l.Expires, Err: err}
		}
		return nil, fmt.Errorf("acquire the lease of session %s: %w", session, err)
	}
	return &Holder{leaser: leaser, session: session, node: node, ttl: ttl, fence: store.Fence(l.Token)}, nil
}

// Fence is the token every write of the activation carries (zero: none).
func (h *Holder) Fence() store.Fence {
	if h == nil {
		return 0
	}
	return h.fence
}

// RenewEvery is how often the lease should be renewed.
func (h *Holder) RenewEvery() time.Duration { return h.ttl / 3 }

// Renew extends the lease. An error wrapping store.ErrFenced means it is
// lost; any other error (the store unreachable) may pass: keep trying.
func (h *Holder) Renew(ctx context.Context) error {
	if h == nil {
		return nil
	}
	_, err := h.leaser.RenewLease(ctx, h.session, int64(h.fence), h.ttl)
	return err
}

// Release gives the lease back once flush (the writes queued under it) has
// returned, so that the next activation need not wait for it to expire. It
// runs on its own goroutine: an actor stopping must not wait for the store.
func (h *Holder) Release(flush func(context.Context) error) {
	if h == nil {
		return
	}
	go func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if flush != nil {
			_ = flush(c)
		}
		_ = h.leaser.ReleaseLease(c, h.session, int64(h.fence))
	}()
}
