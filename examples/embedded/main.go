// Command embedded shows surfaced used as a library: a Go program that runs
// the runtime and the browser gateway itself, registers a native surface
// domain of its own ("notes", implemented in Go in this process), and hosts an
// agent — here itself, re-executed as a subprocess in agent mode, so that the
// example is one binary.
//
//	go run ./examples/embedded            # prints the URL to open
//
// The notes panel shows in the web UI's generic surface panel: run "add" with
// {"text":"..."} from the form, or from the agent's side with surface_command.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/store/memstore"
)

// Notes is the state of the native "notes" domain.
type Notes struct {
	Items []string `json:"items"`
}

// NotesDomain is a native domain: its commands run in this process, in the
// domain actor, one at a time; the runtime assigns revs and publishes.
func NotesDomain() surface.Domain {
	return surface.Define("notes", Notes{Items: []string{}}, map[string]surface.Command[Notes]{
		"add": surface.Typed(func(ctx *surface.Ctx[Notes], a struct {
			Text string `json:"text"`
		}) (any, error) {
			text := strings.TrimSpace(a.Text)
			if text == "" {
				return nil, surface.Errorf("empty_note", "a note needs some text")
			}
			ctx.SetState(func(n Notes) Notes {
				n.Items = append(append([]string(nil), n.Items...), text)
				return n
			})
			return map[string]int{"count": len(ctx.Get().Items)}, nil
		}),
		"clear": func(ctx *surface.Ctx[Notes], _ json.RawMessage) (any, error) {
			ctx.SetState(func(Notes) Notes { return Notes{Items: []string{}} })
			return nil, nil
		},
	})
}

// Server is the embedded daemon.
type Server struct {
	Runtime *surfaced.Runtime
	HTTP    *gateway.Server
	Token   string
	URL     string
	ln      net.Listener
	hs      *http.Server
	guard   *guard.Guard
}

// Start runs the runtime and the gateway on addr, hosting agentArgv.
func Start(addr string, agentArgv []string, log *slog.Logger) (*Server, error) {
	rt, err := surfaced.New(surfaced.Config{
		Store:   memstore.New(),
		Logger:  log,
		Agents:  []surfaced.AgentSpec{{Name: "assistant", Title: "Assistant with notes", Argv: agentArgv}},
		Domains: []surfaced.DomainBinding{{Domain: NotesDomain()}},
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	token := guard.LaunchToken()
	g, err := guard.New(guard.Config{Addr: ln.Addr().String(), Token: token, Logger: log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	srv := gateway.New(gateway.Options{Runtime: rt, Guard: g, Logger: log})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return &Server{Runtime: rt, HTTP: srv, Token: token, ln: ln, hs: hs, guard: g,
		URL: "http://" + ln.Addr().String()}, nil
}

// Close shuts everything down.
func (s *Server) Close(ctx context.Context) {
	s.HTTP.Shutdown(ctx)
	_ = s.Runtime.Shutdown(ctx)
	s.HTTP.Close(ctx)
	_ = s.hs.Shutdown(ctx)
	s.guard.Close()
}

// runAgent is the agent side: a plain chat agent (scripted model unless
// SURFACED_LLM_BASE_URL is set) with a tool that writes to the native notes
// domain through surface_command.
func runAgent() error {
	agent := agentkit.New(agentkit.Options{Name: "embedded-assistant", Model: agentkit.ModelFromEnv()})
	agent.AddTool(agentkit.Tool{
		Name:        "note",
		Description: "Add a note to the notes panel.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Run: func(ctx context.Context, tc *agentkit.ToolCtx, args json.RawMessage) (string, error) {
			data, err := tc.SurfaceCommand(ctx, "notes", "add", args)
			return string(data), err
		},
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return agent.Run(ctx, os.Stdin, os.Stdout)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		if err := runAgent(); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
		return
	}
	addr := flag.String("addr", "127.0.0.1:7801", "listen address")
	flag.Parse()
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := Start(*addr, []string{self, "agent"}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
	fmt.Println("embedded: open " + s.URL + "/?token=" + s.Token)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Close(sctx)
}
