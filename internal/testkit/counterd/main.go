// Command counterd is a daemon for the durability tests: the runtime with
// the configured agent and a native domain, "counter" (add: count+1,
// answered with the new count), behind the gateway, on a store the flags
// name. The daemon (cmd/surfaced) has no native domains; the tests kill
// this one (SIGKILL) as they kill it, to check what native commands
// acknowledged before a crash. It prints the daemon's start line
// ("surfaced: open <url>") and runs until SIGTERM or SIGINT.
//
//	counterd [run] --addr 127.0.0.1:0 --store <postgres DSN> | --data-dir <dir> --token <t> -- <agent argv>
//
// It takes the flags the tests give the daemon; --log-level is accepted and
// the log is always at debug level.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/postgres"
	"github.com/surfaced/surfaced/store/sqlite"
)

type count struct {
	Count int `json:"count"`
}

func counter() surface.Domain {
	return surface.Define("counter", count{}, map[string]surface.Command[count]{
		"add": surface.Typed(func(ctx *surface.Ctx[count], _ struct{}) (any, error) {
			ctx.SetState(func(c count) count { c.Count++; return c })
			return ctx.Get(), nil
		}),
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dsn := flag.String("store", "", "PostgreSQL DSN (empty: SQLite in --data-dir)")
	dir := flag.String("data-dir", "", "SQLite data directory")
	token := flag.String("token", "", "launch token")
	flag.String("log-level", "debug", "ignored: the log is at debug level")
	if len(os.Args) > 1 && os.Args[1] == "run" {
		os.Args = append(os.Args[:1], os.Args[2:]...)
	}
	flag.Parse()
	if err := run(*addr, *dsn, *dir, *token, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "counterd:", err)
		os.Exit(1)
	}
}

func run(addr, dsn, dir, token string, agent []string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var st store.Store
	var err error
	if dsn != "" {
		st, err = postgres.Open(ctx, dsn, postgres.WithLogger(log))
	} else {
		st, err = sqlite.Open(ctx, dir, sqlite.WithLogger(log))
	}
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := surfaced.New(surfaced.Config{Store: st, Logger: log, NodeID: "counterd",
		Agents:  []surfaced.AgentSpec{{Name: "fake", Argv: agent}},
		Domains: []surfaced.DomainBinding{{Domain: counter()}}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	g, err := guard.New(guard.Config{Addr: ln.Addr().String(), Token: token, Logger: log})
	if err != nil {
		return err
	}
	defer g.Close()
	srv := gateway.New(gateway.Options{Runtime: rt, Guard: g, Logger: log})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Printf("surfaced: open http://%s/\n", ln.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	err = rt.Shutdown(sctx)
	srv.Close(sctx)
	_ = hs.Shutdown(sctx)
	return err
}
