package sqlite

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/surfaced/surfaced/store"
)

// BlobDir is the directory, inside the data directory, that holds the bytes
// of artifacts: blobs/<first two hex digits>/<sha256> for the bytes, tmp/
// for writes in progress.
const BlobDir = "artifacts"

// blobFiles keeps the bytes of artifacts as files, one per SHA-256.
//
// A write goes to a temporary file, is fsynced, and is renamed to its
// SHA-256 (the directory fsynced too), so that a file under its final name
// always holds the whole of the bytes named. Equal bytes written twice are
// one file: the second rename replaces the first with the same content.
//
// The database decides which files are alive (an artifact row names their
// SHA-256), and the files and the database cannot change together. Within
// this process a lock per SHA-256 orders the steps that touch one file:
// committing an artifact (the file must exist), deleting the last artifact
// of a file, and the sweep. Between WriteBlob and CommitArtifact the file
// is pinned: neither a delete of another artifact of the same bytes nor
// the sweep (within its grace) removes it. Files of a process that died
// between the two steps have no row and are swept.
type blobFiles struct {
	dir string // <data_dir>/artifacts

	locks [64]sync.Mutex // by hash of the SHA-256

	mu       sync.Mutex
	pins     map[string]pin      // by SHA-256: written, not yet committed
	inFlight map[string]struct{} // temporary files being written, by name
}

// pin is a file written and not yet committed: how many writes, and when
// the last one finished.
type pin struct {
	n     int
	since time.Time
}

// pinTTL bounds a pin a caller never released (it wrote and did not
// commit): past it, deleting the last artifact of the bytes removes the
// file.
const pinTTL = time.Hour

// copyBuffer is the size of the buffer a write copies through.
const copyBuffer = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBuffer); return &b }}

func newBlobFiles(dataDir string) *blobFiles {
	return &blobFiles{dir: filepath.Join(dataDir, BlobDir), pins: map[string]pin{}, inFlight: map[string]struct{}{}}
}

// init creates the directories.
func (b *blobFiles) init() error {
	for _, d := range []string{b.blobsDir(), b.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

func (b *blobFiles) blobsDir() string { return filepath.Join(b.dir, "blobs") }
func (b *blobFiles) tmpDir() string   { return filepath.Join(b.dir, "tmp") }

// path is the file of the bytes whose SHA-256 is sha (already checked to
// be hex).
func (b *blobFiles) path(sha string) string { return filepath.Join(b.blobsDir(), sha[:2], sha) }

func (b *blobFiles) lock(sha string) func() {
	h := fnv.New32a()
	h.Write([]byte(sha))
	m := &b.locks[h.Sum32()%uint32(len(b.locks))]
	m.Lock()
	return m.Unlock
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// write stores the bytes of r as a file (see blobFiles) and pins it.
func (b *blobFiles) write(ctx context.Context, r io.Reader, max int64) (store.Blob, error) {
	f, err := os.CreateTemp(b.tmpDir(), "blob-*")
	if err != nil {
		return store.Blob{}, fmt.Errorf("create a temporary file: %w", err)
	}
	tmp := f.Name()
	b.mu.Lock()
	b.inFlight[filepath.Base(tmp)] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inFlight, filepath.Base(tmp))
		b.mu.Unlock()
	}()
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(tmp)
		}
	}()
	hr := store.NewHashingReader(ctxReader{ctx, r}, max)
	buf := copyBuffers.Get().(*[]byte)
	// Through the buffer: os.File's ReadFrom would copy through its own
	// 32 KiB one.
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, hr, *buf)
	copyBuffers.Put(buf)
	if err != nil {
		return store.Blob{}, err
	}
	if err := f.Sync(); err != nil {
		return store.Blob{}, fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return store.Blob{}, fmt.Errorf("close %s: %w", tmp, err)
	}
	sha := hr.Sum()
	final := b.path(sha)
	unlock := b.lock(sha)
	defer unlock()
	if err := b.mkShard(filepath.Dir(final)); err != nil {
		return store.Blob{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return store.Blob{}, fmt.Errorf("rename the artifact file into place: %w", err)
	}
	keep = true
	if err := syncDir(filepath.Dir(final)); err != nil {
		return store.Blob{}, err
	}
	b.mu.Lock()
	p := b.pins[sha]
	b.pins[sha] = pin{n: p.n + 1, since: time.Now()}
	b.mu.Unlock()
	return store.Blob{Ref: sha, SHA256: sha, Size: hr.Size()}, nil
}

