// Command plainserver is the baseline of BenchmarkCommandLoad's sustained
// load: the work the daemon does for an agent-hosted command, written
// plainly. net/http; one goroutine per session that owns its agent process
// (stdin and a buffered stdout) and its surface's snapshot; every snapshot
// written to the same SQLite store as the daemon's, through one writer
// goroutine that puts every queued session's write in one transaction
// (group commit); the answer sent once the write committed; the new
// snapshot sent to the session's event streams as the daemon's `state`
// frame. No actors, no auth, no limits beyond a bounded queue per session,
// no restarts: what a gateway written by hand for this one agent would be.
//
// It serves what the benchmark uses of the HTTP API: POST /api/sessions,
// POST /api/sessions/{id}/surfaces/{domain}/{action} and
// GET /api/sessions/{id}/events. It prints "plainserver: open <url>" once
// it listens.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/sqlite"
)

// Bounds, the daemon's defaults: commands waiting per session, frames
// waiting per event stream.
const (
	commandQueue = 64
	streamQueue  = 256
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dataDir := flag.String("data-dir", "", "directory of the SQLite store")
	agent := flag.String("agent", "", "the agent's executable")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(*addr, *dataDir, *agent, log); err != nil {
		log.Error("plainserver", "err", err)
		os.Exit(1)
	}
}

