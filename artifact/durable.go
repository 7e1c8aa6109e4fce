package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/surfaced/surfaced/store"
)

// The artifacts' writes keep the daemon's promise about the store (see
// Config.Writer): a put, a delete and a purge that the store could not
// take did not happen, and say so (an error wrapping store.ErrUnavailable),
// one that may have happened says that (store.ErrOutcomeUnknown), and
// their own refusals (the quota, the size limit) stay what they are.

// Bounds of the store reads a Service makes for a caller (a session's
// record, an artifact's, a page of them, the bytes a session holds): a
// frozen store answers store_unavailable within them rather than hold the
// caller. While the writer knows the store cannot be written, reads get a
// short while: they may still work (another process holds SQLite's write
// lock), but a frozen server would hold them to the bound.
const (
	readTimeout            = 10 * time.Second
	unavailableReadTimeout = 2 * time.Second
)

// readCtx bounds a store read (see readTimeout).
func (s *Service) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := readTimeout
	if s.w != nil && !s.w.Available() {
		d = unavailableReadTimeout
	}
	return context.WithTimeout(ctx, d)
}

// readFailed is the error of a store read that failed: the store could
// not be read now, so nothing the caller asked for was done.
func readFailed(what string, err error) error {
	return fmt.Errorf("artifact: %s: %w: %w", what, store.ErrUnavailable, err)
}

// writeFailed is the error of a write the store did not take: one that
// may have landed stays unknown, one refused unsent stays unavailable, and
// any other failure of the store did not happen (store.ErrUnavailable).
// The caller has taken the write's own answers out before.
func writeFailed(what string, err error) error {
	if errors.Is(err, store.ErrOutcomeUnknown) || errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("artifact: %s: %w", what, err)
	}
	return fmt.Errorf("artifact: %s: %w: %w", what, store.ErrUnavailable, err)
}

// write runs a write of the store under the writer's health and outcomes
// (store.Writer.Do), or straight when the Service has no writer.
func (s *Service) write(ctx context.Context, sessionID, what string, idempotent bool, fn func(context.Context) error) error {
	if s.w == nil {
		return fn(ctx)
	}
	return s.w.Do(ctx, sessionID, what, idempotent, fn)
}

// writeBlob stores the bytes of r (store.Writer.DoStream: refused at once
// while the store cannot be written, watched while the store works, never
// retried since r is read once).
func (s *Service) writeBlob(ctx context.Context, sessionID string, r io.Reader) (store.Blob, error) {
	var b store.Blob
	put := func(ctx context.Context, r io.Reader) error {
		var err error
		b, err = s.st.WriteBlob(ctx, r, s.lim.MaxBytes)
		return err
	}
	var err error
	if s.w == nil {
		err = put(ctx, r)
	} else {
		err = s.w.DoStream(ctx, sessionID, "artifact bytes", r, put)
	}
	return b, err
}

// discard deletes the bytes of a put that will not be committed, at once
// if the store takes it (else the sweep does, an hour later): a blob an
// artifact names is kept, so this is safe after a commit whose outcome is
// unknown too.
func (s *Service) discard(ctx context.Context, sessionID string, b store.Blob) {
	if s.w != nil && !s.w.Available() {
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), store.RetryWindow)
	defer cancel()
	if err := s.st.DiscardBlob(c, b); err != nil {
		s.log.Warn("the bytes of a refused artifact could not be discarded; the sweep will", "session", sessionID, "err", err)
	}
}
