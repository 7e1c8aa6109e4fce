package identity_test

import (
	"context"
	"testing"

	"github.com/surfaced/surfaced/identity"
)

func TestContextCarriesTheIdentity(t *testing.T) {
	if _, ok := identity.FromContext(context.Background()); ok {
		t.Fatal("a bare context has an identity")
	}
	want := identity.Identity{Subject: "alice", Credential: "c0ffee"}
	got, ok := identity.FromContext(identity.NewContext(context.Background(), want))
	if !ok || got != want {
		t.Fatalf("FromContext = %+v, %v; want %+v", got, ok, want)
	}
	if got.IsZero() || !(identity.Identity{}).IsZero() {
		t.Fatal("IsZero is wrong")
	}
}