func run(addr, dataDir, agent string, log *slog.Logger) error {
	if dataDir == "" || agent == "" {
		return errors.New("--data-dir and --agent are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := sqlite.Open(ctx, dataDir, sqlite.WithLogger(log))
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	s := &server{st: st, agent: agent, dataDir: dataDir, log: log, sessions: map[string]*session{},
		writes: make(chan write, 4096), epoch: strconv.FormatInt(time.Now().UnixMilli(), 36)}
	go s.writer()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/sessions", s.create)
	mux.HandleFunc("POST /api/sessions/{id}/surfaces/{domain}/{action}", s.command)
	mux.HandleFunc("GET /api/sessions/{id}/events", s.events)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("plainserver: open http://%s/\n", ln.Addr())
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		ss.stdin.Close()
		_ = ss.cmd.Wait()
	}
	return nil
}

type server struct {
	st      *sqlite.Store
	agent   string
	dataDir string
	log     *slog.Logger
	writes  chan write
	epoch   string

	mu       sync.Mutex
	sessions map[string]*session
}

// write is one session's snapshot for the writer; done gets its outcome.
type write struct {
	item store.KVBatch
	done chan error
}

// writer writes what is queued in one transaction, then what queued
// meanwhile, and so on: group commit.
func (s *server) writer() {
	for w := range s.writes {
		batch := []write{w}
	drain:
		for len(batch) < 1024 {
			select {
			case w := <-s.writes:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		items := make([]store.KVBatch, len(batch))
		for i, w := range batch {
			items[i] = w.item
		}
		errs, err := s.st.PutKVBatch(context.Background(), items)
		for i, w := range batch {
			switch {
			case err != nil:
				w.done <- err
			case i < len(errs):
				w.done <- errs[i]
			default:
				w.done <- nil
			}
		}
	}
}

type session struct {
	id      string
	epoch   string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	queue   chan *command
	state   json.RawMessage
	rev     uint64
	nextID  int
	mu      sync.Mutex // watchers, seq, and state as the streams see it
	seq     uint64
	streams map[chan []byte]struct{}
}

type command struct {
	domain, action string
	args           json.RawMessage
	answer         chan []byte
}

func (s *server) create(w http.ResponseWriter, r *http.Request) {
	var b [10]byte
	_, _ = rand.Read(b[:])
	id := fmt.Sprintf("%x", b)
	cwd := filepath.Join(s.dataDir, "cwd", id)
	now := time.Now()
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := s.st.CreateSession(r.Context(), store.Session{ID: id, Owner: "bench", Agent: "demo", Cwd: cwd,
		Status: "idle", Created: now, Updated: now}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	cmd := exec.Command(s.agent)
	cmd.Dir = cwd
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ss := &session{id: id, epoch: s.epoch, cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 64<<10),
		queue: make(chan *command, commandQueue), state: json.RawMessage(`{"count":0,"log":[]}`), streams: map[chan []byte]struct{}{}}
	if _, err := ss.await("agent_ready", ""); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.sessions[id] = ss
	s.mu.Unlock()
	go s.serve(ss)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"sessionId":%q}`, id)
}

func (s *server) lookup(w http.ResponseWriter, r *http.Request) *session {
	s.mu.Lock()
	ss := s.sessions[r.PathValue("id")]
	s.mu.Unlock()
	if ss == nil {
		http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
	}
	return ss
}

func (s *server) command(w http.ResponseWriter, r *http.Request) {
	ss := s.lookup(w, r)
	if ss == nil {
		return
	}
	args, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || !json.Valid(args) {
		http.Error(w, `{"error":{"code":"invalid_json"}}`, http.StatusBadRequest)
		return
	}
	c := &command{domain: r.PathValue("domain"), action: r.PathValue("action"), args: args, answer: make(chan []byte, 1)}
	select {
	case ss.queue <- c:
	default:
		http.Error(w, `{"error":{"code":"queue_full"}}`, http.StatusTooManyRequests)
		return
	}
	body := <-c.answer
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// serve runs a session's commands one at a time: to the agent, its answer,
// the snapshot written, the frame to the streams, the answer to the caller.
func (s *server) serve(ss *session) {
	for c := range ss.queue {
		c.answer <- s.run(ss, c)
	}
}

func (s *server) run(ss *session, c *command) []byte {
	ss.nextID++
	id := c.domain + "#" + strconv.Itoa(ss.nextID)
	line, _ := json.Marshal(map[string]any{"type": "surface_dispatch", "id": id, "domain": c.domain,
		"action": c.action, "args": c.args, "state": ss.state, "rev": ss.rev})
	if _, err := ss.stdin.Write(append(line, '\n')); err != nil {
		return fail("agent_unavailable", err)
	}
	answer, err := ss.await("surface_dispatch_result", id)
	if err != nil {
		return fail("agent_unavailable", err)
	}
	var res struct {
		Result json.RawMessage `json:"result"`
		State  json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return fail("dispatch_failed", err)
	}
	if len(res.State) > 0 && string(res.State) != "null" {
		rev := ss.rev + 1
		key := "surface:" + c.domain
		done := make(chan error, 1)
		s.writes <- write{item: store.KVBatch{SessionID: ss.id, Entries: []store.KV{{Key: key, Value: res.State, Rev: rev}}}, done: done}
		if err := <-done; err != nil {
			s.log.Error("write", "session", ss.id, "rev", rev, "err", err)
			return fail("store_unavailable", err)
		}
		ss.state, ss.rev = res.State, rev
		ss.publish(key, res.State, rev)
	}
	return res.Result
}

// await reads the agent's lines until one of type typ (and id, when set).
func (ss *session) await(typ, id string) ([]byte, error) {
	for {
		line, err := ss.stdout.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("read the agent: %w", err)
		}
		var env struct{ Type, ID string }
		if json.Unmarshal(line, &env) == nil && env.Type == typ && (id == "" || env.ID == id) {
			return line, nil
		}
	}
}

func fail(code string, err error) []byte {
	b, _ := json.Marshal(map[string]any{"ok": false, "error": map[string]string{"code": code, "message": err.Error()}})
	return b
}

// publish sends a state frame to every stream; a stream that is that far
// behind is cut.
func (ss *session) publish(key string, value json.RawMessage, rev uint64) {
	data, _ := json.Marshal(map[string]any{"key": key, "value": value, "rev": rev})
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.seq++
	frame := fmt.Appendf(nil, "event: state\nid: %s-%d\ndata: %s\n\n", ss.epoch, ss.seq, data)
	for ch := range ss.streams {
		select {
		case ch <- frame:
		default:
			delete(ss.streams, ch)
			close(ch)
		}
	}
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	ss := s.lookup(w, r)
	if ss == nil {
		return
	}
	ch := make(chan []byte, streamQueue)
	ss.mu.Lock()
	ss.streams[ch] = struct{}{}
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		delete(ss.streams, ch)
		ss.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	_, _ = io.WriteString(w, ": fresh\n\n")
	fl.Flush()
	for {
		select {
		case frame, ok := <-ch:
			if !ok {
				return
			}
			if _, err := w.Write(frame); err != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}
