// Package postgres is a store.Store in PostgreSQL, for several surfaced
// nodes sharing one store, through github.com/jackc/pgx/v5 and its
// connection pool (pgxpool). The bytes of artifacts are in PostgreSQL too,
// in chunks of ChunkSize, so that any node serves any artifact with no
// other component.
//
// # Layout
//
// Everything lives in one schema of the database, "surfaced" unless
// WithSchema names another, so that the database can be shared with other
// programs and several independent deployments (or tests) can share one
// database. Open creates the schema and its tables and brings them up to
// date: forward-only migrations, each in a transaction that holds an
// advisory lock, so that daemons starting together do not race. A schema
// newer than this build is refused.
//
// # Columns
//
// Times, revs, turn and prompt ids, reserved ids and lease tokens are BIGINT (times in unix
// milliseconds, like the SQLite store). Session ids and node names are text
// COLLATE "C", so that they order by bytes as they do in SQLite and in Go.
// Every other string the caller chooses (owner, title, transcript text, KV
// keys, ...) is bytea: PostgreSQL's text cannot hold NUL or invalid UTF-8,
// which the other stores keep, and bytea orders by bytes too. JSON is bytea
// as well, so that it comes back byte-identical (jsonb would rewrite it).
//
// # Time
//
// Where the time matters between nodes, it is the database server's clock
// (now()), never a node's: lease expiry, so that clock skew between nodes
// cannot let two of them hold a lease, and the Updated of sessions and the
// defaults of Created and Entry.At, so that listings order the sessions of
// all nodes by one clock.
//
// # Fencing
//
// A write under a store.Fence (not zero) is a single statement that takes a
// share lock on the session's lease row and writes only if the token is
// current.
// AcquireLease updates that row, so a takeover waits for a fenced write in
// flight to commit, and a write that comes after the takeover finds the new
// token and writes nothing. Unfenced writes are single statements too: one
// round trip each.
//
// # Lock order
//
// Every transaction that locks more than one row of a session takes them
// in one order, so that two of them never wait for each other: the
// session's lease row, then its sessions row, then its other rows
// (transcript, KV entries, artifacts). A fenced write share-locks the
// lease, then writes the session row (an update, or the key-share lock of
// the foreign key of a new row), then its rows; an unfenced KV write
// key-share-locks the session before it touches a KV row; a commit of an
// artifact locks the session, then the blob; DeleteSession locks the lease,
// then the session, then deletes the rest.
//
// # Connections
//
// The DSN is pgx's: a URL or key=value string, with pgxpool's pool_*
// settings (pool_max_conns defaults to the larger of 4 and the number of
// CPUs). Connecting is bounded by the DSN's connect_timeout, or 10 s (see
// WithConnectTimeout). Open fails with an error that says what is wrong when
// the server cannot be reached, refuses the credentials or has no such
// database.
//
// # Outcomes
//
// Every write is one statement, its own transaction, on a connection it
// takes from the pool first. A failed write wraps store.ErrOutcomeUnknown
// when it may have been committed: its statement was sent and the answer
// did not come (a lost connection, a deadline, the server ending the
// connection as it shuts down or crashes, which can follow a commit). A
// write that got no connection, that pgx says sent nothing, or that the
// server answered with an error (it rolled back) was not applied.
//
// # Durability
//
// A write returns after its commit, durable as the server's
// synchronous_commit says: on (PostgreSQL's default), the WAL is flushed
// first; off, like the SQLite store's synchronous=NORMAL, a server crash may
// lose the last commits but never the consistency of the data. It can be
// set per store in the DSN (synchronous_commit=off); BenchmarkStore prices
// both.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/surfaced/surfaced/store"
)

// DefaultSchema is the schema the store's tables live in unless WithSchema
// names another.
const DefaultSchema = "surfaced"

// DefaultConnectTimeout bounds each connection attempt when neither the DSN
// (connect_timeout) nor WithConnectTimeout sets it.
const DefaultConnectTimeout = 10 * time.Second

// Store is a store.Store and store.Leaser in PostgreSQL. Use Open to get
// one.
type Store struct {
	pool   *pgxpool.Pool
	schema string // as given
	target string // user@host:port/database, for messages
	log    *slog.Logger
	q      queries
	aq     artifactQueries

	closed    atomic.Bool
	closeOnce sync.Once
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Leaser  = (*Store)(nil)
	_ store.Batcher = (*Store)(nil)
)

// Option configures Open.
type Option func(*config)

type config struct {
	log            *slog.Logger
	schema         string
	connectTimeout time.Duration
	migrations     []migration // the schema history this build knows; tests change it
}

// WithLogger sets the logger of the store (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithSchema sets the schema that holds the store's tables (default
// DefaultSchema). Open creates it if it does not exist.
func WithSchema(name string) Option { return func(c *config) { c.schema = name } }

// WithConnectTimeout bounds each connection attempt, from dialing to the
// end of authentication, when the DSN has no connect_timeout (default
// DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option { return func(c *config) { c.connectTimeout = d } }

