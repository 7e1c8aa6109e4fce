// Package bridge is `surfaced acp`: it relays an editor's ACP over stdio
// (newline-delimited JSON on stdin and stdout) to a surfaced daemon's /acp
// mount over Streamable HTTP, verbatim, and survives the daemon going away:
//
//   - On a lost connection it answers the editor's in-flight requests
//     (session/prompt with stopReason "cancelled", anything else with
//     -32000), forgets the daemon's requests to the editor (a late answer is
//     dropped), and queues what the editor sends meanwhile (at most
//     MaxQueued messages; a request past that is answered -32000).
//   - It retries after 250 ms, doubling up to 5 s, each attempt bounded by
//     HandshakeTimeout; on success it replays the editor's initialize under
//     its own id, then session/resume for every session it tracks (resume,
//     not load: the editor already shows the history), forgets a session
//     only when the daemon answers -32002, and sends the queue.
//   - Diagnostics go to stderr; stdout carries protocol messages only.
//
// Exit codes: 0 the editor closed stdin (or the context ended), 1 the
// editor's pipe broke, 2 usage, 3 the first connection never answered.
package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// Exit codes of Run.
const (
	ExitOK          = 0
	ExitEditorBroke = 1
	ExitUsage       = 2
	ExitUnreachable = 3
)

// Defaults of Options.
const (
	DefaultURL              = "http://127.0.0.1:7800"
	DefaultMinDelay         = 250 * time.Millisecond
	DefaultMaxDelay         = 5 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxQueued        = 200
)

// Options configure Run. Zero values take the defaults; Stdin and Stdout
// are required.
type Options struct {
	// URL is the daemon (http://127.0.0.1:7800, the mount at /acp) or the
	// mount's own URL when it has a path.
	URL   string
	Token string
	// Agent is sent as Surfaced-Agent: the agent the editor talks to.
	Agent  string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Client *http.Client
	// MinDelay and MaxDelay bound the retry delays (250 ms doubling to 5 s).
	MinDelay, MaxDelay time.Duration
	// HandshakeTimeout bounds one reconnection attempt (10 s).
	HandshakeTimeout time.Duration
	// MaxQueued bounds the editor messages kept during an outage (200).
	MaxQueued int
}

