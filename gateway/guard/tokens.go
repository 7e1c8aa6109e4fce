package guard

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/surfaced/surfaced/identity"
)

// LaunchToken returns a fresh random 128-bit token as 32 lowercase hex
// digits: safe in a URL, a header and a cookie without escaping.
func LaunchToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b[:])
}

// tokenEntry is one admitted token, known only by its digest.
type tokenEntry struct {
	digest  digestWords
	id      string // hex of the digest: identity.Identity.Credential
	subject string
}

// tokenSet is an immutable set of entries from one read of the tokens file.
type tokenSet struct {
	entries []tokenEntry
	byID    map[string]string // Credential → subject (digests are not secrets)
}

func newTokenSet(entries []tokenEntry) *tokenSet {
	s := &tokenSet{entries: entries, byID: make(map[string]string, len(entries))}
	for _, e := range entries {
		s.byID[e.id] = e.subject
	}
	return s
}

// digestWords is a SHA-256 digest as four machine words, so that a
// constant-time comparison is four XORs instead of a byte loop.
type digestWords [4]uint64

func wordsOf(d *[sha256.Size]byte) digestWords {
	return digestWords{
		binary.LittleEndian.Uint64(d[0:]), binary.LittleEndian.Uint64(d[8:]),
		binary.LittleEndian.Uint64(d[16:]), binary.LittleEndian.Uint64(d[24:]),
	}
}

func newTokenEntry(token, subject string) tokenEntry {
	d := sha256.Sum256([]byte(token))
	return tokenEntry{digest: wordsOf(&d), id: hex.EncodeToString(d[:]), subject: subject}
}

// maxTokenLen bounds what is hashed at all; real tokens are far shorter.
const maxTokenLen = 4096