// Open connects to the database at dsn and brings the store's schema up to
// date.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	cfg := config{
		log:            slog.Default(),
		schema:         DefaultSchema,
		connectTimeout: DefaultConnectTimeout,
		migrations:     migrations,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.schema == "" || len(cfg.schema) > 63 || strings.IndexByte(cfg.schema, 0) >= 0 {
		return nil, fmt.Errorf("postgres: open: schema name %q: want 1 to 63 bytes without NUL", cfg.schema)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message leaves the password out.
		return nil, fmt.Errorf("postgres: open: malformed DSN: %w", err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 && cfg.connectTimeout > 0 {
		pc.ConnConfig.ConnectTimeout = cfg.connectTimeout
	}
	cc := pc.ConnConfig
	s := &Store{
		schema: cfg.schema,
		target: fmt.Sprintf("%s@%s/%s", cc.User, net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port)), cc.Database),
		q:      newQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		aq:     newArtifactQueries(pgx.Identifier{cfg.schema}.Sanitize()),
	}
	if strings.HasPrefix(cc.Host, "/") {
		s.target = fmt.Sprintf("%s@%s/%s", cc.User, cc.Host, cc.Database)
	}
	s.log = cfg.log.With("db", s.target, "schema", cfg.schema)
	s.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: open %s: %w", s.target, err)
	}
	// The pool connects lazily: the first connection tells whether the
	// server is there and lets us in.
	if err := s.pool.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, s.connectErr(err, pc.ConnConfig.ConnectTimeout)
	}
	if err := s.migrate(ctx, cfg.migrations); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// connectErr says why the first connection failed, in the terms of what
// the operator has to fix.
func (s *Store) connectErr(err error, timeout time.Duration) error {
	var pgErr *pgconn.PgError
	var netErr net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return fmt.Errorf("postgres: open %s: the server refused the credentials (wrong user or password, or no pg_hba.conf entry for this host): %w", s.target, err)
	case errors.As(err, &pgErr) && pgErr.Code == "3D000":
		return fmt.Errorf("postgres: open %s: the database does not exist (create it, or fix the DSN): %w", s.target, err)
	case errors.As(err, &pgErr) && (pgErr.Code == "53300" || pgErr.Code == "57P03"):
		return fmt.Errorf("postgres: open %s: the server does not accept connections now (too many, or starting up): %w", s.target, err)
	case errors.As(err, &pgErr):
		return fmt.Errorf("postgres: open %s: %w", s.target, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("postgres: open %s: no answer from the server within the connect timeout (%v): %w", s.target, timeout, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("postgres: open %s: %w", s.target, err)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("postgres: open %s: cannot resolve the server's host name: %w", s.target, err)
	case errors.As(err, &netErr) || errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("postgres: open %s: cannot reach the server (is it running, on this address and port?): %w", s.target, err)
	}
	return fmt.Errorf("postgres: open %s: cannot connect: %w", s.target, err)
}

// migrationLockKey is the advisory lock that serializes the migrations of
// one schema: a hash of its name, so that deployments in other schemas of
// the same database do not wait for each other.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("surfaced migrations\x00" + schema))
	return int64(h.Sum64())
}

// Schema returns the name of the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Close implements store.Store. It waits for calls in flight to return
// their connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.pool.Close()
	})
	return nil
}

// fail wraps err from operation op on session id, telling a closed store
// apart from a failing one, and a canceled call from a failing store.
func (s *Store) fail(ctx context.Context, op, id string, err error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	if id == "" {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return fmt.Errorf("postgres: %s %q: %w", op, id, err)
}

// failWrite is fail for a write: an error that leaves open whether the
// write was applied (see unknownOutcome) wraps store.ErrOutcomeUnknown.
func (s *Store) failWrite(ctx context.Context, op, id string, err error) error {
	if unknownOutcome(err) {
		err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
	}
	return s.fail(ctx, op, id, err)
}

// notSentError is a write that failed before anything of it reached the
// server: no connection could be had.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "no connection to the server: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// conn takes a connection from the pool for one write, so that a write
// that never got one is known not to have been sent.
func (s *Store) conn(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, &notSentError{err: err}
	}
	return c, nil
}

// unknownOutcome reports whether a write that failed with err may have been
// applied: its statement (one statement, its own transaction) was sent,
// and the server's answer did not come back, or it came back as the
// connection's end (a server shutting down or crashing may end a
// connection after the commit reached its log, before the answer was
// sent). An error the server answered for the statement means it rolled
// back; a write that got no connection, or that pgx says sent nothing, was
// not applied.
func unknownOutcome(err error) bool {
	var pgErr *pgconn.PgError
	var notSent *notSentError
	var connect *pgconn.ConnectError
	var rolled *rolledBack
	switch {
	case err == nil, errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid),
		errors.Is(err, store.ErrExists), errors.Is(err, store.ErrClosed):
		return false
	case errors.Is(err, store.ErrQuotaExceeded), errors.Is(err, store.ErrBlobGone), errors.Is(err, store.ErrTooLarge),
		errors.Is(err, store.ErrSourceFailed):
		// The store's answer to what the write is: it rolled back.
		return false
	case errors.As(err, &rolled):
		return false
	case errors.As(err, &pgErr):
		// Class 57 (operator intervention: admin or crash shutdown) and
		// 08 (connection exception) end the connection, whatever became of
		// the statement; FATAL and PANIC do too.
		return strings.HasPrefix(pgErr.Code, "57") || strings.HasPrefix(pgErr.Code, "08") ||
			pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC"
	case errors.As(err, &notSent), errors.As(err, &connect):
		return false
	}
	return !pgconn.SafeToRetry(err)
}

// rolledBack is a failure of a transaction before its commit was sent:
// nothing of it was applied (it rolled back, or died with its connection).
type rolledBack struct{ err error }

func (e *rolledBack) Error() string { return e.err.Error() }
func (e *rolledBack) Unwrap() error { return e.err }

// inTx runs fn in a transaction and commits it. A failure before the
// commit is sent comes back as rolledBack, which failWrite reads as not
// applied, whatever it was (a lost connection too); only the commit's own
// failure may leave the outcome unknown.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return &rolledBack{err: err}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return &rolledBack{err: err}
	}
	return tx.Commit(ctx)
}

// begin checks what every call checks first: the store is open and ctx is
// live.
func (s *Store) begin(ctx context.Context, op, id string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, op, id, err)
	}
	return nil
}
