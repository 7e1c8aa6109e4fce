// Package artifact is the daemon's artifacts: immutable bytes that belong to
// one session (an image, a video, a PDF, a large table), named by an att_ id
// and referenced by that id in snapshots, command args, prompts and chat.
// No binary travels in a frame or on an agent's pipe: clients fetch the
// bytes over HTTP, with their credential or a signed URL.
//
// A Service is the one way in, for every caller: the HTTP API (package
// gateway), a session's agent lines (artifact_put/get/list/url, in the
// session actor), the data plane (a page too large for JSON answers with a
// 303 to an artifact's signed URL) and ACP (resource links carry signed
// URLs).
//
//	a, err := svc.Put(ctx, sessionID, r, artifact.PutOptions{MediaType: "image/png", Name: "cat.png", Size: n})
//	url, exp := svc.URL(a.ID, 0)            // "/api/artifacts/att_…/content?exp=…&sig=…", for an hour
//	page, next, err := svc.List(ctx, sessionID, artifact.Query{MediaType: "image/*"})
//	a, r, err := svc.Open(ctx, a.ID)        // the bytes: an io.ReadSeekCloser, for http.ServeContent
//	_, err = svc.Delete(ctx, sessionID, a.ID)
//
// The Service checks what a caller gives (media type, name, meta, the
// artifact an artifact derives from), enforces the limits (per artifact,
// per session) while the bytes stream in, never holding them whole, and
// tells the session about every artifact added or deleted (Config.Notify),
// which emits the artifact frame to its clients.
//
// It does not check who the caller is: a handler acting for a subject
// checks the session first (Session), an agent line acts for its own
// session.
//
// # Storage
//
// The bytes and the records are the store's (store.ArtifactStore): files
// under the data directory beside SQLite, or chunk rows in PostgreSQL, so
// that every node of a cluster serves every artifact. A put is two steps,
// the bytes then the record; the bytes of a put that never got its record
// (the process died between) are swept after SweepGrace (Sweep).
//
// # Signed URLs
//
// A signed URL lets anyone who holds it read one artifact's bytes until it
// expires, without a credential: an <img> in a page, a link handed to an
// editor. The signature is an HMAC-SHA256 with the deployment's signing
// key, which the store keeps so that every node signs and checks the same
// URLs. The sig parameter is the hex of the artifact id's 16 random bytes
// followed by the MAC of (id, exp): a signature that is valid but names
// another artifact is told apart from a forged one (the HTTP API answers
// the first 404, like a missing artifact, and the second 401).
//
// Rotating the key (RotateKey; the CLI's `surfaced admin rotate-artifact-key`)
// makes a new current key; the old one keeps verifying for a grace
// (DefaultRotationGrace: the longest URL lifetime plus the time nodes take
// to load the new key), so that URLs handed out before keep working until
// they expire. Every node reloads the keys every KeyRefresh, and at once
// (at most every few seconds) when it meets a signature none of its keys
// made.
package artifact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Artifact is an artifact's record.
type Artifact = store.Artifact

// Defaults and bounds.
const (
	DefaultMaxBytes     = 64 << 20 // one artifact
	DefaultSessionBytes = 1 << 30  // all the artifacts of one session
	DefaultURLTTL       = time.Hour
	// MaxURLTTL bounds the lifetime of a signed URL, whatever is asked.
	MaxURLTTL = 24 * time.Hour
	// KeyRefresh is how often a Service reloads the signing keys.
	KeyRefresh = time.Minute
	// DefaultRotationGrace is how long a rotated key keeps verifying
	// unless the rotation says otherwise: every URL signed with it has
	// expired by then, including one a node signed in the minute before it
	// loaded the new key.
	DefaultRotationGrace = MaxURLTTL + KeyRefresh
	// SweepGrace is how old bytes no artifact names must be before Sweep
	// deletes them: longer than any put takes between its two steps.
	SweepGrace = time.Hour
	// MaxMetaBytes bounds an artifact's meta.
	MaxMetaBytes = 16 << 10
	// MaxNameBytes bounds an artifact's name.
	MaxNameBytes = 255
	// MaxMediaTypeBytes bounds an artifact's media type.
	MaxMediaTypeBytes = 255
)