// match finds the entry whose digest equals d, comparing against every
// entry in constant time (no early exit), so the time taken does not
// depend on which entry, if any, matched. It returns -1 for no match.
func match(entries []tokenEntry, d *digestWords) int {
	found := -1
	for i := range entries {
		e := &entries[i].digest
		diff := (e[0] ^ d[0]) | (e[1] ^ d[1]) | (e[2] ^ d[2]) | (e[3] ^ d[3])
		eq := int(1 ^ (diff|-diff)>>63) // 1 when diff == 0, without a branch
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	return found
}

// cookieSafe reports whether a token can travel verbatim as a cookie value
// (RFC 6265 cookie-octet) and therefore also in a header.
func cookieSafe(tok string) bool {
	if tok == "" || len(tok) > maxTokenLen {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

// tokensFileJSON is the on-disk form of --tokens-file.
type tokensFileJSON struct {
	Tokens *[]tokenFileEntry `json:"tokens"`
}

type tokenFileEntry struct {
	Subject string `json:"subject"`
	SHA256  string `json:"sha256"`
}

const maxSubjectLen = 256

// parseTokensFile validates a tokens file and returns its entries. Every
// error names the file and, when it is about an entry, the entry's index
// and subject. launch is the launch token's entry (nil without one),
// which a file entry may not repeat (it would give one token two subjects).
func parseTokensFile(path string, data []byte, launch *tokenEntry) (*tokenSet, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("tokens file %q: %s", path, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f tokensFileJSON
	if err := dec.Decode(&f); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return nil, fail(`is empty; want {"tokens":[{"subject":"alice","sha256":"<hex sha256 of the token>"}]}`)
		case errors.As(err, &syn):
			line, col := lineCol(data, syn.Offset)
			return nil, fail("line %d, column %d: %v", line, col, err)
		case errors.As(err, &typ):
			line, col := lineCol(data, typ.Offset)
			return nil, fail("line %d, column %d: field %q must be %s, not %s", line, col, typ.Field, typeWord(typ.Type.Kind().String()), typ.Value)
		default:
			return nil, fail("%v", err)
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fail("has data after the top-level object")
	}
	if f.Tokens == nil {
		return nil, fail(`has no "tokens" array; want {"tokens":[{"subject":"alice","sha256":"<hex sha256 of the token>"}]}`)
	}
	entries := make([]tokenEntry, 0, len(*f.Tokens))
	seen := make(map[string]int, len(*f.Tokens))
	for i, e := range *f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if e.Subject != "" {
			where += fmt.Sprintf(" (subject %q)", e.Subject)
		}
		if err := checkSubject(e.Subject); err != nil {
			return nil, fail("%s: %v", where, err)
		}
		digest, err := hex.DecodeString(e.SHA256)
		if err != nil || len(digest) != sha256.Size {
			return nil, fail("%s: sha256 must be 64 hex digits (the SHA-256 of the token, e.g. from `printf %%s TOKEN | sha256sum`), got %d characters", where, len(e.SHA256))
		}
		id := hex.EncodeToString(digest)
		if j, dup := seen[id]; dup {
			return nil, fail("%s: the same token as tokens[%d] (subject %q); one token must name one subject", where, j, (*f.Tokens)[j].Subject)
		}
		if launch != nil && id == launch.id {
			return nil, fail("%s: this is the launch token (--token), whose subject is %q; give the file entry its own token", where, identity.Local)
		}
		seen[id] = i
		var d [sha256.Size]byte
		copy(d[:], digest)
		entries = append(entries, tokenEntry{digest: wordsOf(&d), id: id, subject: e.Subject})
	}
	return newTokenSet(entries), nil
}

func checkSubject(s string) error {
	switch {
	case s == "":
		return errors.New(`"subject" is missing or empty`)
	case len(s) > maxSubjectLen:
		return fmt.Errorf("subject is longer than %d bytes", maxSubjectLen)
	case !utf8.ValidString(s):
		return errors.New("subject is not valid UTF-8")
	case strings.TrimSpace(s) != s:
		return errors.New("subject has leading or trailing space")
	case s == identity.Local || s == identity.Anonymous:
		return fmt.Errorf("subject %q is reserved (%q is the launch token's subject, %q is everyone under --no-auth)", s, identity.Local, identity.Anonymous)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return errors.New("subject contains a control character")
		}
	}
	return nil
}

func typeWord(kind string) string {
	switch kind {
	case "slice":
		return "an array"
	case "struct", "ptr":
		return "an object"
	default:
		return "a " + kind
	}
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// fileStamp identifies one version of the tokens file cheaply.
type fileStamp struct {
	info    os.FileInfo
	modTime time.Time
	size    int64
}

func (a fileStamp) same(b fileStamp) bool {
	return a.info != nil && b.info != nil && os.SameFile(a.info, b.info) &&
		a.modTime.Equal(b.modTime) && a.size == b.size
}

// racyWindow: a file modified this recently may be rewritten again within
// the file system's timestamp granularity with the same size, which the
// stamp cannot see; such a file is re-read (and compared by content) on
// every poll until it has been quiet this long.
const racyWindow = 2 * time.Second

// poll checks the tokens file once and installs a new set when its content
// changed and parses. A file that is missing, unreadable or invalid keeps
// the last good set; the error is logged once per distinct failure.
func (g *Guard) poll() {
	fi, err := os.Stat(g.tokensFile)
	if err != nil {
		g.pollFailed(fmt.Sprintf("stat: %v", err), err)
		return
	}
	st := fileStamp{info: fi, modTime: fi.ModTime(), size: fi.Size()}
	if st.same(g.stamp) && time.Since(st.modTime) > racyWindow {
		return
	}
	data, err := os.ReadFile(g.tokensFile)
	if err != nil {
		g.pollFailed(fmt.Sprintf("read: %v", err), err)
		return
	}
	g.stamp = st
	sum := sha256.Sum256(data)
	if sum == g.contentSum {
		return
	}
	g.contentSum = sum
	set, err := parseTokensFile(g.tokensFile, data, g.launch)
	g.lastPollErr = ""
	if err != nil {
		g.log.Error("tokens file is invalid; keeping the last good set of tokens", "file", g.tokensFile, "err", err)
		return
	}
	g.install(set)
}

func (g *Guard) pollFailed(key string, err error) {
	if key == g.lastPollErr {
		return
	}
	g.lastPollErr = key
	// Forget the content so the file is re-read when it comes back.
	g.stamp = fileStamp{}
	g.contentSum = [sha256.Size]byte{}
	g.log.Error("tokens file cannot be read; keeping the last good set of tokens", "file", g.tokensFile, "err", err)
}
