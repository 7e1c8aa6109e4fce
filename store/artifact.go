package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"strings"
	"time"
)

// Artifact is the record of an artifact: immutable bytes that belong to one
// session, named by an id that is never reused. The bytes are kept apart
// (see ArtifactStore); several artifacts with the same bytes may share one
// stored copy. Times are kept with millisecond precision in UTC.
type Artifact struct {
	ID          string
	SessionID   string
	MediaType   string
	Size        int64
	SHA256      string // lowercase hex of the bytes' SHA-256
	Name        string
	DerivedFrom string // the id of the artifact this one was made from; "" when none
	Meta        []byte // the writer's JSON; nil when none
	Created     time.Time

	// Owner is the owner of the artifact's session. Reads set it;
	// CommitArtifact ignores it.
	Owner string
}

// Blob is bytes WriteBlob stored that no artifact references yet: the first
// of the two steps of an artifact (CommitArtifact is the second).
type Blob struct {
	// Ref is the store's own name for the bytes; opaque to callers.
	Ref    string
	SHA256 string // lowercase hex
	Size   int64
}

// ArtifactReader reads an artifact's bytes: Seek makes Range requests
// possible (http.ServeContent). Close releases what it holds.
type ArtifactReader = io.ReadSeekCloser

// ArtifactQuery selects a page of a session's artifacts, newest first (ties
// broken by id, greater first). Cursor is the nextCursor of the previous
// page.
type ArtifactQuery struct {
	SessionID string
	// MediaType filters by media type: "type/subtype" (parameters of the
	// stored type are ignored) or "type/*"; empty: every type.
	MediaType string
	Cursor    string
	Limit     int // 0 means 50; at most 500
}

// SigningKey is a key of the signatures of artifact URLs. A deployment has
// one current key, which signs, and the keys it replaced, each of which
// still verifies until its VerifyUntil.
type SigningKey struct {
	ID      int64 // 1, 2, ... in the order the keys were made
	Secret  []byte
	Created time.Time
	// VerifyUntil is zero for the current key. A key that was rotated out
	// verifies signatures until then (the grace its rotation gave).
	VerifyUntil time.Time
}

// Current reports whether k is the current key, the one that signs.
func (k SigningKey) Current() bool { return k.VerifyUntil.IsZero() }

// MinSigningKeyLen is the shortest signing key secret a store takes.
const MinSigningKeyLen = 16

// Errors of the artifact methods.
var (
	// ErrTooLarge is wrapped by WriteBlob's error when the bytes are more
	// than it was allowed to keep.
	ErrTooLarge = errors.New("store: artifact too large")
	// ErrQuotaExceeded is wrapped by CommitArtifact's error when the
	// session's artifacts would hold more bytes than its quota.
	ErrQuotaExceeded = errors.New("store: the session's artifact quota is exceeded")
	// ErrBlobGone is wrapped by CommitArtifact's error when the blob it was
	// given is not stored (any more): SweepBlobs collected it, or it was
	// never written by this store.
	ErrBlobGone = errors.New("store: the artifact's bytes are not stored")
	// ErrSourceFailed is wrapped by WriteBlob's error when reading the
	// bytes failed (the client went away, a file could not be read): the
	// source's failure, not the store's. Nothing is kept.
	ErrSourceFailed = errors.New("store: the bytes to store could not be read")
)

