package guard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/identity"
)

const (
	aliceToken = "alice-token-aaaaaaaaaaaaaaaaaaaa"
	bobToken   = "bob-token-bbbbbbbbbbbbbbbbbbbbbbb"
	carolToken = "carol-token-cccccccccccccccccccc"
)

// revocationBound is what docs/http-api.md promises: a removed token's streams close within 1 s.
const revocationBound = time.Second

func whoami(t *testing.T, s *server, token string) (int, identity.Identity) {
	t.Helper()
	resp, body := do(t, http.MethodGet, s.srv.URL+"/api/whoami", "Authorization", "Bearer "+token)
	var id identity.Identity
	_ = json.Unmarshal([]byte(body), &id)
	return resp.StatusCode, id
}

func tokensPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "tokens.json")
}

func TestTokensFileSubjects(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken, "bob", bobToken)
	s := start(t, Config{Token: testToken, TokensFile: path})
	for tok, want := range map[string]string{aliceToken: "alice", bobToken: "bob", testToken: identity.Local} {
		st, id := whoami(t, s, tok)
		if st != http.StatusOK || id.Subject != want || id.Credential != digestHex(tok) {
			t.Errorf("token of %s: got %d %+v", want, st, id)
		}
	}
	if st, _ := whoami(t, s, carolToken); st != http.StatusUnauthorized {
		t.Errorf("unknown token: got %d, want 401", st)
	}
}

func TestTokensFileOnly(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken)
	s := start(t, Config{TokensFile: path})
	if st, id := whoami(t, s, aliceToken); st != http.StatusOK || id.Subject != "alice" {
		t.Fatalf("got %d %+v", st, id)
	}
	// The exchange works with a file token too.
	resp, _ := do(t, http.MethodGet, s.srv.URL+"/?token="+aliceToken)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("exchange with a file token: %d", resp.StatusCode)
	}
}

func TestTokensFileReloadAddsAndRevokes(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken, "bob", bobToken)
	s := start(t, Config{Token: testToken, TokensFile: path})
	g := s.g

	_, alice := whoami(t, s, aliceToken)
	_, bob := whoami(t, s, bobToken)
	_, local := whoami(t, s, testToken)
	aliceCtx, aliceCancel := g.Context(t.Context(), alice)
	defer aliceCancel()
	bobCtx, bobCancel := g.Context(t.Context(), bob)
	defer bobCancel()
	localCtx, localCancel := g.Context(t.Context(), local)
	defer localCancel()

	// Add carol.
	writeTokensFile(t, path, "alice", aliceToken, "bob", bobToken, "carol", carolToken)
	waitFor(t, 3*time.Second, "carol to be admitted", func() bool {
		st, id := whoami(t, s, carolToken)
		return st == http.StatusOK && id.Subject == "carol"
	})

	// Remove bob: his context ends within the bound, with identity.ErrRevoked.
	began := time.Now()
	writeTokensFile(t, path, "alice", aliceToken, "carol", carolToken)
	select {
	case <-bobCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("bob's context was never cancelled")
	}
	if took := time.Since(began); took > revocationBound {
		t.Errorf("revocation took %v, the promise is %v", took, revocationBound)
	}
	if cause := context.Cause(bobCtx); !errors.Is(cause, identity.ErrRevoked) {
		t.Errorf("cause = %v, want identity.ErrRevoked", cause)
	}
	// The token stopped authenticating no later than its contexts ended.
	if st, _ := whoami(t, s, bobToken); st != http.StatusUnauthorized {
		t.Errorf("bob after removal: %d, want 401", st)
	}
	for name, ctx := range map[string]context.Context{"alice": aliceCtx, "local": localCtx} {
		if ctx.Err() != nil {
			t.Errorf("%s's context ended: %v", name, context.Cause(ctx))
		}
	}
	// A context asked for after the revocation comes back cancelled.
	late, lateCancel := g.Context(t.Context(), bob)
	defer lateCancel()
	if !errors.Is(context.Cause(late), identity.ErrRevoked) {
		t.Errorf("context for a revoked identity: cause %v, want identity.ErrRevoked", context.Cause(late))
	}
	if !strings.Contains(s.logs.String(), "tokens file reloaded") {
		t.Errorf("no reload log line: %s", s.logs)
	}
}

