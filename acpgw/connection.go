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

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/delivery"
)

// conn is one ACP connection (one Acp-Connection-Id): its subject and agent,
// its streams, where the answers to its pending requests go, the requests
// the daemon put to its client, and the sessions attached through it.
type conn struct {
	srv        *Server
	id         string
	subject    string
	groups     []string // the subject's groups at initialize, for the access rules
	agent      string   // the Surfaced-Agent header at initialize ("" when none)
	base       string   // the daemon as the editor reached it (scheme://host)
	clientName string
	images     bool
	ctx        context.Context // cancelled when the connection closes
	cancel     context.CancelFunc
	done       chan struct{} // closed when the connection closes

	mu         sync.Mutex
	closed     bool
	reason     string // why it closed
	fault      string // why it closed, when it broke
	streams    map[string]*outStream
	routes     map[string]pendingRoute // request id key -> where its answer goes
	routeSeq   uint64
	calls      map[string]*clientCall
	sessions   map[string]*attachedSession
	lastActive time.Time
	readers    int
}

// outStream is one of the connection's SSE streams: the connection stream
// (sessionID "") or one session's. Its queue keeps what is sent to it until
// a reader (a GET) takes it, so that nothing is lost between a POST and the
// GET that reads its answer. leased is guarded by the connection's mu.
type outStream struct {
	sessionID string
	q         *delivery.Queue
	leased    bool
}

// pendingRoute is an unanswered request: where its answer goes.
type pendingRoute struct {
	id        json.RawMessage
	method    string
	sessionID string // its stream; "" the connection stream
	seq       uint64 // the order the requests came in
}

// clientCall is a request of the daemon to the client
// (session/request_permission) waiting for its answer.
type clientCall struct {
	sessionID string
	answer    func(result json.RawMessage, err *acp.RequestError)
}

// attachedSession is the connection's handle on a session's attachment:
// what the HTTP handlers need of it.
type attachedSession struct {
	pid   *actor.PID
	ready chan struct{} // closed when the subscription succeeded or failed
	err   *acp.RequestError
}

func newConnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newConn(srv *Server, id identity.Identity, agent string) *conn {
	c := &conn{
		srv:        srv,
		id:         newConnID(),
		subject:    id.Subject,
		groups:     id.Groups,
		agent:      agent,
		done:       make(chan struct{}),
		streams:    map[string]*outStream{},
		routes:     map[string]pendingRoute{},
		calls:      map[string]*clientCall{},
		sessions:   map[string]*attachedSession{},
		lastActive: time.Now(),
	}
	c.streams[""] = c.newStream("")
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// caller is who the connection acts as, for the access rules.
func (c *conn) caller() identity.Identity {
	return identity.Identity{Subject: c.subject, Groups: c.groups}
}

func (c *conn) newStream(sessionID string) *outStream {
	return &outStream{sessionID: sessionID,
		q: delivery.NewQueue(delivery.Limits{MaxBytes: c.srv.opts.BufferBytes, MaxAge: c.srv.opts.BufferAge}, nil)}
}

// hasRoomFor reports whether a stream of the session exists already, or one
// more may be made: a connection's session streams are capped
// (Options.SessionsPerConnection), the connection stream aside.
func (c *conn) hasRoomFor(sessionID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hasRoomLocked(sessionID)
}

// hasRoomForAnother reports whether one more session stream may be made.
func (c *conn) hasRoomForAnother() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)-1 < c.srv.opts.SessionsPerConnection
}

func (c *conn) hasRoomLocked(sessionID string) bool {
	if sessionID == "" || c.streams[sessionID] != nil {
		return true
	}
	return len(c.streams)-1 < c.srv.opts.SessionsPerConnection
}

// streamLocked returns the stream of a session ("" the connection stream),
// creating it: messages for a session whose GET is not open yet wait there.
func (c *conn) streamLocked(sessionID string) *outStream {
	s := c.streams[sessionID]
	if s == nil {
		s = c.newStream(sessionID)
		c.streams[sessionID] = s
	}
	return s
}

// push queues a message on a stream. A stream past its bounds closes the
// connection: its client stopped reading, or never opened the stream, and
// must not make the daemon hold an unbounded backlog.
func (c *conn) push(sessionID string, msg []byte) {
	c.mu.Lock()
	over := c.pushLocked(sessionID, msg)
	c.mu.Unlock()
	c.checkBound(over)
}

// pushLocked queues msg; it returns the stream when that went past its
// bounds, for checkBound once c.mu is released.
func (c *conn) pushLocked(sessionID string, msg []byte) (over *outStream) {
	_, over = c.pushToLocked(sessionID, msg)
	return over
}

// pushToLocked queues msg and returns the stream it went to (nil once the
// connection closed), and that stream again when it went past its bounds.
func (c *conn) pushToLocked(sessionID string, msg []byte) (s, over *outStream) {
	if c.closed {
		return nil, nil
	}
	s = c.streamLocked(sessionID)
	if !s.q.PushRaw(msg) && s.q.Ended() == delivery.EndSlowConsumer {
		return s, s
	}
	return s, nil
}