// ArtifactStore keeps artifacts: their bytes and their records. A Store
// implements it for the sessions it holds: an artifact's session must exist
// when it is committed, and DeleteSession deletes the session's artifacts.
//
// An artifact is written in two steps: WriteBlob stores the bytes (durable
// when it returns), then CommitArtifact records the artifact that names
// them. Between the two, or when the second never comes (the process died,
// the quota said no), the bytes are an orphan: nothing reads them, and
// SweepBlobs deletes them once they are older than the grace it is given.
// Bytes are deleted when the last artifact that names them is.
//
// The conformance suite in package storetest (RunArtifacts) pins down the
// behaviour below.
type ArtifactStore interface {
	// WriteBlob copies r into the store while hashing it and returns the
	// blob once it is durable. It reads at most max+1 bytes (max < 0: no
	// bound): when r holds more than max it keeps nothing and fails with an
	// error wrapping ErrTooLarge. An error of r is returned wrapped in
	// ErrSourceFailed, and nothing is kept. Nothing is held in memory
	// whole.
	WriteBlob(ctx context.Context, r io.Reader, max int64) (Blob, error)
	// CommitArtifact records a, whose bytes are b: a.Size and a.SHA256 are
	// taken from b, a zero a.Created is now, a.Owner is ignored. It fails
	// with an error wrapping ErrQuotaExceeded when the session's artifacts
	// would then hold more than quota bytes (quota <= 0: no bound); the
	// check and the write are one step, so concurrent commits cannot pass
	// it together. ErrNotFound: no such session; ErrExists: the id is
	// taken; ErrBlobGone: b is not stored. It returns the record as stored.
	CommitArtifact(ctx context.Context, a Artifact, b Blob, quota int64) (Artifact, error)
	// DiscardBlob deletes a blob WriteBlob returned that will not be
	// committed (the commit was refused: quota, no session), at once rather
	// than after the sweep's grace; bytes an artifact names are kept.
	// Discarding a blob twice, or one swept, is not an error.
	DiscardBlob(ctx context.Context, b Blob) error
	// GetArtifact returns the artifact's record, or ErrNotFound.
	GetArtifact(ctx context.Context, id string) (Artifact, error)
	// OpenArtifact returns the artifact's record and a reader of its bytes,
	// which the caller must close; ErrNotFound when there is no such
	// artifact. When the artifact is deleted while the reader is open, the
	// reader either goes on reading the bytes (a file store) or fails (a
	// store that reads chunk by chunk); it never reads other bytes.
	OpenArtifact(ctx context.Context, id string) (Artifact, ArtifactReader, error)
	// ListArtifacts returns a page of the session's artifacts, newest
	// first; nextCursor is empty on the last page. A session without
	// artifacts, or that does not exist, has an empty list. A cursor the
	// store did not produce fails with an error wrapping ErrBadCursor.
	ListArtifacts(ctx context.Context, q ArtifactQuery) (artifacts []Artifact, nextCursor string, err error)
	// DeleteArtifact deletes the artifact and returns its record; its bytes
	// go when no other artifact names them. ErrNotFound when there is no
	// such artifact.
	DeleteArtifact(ctx context.Context, id string) (Artifact, error)
	// ArtifactBytes is the total size of the session's artifacts (what its
	// quota counts); 0 for a session without any.
	ArtifactBytes(ctx context.Context, sessionID string) (int64, error)
	// SweepBlobs deletes the bytes that no artifact names (orphans) and that
	// are at least grace old, and the leftovers of writes that never
	// finished (a process that died while writing) as old, and returns how
	// many of both it deleted. A blob being
	// committed is never deleted under it: either the commit fails with
	// ErrBlobGone or the sweep keeps the blob.
	SweepBlobs(ctx context.Context, grace time.Duration) (int, error)

	// SigningKeys returns the keys that verify now, the current one first,
	// then the others newest first. When the deployment has no key yet it
	// stores initial as its first, current key: of several nodes starting
	// at once one wins, and every node gets the winner.
	SigningKeys(ctx context.Context, initial []byte) ([]SigningKey, error)
	// RotateSigningKey makes secret the current key; the key it replaces
	// verifies for grace more (grace <= 0: not at all). Keys whose grace has
	// passed are deleted. It returns the new key.
	RotateSigningKey(ctx context.Context, secret []byte, grace time.Duration) (SigningKey, error)
}

// MaxArtifactIDLen is the longest artifact id, in bytes, that a store
// accepts.
const MaxArtifactIDLen = 128

// CheckArtifactID returns an error wrapping ErrInvalid unless id is an
// artifact id a store accepts: 1 to MaxArtifactIDLen bytes of UTF-8 without
// NUL.
func CheckArtifactID(id string) error { return checkName("artifact id", id, MaxArtifactIDLen) }

// CheckArtifact returns an error wrapping ErrInvalid unless a can be
// committed: valid ids (its own, its session's, DerivedFrom's when set), a
// media type, and Meta that is JSON when present.
func CheckArtifact(a Artifact) error {
	if err := CheckArtifactID(a.ID); err != nil {
		return err
	}
	if err := CheckSessionID(a.SessionID); err != nil {
		return err
	}
	if a.DerivedFrom != "" {
		if err := CheckArtifactID(a.DerivedFrom); err != nil {
			return fmt.Errorf("derived from: %w", err)
		}
	}
	if a.MediaType == "" {
		return fmt.Errorf("%w: artifact %q has no media type", ErrInvalid, a.ID)
	}
	if len(a.Meta) > 0 && !json.Valid(a.Meta) {
		return fmt.Errorf("%w: artifact %q: meta is not JSON", ErrInvalid, a.ID)
	}
	return nil
}