// MountURL resolves the URL the bridge talks to: a URL without a path gets
// /acp. Its errors are usage errors.
func MountURL(raw string) (string, error) {
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("--url %q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--url %q must start with http:// or https://", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("--url %q has no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--url %q must not carry a query, a fragment or credentials (use --token)", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/acp"
	}
	return u.String(), nil
}

func isLoopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// pending is an editor request the daemon has not answered.
type pending struct {
	id        json.RawMessage
	method    string
	sessionID string
	cwd       string
}

type handshake struct {
	t         *transport
	buffered  []inbound
	forgotten map[string]string // session id -> why
	err       error
}

type relay struct {
	o      Options
	url    string
	header http.Header
	errw   io.Writer
	out    *bufio.Writer

	cur      *transport
	initMsg  json.RawMessage // the editor's initialize params
	sessions map[string]string
	inflight map[string]*pending
	server   map[string]string // daemon request id -> its session stream
	queue    [][]byte

	reconnecting bool
	attempt      int
	lostAt       time.Time
	lastErr      error
	nextID       int
}

// Run relays until the editor closes stdin (or ctx ends) and returns the
// exit code.
func Run(ctx context.Context, o Options) int {
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	target, err := MountURL(o.URL)
	if err != nil {
		fmt.Fprintln(o.Stderr, "surfaced acp:", err)
		return ExitUsage
	}
	if o.Stdin == nil || o.Stdout == nil {
		fmt.Fprintln(o.Stderr, "surfaced acp: no stdin or stdout to relay")
		return ExitUsage
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.MinDelay <= 0 {
		o.MinDelay = DefaultMinDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = DefaultMaxQueued
	}
	r := &relay{o: o, url: target, header: http.Header{}, errw: o.Stderr, out: bufio.NewWriterSize(o.Stdout, 64<<10),
		sessions: map[string]string{}, inflight: map[string]*pending{}, server: map[string]string{}}
	if o.Token != "" {
		r.header.Set("Authorization", "Bearer "+o.Token)
		if !isLoopback(target) && strings.HasPrefix(target, "http://") {
			r.logf("warning: the token travels in cleartext to %s; use https:// for a daemon beyond this machine", target)
		}
	}
	if o.Agent != "" {
		r.header.Set(headerAgent, o.Agent)
	}
	return r.run(ctx)
}

func (r *relay) logf(format string, args ...any) {
	fmt.Fprintf(r.errw, "surfaced acp: "+format+"\n", args...)
}

// editorEvent is one line from the editor, or its end.
type editorEvent struct {
	line []byte
	err  error // io.EOF: closed
}

func readEditor(in io.Reader, ch chan<- editorEvent, stop <-chan struct{}, errw io.Writer) {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(br, maxMessage)
		if errors.Is(err, errLineTooLong) {
			fmt.Fprintf(errw, "surfaced acp: dropped an editor message: %v\n", err)
			// Skip the rest of that line.
			for {
				_, e := br.ReadSlice('\n')
				if e != bufio.ErrBufferFull {
					err = e
					break
				}
			}
			if err == nil {
				continue
			}
		}
		if len(line) > 0 && err == nil {
			select {
			case ch <- editorEvent{line: append([]byte(nil), line...)}:
			case <-stop:
				return
			}
		}
		if err != nil {
			select {
			case ch <- editorEvent{err: err}:
			case <-stop:
			}
			return
		}
	}
}

func (r *relay) run(ctx context.Context) int {
	editor := make(chan editorEvent, 64)
	stop := make(chan struct{})
	defer close(stop)
	go readEditor(r.o.Stdin, editor, stop, r.errw)

	var retry <-chan time.Time
	var shakes chan handshake
	for {
		var in <-chan inbound
		var failed <-chan error
		var rejects <-chan rejected
		if r.cur != nil {
			in, failed, rejects = r.cur.in, r.cur.failed, r.cur.reject
		}
		select {
		case <-ctx.Done():
			r.shutdown()
			return ExitOK
		case ev := <-editor:
			if ev.err != nil {
				r.shutdown()
				if errors.Is(ev.err, io.EOF) {
					return ExitOK
				}
				r.logf("reading from the editor failed: %v", ev.err)
				return ExitEditorBroke
			}
			if code, exit := r.fromEditor(ctx, ev.line); exit {
				r.shutdown()
				return code
			}
		case m := <-in:
			if !r.fromDaemon(m) {
				r.shutdown()
				return ExitEditorBroke
			}
		case rj := <-rejects:
			delete(r.inflight, idKey(rj.request.id))
			if !r.answerError(rj.request.id, -32603, "The daemon refused the request: "+rj.err.Error()) {
				r.shutdown()
				return ExitEditorBroke
			}
		case err := <-failed:
			if !r.lost(err) {
				r.shutdown()
				return ExitEditorBroke
			}
			retry = time.After(r.o.MinDelay)
		case <-retry:
			retry = nil
			r.attempt++
			shakes = make(chan handshake, 1)
			go r.handshake(shakes, r.snapshotSessions(), r.nextOwnID(), r.nextOwnIDs(len(r.sessions)))
		case h := <-shakes:
			shakes = nil
			if h.err != nil {
				r.lastErr = h.err
				if r.attempt%12 == 0 {
					r.logf("still waiting for %s (attempt %d, %s): %v", r.url, r.attempt, time.Since(r.lostAt).Round(time.Second), h.err)
				}
				retry = time.After(r.delay())
				continue
			}
			if !r.reconnected(h) {
				r.shutdown()
				return ExitEditorBroke
			}
		}
	}
}

func (r *relay) delay() time.Duration {
	d := r.o.MinDelay
	for i := 1; i < r.attempt && d < r.o.MaxDelay; i++ {
		d *= 2
	}
	if d > r.o.MaxDelay {
		d = r.o.MaxDelay
	}
	return d
}

func (r *relay) nextOwnID() string {
	r.nextID++
	return "surfaced-acp:" + strconv.Itoa(r.nextID)
}

func (r *relay) nextOwnIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = r.nextOwnID()
	}
	return out
}

func (r *relay) snapshotSessions() map[string]string {
	out := make(map[string]string, len(r.sessions))
	for k, v := range r.sessions {
		out[k] = v
	}
	return out
}

func (r *relay) shutdown() {
	_ = r.out.Flush()
	if r.cur != nil {
		r.cur.close(true)
		r.cur = nil
	}
}

// write sends one message to the editor; false when its pipe broke.
func (r *relay) write(msg []byte) bool {
	if _, err := r.out.Write(msg); err != nil {
		r.logf("writing to the editor failed: %v", err)
		return false
	}
	if err := r.out.WriteByte('\n'); err != nil {
		r.logf("writing to the editor failed: %v", err)
		return false
	}
	if err := r.out.Flush(); err != nil {
		r.logf("writing to the editor failed: %v", err)
		return false
	}
	return true
}