func TestTokensFileSubjectChangeRevokes(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "bob", bobToken)
	s := start(t, Config{TokensFile: path, PollInterval: 20 * time.Millisecond})
	_, bob := whoami(t, s, bobToken)
	ctx, cancel := s.g.Context(t.Context(), bob)
	defer cancel()
	writeTokensFile(t, path, "dave", bobToken)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), identity.ErrRevoked) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if st, id := whoami(t, s, bobToken); st != http.StatusOK || id.Subject != "dave" {
		t.Fatalf("the token now: %d %+v, want dave", st, id)
	}
}

// TestRevocationClosesSSEStream is the end-to-end form: an open event
// stream authenticated with a token ends within 1 s of the token leaving
// the file.
func TestRevocationClosesSSEStream(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken, "bob", bobToken)
	s := start(t, Config{TokensFile: path})
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+bobToken)
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != ": open\n" {
		t.Fatalf("stream began with %q (status %d)", line, resp.StatusCode)
	}
	began := time.Now()
	writeTokensFile(t, path, "alice", aliceToken)
	rest, err := io.ReadAll(br) // until the server ends the stream
	took := time.Since(began)
	if err != nil {
		t.Fatalf("stream broke: %v", err)
	}
	if !strings.Contains(string(rest), `"reason":"revoked"`) {
		t.Errorf("stream ended without the revoked frame: %q", rest)
	}
	if took > revocationBound {
		t.Errorf("the stream closed %v after the revocation; the promise is %v", took, revocationBound)
	}
}

