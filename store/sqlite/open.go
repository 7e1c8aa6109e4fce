package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// applicationID marks a database file as surfaced's ("srfd"), so that Open
// refuses an unrelated SQLite file that happens to sit at the same path.
const applicationID = 0x73726664

// sqliteMagic starts every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// checkFile looks at the database file before SQLite does, to turn the
// usual ways a file goes bad into errors that say what is wrong. A missing
// file is fine (Open creates it); so is an empty one, which SQLite treats as
// a new database and which holds nothing to lose.
func checkFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("sqlite: open database: %w", err)
	case fi.IsDir():
		return fmt.Errorf("sqlite: open %s: is a directory, not a database file", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("sqlite: open %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	// SQLite needs to read and write the file; asking the OS first gives
	// "permission denied" instead of SQLite's "unable to open database file".
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlite: open database for reading and writing: %w", err)
	}
	defer f.Close()
	var header [100]byte
	n, err := io.ReadFull(f, header[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("sqlite: open %s: truncated database file: %d bytes, less than the 100-byte header", path, n)
	case err != nil:
		return fmt.Errorf("sqlite: read database header: %w", err)
	case !bytes.Equal(header[:16], sqliteMagic):
		return fmt.Errorf("sqlite: open %s: not an SQLite database (it starts with %q)", path, header[:16])
	}
	pageSize := int64(binary.BigEndian.Uint16(header[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("sqlite: open %s: corrupt database header: page size %d", path, pageSize)
	}
	// A non-empty WAL may still be replayed into the file and legitimately
	// extend it; only judge the size of a file that has none.
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
		return nil
	}
	if fi.Size()%pageSize != 0 {
		return fmt.Errorf("sqlite: open %s: truncated database file: %d bytes is not a whole number of %d-byte pages", path, fi.Size(), pageSize)
	}
	// The page count in the header is valid when the change counter matches
	// the version-valid-for number (both written by every commit).
	if bytes.Equal(header[24:28], header[92:96]) {
		if pages := int64(binary.BigEndian.Uint32(header[28:32])); pages*pageSize > fi.Size() {
			return fmt.Errorf("sqlite: open %s: truncated database file: %d bytes, the header says %d pages of %d bytes", path, fi.Size(), pages, pageSize)
		}
	}
	return nil
}

// prepare runs on the writer connection before the store is used: WAL mode,
// an integrity check, then the schema.
//
// Everything that only reads comes first, so that a file Open refuses is
// left exactly as it was: switching to WAL rewrites the header.
func (s *Store) prepare(ctx context.Context, cfg config) error {
	if err := s.quickCheck(ctx); err != nil {
		return err
	}
	version, err := s.schemaVersion(ctx)
	if err != nil {
		return err
	}
	latest := cfg.migrations[len(cfg.migrations)-1].version
	if version > latest {
		return fmt.Errorf("sqlite: open %s: schema version %d is newer than this build knows (%d): use a newer surfaced or another data directory", s.path, version, latest)
	}
	var mode string
	if err := s.write.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return s.openErr("set WAL mode", err)
	}
	if mode != "wal" {
		return fmt.Errorf("sqlite: open %s: journal mode is %q, WAL could not be set", s.path, mode)
	}
	return s.migrate(ctx, version, cfg.migrations)
}

// quickCheck runs PRAGMA quick_check, which reads every page of the file: it
// finds torn pages and broken b-trees (not index/table mismatches, which
// would need the much slower integrity_check).
func (s *Store) quickCheck(ctx context.Context) error {
	rows, err := s.write.QueryContext(ctx, "PRAGMA quick_check(10)")
	if err != nil {
		return s.openErr("quick_check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return s.openErr("quick_check", err)
		}
		if msg != "ok" {
			problems = append(problems, strings.ReplaceAll(msg, "\n", "; "))
		}
	}
	if err := rows.Err(); err != nil {
		return s.openErr("quick_check", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("sqlite: open %s: database file is corrupt: quick_check: %s", s.path, strings.Join(problems, "; "))
	}
	return nil
}

// openErr wraps an error met while opening, naming the file and, for the
// SQLite codes that mean a bad file, what is wrong with it.
func (s *Store) openErr(step string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("sqlite: open %s: not an SQLite database or its header is damaged: %w", s.path, err)
		case sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("sqlite: open %s: database file is corrupt: %w", s.path, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("sqlite: open %s: cannot read or write the database file or its directory: %w", s.path, err)
		}
	}
	return fmt.Errorf("sqlite: open %s: %s: %w", s.path, step, err)
}

// schemaVersion reads what the file says about its schema: 0 for a new,
// empty database, else the last migration applied.
func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	var appID, objects, hasVersions int
	err := s.write.QueryRowContext(ctx, `SELECT
		(SELECT application_id FROM pragma_application_id),
		(SELECT count(*) FROM sqlite_schema),
		(SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations')`,
	).Scan(&appID, &objects, &hasVersions)
	if err != nil {
		return 0, s.openErr("read schema", err)
	}
	switch {
	case appID == 0 && objects == 0:
		return 0, nil
	case appID != applicationID:
		return 0, fmt.Errorf("sqlite: open %s: not a surfaced database (application_id %#x, %d schema objects)", s.path, appID, objects)
	case hasVersions == 0:
		return 0, fmt.Errorf("sqlite: open %s: damaged surfaced database: the schema_migrations table is missing", s.path)
	}
	var version sql.NullInt64
	if err := s.write.QueryRowContext(ctx, "SELECT max(version) FROM schema_migrations").Scan(&version); err != nil {
		return 0, s.openErr("read schema version", err)
	}
	if !version.Valid {
		return 0, fmt.Errorf("sqlite: open %s: damaged surfaced database: schema_migrations is empty", s.path)
	}
	return int(version.Int64), nil
}
