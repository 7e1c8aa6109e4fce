package storetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/store"
)

// RunArtifacts runs the conformance suite of store.ArtifactStore (and of
// DeleteSession's artifacts). open returns a new, empty store for one
// subtest; RunArtifacts closes it when the subtest ends.
func RunArtifacts(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"PutGet", testArtifactPutGet},
		{"Empty", testArtifactEmpty},
		{"Ranges", testArtifactRanges},
		{"List", testArtifactList},
		{"ListBadArguments", testArtifactListBad},
		{"Delete", testArtifactDelete},
		{"TooLarge", testArtifactTooLarge},
		{"ReaderFails", testArtifactReaderFails},
		{"Quota", testArtifactQuota},
		{"QuotaConcurrent", testArtifactQuotaConcurrent},
		{"ConcurrentSameBytes", testArtifactSameBytes},
		{"CommitErrors", testArtifactCommitErrors},
		{"OrphanSwept", testArtifactOrphanSwept},
		{"DeleteSession", testArtifactDeleteSession},
		{"SigningKeys", testSigningKeys},
		{"SigningKeysConcurrent", testSigningKeysConcurrent},
		{"Closed", testArtifactClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

// randomBytes is n reproducible bytes that do not compress.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var artifactN atomic.Int64

// newArtifactID is an artifact id no test used yet.
func newArtifactID() string { return fmt.Sprintf("att_test%06d", artifactN.Add(1)) }

// put writes data and commits it as a new artifact of session.
func put(t testing.TB, s store.Store, session string, data []byte, a store.Artifact) store.Artifact {
	t.Helper()
	b, err := s.WriteBlob(context.Background(), bytes.NewReader(data), -1)
	must(t, err)
	if a.ID == "" {
		a.ID = newArtifactID()
	}
	a.SessionID = session
	if a.MediaType == "" {
		a.MediaType = "application/octet-stream"
	}
	got, err := s.CommitArtifact(context.Background(), a, b, 0)
	must(t, err)
	return got
}

// readAll opens the artifact and reads every byte of it.
func readAll(t testing.TB, s store.Store, id string) (store.Artifact, []byte) {
	t.Helper()
	a, r, err := s.OpenArtifact(context.Background(), id)
	must(t, err)
	defer r.Close()
	data, err := io.ReadAll(r)
	must(t, err)
	return a, data
}

func equalArtifact(t testing.TB, got, want store.Artifact) {
	t.Helper()
	if got.ID != want.ID || got.SessionID != want.SessionID || got.MediaType != want.MediaType || got.Size != want.Size ||
		got.SHA256 != want.SHA256 || got.Name != want.Name || got.DerivedFrom != want.DerivedFrom ||
		!bytes.Equal(got.Meta, want.Meta) || (got.Meta == nil) != (want.Meta == nil) ||
		!got.Created.Equal(want.Created) || got.Created.Location() != time.UTC || got.Owner != want.Owner {
		t.Errorf("artifact\n got %+v\nwant %+v", got, want)
	}
}

func testArtifactPutGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "pg", Owner: "alice"}))
	data := randomBytes(1, 3<<20+17)
	b, err := s.WriteBlob(ctx, bytes.NewReader(data), int64(len(data)))
	must(t, err)
	if b.SHA256 != sumOf(data) || b.Size != int64(len(data)) || b.Ref == "" {
		t.Fatalf("blob %+v, want sha256 %s size %d", b, sumOf(data), len(data))
	}
	created := ms(1_750_000_000_123)
	want := store.Artifact{ID: newArtifactID(), SessionID: "pg", MediaType: "image/png", Name: "cat é.png",
		DerivedFrom: "att_source", Meta: []byte(`{"prompt": "a cat",  "seed": 7}`), Created: created.Add(456 * time.Microsecond),
		Size: 1, SHA256: "ignored", Owner: "ignored"}
	got, err := s.CommitArtifact(ctx, want, b, 0)
	must(t, err)
	want.Size, want.SHA256, want.Owner, want.Created = b.Size, b.SHA256, "alice", created
	equalArtifact(t, got, want)
	g, err := s.GetArtifact(ctx, want.ID)
	must(t, err)
	equalArtifact(t, g, want)
	o, read := readAll(t, s, want.ID)
	equalArtifact(t, o, want)
	if !bytes.Equal(read, data) {
		t.Errorf("read %d bytes (sha256 %s), want the %d written", len(read), sumOf(read), len(data))
	}
	// The caller's meta is not kept: changing it changes nothing.
	g.Meta[1] = 'X'
	if again, _ := s.GetArtifact(ctx, want.ID); !bytes.Equal(again.Meta, want.Meta) {
		t.Errorf("stored meta changed with a returned slice: %s", again.Meta)
	}
	// A zero Created is now; no meta comes back nil.
	before := time.Now().Truncate(time.Millisecond)
	plain := put(t, s, "pg", []byte("hello"), store.Artifact{MediaType: "text/plain; charset=utf-8"})
	if plain.Created.Before(before) || plain.Created.After(time.Now()) || plain.Meta != nil || plain.Name != "" {
		t.Errorf("plain artifact %+v: want Created now, no meta, no name", plain)
	}
	if n, err := s.ArtifactBytes(ctx, "pg"); err != nil || n != int64(len(data))+5 {
		t.Errorf("ArtifactBytes = %d, %v; want %d", n, err, len(data)+5)
	}
	if n, err := s.ArtifactBytes(ctx, "nobody"); err != nil || n != 0 {
		t.Errorf("ArtifactBytes of an unknown session = %d, %v; want 0", n, err)
	}
	for _, id := range []string{"att_missing", strings.Repeat("x", store.MaxArtifactIDLen)} {
		if _, err := s.GetArtifact(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetArtifact(%q): err = %v, want ErrNotFound", id, err)
		}
		if _, _, err := s.OpenArtifact(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("OpenArtifact(%q): err = %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range []string{"", "a\x00b", strings.Repeat("x", store.MaxArtifactIDLen+1)} {
		if _, err := s.GetArtifact(ctx, id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("GetArtifact(%q): err = %v, want ErrInvalid", id, err)
		}
	}
}

func testArtifactEmpty(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "e", Owner: "alice"}))
	a := put(t, s, "e", nil, store.Artifact{})
	if a.Size != 0 || a.SHA256 != sumOf(nil) {
		t.Errorf("empty artifact %+v", a)
	}
	_, data := readAll(t, s, a.ID)
	if len(data) != 0 {
		t.Errorf("read %d bytes of an empty artifact", len(data))
	}
}