func TestTokensFileInvalidAtStart(t *testing.T) {
	hexA := digestHex(aliceToken)
	for _, tc := range []struct {
		name    string
		content string // "" with missing: no file at all
		missing bool
		want    []string
	}{
		{"missing file", "", true, []string{"tokens file", "no such file"}},
		{"empty", "", false, []string{"is empty"}},
		{"syntax error", "{\"tokens\": [\n  {\"subject\": \"alice\" \"sha256\": \"x\"}\n]}", false, []string{"line 2, column"}},
		{"no tokens array", `{}`, false, []string{`no "tokens" array`}},
		{"tokens null", `{"tokens":null}`, false, []string{`no "tokens" array`}},
		{"tokens not an array", `{"tokens":{}}`, false, []string{`"tokens"`, "an array"}},
		{"unknown field", `{"tokens":[{"subject":"alice","sha265":"` + hexA + `"}]}`, false, []string{`unknown field "sha265"`}},
		{"subject missing", `{"tokens":[{"sha256":"` + hexA + `"}]}`, false, []string{"tokens[0]", "subject"}},
		{"subject not a string", `{"tokens":[{"subject":7,"sha256":"` + hexA + `"}]}`, false, []string{"tokens.subject", "a string"}},
		{"subject with spaces", `{"tokens":[{"subject":" alice","sha256":"` + hexA + `"}]}`, false, []string{`tokens[0] (subject " alice")`, "space"}},
		{"subject with control", `{"tokens":[{"subject":"al\u0007ice","sha256":"` + hexA + `"}]}`, false, []string{"control character"}},
		{"reserved subject", `{"tokens":[{"subject":"local","sha256":"` + hexA + `"}]}`, false, []string{`subject "local" is reserved`}},
		{"anonymous subject", `{"tokens":[{"subject":"anonymous","sha256":"` + hexA + `"}]}`, false, []string{"reserved"}},
		{"bad hex", `{"tokens":[{"subject":"alice","sha256":"` + strings.Repeat("z", 64) + `"}]}`, false, []string{`tokens[0] (subject "alice")`, "64 hex digits"}},
		{"short hex", `{"tokens":[{"subject":"alice","sha256":"abcd"}]}`, false, []string{"64 hex digits", "got 4"}},
		{"second entry bad", `{"tokens":[{"subject":"alice","sha256":"` + hexA + `"},{"subject":"bob","sha256":""}]}`, false, []string{`tokens[1] (subject "bob")`}},
		{"duplicate token", `{"tokens":[{"subject":"alice","sha256":"` + hexA + `"},{"subject":"bob","sha256":"` + strings.ToUpper(hexA) + `"}]}`, false, []string{`tokens[1] (subject "bob")`, `tokens[0] (subject "alice")`}},
		{"repeats the launch token", `{"tokens":[{"subject":"alice","sha256":"` + digestHex(testToken) + `"}]}`, false, []string{"launch token"}},
		{"trailing data", `{"tokens":[]} {}`, false, []string{"after the top-level object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tokensPath(t)
			if !tc.missing {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			g, err := New(Config{Addr: "127.0.0.1:0", Token: testToken, TokensFile: path, Logger: discard()})
			if err == nil {
				g.Close()
				t.Fatal("New accepted the file")
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestTokensFileValidEdgeCases(t *testing.T) {
	path := tokensPath(t)
	// Uppercase hex, one subject with two tokens, an empty list elsewhere.
	content := `{"tokens":[{"subject":"alice","sha256":"` + strings.ToUpper(digestHex(aliceToken)) + `"},` +
		`{"subject":"alice","sha256":"` + digestHex(bobToken) + `"}]}`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{TokensFile: path})
	for _, tok := range []string{aliceToken, bobToken} {
		if st, id := whoami(t, s, tok); st != http.StatusOK || id.Subject != "alice" || id.Credential != digestHex(tok) {
			t.Errorf("got %d %+v", st, id)
		}
	}

	log, logs := newLogger()
	empty := tokensPath(t)
	if err := os.WriteFile(empty, []byte(`{"tokens":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Addr: "127.0.0.1:0", TokensFile: empty, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if !strings.Contains(logs.String(), "nobody can sign in") {
		t.Errorf("no warning for an empty file without a launch token: %s", logs)
	}
}

func TestTokensFileInvalidLaterKeepsLastGood(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken, "bob", bobToken)
	s := start(t, Config{TokensFile: path, PollInterval: 20 * time.Millisecond})
	_, bob := whoami(t, s, bobToken)
	ctx, cancel := s.g.Context(t.Context(), bob)
	defer cancel()

	writeFileAtomic(t, path, `{"tokens":[{"subject":"alice","sha256":"nothex"}]}`)
	waitFor(t, 3*time.Second, "the invalid file to be logged", func() bool {
		return strings.Contains(s.logs.String(), "tokens file is invalid; keeping the last good set")
	})
	if !strings.Contains(s.logs.String(), `tokens[0] (subject \"alice\")`) {
		t.Errorf("the log does not name the entry: %s", s.logs)
	}
	for tok, want := range map[string]string{aliceToken: "alice", bobToken: "bob"} {
		if st, id := whoami(t, s, tok); st != http.StatusOK || id.Subject != want {
			t.Errorf("%s after an invalid reload: %d %+v", want, st, id)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("an invalid file revoked a context")
	}
	// Logged once, not on every poll.
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(s.logs.String(), "tokens file is invalid"); n != 1 {
		t.Errorf("the invalid file was logged %d times, want once", n)
	}

	// Deleted: still the last good set.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the missing file to be logged", func() bool {
		return strings.Contains(s.logs.String(), "tokens file cannot be read")
	})
	if st, _ := whoami(t, s, bobToken); st != http.StatusOK {
		t.Errorf("bob after the file vanished: %d", st)
	}

	// A good file again recovers, and now revokes bob.
	writeTokensFile(t, path, "alice", aliceToken, "carol", carolToken)
	waitFor(t, 3*time.Second, "carol to be admitted", func() bool {
		st, _ := whoami(t, s, carolToken)
		return st == http.StatusOK
	})
	<-ctx.Done()
	if st, _ := whoami(t, s, bobToken); st != http.StatusUnauthorized {
		t.Errorf("bob after the recovery: %d, want 401", st)
	}
}

// TestTokensFileSameSizeRewrite rewrites the file in place, twice in a
// row, with contents of the same size: the stamp (mtime, size, inode) may
// not change within the file system's timestamp granularity, so only the
// re-read of a young file catches it.
func TestTokensFileSameSizeRewrite(t *testing.T) {
	path := tokensPath(t)
	const tokA, tokB = "token-aaaaaaaaaaaaaaaaaaaaaaaaaaa", "token-bbbbbbbbbbbbbbbbbbbbbbbbbbb"
	write := func(tok string) {
		content := `{"tokens":[{"subject":"alice","sha256":"` + digestHex(tok) + `"}]}`
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A coarse-timestamp file system: both writes get the same mtime.
	mtime := time.Now().Truncate(time.Second)
	write(tokA)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{TokensFile: path, PollInterval: 20 * time.Millisecond})
	write(tokB)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	// Same inode, size and mtime: nothing in the stamp says it changed, but
	// the file is still young, so it is re-read and compared by content.
	waitFor(t, 3*time.Second, "the rewritten token to be admitted", func() bool {
		st, _ := whoami(t, s, tokB)
		return st == http.StatusOK
	})
	if st, _ := whoami(t, s, tokA); st != http.StatusUnauthorized {
		t.Errorf("the replaced token still works: %d", st)
	}
}

func TestContextRegistration(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken)
	g, err := New(Config{Addr: "127.0.0.1:0", TokensFile: path, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	alice, ok := g.lookup(aliceToken)
	if !ok {
		t.Fatal("alice unknown")
	}

	_, cancel := g.Context(t.Context(), alice)
	if n := g.watching(); n != 1 {
		t.Fatalf("watching %d, want 1", n)
	}
	cancel()
	waitFor(t, time.Second, "the released context to unregister", func() bool { return g.watching() == 0 })

	parent, parentCancel := context.WithCancel(t.Context())
	ctx, cancel := g.Context(parent, alice)
	defer cancel()
	parentCancel()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), identity.ErrRevoked) {
		t.Error("a parent cancellation reported as a revocation")
	}
	waitFor(t, time.Second, "the orphaned context to unregister", func() bool { return g.watching() == 0 })

	for name, id := range map[string]identity.Identity{
		"zero identity":       {},
		"forged subject":      {Subject: "mallory", Credential: alice.Credential},
		"unknown token":       {Subject: "alice", Credential: digestHex("nope")},
		"anonymous with auth": {Subject: identity.Anonymous},
	} {
		ctx, cancel := g.Context(t.Context(), id)
		if !errors.Is(context.Cause(ctx), identity.ErrRevoked) {
			t.Errorf("%s: cause %v, want an immediate identity.ErrRevoked", name, context.Cause(ctx))
		}
		cancel()
	}
	if n := g.watching(); n != 0 {
		t.Errorf("refused contexts were registered: %d", n)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	path := tokensPath(t)
	writeTokensFile(t, path, "alice", aliceToken)
	g, err := New(Config{Addr: "127.0.0.1:0", TokensFile: path, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	g.Close()
	g2, err := New(Config{Addr: "127.0.0.1:0", Token: testToken, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	g2.Close() // no watcher at all
}

// TestMatch checks the branch-free comparison: only the exact digest
// matches, whichever word a near miss differs in.
func TestMatch(t *testing.T) {
	entries := []tokenEntry{newTokenEntry("a", "a"), newTokenEntry("b", "b"), newTokenEntry("c", "c")}
	for i, e := range entries {
		d := e.digest
		if got := match(entries, &d); got != i {
			t.Errorf("match(entry %d) = %d", i, got)
		}
		for w := range d {
			for _, flip := range []uint64{1, 1 << 63, ^uint64(0), d[w], d[(w+1)%4] & -d[(w+1)%4]} {
				near := d
				near[w] ^= flip
				if near == d {
					continue
				}
				if got := match(entries, &near); got != -1 {
					t.Errorf("entry %d with word %d ^ %#x matched %d", i, w, flip, got)
				}
			}
		}
	}
	// A digest whose words are another entry's, mixed, must not match.
	a, b := entries[0].digest, entries[1].digest
	mixed := digestWords{a[0], b[1], a[2], b[3]}
	if got := match(entries, &mixed); got != -1 {
		t.Errorf("mixed digest matched %d", got)
	}
	if got := match(nil, &a); got != -1 {
		t.Errorf("empty set matched %d", got)
	}
}