func (r *relay) answerError(id json.RawMessage, code int, msg string) bool {
	b, _ := plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return r.write(b)
}

// fromEditor handles one editor message; exit reports that the bridge must
// end with code.
func (r *relay) fromEditor(ctx context.Context, line []byte) (code int, exit bool) {
	p, err := peek(line)
	if err != nil {
		r.logf("ignored an editor line that is not a JSON-RPC message: %v", err)
		return 0, false
	}
	if r.initMsg == nil {
		if p.isRequest() && p.method == "initialize" {
			return r.firstConnect(ctx, line, p)
		}
		if p.isRequest() {
			if !r.answerError(p.id, -32000, "Not connected to the surfaced daemon yet: send initialize first.") {
				return ExitEditorBroke, true
			}
		}
		return 0, false
	}
	if r.reconnecting {
		if len(r.queue) >= r.o.MaxQueued {
			if p.isRequest() {
				if !r.answerError(p.id, -32000, fmt.Sprintf("The connection to the surfaced daemon is down and %d messages are already queued; the request was not sent.", len(r.queue))) {
					return ExitEditorBroke, true
				}
			}
			return 0, false
		}
		if p.isResponse() {
			// An answer to a request of the lost connection: nobody waits
			// for it any more.
			return 0, false
		}
		r.queue = append(r.queue, line)
		return 0, false
	}
	r.forward(line, p)
	return 0, false
}

// forward POSTs an editor message on the live connection.
func (r *relay) forward(line []byte, p *peeked) {
	job := postJob{msg: line, sessionID: p.sessionID}
	switch {
	case p.isRequest():
		r.inflight[idKey(p.id)] = &pending{id: p.id, method: p.method, sessionID: p.sessionID, cwd: p.cwd}
		job.request = p
	case p.isResponse():
		sid, ok := r.server[idKey(p.id)]
		if !ok {
			// Its request came on a connection that was lost since.
			return
		}
		delete(r.server, idKey(p.id))
		job.sessionID = sid
	}
	r.cur.send(job)
}

// firstConnect opens the first connection with the editor's own initialize;
// a daemon that never answers ends the bridge (exit 3).
func (r *relay) firstConnect(ctx context.Context, line []byte, p *peeked) (int, bool) {
	t := newTransport(r.url, r.header, r.o.Client)
	hctx, cancel := context.WithTimeout(ctx, r.o.HandshakeTimeout)
	body, unreachable, err := t.initialize(hctx, line)
	cancel()
	if err != nil {
		t.close(false)
		if unreachable {
			r.logf("the surfaced daemon at %s did not answer: %v", r.url, err)
			if !r.answerError(p.id, -32603, fmt.Sprintf("The surfaced daemon at %s did not answer: %v", r.url, err)) {
				return ExitEditorBroke, true
			}
			return ExitUnreachable, true
		}
		r.logf("the surfaced daemon at %s refused the connection: %v", r.url, err)
		var hr *httpRefusal
		if errors.As(err, &hr) {
			if q, perr := peek(body); perr == nil && q.isResponse() && q.hasError {
				// A JSON-RPC answer (invalid initialize params): relay it.
				if !r.write(body) {
					return ExitEditorBroke, true
				}
				return 0, false
			}
			code := -32603
			if hr.status == http.StatusUnauthorized {
				code = -32000 // authentication required
			}
			if !r.answerError(p.id, code, "The surfaced daemon refused the connection: "+hr.Error()) {
				return ExitEditorBroke, true
			}
			return 0, false
		}
		if !r.answerError(p.id, -32603, "The surfaced daemon refused the connection: "+err.Error()) {
			return ExitEditorBroke, true
		}
		return 0, false
	}
	var params struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(line, &params)
	r.initMsg = params.Params
	if r.initMsg == nil {
		r.initMsg = json.RawMessage("{}")
	}
	r.cur = t
	if !r.write(body) {
		return ExitEditorBroke, true
	}
	return 0, false
}

// fromDaemon relays one daemon message to the editor, tracking sessions
// and answers on the way; false when the editor's pipe broke.
func (r *relay) fromDaemon(m inbound) bool {
	p, err := peek(m.msg)
	if err != nil {
		r.logf("ignored a daemon message that is not JSON: %v", err)
		return true
	}
	switch {
	case p.isResponse():
		q, ok := r.inflight[idKey(p.id)]
		if !ok {
			return true // answered already (the connection was lost meanwhile)
		}
		delete(r.inflight, idKey(p.id))
		r.track(q, p)
	case p.isRequest():
		r.server[idKey(p.id)] = m.stream
	}
	if p.resultSID != "" && r.cur != nil {
		r.cur.openSession(p.resultSID)
	}
	return r.write(m.msg)
}

