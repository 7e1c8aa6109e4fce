package mcpgw

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced/internal/clock"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// subscriptions are the resources MCP sessions subscribed to, in either
// form: resources/subscribe on a stateful session (2025-11-25: the
// notifications go on its GET stream), or a subscriptions/listen request
// (2026-07-28: on that request's own stream). The SDK keeps who subscribed
// to which URI and sends notifications/resources/updated to them; this
// keeps one watch of the session's frames per (session, subject) with
// subscribers, which tells the SDK of every new rev of a surface (and of
// every prompt and turn end, for the transcript), whoever made it.
type subscriptions struct {
	s *Server

	mu      sync.Mutex
	byMCP   map[*mcp.ServerSession]map[string]watchKey // who subscribed to what, and which watch feeds it
	watches map[watchKey]*resourceWatch
	closed  bool
}

type watchKey struct{ session, subject string }

func newSubscriptions(s *Server) *subscriptions {
	return &subscriptions{s: s, byMCP: map[*mcp.ServerSession]map[string]watchKey{}, watches: map[watchKey]*resourceWatch{}}
}

// subscribe admits a subscription: a resource of a session the caller owns
// (else not found, as a missing one), within the per-session bound.
func (u *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	ref, ok := parseURI(uri)
	if !ok || ref.kind == "artifacts" {
		// Artifacts never change: there is nothing to hear of.
		return mcp.ResourceNotFoundError(uri)
	}
	subj := subject(ctx)
	// The session must be the caller's (one that does not exist, or
	// another's, is not found). A surface need not be registered yet: a
	// starting agent declares it soon, and its first rev is heard.
	res, e := u.s.ask(ctx, ref.session, &pb.GetSummary{Caller: caller(ctx)})
	if e == nil && res.(*pb.SessionSummary).GetError() != nil {
		e = refused(ref.session, res.(*pb.SessionSummary).GetError())
	}
	if e != nil {
		return resourceErr(uri, e)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the daemon is shutting down"}
	}
	subs := u.byMCP[req.Session]
	if subs == nil {
		subs = map[string]watchKey{}
		u.byMCP[req.Session] = subs
		ss := req.Session
		go func() {
			// A session that closes (its client left, or a listen request
			// ended) drops its subscriptions.
			_ = ss.Wait()
			u.drop(ss)
		}()
	}
	if _, dup := subs[uri]; dup {
		return nil
	}
	if len(subs) >= u.s.opts.SubscriptionsPerSession {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("this MCP session already subscribes to %d resources (the limit, mcp.subscriptions_per_session); unsubscribe from one first", len(subs))}
	}
	k := watchKey{session: ref.session, subject: subj}
	subs[uri] = k
	u.retain(k)
	return nil
}

func (u *subscriptions) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	subs := u.byMCP[req.Session]
	k, ok := subs[req.Params.URI]
	if !ok {
		return nil
	}
	delete(subs, req.Params.URI)
	u.release(k)
	return nil
}

// drop forgets a closed MCP session's subscriptions.
func (u *subscriptions) drop(ss *mcp.ServerSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	subs := u.byMCP[ss]
	delete(u.byMCP, ss)
	for _, k := range subs {
		u.release(k)
	}
}

// retain starts (or counts one more subscriber of) the watch of a
// session; u.mu is held.
func (u *subscriptions) retain(k watchKey) {
	w := u.watches[k]
	if w == nil {
		w = &resourceWatch{u: u, key: k, clock: u.s.opts.Clock, notify: make(chan struct{}, 1), pending: map[string]bool{}, done: make(chan struct{})}
		u.watches[k] = w
		go w.run()
	}
	w.refs++
}

// release counts one subscriber less, and stops the watch at none; u.mu
// is held.
func (u *subscriptions) release(k watchKey) {
	w := u.watches[k]
	if w == nil {
		return
	}
	w.refs--
	if w.refs <= 0 {
		delete(u.watches, k)
		close(w.done)
	}
}

func (u *subscriptions) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for k, w := range u.watches {
		delete(u.watches, k)
		close(w.done)
	}
}

// resourceWatch follows one session's frames for its subscribers, and
// subscribes again when the session went away (it slept, it restarted)
// while anyone still listens.
type resourceWatch struct {
	u     *subscriptions
	key   watchKey
	clock clock.Clock
	refs  int // under u.mu

	mu      sync.Mutex
	pending map[string]bool // URIs updated, not yet told
	ended   bool            // the session is gone (or ended): subscribe again
	notify  chan struct{}
	done    chan struct{}
}

// run subscribes and tells the SDK of the updated URIs, from its own
// goroutine (never the subscriber actor's: a notification may wait for a
// slow client's stream).
func (w *resourceWatch) run() {
	backoff := 250 * time.Millisecond
	for {
		stop, e := w.subscribe()
		if e == nil {
			backoff = 250 * time.Millisecond
			if !w.serve() {
				stop()
				return
			}
			stop()
		} else {
			w.u.s.log.Debug("mcp resource watch: subscribe failed", "session", w.key.session, "code", e.Code, "err", e.Message)
		}
		wait := make(chan struct{})
		t := w.clock.AfterFunc(backoff, func() { close(wait) })
		select {
		case <-w.done:
			t.Stop()
			return
		case <-wait:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (w *resourceWatch) subscribe() (func(), *toolError) {
	w.mu.Lock()
	w.ended = false
	w.mu.Unlock()
	k := &sink{frames: w.frames, gone: w.gone}
	ctx := context.WithValue(context.Background(), callerKey{}, callerInfo{})
	return w.u.s.watch(ctx, w.key.session, w.key.subject, pb.SubscribeFrom_SUBSCRIBE_FROM_NOW, k)
}

// serve tells updates until the watch is done (false) or the session went
// away (true: subscribe again).
func (w *resourceWatch) serve() bool {
	for {
		select {
		case <-w.done:
			return false
		case <-w.notify:
		}
		w.mu.Lock()
		uris := make([]string, 0, len(w.pending))
		for uri := range w.pending {
			uris = append(uris, uri)
		}
		clear(w.pending)
		ended := w.ended
		w.mu.Unlock()
		for _, uri := range uris {
			_ = w.u.s.mcp.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
		if ended {
			return true
		}
	}
}

// frames runs on the subscriber actor: it marks the URIs a batch updates.
func (w *resourceWatch) frames(frames []*pb.Frame, final bool) {
	w.mu.Lock()
	for _, f := range frames {
		ev := f.GetEvent()
		if st := ev.GetState(); st != nil {
			if domain, ok := strings.CutPrefix(st.GetKey(), surfaceKeyPrefix); ok {
				w.pending[surfaceURI(w.key.session, domain)] = true
			}
			continue
		}
		if c := ev.GetChat(); c != nil && (c.GetUserMessage() != nil || c.GetTurnFinish() != nil) {
			w.pending[transcriptURI(w.key.session)] = true
		}
	}
	w.ended = w.ended || final
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *resourceWatch) gone() { w.frames(nil, true) }