// CheckBlob returns an error wrapping ErrInvalid unless b looks like a blob
// WriteBlob returned: a ref, a hex SHA-256, a size that is not negative.
func CheckBlob(b Blob) error {
	if b.Ref == "" {
		return fmt.Errorf("%w: blob without ref", ErrInvalid)
	}
	if !IsSHA256(b.SHA256) {
		return fmt.Errorf("%w: blob sha256 %q is not 64 lowercase hex digits", ErrInvalid, b.SHA256)
	}
	if b.Size < 0 {
		return fmt.Errorf("%w: blob size %d", ErrInvalid, b.Size)
	}
	return nil
}

// IsSHA256 reports whether s is a SHA-256 as artifacts carry it: 64
// lowercase hex digits.
func IsSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// CheckArtifactQuery returns the page size q asks for (DefaultListLimit
// when 0, at most MaxListLimit) and the media type filter as a range of
// stored media types, or an error wrapping ErrInvalid: no session, a
// negative limit, a filter that is not "type/subtype" or "type/*".
func CheckArtifactQuery(q ArtifactQuery) (limit int, filter MediaRange, err error) {
	if err := CheckSessionID(q.SessionID); err != nil {
		return 0, MediaRange{}, err
	}
	limit, err = CheckListQuery(ListQuery{Owner: "-", Limit: q.Limit})
	if err != nil {
		return 0, MediaRange{}, err
	}
	filter, err = ParseMediaFilter(q.MediaType)
	return limit, filter, err
}

// MediaRange is a media type filter as stored types are compared with it:
// a stored type t matches when t == Exact, or Low <= t < High. The zero
// MediaRange matches every type.
type MediaRange struct {
	Exact     string
	Low, High string
}

// Any reports whether r matches every type.
func (r MediaRange) Any() bool { return r == MediaRange{} }

// Match reports whether the stored media type t matches r.
func (r MediaRange) Match(t string) bool {
	if r.Any() {
		return true
	}
	return t == r.Exact || r.Low <= t && t < r.High
}

// ParseMediaFilter turns a filter of ArtifactQuery.MediaType into the range
// of stored types it matches. Stored types are lowercase ("type/subtype",
// with "; param=value" after it when they have parameters), so that
// "image/*" is every type from "image/" up to "image0" ('/'+1), and
// "text/plain" is "text/plain" or any type from "text/plain;" up to
// "text/plain<" (';'+1): comparisons an index can serve.
func ParseMediaFilter(f string) (MediaRange, error) {
	if f == "" {
		return MediaRange{}, nil
	}
	typ, sub, ok := strings.Cut(strings.ToLower(f), "/")
	if !ok || !isToken(typ) || typ == "*" || (sub != "*" && !isToken(sub)) {
		return MediaRange{}, fmt.Errorf("%w: media type filter %q is not type/subtype or type/*", ErrInvalid, f)
	}
	if sub == "*" {
		return MediaRange{Exact: typ + "/", Low: typ + "/", High: typ + "0"}, nil
	}
	e := typ + "/" + sub
	return MediaRange{Exact: e, Low: e + ";", High: e + "<"}, nil
}

// isToken reports whether s is a non-empty RFC 2045 token.
func isToken(s string) bool {
	if s == "" || len(s) > 127 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// CheckSigningKey returns an error wrapping ErrInvalid unless secret is long
// enough to be a signing key.
func CheckSigningKey(secret []byte) error {
	if len(secret) < MinSigningKeyLen {
		return fmt.Errorf("%w: a signing key of %d bytes is shorter than %d", ErrInvalid, len(secret), MinSigningKeyLen)
	}
	return nil
}

// HashingReader reads from R and counts and hashes what it read, failing
// with an error wrapping ErrTooLarge once more than Max bytes came (Max < 0:
// no bound), and wrapping a failure of R in ErrSourceFailed. Stores use
// it in WriteBlob.
type HashingReader struct {
	R   io.Reader
	Max int64
	n   int64
	h   hash.Hash
}

// NewHashingReader returns a HashingReader of r that allows max bytes.
func NewHashingReader(r io.Reader, max int64) *HashingReader {
	if max < 0 {
		max = math.MaxInt64
	}
	return &HashingReader{R: r, Max: max, h: sha256.New()}
}

// Read implements io.Reader.
func (h *HashingReader) Read(p []byte) (int, error) {
	// Read at most one byte past the limit: enough to know it was passed.
	if room := h.Max - h.n; room < math.MaxInt64 && int64(len(p)) > room+1 {
		p = p[:room+1]
	}
	n, err := h.R.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	if h.n > h.Max {
		return n, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, h.Max)
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", ErrSourceFailed, err)
	}
	return n, err
}

// Size is the number of bytes read so far.
func (h *HashingReader) Size() int64 { return h.n }

// Sum is the lowercase hex SHA-256 of the bytes read so far.
func (h *HashingReader) Sum() string { return hex.EncodeToString(h.h.Sum(nil)) }