// track keeps the sessions to resume after a reconnection.
func (r *relay) track(q *pending, p *peeked) {
	if p.hasError {
		if p.errCode == -32002 && q.sessionID != "" {
			delete(r.sessions, q.sessionID)
		}
		return
	}
	switch q.method {
	case "session/new":
		if p.resultSID != "" {
			r.sessions[p.resultSID] = q.cwd
		}
	case "session/load", "session/resume":
		if q.sessionID != "" {
			r.sessions[q.sessionID] = q.cwd
		}
	case "session/close":
		delete(r.sessions, q.sessionID)
	}
}

// lost handles the loss of the live connection: in-flight requests are
// answered now (the daemon will not), the daemon's requests forgotten.
func (r *relay) lost(err error) bool {
	if r.cur != nil {
		r.cur.close(false)
		r.cur = nil
	}
	r.reconnecting = true
	r.attempt = 0
	r.lostAt = time.Now()
	r.lastErr = err
	r.logf("lost the connection to %s: %v. Waiting for it to come back.", r.url, err)
	for k, q := range r.inflight {
		delete(r.inflight, k)
		var b []byte
		if q.method == "session/prompt" {
			b, _ = plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": q.id, "result": map[string]any{"stopReason": "cancelled"}})
		} else {
			b, _ = plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": q.id, "error": map[string]any{"code": -32000,
				"message": fmt.Sprintf("Lost the connection to the surfaced daemon while %q was in flight; the request was not answered.", q.method)}})
		}
		if !r.write(b) {
			return false
		}
	}
	clear(r.server)
	return true
}

// handshake runs on its own goroutine: a new connection, the editor's
// initialize replayed under the bridge's id, then session/resume for each
// tracked session.
func (r *relay) handshake(done chan<- handshake, sessions map[string]string, initID string, resumeIDs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.HandshakeTimeout)
	defer cancel()
	h := handshake{forgotten: map[string]string{}}
	t := newTransport(r.url, r.header, r.o.Client)
	initMsg, _ := plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": initID, "method": "initialize", "params": r.initMsg})
	if _, _, err := t.initialize(ctx, initMsg); err != nil {
		t.close(false)
		h.err = err
		done <- h
		return
	}
	i := 0
	for sid, cwd := range sessions {
		id := resumeIDs[i]
		i++
		if cwd == "" {
			cwd = "/"
		}
		msg, _ := plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/resume",
			"params": map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}})
		t.send(postJob{msg: msg, sessionID: sid})
		want, _ := plainjson.Marshal(id)
		answered := false
		for !answered {
			select {
			case m := <-t.in:
				p, err := peek(m.msg)
				if err == nil && p.isResponse() && idKey(p.id) == idKey(want) {
					answered = true
					if p.hasError && p.errCode == -32002 {
						h.forgotten[sid] = "the daemon answered -32002"
					} else if p.hasError {
						h.forgotten[sid] = "" // kept: the daemon may serve it later
					}
					continue
				}
				h.buffered = append(h.buffered, m)
			case err := <-t.failed:
				t.close(false)
				h.err = err
				done <- h
				return
			case <-ctx.Done():
				t.close(true)
				h.err = fmt.Errorf("the handshake took longer than %s", r.o.HandshakeTimeout)
				done <- h
				return
			}
		}
	}
	h.t = t
	done <- h
}

// reconnected puts a new connection in service: sessions the daemon no
// longer has are forgotten, what came during the handshake is relayed, and
// the queue goes out.
func (r *relay) reconnected(h handshake) bool {
	r.cur = h.t
	r.reconnecting = false
	for sid, why := range h.forgotten {
		if why == "" {
			r.logf("could not resume conversation %s on %s yet; it stays tracked", sid, r.url)
			continue
		}
		delete(r.sessions, sid)
		r.logf("conversation %s is not on %s any more (%s). Start a new one from the editor.", sid, r.url, why)
	}
	r.logf("reconnected to %s after %d attempts (%s).", r.url, r.attempt, time.Since(r.lostAt).Round(time.Millisecond))
	for _, m := range h.buffered {
		if !r.fromDaemon(m) {
			return false
		}
	}
	queue := r.queue
	r.queue = nil
	for _, line := range queue {
		p, err := peek(line)
		if err != nil {
			continue
		}
		r.forward(line, p)
	}
	return true
}