func testArtifactRanges(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "r", Owner: "alice"}))
	// Past several chunk boundaries of any chunked store (1 MiB, 256 KiB, ...).
	data := randomBytes(2, 5<<20+123)
	a := put(t, s, "r", data, store.Artifact{})
	_, r, err := s.OpenArtifact(ctx, a.ID)
	must(t, err)
	defer r.Close()
	size := int64(len(data))
	if end, err := r.Seek(0, io.SeekEnd); err != nil || end != size {
		t.Fatalf("Seek(0, End) = %d, %v; want %d", end, err, size)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 40 {
		off := rng.Int64N(size)
		n := rng.Int64N(3<<20) + 1
		if i%5 == 0 {
			off = int64(1<<20) - 1 // straddles a 1 MiB boundary
			n = 2
		}
		if pos, err := r.Seek(off, io.SeekStart); err != nil || pos != off {
			t.Fatalf("Seek(%d) = %d, %v", off, pos, err)
		}
		buf := make([]byte, n)
		got, err := io.ReadFull(r, buf)
		want := min(n, size-off)
		if int64(got) != want || (want == n && err != nil) {
			t.Fatalf("read %d at %d: got %d bytes (%v), want %d", n, off, got, err, want)
		}
		if !bytes.Equal(buf[:got], data[off:off+int64(got)]) {
			t.Fatalf("read %d at %d: bytes differ", n, off)
		}
	}
	// Relative seeks, and reading at the end.
	if _, err := r.Seek(10, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if pos, err := r.Seek(-4, io.SeekCurrent); err != nil || pos != 6 {
		t.Fatalf("Seek(-4, Current) = %d, %v; want 6", pos, err)
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(r, one); err != nil || one[0] != data[6] {
		t.Fatalf("byte at 6 = %v, %v; want %v", one, err, data[6])
	}
	if pos, err := r.Seek(-1, io.SeekEnd); err != nil || pos != size-1 {
		t.Fatalf("Seek(-1, End) = %d, %v", pos, err)
	}
	if _, err := io.ReadFull(r, one); err != nil || one[0] != data[size-1] {
		t.Fatalf("last byte = %v, %v; want %v", one, err, data[size-1])
	}
	if n, err := r.Read(one); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end = %d, %v; want 0, EOF", n, err)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Error("Seek to a negative offset succeeded")
	}
	// A deleted artifact's open reader reads its bytes or fails; it never
	// reads others.
	_, r2, err := s.OpenArtifact(ctx, a.ID)
	must(t, err)
	defer r2.Close()
	if _, err := s.DeleteArtifact(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Seek(4<<20, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r2)
	if !bytes.Equal(rest, data[4<<20:4<<20+len(rest)]) || err == nil && len(rest) != len(data)-4<<20 {
		t.Errorf("reading a deleted artifact's open reader: %d bytes, %v", len(rest), err)
	}
}

func testArtifactList(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "l", Owner: "alice"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "other", Owner: "alice"}))
	types := []string{"image/png", "image/jpeg", "text/plain", "text/plain; charset=utf-8", "text/plainer", "imagex/y", "application/json"}
	var all []store.Artifact
	base := ms(1_750_000_000_000)
	for i := range 23 {
		// Two artifacts per millisecond: ties are broken by id.
		a := put(t, s, "l", []byte{byte(i)}, store.Artifact{MediaType: types[i%len(types)], Created: base.Add(time.Duration(i/2) * time.Millisecond)})
		all = append(all, a)
	}
	put(t, s, "other", []byte("x"), store.Artifact{MediaType: "image/png"})
	slices.SortFunc(all, func(a, b store.Artifact) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	collect := func(q store.ArtifactQuery) []store.Artifact {
		t.Helper()
		var out []store.Artifact
		for pages := 0; ; pages++ {
			page, next, err := s.ListArtifacts(ctx, q)
			must(t, err)
			if q.Limit > 0 && len(page) > q.Limit {
				t.Fatalf("page of %d, limit %d", len(page), q.Limit)
			}
			out = append(out, page...)
			if next == "" {
				return out
			}
			if pages > 100 {
				t.Fatal("paging does not end")
			}
			q.Cursor = next
		}
	}
	ids := func(as []store.Artifact) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	filter := func(f func(string) bool) []string {
		var out []store.Artifact
		for _, a := range all {
			if f(a.MediaType) {
				out = append(out, a)
			}
		}
		return ids(out)
	}
	for _, limit := range []int{0, 1, 5, 23, 24} {
		got := collect(store.ArtifactQuery{SessionID: "l", Limit: limit})
		if !slices.Equal(ids(got), ids(all)) {
			t.Errorf("limit %d: listed %v\nwant %v", limit, ids(got), ids(all))
		}
		if len(got) > 0 {
			equalArtifact(t, got[0], all[0])
		}
	}
	for f, want := range map[string][]string{
		"image/*":    filter(func(mt string) bool { return strings.HasPrefix(mt, "image/") }),
		"IMAGE/*":    filter(func(mt string) bool { return strings.HasPrefix(mt, "image/") }),
		"text/plain": filter(func(mt string) bool { return mt == "text/plain" || strings.HasPrefix(mt, "text/plain;") }),
		"image/png":  filter(func(mt string) bool { return mt == "image/png" }),
		"video/*":    nil,
	} {
		if got := collect(store.ArtifactQuery{SessionID: "l", MediaType: f, Limit: 2}); !slices.Equal(ids(got), want) {
			t.Errorf("filter %q: listed %v\nwant %v", f, ids(got), want)
		}
	}
	if got := collect(store.ArtifactQuery{SessionID: "nobody"}); len(got) != 0 {
		t.Errorf("an unknown session lists %d artifacts", len(got))
	}
	if got := collect(store.ArtifactQuery{SessionID: "other"}); len(got) != 1 {
		t.Errorf("the other session lists %d artifacts, want 1", len(got))
	}
}

