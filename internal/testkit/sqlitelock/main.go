// Command sqlitelock holds the write lock of an SQLite database, as another
// program on the same file would: it opens the file, runs BEGIN IMMEDIATE,
// prints "locked", and holds the lock until its standard input closes (or
// says anything), then rolls back and exits. Tests start it as a child
// process (testkit.LockSQLite) to take the lock away from the daemon.
package main

import (
	"database/sql"
	"fmt"
	"io"
	"os"

	_ "modernc.org/sqlite"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sqlitelock <database file>")
		os.Exit(2)
	}
	db, err := sql.Open("sqlite", "file:"+os.Args[1]+"?_busy_timeout=10000")
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("BEGIN IMMEDIATE"); err != nil {
		fail(err)
	}
	fmt.Println("locked")
	_, _ = io.ReadFull(os.Stdin, make([]byte, 1))
	if _, err := db.Exec("ROLLBACK"); err != nil {
		fail(err)
	}
	db.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sqlitelock:", err)
	os.Exit(1)
}