// mkShard creates a shard directory of blobs if needed, durably.
func (b *blobFiles) mkShard(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return syncDir(filepath.Dir(dir))
}

// syncDir fsyncs a directory, so that the names in it (a rename, a new
// file) survive a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// unpin releases a pin of write; the caller holds the file's lock.
func (b *blobFiles) unpin(sha string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pins[sha]
	if !ok {
		return
	}
	if p.n <= 1 {
		delete(b.pins, sha)
		return
	}
	p.n--
	b.pins[sha] = p
}

// pinned reports whether a write of sha finished within d and was not yet
// committed; the caller holds the file's lock.
func (b *blobFiles) pinned(sha string, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pins[sha]
	return ok && time.Since(p.since) < d
}

// exists reports whether the file of sha holds size bytes.
func (b *blobFiles) exists(sha string, size int64) (bool, error) {
	fi, err := os.Stat(b.path(sha))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return fi.Mode().IsRegular() && fi.Size() == size, nil
}

// removeIfUnnamed removes the file of sha unless an artifact names it
// (named answers that) or a write pinned it within pinFor; the caller holds
// the file's lock. It reports whether it removed the file.
func (b *blobFiles) removeIfUnnamed(sha string, pinFor time.Duration, named func(sha string) (bool, error)) (bool, error) {
	if b.pinned(sha, pinFor) {
		return false, nil
	}
	isNamed, err := named(sha)
	if err != nil || isNamed {
		return false, err
	}
	err = os.Remove(b.path(sha))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remove an artifact file: %w", err)
	}
	return true, nil
}

// sweep removes the files no artifact names that are at least grace old,
// and the temporary files of writes that never finished as old.
func (b *blobFiles) sweep(ctx context.Context, grace time.Duration, named func(sha string) (bool, error)) (int, error) {
	cutoff := time.Now().Add(-grace)
	b.mu.Lock()
	for sha, p := range b.pins {
		if time.Since(p.since) > pinTTL {
			delete(b.pins, sha) // a write nobody committed
		}
	}
	b.mu.Unlock()
	n := 0
	shards, err := os.ReadDir(b.blobsDir())
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", b.blobsDir(), err)
	}
	for _, shard := range shards {
		if !shard.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(b.blobsDir(), shard.Name()))
		if err != nil {
			return n, fmt.Errorf("read %s: %w", shard.Name(), err)
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			sha := f.Name()
			if !store.IsSHA256(sha) || !strings.HasPrefix(sha, shard.Name()) {
				continue // not ours
			}
			if info, err := f.Info(); err != nil || info.ModTime().After(cutoff) {
				continue
			}
			removed, err := func() (bool, error) {
				defer b.lock(sha)()
				// Written again since it was listed: it is young now.
				if fi, err := os.Stat(b.path(sha)); err != nil || fi.ModTime().After(cutoff) {
					return false, nil
				}
				return b.removeIfUnnamed(sha, grace, named)
			}()
			if err != nil {
				return n, err
			}
			if removed {
				n++
			}
		}
	}
	tmps, err := os.ReadDir(b.tmpDir())
	if err != nil {
		return n, fmt.Errorf("read %s: %w", b.tmpDir(), err)
	}
	for _, f := range tmps {
		b.mu.Lock()
		_, writing := b.inFlight[f.Name()]
		b.mu.Unlock()
		info, err := f.Info()
		if writing || err != nil || info.ModTime().After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(b.tmpDir(), f.Name())); err == nil {
			n++
		}
	}
	return n, nil
}