func testArtifactListBad(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "lb", Owner: "alice"}))
	for _, a := range []int{1, 2, 3} {
		put(t, s, "lb", []byte{byte(a)}, store.Artifact{})
	}
	_, next, err := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "lb", Limit: 1})
	must(t, err)
	for _, c := range []string{"garbage", next[:len(next)-2], next + "AA", store.EncodeCursor("zz:", 1, "x")} {
		if _, _, err := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "lb", Cursor: c}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: err = %v, want ErrBadCursor", c, err)
		}
	}
	for _, q := range []store.ArtifactQuery{
		{SessionID: ""},
		{SessionID: "lb", Limit: -1},
		{SessionID: "lb", MediaType: "image"},
		{SessionID: "lb", MediaType: "*/*"},
		{SessionID: "lb", MediaType: "image/png; q=1"},
		{SessionID: "lb", MediaType: "image/"},
	} {
		if _, _, err := s.ListArtifacts(ctx, q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("query %+v: err = %v, want ErrInvalid", q, err)
		}
	}
}

func testArtifactDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "d", Owner: "alice"}))
	data := randomBytes(4, 70_000)
	a1 := put(t, s, "d", data, store.Artifact{Name: "one"})
	a2 := put(t, s, "d", data, store.Artifact{Name: "two"}) // the same bytes
	got, err := s.DeleteArtifact(ctx, a1.ID)
	must(t, err)
	equalArtifact(t, got, a1)
	if _, err := s.GetArtifact(ctx, a1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetArtifact after delete: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.OpenArtifact(ctx, a1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OpenArtifact after delete: err = %v, want ErrNotFound", err)
	}
	if _, err := s.DeleteArtifact(ctx, a1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteArtifact: err = %v, want ErrNotFound", err)
	}
	// The other artifact with the same bytes keeps them.
	if _, read := readAll(t, s, a2.ID); !bytes.Equal(read, data) {
		t.Error("the bytes of an artifact went with another artifact of the same bytes")
	}
	if n, _ := s.ArtifactBytes(ctx, "d"); n != int64(len(data)) {
		t.Errorf("ArtifactBytes after a delete = %d, want %d", n, len(data))
	}
	if page, _, _ := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "d"}); len(page) != 1 || page[0].ID != a2.ID {
		t.Errorf("listing after a delete: %v", page)
	}
	if _, err := s.DeleteArtifact(ctx, a2.ID); err != nil {
		t.Fatal(err)
	}
	// Deleting the last artifact of the bytes deleted them: nothing is
	// left for the sweep.
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after deleting every artifact = %d, %v; want 0 (the bytes go with their last artifact)", n, err)
	}
	// Writing the same bytes again works.
	a3 := put(t, s, "d", data, store.Artifact{})
	if _, read := readAll(t, s, a3.ID); !bytes.Equal(read, data) {
		t.Error("bytes written again after their deletion read back wrong")
	}
}