// Limits bound artifacts. Zero values take the defaults.
type Limits struct {
	MaxBytes     int64         // bytes of one artifact (DefaultMaxBytes)
	SessionBytes int64         // bytes of all a session's artifacts (DefaultSessionBytes)
	URLTTL       time.Duration // lifetime of a signed URL when none is asked (DefaultURLTTL; at most MaxURLTTL)
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.SessionBytes <= 0 {
		l.SessionBytes = DefaultSessionBytes
	}
	if l.URLTTL <= 0 {
		l.URLTTL = DefaultURLTTL
	}
	l.URLTTL = min(l.URLTTL, MaxURLTTL)
	return l
}

// Errors. Every error of a Service wraps one of these, a *FieldError, or
// the store's: store.ErrUnavailable (the store could not be read or
// written now; nothing changed, try again) or store.ErrOutcomeUnknown (a
// change was sent to the store and its answer never came: it may or may
// not have been made). A Put's reader's failure comes back wrapped in
// store.ErrSourceFailed.
var (
	// ErrNotFound: no such artifact in the session, or no such session (a
	// foreign session is missing too, see Service.Session).
	ErrNotFound = errors.New("artifact: not found")
	// ErrTooLarge: the bytes are over Limits.MaxBytes.
	ErrTooLarge = errors.New("artifact: too large")
	// ErrQuotaExceeded: the session's artifacts would be over
	// Limits.SessionBytes.
	ErrQuotaExceeded = errors.New("artifact: quota exceeded")
	// ErrSessionEnded: the session has ended; its artifacts can be read and
	// deleted, not added.
	ErrSessionEnded = errors.New("artifact: the session has ended")
	// ErrBadSignature: a signed URL's signature is missing, malformed, or
	// made by no key of the deployment.
	ErrBadSignature = errors.New("artifact: bad signature")
	// ErrSignatureExpired: a signed URL's signature is genuine and its
	// time has passed.
	ErrSignatureExpired = errors.New("artifact: signature expired")
	// ErrOtherArtifact: a signed URL's signature is genuine and names
	// another artifact.
	ErrOtherArtifact = errors.New("artifact: the signature is for another artifact")
)

// FieldError is an argument a Service refuses, naming it as the HTTP API
// and the agent lines do: mediaType, name, derivedFrom, meta, cursor,
// limit.
type FieldError struct {
	Field   string
	Message string // one sentence, without a final period
}

func (e *FieldError) Error() string { return "artifact: " + e.Message }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Config configures a Service. Store is required.
type Config struct {
	Store store.Store
	// Writer, when set, runs the Service's writes (an artifact's bytes and
	// record, a delete) under the daemon's promise about the store, as
	// every other write (store.Writer.Do, DoStream): refused at once while
	// the store cannot be written (an error wrapping store.ErrUnavailable),
	// tried again within the retry window, their outcome known within it
	// (store.ErrOutcomeUnknown when it is not), and their failures and
	// stalls telling the writer's health. It must write to Store. Nil: the
	// writes go straight to Store (a test, an embedding without a writer).
	Writer *store.Writer
	Limits Limits
	// Clock tells the time of signatures and runs the key refresh (nil:
	// the wall clock).
	Clock  clock.Clock
	Logger *slog.Logger
	// Notify tells a session that one of its artifacts was added or
	// deleted (the runtime sends it an ArtifactNotice, and it emits the
	// artifact frame). It is called after the store has the change, before
	// Put or Delete returns; it may block briefly and reports nothing (a
	// session nobody watches has nobody to tell). Nil: nobody is told.
	Notify func(ctx context.Context, sessionID string, ev *pb.ArtifactEvent)
}

// Service is the artifacts of a daemon. It is safe for concurrent use.
type Service struct {
	st     store.Store
	w      *store.Writer
	lim    Limits
	clock  clock.Clock
	log    *slog.Logger
	notify func(ctx context.Context, sessionID string, ev *pb.ArtifactEvent)

	keysMu     sync.RWMutex
	keys       []store.SigningKey // as the store last said: current first
	keysLoaded time.Time
	reloadMu   sync.Mutex // one reload at a time
	timer      clock.Timer
	closed     bool
}

