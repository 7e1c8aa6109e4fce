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
	if !ok || got.Subject != want.Subject || got.Credential != want.Credential {
		t.Fatalf("FromContext = %+v, %v; want %+v", got, ok, want)
	}
	if got.IsZero() || !(identity.Identity{}).IsZero() {
		t.Fatal("IsZero is wrong")
	}
}

func TestQualify(t *testing.T) {
	if got := identity.Qualify("https://idp.example.com", "42"); got != "https://idp.example.com#42" {
		t.Fatalf("Qualify = %q", got)
	}
}

func TestAccess(t *testing.T) {
	a := identity.NewAccess(map[string]identity.Rule{
		"demo":   {Subjects: []string{"alice", "https://idp#bob"}, Groups: []string{"staff"}},
		"closed": {},
	})
	cases := []struct {
		id    identity.Identity
		agent string
		want  bool
	}{
		{identity.Identity{Subject: "alice"}, "demo", true},
		{identity.Identity{Subject: "https://idp#bob"}, "demo", true},
		{identity.Identity{Subject: "bob"}, "demo", false},
		{identity.Identity{Subject: "carol", Groups: []string{"dev", "staff"}}, "demo", true},
		{identity.Identity{Subject: "carol", Groups: []string{"dev"}}, "demo", false},
		{identity.Identity{Subject: "carol", Groups: []string{""}}, "demo", false},
		{identity.Identity{Subject: "alice"}, "closed", false},
		{identity.Identity{Subject: "anyone"}, "open", true},
		{identity.Identity{}, "open", true},
		{identity.Identity{}, "demo", false},
	}
	for _, c := range cases {
		if got := a.Allows(c.id, c.agent); got != c.want {
			t.Errorf("Allows(%+v, %q) = %v, want %v", c.id, c.agent, got, c.want)
		}
	}
	var none *identity.Access
	if !none.Allows(identity.Identity{Subject: "x"}, "demo") || none.Restricted("demo") {
		t.Error("a nil Access must allow everything")
	}
	if identity.NewAccess(nil) != nil {
		t.Error("no rules must give a nil Access")
	}
	if !a.Restricted("demo") || a.Restricted("open") {
		t.Error("Restricted is wrong")
	}
}