func testArtifactTooLarge(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "tl", Owner: "alice"}))
	data := randomBytes(5, 300_000)
	b, err := s.WriteBlob(ctx, bytes.NewReader(data), int64(len(data)))
	if err != nil || b.Size != int64(len(data)) {
		t.Fatalf("a blob of exactly max bytes: %+v, %v", b, err)
	}
	if _, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: "tl", MediaType: "a/b"}, b, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteBlob(ctx, bytes.NewReader(data), int64(len(data))-1); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("a blob of max+1 bytes: err = %v, want ErrTooLarge", err)
	}
	if _, err := s.WriteBlob(ctx, io.MultiReader(bytes.NewReader(data), bytes.NewReader(data)), 400_000); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("a blob over max: err = %v, want ErrTooLarge", err)
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after refused writes = %d, %v; want 0 (a refused write keeps nothing)", n, err)
	}
}

// failingReader gives n good bytes, then fails.
type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(p), f.n)
	for i := range p[:k] {
		p[i] = byte(i)
	}
	f.n -= k
	return k, nil
}

func testArtifactReaderFails(t *testing.T, s store.Store) {
	ctx := context.Background()
	boom := errors.New("connection reset by peer")
	if _, err := s.WriteBlob(ctx, &failingReader{n: 2 << 20, err: boom}, -1); !errors.Is(err, boom) || !errors.Is(err, store.ErrSourceFailed) {
		t.Errorf("WriteBlob from a failing reader: err = %v, want it wrapped, with ErrSourceFailed", err)
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after a failed write = %d, %v; want 0 (a failed write keeps nothing)", n, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.WriteBlob(cctx, bytes.NewReader([]byte("x")), -1); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteBlob with a canceled context: err = %v, want context.Canceled", err)
	}
}

func testArtifactQuota(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "q", Owner: "alice"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "q2", Owner: "alice"}))
	write := func(n int) store.Blob {
		b, err := s.WriteBlob(ctx, bytes.NewReader(randomBytes(uint64(n), n)), -1)
		must(t, err)
		return b
	}
	commit := func(session string, b store.Blob, quota int64) error {
		_, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: session, MediaType: "a/b"}, b, quota)
		return err
	}
	must(t, commit("q", write(600), 1000))
	must(t, commit("q", write(400), 1000)) // exactly the quota
	refused := write(1)
	if err := commit("q", refused, 1000); !errors.Is(err, store.ErrQuotaExceeded) || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("a byte over the quota: err = %v, want ErrQuotaExceeded, a definite answer (not an unknown outcome)", err)
	}
	// A refused blob is discarded at once, not left for the sweep.
	must(t, s.DiscardBlob(ctx, refused))
	must(t, s.DiscardBlob(ctx, refused))
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after DiscardBlob = %d, %v; want 0", n, err)
	}
	if err := commit("q2", refused, 0); !errors.Is(err, store.ErrBlobGone) {
		t.Errorf("commit of a discarded blob: err = %v, want ErrBlobGone", err)
	}
	if err := commit("q", write(1), 0); err != nil { // no quota
		t.Errorf("no quota: %v", err)
	}
	must(t, commit("q2", write(1000), 1000)) // another session's quota is its own
	if n, _ := s.ArtifactBytes(ctx, "q"); n != 1001 {
		t.Errorf("ArtifactBytes = %d, want 1001", n)
	}
}

func testArtifactQuotaConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "qc", Owner: "alice"}))
	const n, size, quota = 12, 1000, 5000
	var blobs []store.Blob
	for i := range n {
		b, err := s.WriteBlob(ctx, bytes.NewReader(randomBytes(uint64(100+i), size)), -1)
		must(t, err)
		blobs = append(blobs, b)
	}
	var ok, over atomic.Int32
	var wg sync.WaitGroup
	for _, b := range blobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: "qc", MediaType: "a/b"}, b, quota)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrQuotaExceeded):
				over.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != quota/size || over.Load() != n-quota/size {
		t.Errorf("%d commits passed and %d were refused; want %d and %d", ok.Load(), over.Load(), quota/size, n-quota/size)
	}
	if used, _ := s.ArtifactBytes(ctx, "qc"); used != quota {
		t.Errorf("ArtifactBytes = %d, want %d", used, quota)
	}
}