func (c *conn) checkBound(over *outStream) {
	if over == nil {
		return
	}
	_, bytes, age := over.q.Waiting()
	lim := over.q.Limits()
	c.close(fmt.Sprintf("messages waited for a stream reader: %d bytes, the oldest for %s (the limits are %d bytes and %s); the client never opened its GET streams, or stopped reading them",
		bytes, age.Round(time.Millisecond), lim.MaxBytes, lim.MaxAge), true)
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
	var over *outStream
	if ok {
		over = c.pushLocked(r.sessionID, msg)
	}
	c.mu.Unlock()
	c.checkBound(over)
}

// answerPending answers every request still open, as the daemon stops: a
// prompt with stopReason "cancelled" (its message was not, or not fully,
// answered), anything else with an internal error. The attachments answer
// first when they can; this covers the ones the shutdown stopped before
// they could.
func (c *conn) answerPending() {
	c.mu.Lock()
	routes := make([]pendingRoute, 0, len(c.routes))
	for _, r := range c.routes {
		routes = append(routes, r)
	}
	c.routes = map[string]pendingRoute{}
	// In the order they came, as the session would have answered them.
	slices.SortFunc(routes, func(a, b pendingRoute) int { return cmp.Compare(a.seq, b.seq) })
	var over *outStream
	for _, r := range routes {
		var msg []byte
		if r.method == "session/prompt" {
			msg = encodeResponse(r.id, map[string]string{"stopReason": "cancelled"}, nil)
		} else {
			msg = encodeResponse(r.id, nil, errInternal(codes.ShuttingDown))
		}
		if s := c.pushLocked(r.sessionID, msg); s != nil {
			over = s
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

// idleSince is how long the connection has had no reader and no request.
func (c *conn) idleSince(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readers > 0 {
		return 0
	}
	return now.Sub(c.lastActive)
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

// release ends a reader's lease. A session stream with nothing queued, no
// reader and no attachment is forgotten (it is created again on demand).
func (c *conn) release(s *outStream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.leased = false
	c.readers--
	c.lastActive = time.Now()
	if n, _, _ := s.q.Waiting(); s.sessionID != "" && n == 0 && c.streams[s.sessionID] == s && c.sessions[s.sessionID] == nil {
		delete(c.streams, s.sessionID)
	}
}

// stream returns a session's stream, if it has one and a reader reads it.
func (c *conn) readStream(sessionID string) *outStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streams[sessionID]; s != nil && s.leased {
		return s
	}
	return nil
}

// isClosed reports whether the connection closed, and why when it broke.
func (c *conn) isClosed() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed, c.fault
}

// closeReason reports whether the connection closed and why.
func (c *conn) closeReason() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed, c.reason
}

// close ends the connection: its streams finish (a reader gets what is
// queued, then the reason as a comment), its attachments end, and it is
// forgotten. Sessions live on. broken tells an orderly close (DELETE,
// shutdown) from a fault (a stream's bounds, abandonment).
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
		s.q.End(delivery.EndClosed)
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
	c.srv.reg.forget(c, reason, broken)
}

// waitDrained waits, up to max, until the readers wrote everything queued
// on the streams that have one.
func (c *conn) waitDrained(ctx context.Context, max time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	c.mu.Lock()
	var read []*outStream
	for _, s := range c.streams {
		if s.leased {
			read = append(read, s)
		}
	}
	c.mu.Unlock()
	for _, s := range read {
		s.q.WaitWritten(ctx, s.q.Mark())
	}
}

// attach returns the session's attachment on this connection, spawning it
// when there is none. The attachment checks ownership and subscribes;
// a.ready closes when that is decided (a.err tells how). hold starts it
// holding live updates back (session/load), or asks a running one to.
func (c *conn) attach(sessionID, agent string, hold bool) *attachedSession {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		a := &attachedSession{ready: make(chan struct{}), err: errInternal(codes.ConnectionClosed)}
		close(a.ready)
		return a
	}
	if a := c.sessions[sessionID]; a != nil {
		c.mu.Unlock()
		if hold {
			c.srv.sys().Root.Send(a.pid, &holdLive{})
		}
		return a
	}
	if !c.hasRoomLocked(sessionID) {
		c.mu.Unlock()
		a := &attachedSession{ready: make(chan struct{}), err: errTooManySessionsOnConnection(c.srv.opts.SessionsPerConnection)}
		close(a.ready)
		return a
	}
	a := &attachedSession{ready: make(chan struct{})}
	// The attachment's mailbox runs on its stream's writer while that waits
	// (delivery.Queue.Dispatcher); the stream stays while it is attached.
	a.pid = spawnAttachment(c, sessionID, agent, a, hold, c.streamLocked(sessionID).q)
	c.sessions[sessionID] = a
	c.mu.Unlock()
	return a
}

// lookupSession returns the attachment of a session, or nil.
func (c *conn) lookupSession(sessionID string) *attachedSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[sessionID]
}

// detach ends a session's attachment; the returned channel closes when its
// held prompts were answered. Nil when the session is not attached.
func (c *conn) detach(sessionID string) chan struct{} {
	c.mu.Lock()
	a := c.sessions[sessionID]
	delete(c.sessions, sessionID)
	c.mu.Unlock()
	if a == nil {
		return nil
	}
	done := make(chan struct{})
	c.srv.sys().Root.Send(a.pid, &detach{done: done})
	return done
}

// detached forgets an attachment that ended on its own.
func (c *conn) detached(sessionID string, a *attachedSession) {
	c.mu.Lock()
	if c.sessions[sessionID] == a {
		delete(c.sessions, sessionID)
	}
	c.mu.Unlock()
}
