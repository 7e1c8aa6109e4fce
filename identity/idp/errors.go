package idp

import (
	"context"
	"errors"
)

// ErrUnavailable: the provider's keys cannot be had (its key set cannot
// be fetched and no cached key may be trusted any more), so the credential
// can be neither accepted nor refused: the answer is 503
// identity_unavailable.
var ErrUnavailable = errors.New("idp: the identity provider's keys are unavailable")

// Refusal is a credential refused: its reason is for the log (and, for a
// few reasons a client can act on, the message); the answer is 401
// unauthorized, as for every refused credential.
type Refusal struct {
	Reason string
	// Expired: the token was valid and has expired (a client fetches a new
	// one).
	Expired bool
}

func (r *Refusal) Error() string { return "idp: refused: " + r.Reason }

func refuse(format string, err error) *Refusal {
	if err != nil {
		return &Refusal{Reason: format + ": " + err.Error()}
	}
	return &Refusal{Reason: format}
}

// unavailableNote carries, through go-oidc's verifier (which flattens the
// key set's error to text), whether the key set failed for being
// unavailable.
type unavailableNote struct{ set bool }

type noteKey struct{}

func withNote(ctx context.Context) (context.Context, *unavailableNote) {
	n := &unavailableNote{}
	return context.WithValue(ctx, noteKey{}, n), n
}

func noteUnavailable(ctx context.Context) {
	if n, ok := ctx.Value(noteKey{}).(*unavailableNote); ok {
		n.set = true
	}
}
