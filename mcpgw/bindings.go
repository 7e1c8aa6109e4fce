package mcpgw

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/clock"
)

// bindings are the stateful MCP sessions (protocol versions before
// 2026-07-28) and whose they are: the SDK names a session by its
// Mcp-Session-Id alone; here each is bound to the subject that opened it
// and the path it was opened on, counted against the subject's cap, and
// closed once its client is gone (no request and no open stream for the
// idle timeout).
type bindings struct {
	s     *Server
	clock clock.Clock
	idle  time.Duration

	mu     sync.Mutex
	byID   map[string]*binding
	timer  clock.Timer
	closed bool
}

type binding struct {
	subject  string
	attached string
	active   int       // requests and streams in flight
	last     time.Time // when the last one ended (or the session opened)
}

func newBindings(s *Server) *bindings {
	b := &bindings{s: s, clock: s.opts.Clock, idle: s.opts.IdleTimeout, byID: map[string]*binding{}}
	b.mu.Lock()
	b.arm()
	b.mu.Unlock()
	return b
}

// serve passes a request of the stateful protocol to the SDK: one naming a
// session must come from its subject on its path (else 404, as for a
// session that does not exist); one opening a session (initialize) is
// refused past the subject's cap, and its session is bound when the SDK
// names it.
func (b *bindings) serve(w http.ResponseWriter, r *http.Request, id identity.Identity, attached, sid string) {
	if sid != "" {
		if !b.enter(sid, id.Subject, attached) {
			textError(w, http.StatusNotFound, "Not Found: no such MCP session (it closed, or the daemon restarted); initialize a new one.")
			return
		}
		defer b.leave(sid, r.Method == http.MethodDelete)
		if b.s.serveFast(w, r, false) {
			return
		}
		b.s.stateful.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodPost {
		if n := b.count(id.Subject); n >= b.s.opts.SessionsPerSubject {
			textError(w, http.StatusTooManyRequests, fmt.Sprintf("Too Many Requests: you already hold %s open (the limit); close one (DELETE with its Mcp-Session-Id) or let it idle out.",
				plural(n, "MCP session", "MCP sessions")))
			return
		}
		w = &bindOnAnswer{ResponseWriter: w, bind: func(sid string) { b.bind(sid, id.Subject, attached) }}
	}
	b.s.stateful.ServeHTTP(w, r)
}

// bindOnAnswer binds the session the SDK names in its answer to initialize.
type bindOnAnswer struct {
	http.ResponseWriter
	bind  func(sid string)
	wrote bool
}

func (w *bindOnAnswer) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if sid := w.Header().Get("Mcp-Session-Id"); sid != "" && code < 300 {
			w.bind(sid)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *bindOnAnswer) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController flush the SSE answer.
func (w *bindOnAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes an SSE answer (the SDK flushes through the writer itself).
func (w *bindOnAnswer) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (b *bindings) bind(sid, subject, attached string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byID[sid] = &binding{subject: subject, attached: attached, last: b.clock.Now()}
}

func (b *bindings) count(subject string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, x := range b.byID {
		if x.subject == subject {
			n++
		}
	}
	return n
}

// enter admits a request naming session sid when subject opened it on
// this path.
func (b *bindings) enter(sid, subject, attached string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.byID[sid]
	if x == nil || x.subject != subject || x.attached != attached {
		return false
	}
	x.active++
	return true
}

func (b *bindings) leave(sid string, deleted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.byID[sid]
	if x == nil {
		return
	}
	x.active--
	x.last = b.clock.Now()
	if deleted {
		delete(b.byID, sid)
	}
}

// arm schedules the next sweep; b.mu is held.
func (b *bindings) arm() {
	if b.closed {
		return
	}
	b.timer = b.clock.AfterFunc(max(min(b.idle/4, 30*time.Second), 10*time.Millisecond), b.sweep)
}

// sweep closes the sessions idle past the timeout and forgets the ones the
// SDK closed by itself.
func (b *bindings) sweep() {
	live := map[string]bool{}
	for ss := range b.s.mcp.Sessions() {
		live[ss.ID()] = true
	}
	now := b.clock.Now()
	var idle []string
	b.mu.Lock()
	for sid, x := range b.byID {
		switch {
		case !live[sid] && x.active == 0 && now.Sub(x.last) > time.Second:
			delete(b.byID, sid)
		case x.active == 0 && now.Sub(x.last) >= b.idle:
			delete(b.byID, sid)
			idle = append(idle, sid)
		}
	}
	b.arm()
	b.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, sid := range idle {
		gone[sid] = true
	}
	for ss := range b.s.mcp.Sessions() {
		if gone[ss.ID()] {
			b.s.log.Debug("mcp session closed: idle", "mcp_session", ss.ID())
			_ = ss.Close()
		}
	}
}

func (b *bindings) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	clear(b.byID) // the SDK's sessions close next: a request naming one is 404
	if b.timer != nil {
		b.timer.Stop()
	}
}
