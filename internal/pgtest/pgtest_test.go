package pgtest

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"
)

// The tests run under Main, which stops the shared server after them; then
// every goroutine they started has ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(mainRun{m}) }

type mainRun struct{ m *testing.M }

func (r mainRun) Run() int { return Main(r.m) }

func TestStartGivesFreshDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := Start(t), Start(t)
	if a == b {
		t.Fatalf("two Starts gave the same database %s", a)
	}
	conn, err := pgconn.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE x (v int); INSERT INTO x VALUES (1)").ReadAll(); err != nil {
		t.Fatal(err)
	}
	other, err := pgconn.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	_, err = other.Exec(ctx, "SELECT * FROM x").ReadAll()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("table of one database seen from another: err = %v, want undefined_table", err)
	}
}

func TestPrivateServerStops(t *testing.T) {
	Require(t)
	ctx := context.Background()
	srv, err := NewServer(ctx, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	res, err := conn.Exec(ctx, "SHOW fsync").ReadAll()
	conn.Close(ctx)
	if err != nil || string(res[0].Rows[0][0]) != "on" {
		t.Errorf("durable server: fsync = %v, %v", res, err)
	}
	base := srv.base
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server directory left after Stop: %v", err)
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(srv.Port)), time.Second)
	if err == nil {
		c.Close()
		t.Errorf("port %d still accepts connections after Stop", srv.Port)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Freeze leaves an open connection unanswered until Thaw; StopImmediate
// and Restart keep what was committed (with synchronous commit, which the
// fast test server turns off), on the same port.
func TestFreezeAndImmediateRestart(t *testing.T) {
	Require(t)
	ctx := context.Background()
	srv, err := NewServer(ctx, Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Thaw(); srv.Stop() })
	dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE x (v int); INSERT INTO x VALUES (1)").ReadAll(); err != nil {
		t.Fatal(err)
	}

	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = conn.Exec(c, "SELECT 1").ReadAll()
	cancel()
	if err == nil {
		t.Fatal("a frozen server answered")
	}
	conn.Close(ctx)
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("after Thaw: %v", err)
	}
	conn.Close(ctx)

	port := srv.Port
	if err := srv.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgconn.Connect(ctx, dsn); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Port != port {
		t.Fatalf("restarted on port %d, was %d", srv.Port, port)
	}
	conn, err = pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, "SELECT v FROM x").ReadAll()
	if err != nil || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "1" {
		t.Fatalf("after an immediate stop and restart: %v %v", res, err)
	}
}
