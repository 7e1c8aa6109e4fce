package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// PutOptions describe the artifact Put makes.
type PutOptions struct {
	// MediaType is the type of the bytes, "type/subtype" with parameters
	// (required); it is kept normalized (lowercase type, parameters as
	// mime.FormatMediaType writes them).
	MediaType string
	// Name is a name to show and to save the bytes under (optional): at
	// most MaxNameBytes of UTF-8 without control characters.
	Name string
	// DerivedFrom is the id of an artifact of the same session this one
	// was made from (optional).
	DerivedFrom string
	// Meta is the writer's JSON object, at most MaxMetaBytes (optional),
	// kept byte for byte.
	Meta json.RawMessage
	// Size is how many bytes the caller announces (a Content-Length, a
	// file's size), checked against the limits before any is read; -1 (or
	// any negative) when it is unknown. The bytes read decide in the end.
	Size int64
}

func (s *Service) put(ctx context.Context, sessionID string, r io.Reader, o PutOptions) (Artifact, error) {
	a := Artifact{ID: NewID(), SessionID: sessionID, Name: o.Name, DerivedFrom: o.DerivedFrom}
	var err error
	if a.MediaType, err = NormalizeMediaType(o.MediaType); err != nil {
		return Artifact{}, err
	}
	if err := CheckName(o.Name); err != nil {
		return Artifact{}, err
	}
	if a.Meta, err = CheckMeta(o.Meta); err != nil {
		return Artifact{}, err
	}
	if s.w != nil && !s.w.Available() {
		// Refused before anything is read, the client's bytes included.
		return Artifact{}, fmt.Errorf("artifact: put into session %s: %w", sessionID, store.ErrUnavailable)
	}
	sess, err := s.session(ctx, sessionID)
	switch {
	case err != nil:
		return Artifact{}, err
	case sess.Status == store.StatusEnded:
		return Artifact{}, ErrSessionEnded
	}
	if o.DerivedFrom != "" {
		if _, err := s.Get(ctx, sessionID, o.DerivedFrom); errors.Is(err, ErrNotFound) {
			return Artifact{}, fieldErr("derivedFrom", "derivedFrom %q is not an artifact of this session", o.DerivedFrom)
		} else if err != nil {
			return Artifact{}, err
		}
	}
	// What the caller announced is refused before a byte is read.
	if o.Size > s.lim.MaxBytes {
		return Artifact{}, s.tooLarge(o.Size)
	}
	if o.Size > 0 {
		used, err := s.Usage(ctx, sessionID)
		if err != nil {
			return Artifact{}, err
		}
		if used+o.Size > s.lim.SessionBytes {
			return Artifact{}, s.overQuota(used, o.Size)
		}
	}
	b, err := s.writeBlob(ctx, sessionID, r)
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return Artifact{}, s.tooLarge(-1)
	case errors.Is(err, store.ErrSourceFailed), errors.Is(err, context.Canceled):
		// The reader's failure (the client went away), not the store's.
		return Artifact{}, fmt.Errorf("artifact: read the bytes: %w", err)
	case err != nil:
		// No record names the bytes: nothing was put.
		return Artifact{}, writeFailed("store the bytes", err)
	}
	// Not idempotent: an attempt after one whose outcome is unknown could
	// find the first's record, or count its bytes against the quota.
	var rec Artifact
	err = s.write(ctx, sessionID, "artifact record", false, func(c context.Context) error {
		var err error
		rec, err = s.st.CommitArtifact(c, a, b, s.lim.SessionBytes)
		return err
	})
	if err != nil {
		s.discard(ctx, sessionID, b)
	}
	switch {
	case errors.Is(err, store.ErrQuotaExceeded):
		used, _ := s.Usage(ctx, sessionID)
		return Artifact{}, s.overQuota(used, b.Size)
	case errors.Is(err, store.ErrNotFound):
		return Artifact{}, ErrNotFound // deleted meanwhile
	case errors.Is(err, store.ErrBlobGone), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrInvalid):
		return Artifact{}, fmt.Errorf("artifact: record %s: %w", a.ID, err)
	case err != nil:
		return Artifact{}, writeFailed("record "+a.ID, err)
	}
	a = rec
	s.log.Info("artifact added", "session", sessionID, "artifact", a.ID, "mediaType", a.MediaType, "size", a.Size)
	s.tell(ctx, sessionID, pb.ArtifactAdded, a)
	return a, nil
}

func (s *Service) tooLarge(size int64) error {
	if size >= 0 {
		return fmt.Errorf("%w: the artifact is %d bytes, over the %d-byte limit", ErrTooLarge, size, s.lim.MaxBytes)
	}
	return fmt.Errorf("%w: the artifact is over the %d-byte limit", ErrTooLarge, s.lim.MaxBytes)
}

func (s *Service) overQuota(used, more int64) error {
	return fmt.Errorf("%w: the session's artifacts hold %d bytes; %d more would pass its %d-byte quota", ErrQuotaExceeded, used, more, s.lim.SessionBytes)
}

// PutFile stores the file at path as a new artifact of the session (see
// Put); its size is announced from the file. It does not judge path: the
// caller decides which files a session may publish.
func (s *Service) PutFile(ctx context.Context, sessionID, path string, o PutOptions) (Artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Artifact{}, fmt.Errorf("artifact: %s is not a regular file", path)
	}
	o.Size = fi.Size()
	return s.Put(ctx, sessionID, f, o)
}

// NormalizeMediaType checks a media type ("type/subtype" and parameters)
// and returns it as it is kept; a *FieldError (mediaType) otherwise.
func NormalizeMediaType(mt string) (string, error) {
	if strings.TrimSpace(mt) == "" {
		return "", fieldErr("mediaType", "a media type is required (like image/png)")
	}
	t, params, err := mime.ParseMediaType(mt)
	if err != nil || strings.Count(t, "/") != 1 || strings.HasPrefix(t, "/") || strings.HasSuffix(t, "/") || strings.Contains(t, "*") {
		return "", fieldErr("mediaType", "%q is not a media type (like image/png)", clip(mt))
	}
	out := mime.FormatMediaType(t, params)
	if out == "" {
		return "", fieldErr("mediaType", "%q is not a media type (like image/png)", clip(mt))
	}
	if len(out) > MaxMediaTypeBytes {
		return "", fieldErr("mediaType", "the media type is %d bytes, over the %d-byte limit", len(out), MaxMediaTypeBytes)
	}
	return out, nil
}

// CheckName returns a *FieldError (name) unless name can name an
// artifact.
func CheckName(name string) error {
	switch {
	case len(name) > MaxNameBytes:
		return fieldErr("name", "the name is %d bytes, over the %d-byte limit", len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fieldErr("name", "the name is not UTF-8")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fieldErr("name", "the name holds a control character")
	}
	return nil
}

// CheckMeta returns meta as kept (nil when empty), or a *FieldError (meta)
// unless it is a JSON object of at most MaxMetaBytes.
func CheckMeta(meta json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(meta)) == 0 {
		return nil, nil
	}
	switch {
	case len(meta) > MaxMetaBytes:
		return nil, fieldErr("meta", "meta is %d bytes, over the %d-byte limit", len(meta), MaxMetaBytes)
	case !json.Valid(meta):
		return nil, fieldErr("meta", "meta is not valid JSON")
	case bytes.TrimSpace(meta)[0] != '{':
		return nil, fieldErr("meta", "meta must be a JSON object")
	}
	return bytes.Clone(meta), nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