func testArtifactSameBytes(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "sb", Owner: "alice"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "sb2", Owner: "bob"}))
	data := randomBytes(6, 2<<20+5)
	const n = 8
	arts := make([]store.Artifact, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := []string{"sb", "sb2"}[i%2]
			b, err := s.WriteBlob(ctx, bytes.NewReader(data), -1)
			if err != nil {
				t.Error(err)
				return
			}
			a, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: session, MediaType: "a/b"}, b, 0)
			if err != nil {
				t.Error(err)
				return
			}
			arts[i] = a
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, a := range arts {
		if a.SHA256 != sumOf(data) || a.Size != int64(len(data)) {
			t.Errorf("artifact %+v of the same bytes", a)
		}
		if _, read := readAll(t, s, a.ID); !bytes.Equal(read, data) {
			t.Errorf("artifact %s reads back wrong", a.ID)
		}
	}
	// Deleting some, concurrently with reading the others, leaves the others whole.
	for i, a := range arts {
		if i%2 == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.DeleteArtifact(ctx, a.ID); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for i, a := range arts {
		if i%2 == 1 {
			if _, read := readAll(t, s, a.ID); !bytes.Equal(read, data) {
				t.Errorf("artifact %s reads back wrong after the others were deleted", a.ID)
			}
		}
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs = %d, %v; want 0 (the bytes are still named)", n, err)
	}
	// Discarding a blob of bytes an artifact names keeps them.
	again, err := s.WriteBlob(ctx, bytes.NewReader(data), -1)
	must(t, err)
	must(t, s.DiscardBlob(ctx, again))
	if _, read := readAll(t, s, arts[1].ID); !bytes.Equal(read, data) {
		t.Error("discarding a blob of equal bytes took a named artifact's bytes")
	}
	for i, a := range arts {
		if i%2 == 1 {
			if _, err := s.DeleteArtifact(ctx, a.ID); err != nil {
				t.Error(err)
			}
		}
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after deleting them all = %d, %v; want 0 (the bytes went with the last)", n, err)
	}
}

func testArtifactCommitErrors(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "ce", Owner: "alice"}))
	b, err := s.WriteBlob(ctx, bytes.NewReader([]byte("bytes")), -1)
	must(t, err)
	good := store.Artifact{ID: newArtifactID(), SessionID: "ce", MediaType: "a/b"}
	if _, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: "nope", MediaType: "a/b"}, b, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("commit to an unknown session: err = %v, want ErrNotFound", err)
	}
	_, err = s.CommitArtifact(ctx, good, b, 0)
	must(t, err)
	if _, err := s.CommitArtifact(ctx, good, b, 0); !errors.Is(err, store.ErrExists) {
		t.Errorf("commit of a taken id: err = %v, want ErrExists", err)
	}
	for name, a := range map[string]store.Artifact{
		"no id":           {SessionID: "ce", MediaType: "a/b"},
		"no session":      {ID: newArtifactID(), MediaType: "a/b"},
		"no media type":   {ID: newArtifactID(), SessionID: "ce"},
		"meta not JSON":   {ID: newArtifactID(), SessionID: "ce", MediaType: "a/b", Meta: []byte("{")},
		"bad derivedFrom": {ID: newArtifactID(), SessionID: "ce", MediaType: "a/b", DerivedFrom: "a\x00"},
	} {
		if _, err := s.CommitArtifact(ctx, a, b, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	for name, bad := range map[string]store.Blob{
		"no ref":     {SHA256: b.SHA256, Size: b.Size},
		"bad sha256": {Ref: b.Ref, SHA256: "ABC", Size: b.Size},
		"negative":   {Ref: b.Ref, SHA256: b.SHA256, Size: -1},
	} {
		if _, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: "ce", MediaType: "a/b"}, bad, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("blob with %s: err = %v, want ErrInvalid", name, err)
		}
	}
	// A blob the sweep collected cannot be committed.
	orphan, err := s.WriteBlob(ctx, bytes.NewReader([]byte("orphan")), -1)
	must(t, err)
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 1 {
		t.Fatalf("SweepBlobs = %d, %v; want 1", n, err)
	}
	if _, err := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: "ce", MediaType: "a/b"}, orphan, 0); !errors.Is(err, store.ErrBlobGone) {
		t.Errorf("commit of a swept blob: err = %v, want ErrBlobGone", err)
	}
}

func testArtifactOrphanSwept(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "os", Owner: "alice"}))
	kept := put(t, s, "os", []byte("kept"), store.Artifact{})
	if _, err := s.WriteBlob(ctx, bytes.NewReader(randomBytes(7, 100_000)), -1); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepBlobs(ctx, time.Hour); err != nil || n != 0 {
		t.Errorf("SweepBlobs(1h) of a fresh orphan = %d, %v; want 0 (within its grace)", n, err)
	}
	if page, _, _ := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "os"}); len(page) != 1 {
		t.Errorf("an orphan blob is listed: %v", page)
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 1 {
		t.Errorf("SweepBlobs(0) = %d, %v; want 1 (the orphan)", n, err)
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("second SweepBlobs = %d, %v; want 0", n, err)
	}
	if _, read := readAll(t, s, kept.ID); string(read) != "kept" {
		t.Errorf("the sweep took a named blob: read %q", read)
	}
}

