package acpgw

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	acp "github.com/coder/acp-go-sdk"
)

// outStream is one outbound SSE stream of a connection: the connection
// stream (sessionID "") or one session's stream. Messages queue here until a
// reader (a GET) takes them; a stream without a reader keeps them, so that
// nothing is lost between a POST and the GET that reads its answer. All
// fields are guarded by the connection's mu.
type outStream struct {
	sessionID string
	queue     [][]byte
	leased    bool
	wake      chan struct{} // capacity 1: something to do for the reader
	pushed    uint64        // messages ever queued
	taken     uint64        // messages ever written to a reader
}

func (s *outStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// clientCall is a request of the gateway to the client (session/request_permission)
// waiting for its answer.
type clientCall struct {
	sessionID string
	answer    func(result json.RawMessage, err *acp.RequestError)
}

// attachedSession is a session attached to this connection: its gateway actor.
type attachedSession struct {
	pid   *actor.PID
	ready chan struct{} // closed when the subscription succeeded or failed
	err   *acp.RequestError
}

// conn is one ACP connection (one Acp-Connection-Id): its subject and agent,
// its streams, the routes of its pending requests, the requests it made to
// the client, and the sessions attached through it.
type conn struct {
	srv        *Server
	id         string
	subject    string
	agent      string // the Surfaced-Agent header at initialize ("" when none)
	clientName string
	images     bool

	mu         sync.Mutex
	closed     bool
	reason     string          // why it closed
	fault      string          // why it closed, when it broke
	ctx        context.Context // cancelled when the connection closes
	cancel     context.CancelFunc
	done       chan struct{}
	progress   chan struct{} // closed and replaced whenever a reader takes messages
	streams    map[string]*outStream
	buffered   int                     // messages queued on all streams, not yet taken
	routes     map[string]pendingRoute // request id key -> where its answer goes
	routeSeq   uint64
	calls      map[string]*clientCall
	sessions   map[string]*attachedSession
	lastActive time.Time
	readers    int
}

func newConnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newConn(srv *Server, subject, agent string) *conn {
	c := &conn{
		srv:        srv,
		id:         newConnID(),
		subject:    subject,
		agent:      agent,
		done:       make(chan struct{}),
		progress:   make(chan struct{}),
		streams:    map[string]*outStream{},
		routes:     map[string]pendingRoute{},
		calls:      map[string]*clientCall{},
		sessions:   map[string]*attachedSession{},
		lastActive: time.Now(),
	}
	c.streams[""] = &outStream{wake: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// streamLocked returns the stream of a session ("" the connection stream),
// creating it: messages for a session whose GET is not open yet wait there.
func (c *conn) streamLocked(sessionID string) *outStream {
	s := c.streams[sessionID]
	if s == nil {
		s = &outStream{sessionID: sessionID, wake: make(chan struct{}, 1)}
		c.streams[sessionID] = s
	}
	return s
}

// push queues a message on a stream. A connection holding more undelivered
// messages than its bound is closed: its client stopped reading, or never
// opened the stream, and must not make the daemon hold an unbounded backlog.
func (c *conn) push(sessionID string, msg []byte) {
	c.mu.Lock()
	over := c.pushLocked(sessionID, msg)
	c.mu.Unlock()
	c.checkBound(over)
}

// pushLocked queues msg; it reports the backlog size when it went over the
// bound (0 otherwise), for checkBound once c.mu is released.
func (c *conn) pushLocked(sessionID string, msg []byte) int {
	if c.closed {
		return 0
	}
	s := c.streamLocked(sessionID)
	s.queue = append(s.queue, msg)
	s.pushed++
	c.buffered++
	s.signal()
	if c.buffered > c.srv.maxBuffered {
		return c.buffered
	}
	return 0
}

func (c *conn) checkBound(over int) {
	if over > 0 {
		c.close(fmt.Sprintf("%d messages waited for a stream reader (the limit is %d): the client never opened its GET streams, or stopped reading them", over, c.srv.maxBuffered), true)
	}
}

// pushWait queues a message after waiting, up to timeout, for the backlog
// to fall under half the bound: a long replay goes at the reader's pace
// instead of tripping the bound.
func (c *conn) pushWait(sessionID string, msg []byte, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		if c.closed || c.buffered < c.srv.maxBuffered/2+1 {
			c.mu.Unlock()
			break
		}
		ch := c.progress
		c.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
	c.push(sessionID, msg)
}

// waitTaken waits, up to timeout, until a reader wrote out every message
// queued on the session's stream so far, and reports whether one did. The
// session/load answer goes out on the connection stream; waiting here makes
// the replay reach the client first.
func (c *conn) waitTaken(sessionID string, timeout time.Duration) bool {
	c.mu.Lock()
	s := c.streams[sessionID]
	if s == nil {
		c.mu.Unlock()
		return false
	}
	target := s.pushed
	c.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		switch {
		case s.taken >= target:
			c.mu.Unlock()
			return true
		case c.closed || !s.leased:
			c.mu.Unlock()
			return false
		}
		ch := c.progress
		c.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
}

// pendingRoute is an unanswered request: where its answer goes.
type pendingRoute struct {
	id        json.RawMessage
	method    string
	sessionID string // its stream; "" the connection stream
	seq       uint64 // the order the requests came in
}

// route records where the answer to a request goes.
func (c *conn) route(id json.RawMessage, method, sessionID string) {
	c.mu.Lock()
	c.routeSeq++
	c.routes[idKey(id)] = pendingRoute{id: id, method: method, sessionID: sessionID, seq: c.routeSeq}
	c.mu.Unlock()
}

// respond sends the answer to a request where its POST was routed. Every
// request is answered once: a second answer (the request was answered at
// shutdown already) is dropped.
func (c *conn) respond(id json.RawMessage, result any, rerr *acp.RequestError) {
	msg := encodeResponse(id, result, rerr)
	key := idKey(id)
	// Taking the route and queueing the answer is one step: answerPending
	// and close see the request either open or answered, never neither.
	c.mu.Lock()
	r, ok := c.routes[key]
	delete(c.routes, key)
	over := 0
	if ok {
		over = c.pushLocked(r.sessionID, msg)
	}
	c.mu.Unlock()
	c.checkBound(over)
}

// answerPending answers every request still open, as the daemon stops: a
// prompt with stopReason "cancelled" (its message was not, or not fully,
// answered), anything else with an internal error. The session gateway
// actors answer first when they can; this covers the ones the shutdown
// stopped before they could.
func (c *conn) answerPending() {
	c.mu.Lock()
	routes := make([]pendingRoute, 0, len(c.routes))
	for _, r := range c.routes {
		routes = append(routes, r)
	}
	c.routes = map[string]pendingRoute{}
	// In the order they came, as the session would have answered them.
	slices.SortFunc(routes, func(a, b pendingRoute) int { return cmp.Compare(a.seq, b.seq) })
	over := 0
	for _, r := range routes {
		var msg []byte
		if r.method == "session/prompt" {
			msg = encodeResponse(r.id, map[string]string{"stopReason": "cancelled"}, nil)
		} else {
			msg = encodeResponse(r.id, nil, errInternal("shutting_down"))
		}
		if n := c.pushLocked(r.sessionID, msg); n > 0 {
			over = n
		}
	}
	c.mu.Unlock()
	c.checkBound(over)
}

// notify sends a notification for a session on its stream.
func (c *conn) notify(sessionID, method string, params any) {
	c.push(sessionID, encodeNotification(method, params))
}

// call sends a request to the client on the session's stream; answer runs
// when the client's response arrives (never, if the call is withdrawn).
func (c *conn) call(sessionID, method string, params any, answer func(json.RawMessage, *acp.RequestError)) json.RawMessage {
	// Ids are unique across the daemon's connections and runs, so that a
	// client's late answer to a lost connection's request never matches a
	// new one.
	id := json.RawMessage(strconv.Quote("surfaced-" + c.srv.callPrefix + "-" + strconv.FormatUint(c.srv.callSeq.Add(1), 10)))
	c.mu.Lock()
	c.calls[idKey(id)] = &clientCall{sessionID: sessionID, answer: answer}
	c.mu.Unlock()
	c.push(sessionID, encodeRequest(id, method, params))
	return id
}

// withdraw forgets a call and tells the client it is no longer wanted
// ($/cancel_request; the client may still answer, and that answer is dropped).
func (c *conn) withdraw(id json.RawMessage) {
	key := idKey(id)
	c.mu.Lock()
	_, ok := c.calls[key]
	delete(c.calls, key)
	c.mu.Unlock()
	if ok {
		c.push("", encodeNotification("$/cancel_request", map[string]json.RawMessage{"requestId": id}))
	}
}

// takeCall removes and returns the call a client response answers.
func (c *conn) takeCall(id json.RawMessage) (*clientCall, bool) {
	key := idKey(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.calls[key]
	if ok {
		delete(c.calls, key)
	}
	return cc, ok
}

// callSession is the session stream a pending call went out on.
func (c *conn) callSession(id json.RawMessage) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.calls[idKey(id)]
	if !ok {
		return "", false
	}
	return cc.sessionID, true
}

// touch records client activity (for the idle reaper).
func (c *conn) touch() {
	c.mu.Lock()
	c.lastActive = time.Now()
	c.mu.Unlock()
}

// lease gives the stream to one reader; false when it already has one.
func (c *conn) lease(sessionID string) (*outStream, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	s := c.streamLocked(sessionID)
	if s.leased {
		return nil, false
	}
	s.leased = true
	c.readers++
	c.lastActive = time.Now()
	return s, true
}

// release ends a reader's lease. A session stream with nothing queued and no
// reader is forgotten (it is created again on demand).
func (c *conn) release(s *outStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.leased = false
	c.readers--
	c.lastActive = time.Now()
	if s.sessionID != "" && len(s.queue) == 0 && c.streams[s.sessionID] == s {
		delete(c.streams, s.sessionID)
	}
}

// take hands the reader everything queued on its stream.
func (c *conn) take(s *outStream, buf [][]byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append(buf[:0], s.queue...)
	clear(s.queue)
	s.queue = s.queue[:0]
	if n := len(out); n > 0 {
		c.buffered -= n
		c.progressLocked()
	}
	return out
}

// delivered records that a reader wrote and flushed n messages it took.
func (c *conn) delivered(s *outStream, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.taken += uint64(n)
	c.progressLocked()
}

func (c *conn) progressLocked() {
	close(c.progress)
	c.progress = make(chan struct{})
}

// isClosed reports whether the connection closed, and why when it broke.
func (c *conn) isClosed() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed, c.fault
}

// close ends the connection: its streams finish (a reader gets what is
// queued, then the reason as a comment), its gateway actors stop, and it is
// forgotten. Sessions live on. broken tells an orderly close (DELETE,
// shutdown) from a fault (the backlog bound, abandonment).
func (c *conn) close(reason string, broken bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.reason = reason
	if broken {
		c.fault = reason
	}
	close(c.done)
	for _, s := range c.streams {
		s.signal()
	}
	sessions := c.sessions
	c.sessions = map[string]*attachedSession{}
	c.calls = map[string]*clientCall{}
	c.routes = map[string]pendingRoute{}
	c.mu.Unlock()
	c.cancel()

	for _, a := range sessions {
		if a.pid != nil {
			c.srv.sys().Root.Send(a.pid, &detach{})
		}
	}
	c.srv.forget(c, reason, broken)
}

// waitDrained waits, up to max, until readers took everything queued on
// streams that have a reader.
func (c *conn) waitDrained(ctx context.Context, max time.Duration) {
	deadline := time.Now().Add(max)
	for {
		c.mu.Lock()
		pending := false
		for _, s := range c.streams {
			if s.leased && len(s.queue) > 0 {
				pending = true
			}
		}
		ch := c.progress
		c.mu.Unlock()
		left := time.Until(deadline)
		if !pending || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		t.Stop()
	}
}

// closeReason reports whether the connection closed and why.
func (c *conn) closeReason() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed, c.reason
}
