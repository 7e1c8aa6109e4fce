package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/surfaced/surfaced/store"
)

// AcquireLease implements store.Leaser, by the server's clock, in one
// statement: the row lock of its upsert serializes acquirers.
func (s *Store) AcquireLease(ctx context.Context, sessionID, node string, ttl time.Duration) (store.Lease, error) {
	const op = "acquire lease"
	if err := s.begin(ctx, op, ""); err != nil {
		return store.Lease{}, err
	}
	if err := cmp.Or(store.CheckSessionID(sessionID), store.CheckNode(node), store.CheckLeaseTTL(ttl)); err != nil {
		return store.Lease{}, s.fail(ctx, op, "", err)
	}
	// The upsert sees the latest lease, the statement's SELECT its snapshot,
	// taken before: when the lease changed hands in between (a first
	// acquirer, a release), the snapshot shows no holder. Ask again.
	for range 10 {
		var l store.Lease
		var expires int64
		var won, held bool
		err := s.pool.QueryRow(ctx, s.q.acquireLease, sessionID, node, ttl.Milliseconds()).Scan(&l.Token, &l.Node, &expires, &won, &held)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !won && !held {
			continue
		}
		if err != nil {
			return store.Lease{}, s.fail(ctx, op, sessionID, err)
		}
		l.Expires = fromMillis(expires)
		if !won {
			return l, s.fail(ctx, op, sessionID, fmt.Errorf("for %q: %w: node %q holds it until %s",
				node, store.ErrLeaseHeld, l.Node, l.Expires.Format(time.RFC3339Nano)))
		}
		return l, nil
	}
	return store.Lease{}, s.fail(ctx, op, sessionID, errors.New("the lease changed hands during every attempt"))
}

// RenewLease implements store.Leaser.
func (s *Store) RenewLease(ctx context.Context, sessionID string, token int64, ttl time.Duration) (store.Lease, error) {
	const op = "renew lease"
	if err := s.begin(ctx, op, ""); err != nil {
		return store.Lease{}, err
	}
	if err := cmp.Or(store.CheckSessionID(sessionID), store.CheckLeaseTTL(ttl)); err != nil {
		return store.Lease{}, s.fail(ctx, op, "", err)
	}
	var l store.Lease
	var expires int64
	err := s.pool.QueryRow(ctx, s.q.renewLease, sessionID, token, ttl.Milliseconds()).Scan(&l.Token, &l.Node, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("token %d: %w", token, store.ErrFenced)
	}
	if err != nil {
		return store.Lease{}, s.fail(ctx, op, sessionID, err)
	}
	l.Expires = fromMillis(expires)
	return l, nil
}

// ReleaseLease implements store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, sessionID string, token int64) error {
	const op = "release lease"
	if err := s.begin(ctx, op, ""); err != nil {
		return err
	}
	if err := store.CheckSessionID(sessionID); err != nil {
		return s.fail(ctx, op, "", err)
	}
	if _, err := s.pool.Exec(ctx, s.q.releaseLease, sessionID, token); err != nil {
		return s.fail(ctx, op, sessionID, err)
	}
	return nil
}
