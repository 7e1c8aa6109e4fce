package artifact

import (
	"context"
	"errors"
	"io"

	"go.opentelemetry.io/otel/attribute"

	"github.com/surfaced/surfaced/internal/tracing"
	"github.com/surfaced/surfaced/store"
)

// attrBytes is the size of an artifact on its put's or get's span.
const attrBytes = attribute.Key("surfaced.artifact.bytes")

// Put stores the bytes of r as a new artifact of the session and tells the
// session. The bytes stream through: never held whole, refused as soon as
// they pass the limit. Errors: ErrNotFound (no such session),
// ErrSessionEnded, ErrTooLarge, ErrQuotaExceeded, a *FieldError, the
// reader's error (wrapped in store.ErrSourceFailed), or the store's:
// store.ErrUnavailable (nothing was put; refused at once, before a byte
// is read, while the store cannot be written) or store.ErrOutcomeUnknown
// (the record was sent and its answer never came: the artifact may exist).
// In a trace, the put is a span.
func (s *Service) Put(ctx context.Context, sessionID string, r io.Reader, o PutOptions) (Artifact, error) {
	var span tracing.Span
	if tracing.On() { // off, not even the attribute is made
		ctx, span = tracing.Start(ctx, "artifact put", tracing.Internal, tracing.AttrSession.String(sessionID))
	}
	a, err := s.put(ctx, sessionID, r, o)
	traced(span, a, err)
	return a, err
}

// Open returns the artifact id of any session and a reader of its bytes
// (seekable, for Range requests), which the caller closes; ErrNotFound when
// there is no such artifact. In a trace, the open is a span (reading the
// bytes is the caller's).
func (s *Service) Open(ctx context.Context, id string) (Artifact, store.ArtifactReader, error) {
	ctx, span := tracing.Start(ctx, "artifact get", tracing.Internal)
	a, r, err := s.open(ctx, id)
	traced(span, a, err)
	return a, r, err
}

func traced(span tracing.Span, a Artifact, err error) {
	if !span.Valid() {
		return
	}
	span.Set(tracing.AttrSession.String(a.SessionID), attrBytes.Int64(a.Size))
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		span.Fail("not_found")
	case errors.Is(err, ErrTooLarge):
		span.Fail("too_large")
	case errors.Is(err, ErrQuotaExceeded):
		span.Fail("quota_exceeded")
	default:
		span.Fail("failed")
	}
	span.End()
}