// New returns a Service. It loads the deployment's signing keys, making the
// first one if the store has none, and reloads them every KeyRefresh until
// Close.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("artifact: Config.Store is required")
	}
	s := &Service{st: cfg.Store, w: cfg.Writer, lim: cfg.Limits.withDefaults(), clock: cfg.Clock, log: cfg.Logger, notify: cfg.Notify}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.loadKeys(ctx); err != nil {
		return nil, err
	}
	s.keysMu.Lock()
	s.timer = s.clock.AfterFunc(KeyRefresh, s.refresh)
	s.keysMu.Unlock()
	return s, nil
}

// Close stops the key refresh. The Service still answers (with the keys it
// has).
func (s *Service) Close() {
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// Now is the time by the Service's clock: the time signatures expire by.
func (s *Service) Now() time.Time { return s.clock.Now() }

// Limits are the limits the Service enforces (defaults filled in).
func (s *Service) Limits() Limits { return s.lim }

// refresh reloads the keys and arms the next refresh.
func (s *Service) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.loadKeys(ctx); err != nil {
		s.log.Warn("the artifact signing keys could not be reloaded; the ones loaded before stay", "err", err)
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if !s.closed {
		s.timer = s.clock.AfterFunc(KeyRefresh, s.refresh)
	}
}

// Session returns the session if subject owns it; ErrNotFound when it does
// not exist or someone else owns it (the same answer, as for sessions).
func (s *Service) Session(ctx context.Context, sessionID, subject string) (store.Session, error) {
	sess, err := s.session(ctx, sessionID)
	switch {
	case err != nil:
		return store.Session{}, err
	case sess.Owner != subject:
		return store.Session{}, ErrNotFound
	}
	return sess, nil
}

// session reads the session's record; ErrNotFound when there is none.
func (s *Service) session(ctx context.Context, sessionID string) (store.Session, error) {
	if store.CheckSessionID(sessionID) != nil {
		return store.Session{}, ErrNotFound
	}
	c, cancel := s.readCtx(ctx)
	defer cancel()
	sess, err := s.st.GetSession(c, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Session{}, ErrNotFound
	case err != nil:
		return store.Session{}, readFailed("read session "+sessionID, err)
	}
	return sess, nil
}

// Get returns the session's artifact id; ErrNotFound when there is none,
// or it belongs to another session.
func (s *Service) Get(ctx context.Context, sessionID, id string) (Artifact, error) {
	a, err := s.Lookup(ctx, id)
	switch {
	case err != nil:
		return Artifact{}, err
	case a.SessionID != sessionID:
		return Artifact{}, ErrNotFound
	}
	return a, nil
}

// Lookup returns the artifact id of any session (its Owner says whose);
// ErrNotFound when there is none. The content route uses it, and decides
// access itself.
func (s *Service) Lookup(ctx context.Context, id string) (Artifact, error) {
	if _, ok := ParseID(id); !ok {
		return Artifact{}, ErrNotFound
	}
	c, cancel := s.readCtx(ctx)
	defer cancel()
	a, err := s.st.GetArtifact(c, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Artifact{}, ErrNotFound
	case err != nil:
		return Artifact{}, readFailed("read artifact "+id, err)
	}
	return a, nil
}

func (s *Service) open(ctx context.Context, id string) (Artifact, store.ArtifactReader, error) {
	if _, ok := ParseID(id); !ok {
		return Artifact{}, nil, ErrNotFound
	}
	// The reader reads with ctx (a chunk at a time): not bounded here.
	a, r, err := s.st.OpenArtifact(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Artifact{}, nil, ErrNotFound
	case err != nil:
		return Artifact{}, nil, readFailed("open artifact "+id, err)
	}
	return a, r, nil
}

// Query selects a page of a session's artifacts, newest first.
type Query struct {
	MediaType string // "type/subtype" or "type/*"; empty: every type
	Cursor    string // the nextCursor of the previous page
	Limit     int    // 1 to 500; 0 means 50
}

// List returns a page of the session's artifacts, newest first, and the
// cursor of the next page ("" on the last).
func (s *Service) List(ctx context.Context, sessionID string, q Query) ([]Artifact, string, error) {
	if q.Limit < 0 || q.Limit > store.MaxListLimit {
		return nil, "", fieldErr("limit", "limit must be a number from 1 to %d", store.MaxListLimit)
	}
	if _, err := store.ParseMediaFilter(q.MediaType); err != nil {
		return nil, "", fieldErr("mediaType", "mediaType must be type/subtype or type/*, like image/png or image/*")
	}
	c, cancel := s.readCtx(ctx)
	defer cancel()
	page, next, err := s.st.ListArtifacts(c, store.ArtifactQuery{SessionID: sessionID, MediaType: q.MediaType, Cursor: q.Cursor, Limit: q.Limit})
	switch {
	case errors.Is(err, store.ErrBadCursor):
		return nil, "", fieldErr("cursor", "cursor is not one this server gave out")
	case err != nil:
		return nil, "", readFailed("list the artifacts of session "+sessionID, err)
	}
	return page, next, nil
}

// Usage is the number of bytes the session's artifacts hold (what its
// quota counts).
func (s *Service) Usage(ctx context.Context, sessionID string) (int64, error) {
	c, cancel := s.readCtx(ctx)
	defer cancel()
	n, err := s.st.ArtifactBytes(c, sessionID)
	if err != nil {
		return 0, readFailed("the bytes of session "+sessionID, err)
	}
	return n, nil
}

// Delete deletes the session's artifact id and tells the session; later
// reads of it find nothing. ErrNotFound when the session has no such
// artifact. A delete the store did not take is an error wrapping
// store.ErrUnavailable (the artifact is still there); one whose outcome
// is unknown, store.ErrOutcomeUnknown.
func (s *Service) Delete(ctx context.Context, sessionID, id string) (Artifact, error) {
	a, err := s.Get(ctx, sessionID, id)
	if err != nil {
		return Artifact{}, err
	}
	// Idempotent: an attempt after one whose outcome is unknown finds the
	// artifact, or finds it gone.
	err = s.write(ctx, sessionID, "artifact delete", true, func(c context.Context) error {
		_, err := s.st.DeleteArtifact(c, id)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && errors.Is(err, store.ErrOutcomeUnknown):
		// An attempt whose answer was lost, then not found: it is gone,
		// which is what the caller asked for.
	case errors.Is(err, store.ErrNotFound):
		return Artifact{}, ErrNotFound // deleted meanwhile
	case err != nil:
		return Artifact{}, writeFailed("delete "+id, err)
	}
	s.log.Info("artifact deleted", "session", sessionID, "artifact", id)
	s.tell(ctx, sessionID, pb.ArtifactDeleted, a)
	return a, nil
}

// Sweep deletes the bytes of puts that never got their record (older than
// SweepGrace) and reports how many it deleted. The runtime runs it
// periodically.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	return s.st.SweepBlobs(ctx, SweepGrace)
}

func (s *Service) tell(ctx context.Context, sessionID, event string, a Artifact) {
	if s.notify != nil {
		// The change happened: the session hears of it even if the
		// caller has gone.
		s.notify(context.WithoutCancel(ctx), sessionID, &pb.ArtifactEvent{Event: event, Artifact: ToProto(a)})
	}
}

// ToProto is the artifact as messages carry it.
func ToProto(a Artifact) *pb.Artifact {
	return &pb.Artifact{Id: a.ID, SessionId: a.SessionID, MediaType: a.MediaType, Size: a.Size, Sha256: a.SHA256, Name: a.Name,
		CreatedAtMs: a.Created.UnixMilli(), DerivedFrom: a.DerivedFrom, Meta: a.Meta}
}

// FromProto is the record of an artifact a message carries (Owner unset).
func FromProto(p *pb.Artifact) Artifact {
	return Artifact{ID: p.GetId(), SessionID: p.GetSessionId(), MediaType: p.GetMediaType(), Size: p.GetSize(), SHA256: p.GetSha256(),
		Name: p.GetName(), Created: time.UnixMilli(p.GetCreatedAtMs()).UTC(), DerivedFrom: p.GetDerivedFrom(), Meta: p.GetMeta()}
}
