package artifact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/memstore"
)

// notices records what a Service tells sessions.
type notices struct {
	mu  sync.Mutex
	got []string // "<session> <event> <artifact id>"
}

func (n *notices) notify(_ context.Context, sessionID string, ev *pb.ArtifactEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, sessionID+" "+ev.GetEvent()+" "+ev.GetArtifact().GetId())
}

func (n *notices) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

type fixture struct {
	st    *memstore.Store
	clock *clock.Fake
	svc   *artifact.Service
	seen  *notices
}

func newFixture(t *testing.T, lim artifact.Limits) *fixture {
	t.Helper()
	f := &fixture{st: memstore.New(), clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), seen: &notices{}}
	f.svc = f.service(t, lim)
	ctx := context.Background()
	for _, s := range []store.Session{{ID: "s1", Owner: "alice"}, {ID: "s2", Owner: "bob"}, {ID: "done", Owner: "alice", Status: store.StatusEnded}} {
		if err := f.st.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// service is another Service on the same store: another node.
func (f *fixture) service(t *testing.T, lim artifact.Limits) *artifact.Service {
	t.Helper()
	svc, err := artifact.New(context.Background(), artifact.Config{Store: f.st, Limits: lim, Clock: f.clock, Notify: f.seen.notify,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func (f *fixture) put(t *testing.T, session, data string, o artifact.PutOptions) artifact.Artifact {
	t.Helper()
	if o.MediaType == "" {
		o.MediaType = "text/plain"
	}
	a, err := f.svc.Put(context.Background(), session, strings.NewReader(data), o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := artifact.NewID()
		if len(id) != 30 || !strings.HasPrefix(id, "att_") || strings.Trim(id[4:], "abcdefghijklmnopqrstuvwxyz234567") != "" {
			t.Fatalf("id %q is not att_ and 26 lowercase base32 characters", id)
		}
		if url.PathEscape(id) != id {
			t.Fatalf("id %q is not URL-safe", id)
		}
		if _, ok := artifact.ParseID(id); !ok {
			t.Fatalf("ParseID(%q) refused an id NewID made", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
	good := artifact.NewID()
	for _, bad := range []string{"", "att_", good[:29], good + "a", "ATT_" + good[4:], strings.ToUpper(good), "att_" + strings.Repeat("1", 26),
		"img_" + good[4:], good[:29] + "="} {
		if _, ok := artifact.ParseID(bad); ok {
			t.Errorf("ParseID(%q) accepted it", bad)
		}
	}
}

func TestPutGetListDelete(t *testing.T) {
	f := newFixture(t, artifact.Limits{})
	ctx := context.Background()
	src := f.put(t, "s1", "source", artifact.PutOptions{MediaType: "text/plain"})
	a := f.put(t, "s1", "hello", artifact.PutOptions{MediaType: "Text/Plain; Charset=UTF-8", Name: "hello é.txt", DerivedFrom: src.ID,
		Meta: json.RawMessage(`{"by": "test"}`), Size: 5})
	if a.MediaType != "text/plain; charset=UTF-8" || a.Size != 5 || a.Name != "hello é.txt" || a.DerivedFrom != src.ID || string(a.Meta) != `{"by": "test"}` {
		t.Errorf("artifact %+v", a)
	}
	if got, err := f.svc.Get(ctx, "s1", a.ID); err != nil || got.ID != a.ID || got.Owner != "alice" {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if _, err := f.svc.Get(ctx, "s2", a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Get from another session: err = %v, want ErrNotFound", err)
	}
	if _, err := f.svc.Get(ctx, "s1", "att_nope"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Get of a malformed id: err = %v, want ErrNotFound", err)
	}
	_, r, err := f.svc.Open(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if string(data) != "hello" {
		t.Errorf("Open read %q", data)
	}
	page, next, err := f.svc.List(ctx, "s1", artifact.Query{MediaType: "text/*", Limit: 1})
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("List = %v, %q, %v", page, next, err)
	}
	rest, last, err := f.svc.List(ctx, "s1", artifact.Query{MediaType: "text/*", Cursor: next})
	if err != nil || len(rest) != 1 || last != "" || rest[0].ID == page[0].ID {
		t.Fatalf("the next page = %v, %q, %v", rest, last, err)
	}
	if n, _ := f.svc.Usage(ctx, "s1"); n != 11 {
		t.Errorf("Usage = %d, want 11", n)
	}
	if _, err := f.svc.Delete(ctx, "s2", a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Delete from another session: err = %v, want ErrNotFound", err)
	}
	if _, err := f.svc.Delete(ctx, "s1", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Open(ctx, a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Open after Delete: err = %v, want ErrNotFound", err)
	}
	if _, err := f.svc.Delete(ctx, "s1", a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("second Delete: err = %v, want ErrNotFound", err)
	}
	want := []string{"s1 added " + src.ID, "s1 added " + a.ID, "s1 deleted " + a.ID}
	if got := f.seen.all(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("notices %v, want %v", got, want)
	}
}

// mustNotRead fails the test when read: a put refused before any byte.
type mustNotRead struct{ t *testing.T }

func (m mustNotRead) Read([]byte) (int, error) {
	m.t.Error("the bytes were read although the put was refused up front")
	return 0, io.EOF
}

func TestPutRefusals(t *testing.T) {
	f := newFixture(t, artifact.Limits{MaxBytes: 100, SessionBytes: 250})
	ctx := context.Background()
	field := func(err error) string {
		var fe *artifact.FieldError
		if errors.As(err, &fe) {
			return fe.Field
		}
		return ""
	}
	for name, tc := range map[string]struct {
		session string
		o       artifact.PutOptions
		is      error
		field   string
	}{
		"no media type":        {"s1", artifact.PutOptions{}, nil, "mediaType"},
		"bad media type":       {"s1", artifact.PutOptions{MediaType: "png"}, nil, "mediaType"},
		"wildcard media type":  {"s1", artifact.PutOptions{MediaType: "image/*"}, nil, "mediaType"},
		"long media type":      {"s1", artifact.PutOptions{MediaType: "a/" + strings.Repeat("b", 300)}, nil, "mediaType"},
		"control in name":      {"s1", artifact.PutOptions{MediaType: "a/b", Name: "a\nb"}, nil, "name"},
		"long name":            {"s1", artifact.PutOptions{MediaType: "a/b", Name: strings.Repeat("n", 256)}, nil, "name"},
		"meta not JSON":        {"s1", artifact.PutOptions{MediaType: "a/b", Meta: json.RawMessage(`{`)}, nil, "meta"},
		"meta not an object":   {"s1", artifact.PutOptions{MediaType: "a/b", Meta: json.RawMessage(`[1]`)}, nil, "meta"},
		"meta too large":       {"s1", artifact.PutOptions{MediaType: "a/b", Meta: json.RawMessage(`{"x":"` + strings.Repeat("x", 16<<10) + `"}`)}, nil, "meta"},
		"unknown derivedFrom":  {"s1", artifact.PutOptions{MediaType: "a/b", DerivedFrom: artifact.NewID()}, nil, "derivedFrom"},
		"no session":           {"nope", artifact.PutOptions{MediaType: "a/b"}, artifact.ErrNotFound, ""},
		"ended session":        {"done", artifact.PutOptions{MediaType: "a/b"}, artifact.ErrSessionEnded, ""},
		"announced too large":  {"s1", artifact.PutOptions{MediaType: "a/b", Size: 101}, artifact.ErrTooLarge, ""},
		"announced over quota": {"s1", artifact.PutOptions{MediaType: "a/b", Size: 251}, artifact.ErrTooLarge, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.svc.Put(ctx, tc.session, mustNotRead{t}, tc.o)
			if tc.is != nil && !errors.Is(err, tc.is) || tc.field != field(err) || err == nil {
				t.Errorf("err = %v, want %v / field %q", err, tc.is, tc.field)
			}
		})
	}
	// The bytes decide in the end: more than announced, or none announced.
	if _, err := f.svc.Put(ctx, "s1", strings.NewReader(strings.Repeat("x", 101)), artifact.PutOptions{MediaType: "a/b", Size: 10}); !errors.Is(err, artifact.ErrTooLarge) {
		t.Errorf("101 bytes announced as 10: err = %v, want ErrTooLarge", err)
	}
	if _, err := f.svc.Put(ctx, "s1", strings.NewReader(strings.Repeat("x", 101)), artifact.PutOptions{MediaType: "a/b", Size: -1}); !errors.Is(err, artifact.ErrTooLarge) {
		t.Errorf("101 bytes: err = %v, want ErrTooLarge", err)
	}
	f.put(t, "s1", strings.Repeat("a", 100), artifact.PutOptions{})
	f.put(t, "s1", strings.Repeat("b", 100), artifact.PutOptions{})
	if _, err := f.svc.Put(ctx, "s1", mustNotRead{t}, artifact.PutOptions{MediaType: "a/b", Size: 51}); !errors.Is(err, artifact.ErrQuotaExceeded) {
		t.Errorf("announced over the quota: err = %v, want ErrQuotaExceeded", err)
	}
	if _, err := f.svc.Put(ctx, "s1", strings.NewReader(strings.Repeat("c", 51)), artifact.PutOptions{MediaType: "a/b", Size: -1}); !errors.Is(err, artifact.ErrQuotaExceeded) {
		t.Errorf("over the quota: err = %v, want ErrQuotaExceeded", err)
	}
	f.put(t, "s1", strings.Repeat("d", 50), artifact.PutOptions{})  // exactly the quota
	f.put(t, "s2", strings.Repeat("e", 100), artifact.PutOptions{}) // another session's own
	if n, _ := f.st.SweepBlobs(ctx, 0); n != 0 {
		t.Errorf("refused puts left %d blobs", n)
	}
}

func TestSession(t *testing.T) {
	f := newFixture(t, artifact.Limits{})
	ctx := context.Background()
	if s, err := f.svc.Session(ctx, "s1", "alice"); err != nil || s.ID != "s1" {
		t.Errorf("own session: %v, %v", s, err)
	}
	for _, tc := range [][2]string{{"s1", "bob"}, {"nope", "alice"}, {"", "alice"}, {"a\x00", "alice"}} {
		if _, err := f.svc.Session(ctx, tc[0], tc[1]); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Session(%q, %q): err = %v, want ErrNotFound", tc[0], tc[1], err)
		}
	}
}

func TestListRefusals(t *testing.T) {
	f := newFixture(t, artifact.Limits{})
	ctx := context.Background()
	for q, field := range map[artifact.Query]string{
		{MediaType: "image"}:  "mediaType",
		{Cursor: "garbage"}:   "cursor",
		{Limit: -1}:           "limit",
		{Limit: 501}:          "limit",
		{MediaType: "*/json"}: "mediaType",
	} {
		var fe *artifact.FieldError
		if _, _, err := f.svc.List(ctx, "s1", q); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("List(%+v): err = %v, want a field error on %s", q, err, field)
		}
	}
}

// signed splits a signed URL into its artifact id, exp and sig.
func signed(t *testing.T, u string) (id, exp, sig string) {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSuffix(strings.TrimPrefix(p.Path, "/api/artifacts/"), "/content")
	return id, p.Query().Get("exp"), p.Query().Get("sig")
}

// verifyURL verifies a signed URL as the content route does.
func verifyURL(t *testing.T, svc *artifact.Service, u string) error {
	t.Helper()
	id, exp, sig := signed(t, u)
	return svc.Verify(context.Background(), id, exp, sig)
}

func TestSignedURLs(t *testing.T) {
	f := newFixture(t, artifact.Limits{})
	ctx := context.Background()
	a := f.put(t, "s1", "x", artifact.PutOptions{})
	b := f.put(t, "s2", "y", artifact.PutOptions{})
	u, expires := f.svc.URL(a.ID, 0)
	if !strings.HasPrefix(u, "/api/artifacts/"+a.ID+"/content?exp=") {
		t.Fatalf("URL %q", u)
	}
	if d := expires.Sub(f.clock.Now()); d < time.Hour || d > time.Hour+time.Second {
		t.Errorf("the URL expires in %v, want an hour", d)
	}
	id, exp, sig := signed(t, u)
	if err := f.svc.Verify(ctx, id, exp, sig); err != nil {
		t.Fatalf("Verify of a fresh URL: %v", err)
	}
	// Another node of the deployment verifies it too.
	other := f.service(t, artifact.Limits{})
	if err := other.Verify(ctx, id, exp, sig); err != nil {
		t.Errorf("another node's Verify: %v", err)
	}
	flip := func(s string, i int) string {
		c := byte('0')
		if s[i] == '0' {
			c = '1'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	for name, tc := range map[string][3]string{
		"no sig":          {id, exp, ""},
		"no exp":          {id, "", sig},
		"exp moved":       {id, flip(exp, len(exp)-1), sig},
		"exp negative":    {id, "-" + exp, sig},
		"mac changed":     {id, exp, flip(sig, len(sig)-1)},
		"id part changed": {id, exp, flip(sig, 0)},
		"sig cut":         {id, exp, sig[:len(sig)-2]},
		"sig not hex":     {id, exp, "zz" + sig[2:]},
		"sig upper":       {id, exp, strings.ToUpper(sig) + "00"},
	} {
		if err := f.svc.Verify(ctx, tc[0], tc[1], tc[2]); !errors.Is(err, artifact.ErrBadSignature) {
			t.Errorf("%s: err = %v, want ErrBadSignature", name, err)
		}
	}
	// A genuine signature for another artifact.
	if err := f.svc.Verify(ctx, b.ID, exp, sig); !errors.Is(err, artifact.ErrOtherArtifact) {
		t.Errorf("a's signature on b: err = %v, want ErrOtherArtifact", err)
	}
	// A longer ttl is bounded.
	long, longExp := f.svc.URL(a.ID, 1000*time.Hour)
	if d := longExp.Sub(f.clock.Now()); d > artifact.MaxURLTTL+time.Second {
		t.Errorf("a URL asked for 1000h expires in %v", d)
	}
	// Expiry by the clock.
	f.clock.Advance(time.Hour + time.Second)
	if err := f.svc.Verify(ctx, id, exp, sig); !errors.Is(err, artifact.ErrSignatureExpired) {
		t.Errorf("after an hour: err = %v, want ErrSignatureExpired", err)
	}
	if err := verifyURL(t, f.svc, long); err != nil {
		t.Errorf("a 24h URL after an hour: %v", err)
	}
}

func TestRotation(t *testing.T) {
	f := newFixture(t, artifact.Limits{})
	ctx := context.Background()
	a := f.put(t, "s1", "x", artifact.PutOptions{})
	before, _ := f.svc.URL(a.ID, 0)
	other := f.service(t, artifact.Limits{}) // another node

	if _, err := artifact.RotateKey(ctx, f.st, -1); err != nil {
		t.Fatal(err)
	}
	// A node that loaded the new key signs with it; one that did not yet
	// verifies its URLs at once (the unknown signature makes it reload).
	f.clock.Advance(artifact.KeyRefresh)
	if !f.clock.WaitPending(2, 5*time.Second) {
		t.Fatal("the key refresh was not armed again")
	}
	waitFor(t, func() bool {
		u, _ := f.svc.URL(a.ID, 0)
		_, _, sig := signed(t, u)
		_, _, old := signed(t, before)
		return sig[32:] != old[32:] && !strings.Contains(u, old)
	})
	after, _ := f.svc.URL(a.ID, 0)
	if err := verifyURL(t, other, after); err != nil {
		t.Errorf("a URL signed with the new key, on another node: %v", err)
	}
	// URLs handed out before keep working through the grace.
	if err := verifyURL(t, f.svc, before); err != nil {
		t.Errorf("a URL signed before the rotation: %v", err)
	}

	// A rotation without grace ends the old keys' URLs once nodes reload.
	if _, err := artifact.RotateKey(ctx, f.st, 0); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(artifact.KeyRefresh)
	waitFor(t, func() bool { return verifyURL(t, f.svc, after) != nil })
	if err := verifyURL(t, f.svc, after); !errors.Is(err, artifact.ErrBadSignature) {
		t.Errorf("a URL of a key rotated out without grace: err = %v, want ErrBadSignature", err)
	}
	if err := verifyURL(t, f.svc, before); err != nil {
		t.Errorf("the first key is still within its grace: %v", err)
	}
	f.clock.Advance(artifact.DefaultRotationGrace)
	if err := verifyURL(t, f.svc, before); err == nil {
		t.Error("a URL of a key past its grace still verifies")
	}
}

// waitFor waits until cond holds: the reload runs on the clock's own
// goroutine.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, cond, "the keys reloaded")
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }

func TestPutFile(t *testing.T) {
	f := newFixture(t, artifact.Limits{MaxBytes: 10})
	dir := t.TempDir()
	path := dir + "/f.bin"
	if err := writeFile(path, bytes.Repeat([]byte{7}, 11)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.PutFile(context.Background(), "s1", path, artifact.PutOptions{MediaType: "a/b"}); !errors.Is(err, artifact.ErrTooLarge) {
		t.Errorf("a file over the limit: err = %v, want ErrTooLarge", err)
	}
	if _, err := f.svc.PutFile(context.Background(), "s1", dir, artifact.PutOptions{MediaType: "a/b"}); err == nil {
		t.Error("a directory was put")
	}
	if err := writeFile(path, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	a, err := f.svc.PutFile(context.Background(), "s1", path, artifact.PutOptions{MediaType: "a/b"})
	if err != nil || a.Size != 10 {
		t.Errorf("PutFile = %+v, %v", a, err)
	}
}
