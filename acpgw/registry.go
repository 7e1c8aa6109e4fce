package acpgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/surfaced/surfaced/identity"
)

// registry is the mount's set of open connections, the reasons of the
// last closed ones, and the reaper of abandoned ones.
type registry struct {
	srv        *Server
	mu         sync.Mutex
	closing    bool
	conns      map[string]*conn
	bySubject  map[string]int // open connections per subject
	tombstones map[string]tombstone
	tombOrder  []string
	stop       chan struct{}
	stopped    chan struct{}
}

// tombstone remembers why a connection closed, so that a late request learns
// the reason instead of a bare "unknown".
type tombstone struct {
	reason string
	at     time.Time
}

const maxTombstones = 1024

func (g *registry) start(s *Server) {
	g.srv = s
	g.conns = map[string]*conn{}
	g.bySubject = map[string]int{}
	g.tombstones = map[string]tombstone{}
	g.stop = make(chan struct{})
	g.stopped = make(chan struct{})
	go g.reap()
}

// Close ends every connection (their readers get what is queued, then the
// streams end) and stops the reaper. Sessions live on. Call it after the
// runtime's Shutdown, so that held prompts were answered "cancelled" first.
func (s *Server) Close(ctx context.Context) {
	g := &s.reg
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return
	}
	g.closing = true
	conns := make([]*conn, 0, len(g.conns))
	for _, c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	close(g.stop)
	for _, c := range conns {
		c.answerPending()
	}
	for _, c := range conns {
		// Let readers take what was said last (cancelled prompts).
		c.waitDrained(ctx, 2*time.Second)
		c.close("the daemon is shutting down", false)
	}
	<-g.stopped
}

// reap closes connections whose client is gone: no stream reader and no
// request for IdleTimeout.
func (g *registry) reap() {
	defer close(g.stopped)
	idleFor := g.srv.opts.IdleTimeout
	t := time.NewTicker(max(min(idleFor/4, 30*time.Second), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			g.mu.Lock()
			var idle []*conn
			for _, c := range g.conns {
				if c.idleSince(now) > idleFor {
					idle = append(idle, c)
				}
			}
			g.mu.Unlock()
			for _, c := range idle {
				c.close(fmt.Sprintf("abandoned: no stream reader and no request for %s", idleFor), true)
			}
		}
	}
}

// Why register refused a connection.
var (
	errClosing      = errors.New("the daemon is shutting down")
	errTooManyConns = errors.New("too many connections")
)

func (g *registry) register(c *conn) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return errClosing
	}
	if g.bySubject[c.subject] >= g.srv.opts.ConnectionsPerSubject {
		return errTooManyConns
	}
	g.conns[c.id] = c
	g.bySubject[c.subject]++
	return nil
}

// forget drops a closed connection, keeping its reason for late requests.
func (g *registry) forget(c *conn, reason string, broken bool) {
	g.mu.Lock()
	if g.conns[c.id] == c {
		delete(g.conns, c.id)
		if g.bySubject[c.subject]--; g.bySubject[c.subject] <= 0 {
			delete(g.bySubject, c.subject)
		}
	}
	g.tombstones[c.id] = tombstone{reason: reason, at: time.Now()}
	g.tombOrder = append(g.tombOrder, c.id)
	for len(g.tombOrder) > maxTombstones {
		delete(g.tombstones, g.tombOrder[0])
		g.tombOrder = g.tombOrder[1:]
	}
	g.mu.Unlock()
	s := g.srv
	ev := ConnectionClosed{ConnectionID: c.id}
	if broken {
		ev.Fault = reason
		s.log.Warn("acp connection closed", "connection", c.id, "subject", c.subject, "fault", reason)
	} else {
		s.log.Info("acp connection closed", "connection", c.id, "subject", c.subject, "reason", reason)
	}
	s.publish(ev)
}

// lookup finds the connection a request names; it answers the request itself
// (400, 404, 403) and returns nil when it cannot be used.
func (g *registry) lookup(w http.ResponseWriter, r *http.Request, id identity.Identity) *conn {
	cid := r.Header.Get(HeaderConnectionID)
	if cid == "" {
		textError(w, http.StatusBadRequest, "Missing "+HeaderConnectionID+": POST initialize without it to open a connection, then send its id on every request.")
		return nil
	}
	g.mu.Lock()
	c := g.conns[cid]
	ts, dead := g.tombstones[cid]
	g.mu.Unlock()
	if c == nil {
		if dead {
			textError(w, http.StatusNotFound, "Unknown "+HeaderConnectionID+": the connection was closed ("+ts.reason+"); initialize a new one.")
		} else {
			textError(w, http.StatusNotFound, "Unknown "+HeaderConnectionID+": initialize a new connection.")
		}
		return nil
	}
	if c.subject != id.Subject {
		g.srv.log.Warn("acp connection used by another subject", "connection", c.id, "owner", c.subject, "subject", id.Subject, "remote", r.RemoteAddr)
		textError(w, http.StatusForbidden, "This connection belongs to another identity; initialize your own.")
		return nil
	}
	if closed, _ := c.isClosed(); closed {
		textError(w, http.StatusNotFound, "Unknown "+HeaderConnectionID+": the connection is closing.")
		return nil
	}
	return c
}
