// Package sqlite is the embedded default store.Store: one SQLite database
// file, surfaced.db, in the daemon's data directory, through the pure-Go
// driver modernc.org/sqlite (no cgo). The bytes of artifacts are files
// beside it, in the directory artifacts (see BlobDir): one file per
// SHA-256, written to a temporary name, fsynced and renamed.
//
// # Durability
//
// The database runs in WAL mode with synchronous=NORMAL. A committed write
// is in the WAL, handed to the operating system, before the call returns, so
// it survives a crash or kill of the daemon. The WAL is fsynced at each
// checkpoint rather than at each commit, so a power loss or kernel crash may
// lose the last transactions before it, never the consistency of the file.
// synchronous=FULL would fsync every commit; see BenchmarkSynchronous for its
// price. For a daemon whose writes are snapshots that the domain actors can
// rewrite, the price buys too little.
//
// # Connections
//
// SQLite has one writer at a time. All writes go through one database/sql
// pool with a single connection, so writers queue in Go instead of spinning on
// SQLITE_BUSY; reads use a separate pool of query-only connections, which WAL
// lets run beside the writer. BenchmarkPools measures the split against one
// shared single-connection pool (the split did about 20% more mixed work on
// 2 cores). A write of one row is one statement outside BEGIN/COMMIT, which
// SQLite makes a transaction of its own; every statement is prepared at Open.
//
// The store says so (store.ConcurrentWrites: 1), and is a store.Batcher: a
// store.Writer writes to it through one worker, which puts the KV writes of
// every session queued meanwhile in one transaction (PutKVBatch), one
// commit for all, instead of taking turns on the connection a transaction
// each.
//
// # Opening
//
// Open never replaces a database it cannot use: a file that is not an SQLite
// database, is truncated or corrupt (PRAGMA quick_check runs at every open),
// cannot be read and written, is a directory, or has a schema newer than this
// build is an error naming the path and the problem.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/surfaced/surfaced/store"
)

// FileName is the name of the database file inside the data directory.
const FileName = "surfaced.db"

// Store is a store.Store in an SQLite database. Use Open to get one.
type Store struct {
	path  string
	write *sql.DB // one connection: the single writer
	read  *sql.DB // query-only connections; the same pool as write when shared
	log   *slog.Logger
	st    statements
	blobs *blobFiles // the bytes of artifacts

	closed    atomic.Bool
	closeOnce sync.Once
}

var (
	_ store.Store            = (*Store)(nil)
	_ store.Batcher          = (*Store)(nil)
	_ store.ConcurrentWrites = (*Store)(nil)
)

// Option configures Open.
type Option func(*config)

type config struct {
	log         *slog.Logger
	busyTimeout time.Duration
	readConns   int

	// For benchmarks and tests inside this package.
	sharedPool  bool        // one single-connection pool for reads and writes
	synchronous string      // PRAGMA synchronous value
	migrations  []migration // the schema history this build knows
}

// WithLogger sets the logger of the store (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithBusyTimeout sets how long a connection waits for a lock held by another
// process on the same file before failing (default 5s).
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

// WithReadConns sets the size of the read pool (default: GOMAXPROCS, at
// least 2; at least 1).
func WithReadConns(n int) Option { return func(c *config) { c.readConns = max(1, n) } }

// Open opens the database in dir, creating dir and the database if they do not
// exist, and brings the schema up to date.
func Open(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	cfg := config{
		log:         slog.Default(),
		busyTimeout: 5 * time.Second,
		readConns:   max(2, runtime.GOMAXPROCS(0)),
		synchronous: "NORMAL",
		migrations:  migrations,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if dir == "" {
		return nil, errors.New("sqlite: open: empty data directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", dir, err)
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	s := &Store{path: path, log: cfg.log.With("db", path), blobs: newBlobFiles(filepath.Dir(path))}
	s.write, err = sql.Open("sqlite", dsn(path, cfg, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.write.SetMaxOpenConns(1)
	s.write.SetMaxIdleConns(1)
	s.write.SetConnMaxLifetime(0)
	s.write.SetConnMaxIdleTime(0)

	if err := s.prepare(ctx, cfg); err != nil {
		s.write.Close()
		return nil, err
	}
	s.read = s.write
	if !cfg.sharedPool {
		s.read, err = sql.Open("sqlite", dsn(path, cfg, true))
		if err != nil {
			s.write.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		s.read.SetMaxOpenConns(cfg.readConns)
		s.read.SetMaxIdleConns(cfg.readConns)
		s.read.SetConnMaxLifetime(0)
		s.read.SetConnMaxIdleTime(0)
	}
	if err := s.prepareStatements(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.blobs.init(); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: cannot create the artifact directories: %w", path, err)
	}
	return s, nil
}

// dsn is the driver's name for the database at path with the connection
// settings; readOnly connections refuse writes.
func dsn(path string, cfg config, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(cfg.busyTimeout.Milliseconds(), 10))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", cfg.synchronous)
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		// Take the write lock at BEGIN: a transaction that starts reading and
		// then writes could otherwise fail with SQLITE_BUSY mid-way when
		// another process holds the lock.
		q.Set("_txlock", "immediate")
		// A WAL that grew while readers held back checkpoints is cut back
		// to this size once checkpointed, instead of keeping its peak size.
		q.Set("_pragma", "journal_size_limit(67108864)")
	}
	// A file: URI with the path escaped, so that a '?' or '%' in the data
	// directory's name stays part of the name.
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// Path returns the path of the database file.
func (s *Store) Path() string { return s.path }

// Close implements store.Store. The last connection to close checkpoints the
// WAL into the database file.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		errs := []error{s.st.close()}
		if s.read != s.write {
			errs = append(errs, s.read.Close())
		}
		errs = append(errs, s.write.Close())
		if joined := errors.Join(errs...); joined != nil {
			err = fmt.Errorf("sqlite: close %s: %w", s.path, joined)
		}
	})
	return err
}