func testArtifactDeleteSession(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "ds", Owner: "alice"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "keep", Owner: "alice"}))
	shared := randomBytes(8, 50_000)
	own := randomBytes(9, 60_000)
	a1 := put(t, s, "ds", shared, store.Artifact{})
	put(t, s, "ds", own, store.Artifact{})
	a3 := put(t, s, "keep", shared, store.Artifact{})
	must(t, s.DeleteSession(ctx, "ds"))
	if _, err := s.GetArtifact(ctx, a1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an artifact of a deleted session: err = %v, want ErrNotFound", err)
	}
	if page, _, err := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "ds"}); err != nil || len(page) != 0 {
		t.Errorf("a deleted session lists %d artifacts (%v)", len(page), err)
	}
	if n, _ := s.ArtifactBytes(ctx, "ds"); n != 0 {
		t.Errorf("a deleted session holds %d artifact bytes", n)
	}
	if _, read := readAll(t, s, a3.ID); !bytes.Equal(read, shared) {
		t.Error("another session's artifact of the same bytes lost them")
	}
	// Its own bytes went with it; the shared ones stay named.
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("SweepBlobs after DeleteSession = %d, %v; want 0", n, err)
	}
}

func testDeleteSession(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "del", Owner: "alice", Status: "ready"}))
	must(t, s.CreateSession(ctx, store.Session{ID: "other", Owner: "alice"}))
	must(t, s.AppendTranscript(ctx, "del", 0, sampleEntries(4)))
	must(t, s.PutKV(ctx, "del", 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 3}}))
	must(t, s.AppendTranscript(ctx, "other", 0, sampleEntries(2)))
	must(t, s.PutKV(ctx, "other", 0, []store.KV{{Key: "k", Value: []byte("2"), Rev: 1}}))
	l, err := leaser(t, s).AcquireLease(ctx, "del", "node-a", time.Hour)
	must(t, err)

	must(t, s.DeleteSession(ctx, "del"))
	if _, err := s.GetSession(ctx, "del"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSession after DeleteSession: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Transcript(ctx, "del"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Transcript after DeleteSession: err = %v, want ErrNotFound", err)
	}
	if _, err := s.LoadKV(ctx, "del"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LoadKV after DeleteSession: err = %v, want ErrNotFound", err)
	}
	if page, _, _ := s.ListSessions(ctx, store.ListQuery{Owner: "alice"}); len(page) != 1 || page[0].ID != "other" {
		t.Errorf("listing after DeleteSession: %v", idsOf(page))
	}
	// The lease went too: the old token fences nothing any more, and a
	// write under it fails.
	if err := s.PutKV(ctx, "del", store.Fence(l.Token), []store.KV{{Key: "k", Value: []byte("9"), Rev: 9}}); err == nil {
		t.Error("a write under the deleted session's lease succeeded")
	}
	if err := s.DeleteSession(ctx, "del"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteSession: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSession(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("DeleteSession(\"\"): err = %v, want ErrInvalid", err)
	}
	// Writes of an actor that had not stopped find no session.
	if err := s.AppendTranscript(ctx, "del", 0, sampleEntries(1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendTranscript after DeleteSession: err = %v, want ErrNotFound", err)
	}
	if err := s.PutKV(ctx, "del", 0, []store.KV{{Key: "k", Value: []byte("1"), Rev: 4}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutKV after DeleteSession: err = %v, want ErrNotFound", err)
	}
	// The other session is whole.
	tr, err := s.Transcript(ctx, "other")
	must(t, err)
	equalEntries(t, tr, sampleEntries(2))
	kvs, err := s.LoadKV(ctx, "other")
	must(t, err)
	equalKVs(t, kvs, []store.KV{{Key: "k", Value: []byte("2"), Rev: 1}})
	// The id can be used again, and starts empty.
	must(t, s.CreateSession(ctx, store.Session{ID: "del", Owner: "bob"}))
	if tr, _ := s.Transcript(ctx, "del"); len(tr) != 0 {
		t.Errorf("a new session under a deleted id has %d transcript entries", len(tr))
	}
	if kvs, _ := s.LoadKV(ctx, "del"); len(kvs) != 0 {
		t.Errorf("a new session under a deleted id has %d KV entries", len(kvs))
	}
}

func testEndedSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := ms(1_700_000_000_000)
	for i, st := range []string{"ended", "ready", "ended", "ended", "idle", "ended", "Ended"} {
		must(t, s.CreateSession(ctx, store.Session{ID: fmt.Sprintf("e%d", i), Owner: []string{"alice", "bob"}[i%2], Status: st,
			Created: base, Updated: base.Add(time.Duration(10-i) * time.Second)}))
	}
	got, err := s.EndedSessions(ctx, base.Add(time.Hour), 0)
	must(t, err)
	// Least recently updated first.
	if want := []string{"e5", "e3", "e2", "e0"}; !slices.Equal(got, want) {
		t.Errorf("EndedSessions = %v, want %v", got, want)
	}
	got, err = s.EndedSessions(ctx, base.Add(8*time.Second), 0) // e2 was updated at +8s: not before
	must(t, err)
	if want := []string{"e5", "e3"}; !slices.Equal(got, want) {
		t.Errorf("EndedSessions before +8s = %v, want %v", got, want)
	}
	got, err = s.EndedSessions(ctx, base.Add(time.Hour), 3)
	must(t, err)
	if want := []string{"e5", "e3", "e2"}; !slices.Equal(got, want) {
		t.Errorf("EndedSessions limit 3 = %v, want %v", got, want)
	}
	if _, err := s.EndedSessions(ctx, base, -1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("negative limit: err = %v, want ErrInvalid", err)
	}
}

func testSigningKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	first := bytes.Repeat([]byte{1}, 32)
	keys, err := s.SigningKeys(ctx, first)
	must(t, err)
	if len(keys) != 1 || !bytes.Equal(keys[0].Secret, first) || !keys[0].Current() || keys[0].ID == 0 {
		t.Fatalf("first SigningKeys = %+v, want the initial key, current", keys)
	}
	again, err := s.SigningKeys(ctx, bytes.Repeat([]byte{2}, 32))
	must(t, err)
	if len(again) != 1 || !bytes.Equal(again[0].Secret, first) || again[0].ID != keys[0].ID {
		t.Fatalf("second SigningKeys = %+v, want the first key kept", again)
	}
	second := bytes.Repeat([]byte{3}, 32)
	before := time.Now().Truncate(time.Millisecond)
	k2, err := s.RotateSigningKey(ctx, second, time.Hour)
	must(t, err)
	if !bytes.Equal(k2.Secret, second) || !k2.Current() || k2.ID <= keys[0].ID {
		t.Fatalf("RotateSigningKey = %+v", k2)
	}
	keys, err = s.SigningKeys(ctx, bytes.Repeat([]byte{4}, 32))
	must(t, err)
	if len(keys) != 2 || !bytes.Equal(keys[0].Secret, second) || !keys[0].Current() || !bytes.Equal(keys[1].Secret, first) || keys[1].Current() {
		t.Fatalf("keys after a rotation: %+v; want the new key current, then the old one", keys)
	}
	if vu := keys[1].VerifyUntil; vu.Before(before.Add(time.Hour)) || vu.After(time.Now().Add(time.Hour)) {
		t.Errorf("the old key verifies until %v, want about an hour from now", vu)
	}
	// A rotation without grace drops the key it replaces at once; keys
	// whose grace passed are gone.
	third := bytes.Repeat([]byte{5}, 32)
	_, err = s.RotateSigningKey(ctx, third, 0)
	must(t, err)
	keys, err = s.SigningKeys(ctx, first)
	must(t, err)
	var secrets []byte
	for _, k := range keys {
		secrets = append(secrets, k.Secret[0])
	}
	if !bytes.Equal(secrets, []byte{5, 1}) || !keys[0].Current() {
		t.Errorf("keys after a rotation without grace: secrets %v, want [5 1] (the first key is still in its hour)", secrets)
	}
	if _, err := s.RotateSigningKey(ctx, []byte("short"), time.Hour); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a short key: err = %v, want ErrInvalid", err)
	}
	if _, err := s.SigningKeys(ctx, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SigningKeys(nil): err = %v, want ErrInvalid", err)
	}
}

func testSigningKeysConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 8
	got := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys, err := s.SigningKeys(ctx, bytes.Repeat([]byte{byte(i + 1)}, 32))
			if err != nil {
				t.Error(err)
				return
			}
			if len(keys) != 1 {
				t.Errorf("%d keys", len(keys))
				return
			}
			got[i] = keys[0].Secret
		}()
	}
	wg.Wait()
	for i := range got {
		if !bytes.Equal(got[i], got[0]) {
			t.Fatalf("nodes starting at once got different keys: %x and %x", got[0], got[i])
		}
	}
}

func testArtifactClosed(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.CreateSession(ctx, store.Session{ID: "c", Owner: "alice"}))
	a := put(t, s, "c", []byte("x"), store.Artifact{})
	b, err := s.WriteBlob(ctx, bytes.NewReader([]byte("y")), -1)
	must(t, err)
	must(t, s.Close())
	_, writeErr := s.WriteBlob(ctx, bytes.NewReader([]byte("z")), -1)
	_, commitErr := s.CommitArtifact(ctx, store.Artifact{ID: newArtifactID(), SessionID: "c", MediaType: "a/b"}, b, 0)
	_, getErr := s.GetArtifact(ctx, a.ID)
	_, _, openErr := s.OpenArtifact(ctx, a.ID)
	_, _, listErr := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "c"})
	_, delErr := s.DeleteArtifact(ctx, a.ID)
	_, bytesErr := s.ArtifactBytes(ctx, "c")
	_, sweepErr := s.SweepBlobs(ctx, 0)
	_, keysErr := s.SigningKeys(ctx, bytes.Repeat([]byte{1}, 32))
	_, rotErr := s.RotateSigningKey(ctx, bytes.Repeat([]byte{1}, 32), 0)
	discardErr := s.DiscardBlob(ctx, b)
	for name, err := range map[string]error{
		"WriteBlob": writeErr, "CommitArtifact": commitErr, "GetArtifact": getErr, "OpenArtifact": openErr,
		"ListArtifacts": listErr, "DeleteArtifact": delErr, "ArtifactBytes": bytesErr, "SweepBlobs": sweepErr,
		"SigningKeys": keysErr, "RotateSigningKey": rotErr, "DiscardBlob": discardErr,
	} {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}

