package artifact

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/surfaced/surfaced/store"
)

// IDPrefix begins every artifact id.
const IDPrefix = "att_"

// idRandomBytes is the randomness of an id: 128 bits.
const idRandomBytes = 16

// idEncoding writes ids: lowercase base32 without padding (URL-safe, case
// never matters to a reader).
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// idLen is the length of an id: the prefix and 26 characters.
var idLen = len(IDPrefix) + idEncoding.EncodedLen(idRandomBytes)

// NewID returns a new artifact id: att_ and 128 random bits.
func NewID() string {
	var b [idRandomBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return IDPrefix + idEncoding.EncodeToString(b[:])
}

// ParseID returns the random bytes of an artifact id, and whether id is one
// (of the form NewID makes).
func ParseID(id string) ([idRandomBytes]byte, bool) {
	var b [idRandomBytes]byte
	if len(id) != idLen || id[:len(IDPrefix)] != IDPrefix {
		return b, false
	}
	n, err := idEncoding.Decode(b[:], []byte(id[len(IDPrefix):]))
	if err != nil || n != idRandomBytes || idEncoding.EncodeToString(b[:]) != id[len(IDPrefix):] {
		return b, false
	}
	return b, true
}

// ContentPath is the path of an artifact's bytes in the HTTP API.
func ContentPath(id string) string { return "/api/artifacts/" + id + "/content" }

// sigContext separates these MACs from any other use of the key.
const sigContext = "surfaced artifact content v1\x00"

func mac(secret []byte, id string, exp int64) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(sigContext))
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write(strconv.AppendInt(nil, exp, 10))
	return m.Sum(nil)
}

// URL returns the signed URL of the artifact's bytes, relative to the
// daemon ("/api/artifacts/att_…/content?exp=<unix s>&sig=<hex>"), and when
// it expires: after ttl (0 or less: Limits.URLTTL; at most MaxURLTTL).
// Anyone who holds it reads the bytes until then, from any node. It does
// not look the artifact up.
func (s *Service) URL(id string, ttl time.Duration) (string, time.Time) {
	if ttl <= 0 {
		ttl = s.lim.URLTTL
	}
	ttl = min(ttl, MaxURLTTL)
	exp := s.clock.Now().Add(ttl).Truncate(time.Second).Add(time.Second) // whole seconds, never short of ttl
	raw, _ := ParseID(id)
	key := s.currentKey()
	sig := hex.EncodeToString(append(raw[:], mac(key.Secret, id, exp.Unix())...))
	q := url.Values{"exp": {strconv.FormatInt(exp.Unix(), 10)}, "sig": {sig}}
	return ContentPath(id) + "?" + q.Encode(), exp
}

// Verify checks a signed URL's exp and sig for the artifact id: nil when
// they let the holder read it now; ErrBadSignature when the signature is
// missing, malformed or made by no key of the deployment (including a
// tampered exp); ErrOtherArtifact when it is genuine and names another
// artifact; ErrSignatureExpired when it is genuine and its time is past.
func (s *Service) Verify(ctx context.Context, id, exp, sig string) error {
	expires, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || expires < 0 || len(exp) > 20 {
		return fmt.Errorf("%w: exp is not a time", ErrBadSignature)
	}
	raw, err := hex.DecodeString(sig)
	if err != nil || len(raw) != idRandomBytes+sha256.Size {
		return fmt.Errorf("%w: sig is not one this daemon makes", ErrBadSignature)
	}
	signed := IDPrefix + idEncoding.EncodeToString(raw[:idRandomBytes])
	want := raw[idRandomBytes:]
	if !s.verifies(signed, expires, want) {
		// Perhaps a key another node made since this one last loaded them.
		if !s.reloadForUnknown(ctx) || !s.verifies(signed, expires, want) {
			return fmt.Errorf("%w: no key of this deployment made it", ErrBadSignature)
		}
	}
	if signed != id {
		return ErrOtherArtifact
	}
	if !s.clock.Now().Before(time.Unix(expires, 0)) {
		return fmt.Errorf("%w: it expired at %s", ErrSignatureExpired, time.Unix(expires, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// verifies reports whether a key that verifies now made want.
func (s *Service) verifies(id string, exp int64, want []byte) bool {
	now := s.clock.Now()
	s.keysMu.RLock()
	keys := s.keys
	s.keysMu.RUnlock()
	for _, k := range keys {
		if !k.Current() && !now.Before(k.VerifyUntil) {
			continue
		}
		if hmac.Equal(mac(k.Secret, id, exp), want) {
			return true
		}
	}
	return false
}

func (s *Service) currentKey() store.SigningKey {
	s.keysMu.RLock()
	defer s.keysMu.RUnlock()
	return s.keys[0] // loadKeys keeps at least one, the current one first
}

// minReload spaces the reloads an unknown signature causes: forged
// signatures cannot make the daemon read the store more often than this.
const minReload = 5 * time.Second

// reloadForUnknown reloads the keys unless they were loaded within
// minReload, and reports whether it did.
func (s *Service) reloadForUnknown(ctx context.Context) bool {
	s.keysMu.RLock()
	recent := s.clock.Now().Sub(s.keysLoaded) < minReload
	s.keysMu.RUnlock()
	if recent {
		return false
	}
	if err := s.loadKeys(ctx); err != nil {
		s.log.Warn("the artifact signing keys could not be reloaded", "err", err)
		return false
	}
	return true
}

// loadKeys reads the keys from the store (making the first one when there
// is none).
func (s *Service) loadKeys(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	keys, err := s.st.SigningKeys(ctx, NewKey())
	if err != nil {
		return fmt.Errorf("artifact: load the signing keys: %w", err)
	}
	if len(keys) == 0 || !keys[0].Current() {
		return fmt.Errorf("artifact: the store holds no current signing key")
	}
	s.keysMu.Lock()
	s.keys, s.keysLoaded = keys, s.clock.Now()
	s.keysMu.Unlock()
	return nil
}

// NewKey returns a new signing key secret: 32 random bytes.
func NewKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

// RotateKey makes a new current signing key in st. The key it replaces
// verifies for grace more (DefaultRotationGrace when grace is negative; 0
// ends it at once, so that every URL signed with it stops working), so
// that URLs handed out before keep working until they expire. Running
// daemons load the new key within KeyRefresh.
func RotateKey(ctx context.Context, st store.ArtifactStore, grace time.Duration) (store.SigningKey, error) {
	if grace < 0 {
		grace = DefaultRotationGrace
	}
	k, err := st.RotateSigningKey(ctx, NewKey(), grace)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("artifact: rotate the signing key: %w", err)
	}
	return k, nil
}
