package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/surfaced/surfaced/store"
)

// Leases are kept by this machine's clock: every process that opens the
// file runs on it. Each call runs on the single writer connection, and
// AcquireLease's read and write in one BEGIN IMMEDIATE transaction, so
// that concurrent acquirers, in this process or another, are serialized.

var _ store.Leaser = (*Store)(nil)

// AcquireLease implements store.Leaser.
func (s *Store) AcquireLease(ctx context.Context, sessionID, node string, ttl time.Duration) (store.Lease, error) {
	const op = "acquire lease"
	if s.closed.Load() {
		return store.Lease{}, store.ErrClosed
	}
	if err := cmp.Or(store.CheckSessionID(sessionID), store.CheckNode(node), store.CheckLeaseTTL(ttl)); err != nil {
		return store.Lease{}, s.fail(op, "", err)
	}
	var lease store.Lease
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixMilli()
		var token, expires int64
		var holder string
		err := tx.StmtContext(ctx, s.st.getLease).QueryRowContext(ctx, sessionID).Scan(&token, &holder, &expires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			token = 1
		case err != nil:
			return err
		case holder == node && expires > now:
			// Renewed by its holder: same token.
		case holder != "" && expires > now:
			lease = store.Lease{Node: holder, Expires: fromMillis(expires)}
			return fmt.Errorf("for %q: %w: node %q holds it until %s", node, store.ErrLeaseHeld, holder, lease.Expires.Format(time.RFC3339Nano))
		default:
			token++
		}
		lease = store.Lease{Token: token, Node: node, Expires: fromMillis(now + ttl.Milliseconds())}
		_, err = tx.StmtContext(ctx, s.st.putLease).ExecContext(ctx, sessionID, token, node, now+ttl.Milliseconds())
		return err
	})
	if err != nil {
		if !errors.Is(err, store.ErrLeaseHeld) {
			lease = store.Lease{}
		}
		return lease, s.fail(op, sessionID, err)
	}
	return lease, nil
}

// RenewLease implements store.Leaser.
func (s *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) (store.Lease, error) {
	const op = "renew lease"
	if s.closed.Load() {
		return store.Lease{}, store.ErrClosed
	}
	if err := cmp.Or(store.CheckSessionID(sessionID), store.CheckLeaseTTL(ttl)); err != nil {
		return store.Lease{}, s.fail(op, "", err)
	}
	lease := store.Lease{}
	var expires int64
	err := s.st.renewLease.QueryRowContext(ctx, time.Now().UnixMilli()+ttl.Milliseconds(), sessionID, token).
		Scan(&lease.Token, &lease.Node, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("token %d: %w", token, store.ErrFenced)
	}
	if err != nil {
		return store.Lease{}, s.fail(op, sessionID, err)
	}
	lease.Expires = fromMillis(expires)
	return lease, nil
}

// ReleaseLease implements store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	const op = "release lease"
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(op, "", err)
	}
	if _, err := s.st.releaseLease.ExecContext(ctx, time.Now().UnixMilli(), sessionID, token); err != nil {
		return s.fail(op, sessionID, err)
	}
	return nil
}