// Crash between the two steps of an artifact, with a real second process.

// crashChildEnv marks the process ArtifactCrash starts.
const crashChildEnv = "SURFACED_STORETEST_CRASH_CHILD"

// crashBytes are the bytes the crashing child writes.
func crashBytes() []byte { return randomBytes(42, 1<<20+3) }

// RunArtifactCrash checks that an artifact whose process died between its
// two steps (the bytes written, the record not) is never served and is
// swept: it starts this test binary again, running only the test named
// child (which must call ArtifactCrashChild with a store of the same
// storage) with env added to its environment; the child writes a blob,
// says so, and is killed (SIGKILL) before it commits. Then open opens the
// storage here, as a restarted daemon would.
func RunArtifactCrash(t *testing.T, child string, env []string, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	s := open(t)
	must(t, s.CreateSession(ctx, store.Session{ID: "crash", Owner: "alice"}))
	kept := put(t, s, "crash", []byte("committed before the crash"), store.Artifact{})
	must(t, s.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), crashChildEnv+"=1"), env...)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	stdin, err := cmd.StdinPipe() // kept open: the child waits on it
	must(t, err)
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "BLOB ") {
				line <- sc.Text()
				break
			}
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var got string
	select {
	case got = <-line:
	case <-time.After(60 * time.Second):
	}
	// Between the two steps: killed, as a power cut or the OOM killer would.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	fields := strings.Fields(got)
	if len(fields) != 3 {
		t.Fatalf("the child did not write its blob (said %q); stderr:\n%s", got, stderr.String())
	}
	data := crashBytes()
	if fields[1] != sumOf(data) || fields[2] != strconv.Itoa(len(data)) {
		t.Fatalf("the child wrote %s, want the blob of sha256 %s size %d", got, sumOf(data), len(data))
	}

	s = open(t)
	defer s.Close()
	page, _, err := s.ListArtifacts(ctx, store.ArtifactQuery{SessionID: "crash"})
	must(t, err)
	if len(page) != 1 || page[0].ID != kept.ID {
		t.Errorf("after the crash the session lists %v, want only the artifact committed before", page)
	}
	if n, _ := s.ArtifactBytes(ctx, "crash"); n != kept.Size {
		t.Errorf("after the crash the session holds %d artifact bytes, want %d", n, kept.Size)
	}
	if n, err := s.SweepBlobs(ctx, time.Hour); err != nil || n != 0 {
		t.Errorf("SweepBlobs(1h) just after the crash = %d, %v; want 0 (the orphan is within its grace)", n, err)
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 1 {
		t.Errorf("SweepBlobs(0) after the crash = %d, %v; want 1 (the crashed write's orphan)", n, err)
	}
	if n, err := s.SweepBlobs(ctx, 0); err != nil || n != 0 {
		t.Errorf("second SweepBlobs = %d, %v; want 0", n, err)
	}
	if _, read := readAll(t, s, kept.ID); string(read) != "committed before the crash" {
		t.Errorf("the artifact committed before the crash reads %q", read)
	}
	// The same bytes, written again, make an artifact.
	a := put(t, s, "crash", data, store.Artifact{})
	if _, read := readAll(t, s, a.ID); !bytes.Equal(read, data) {
		t.Error("the crashed bytes written again read back wrong")
	}
}

// ArtifactCrashChild is the child of RunArtifactCrash; in any other process
// it skips. It writes the blob, prints "BLOB <sha256> <size>", and waits to
// be killed.
func ArtifactCrashChild(t *testing.T, open func(t *testing.T) store.Store) {
	if os.Getenv(crashChildEnv) == "" {
		t.Skip("run by RunArtifactCrash")
	}
	s := open(t)
	b, err := s.WriteBlob(context.Background(), bytes.NewReader(crashBytes()), -1)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("BLOB %s %d\n", b.SHA256, b.Size)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the kill
	t.Fatal("not killed")
}
