// Package bridge is `surfaced mcp`: it relays an MCP client's stdio
// (newline-delimited JSON-RPC on stdin and stdout) to a surfaced daemon's
// /mcp mount over Streamable HTTP, and survives the daemon going away:
//
//   - Each client message is POSTed as it is, with the session's headers
//     (Mcp-Session-Id, Mcp-Protocol-Version; and Mcp-Method and Mcp-Name
//     for 2026-07-28 and later). A request's answer (a JSON body, or an SSE
//     stream with its progress and notifications) goes to stdout; the
//     session's GET stream (resource updates) goes there too.
//   - When the daemon cannot be reached, or no longer knows the session
//     (it restarted), the bridge waits for it (250 ms doubling to 5 s),
//     opens a new session by replaying the client's initialize and
//     notifications/initialized under its own ids, subscribes again to
//     every resource the client subscribed to, and sends the message that
//     could not go. A request whose answer was under way when the daemon
//     went is answered -32000 (it may have run: the client decides).
//   - Diagnostics go to stderr; stdout carries protocol messages only.
//
// Exit codes: 0 the client closed stdin (or the context ended), 1 the
// client's pipe broke, 2 usage, 3 the daemon never answered the first
// message.
package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// Exit codes of Run.
const (
	ExitOK          = 0
	ExitClientBroke = 1
	ExitUsage       = 2
	ExitUnreachable = 3
)

// Defaults of Options.
const (
	DefaultURL              = "http://127.0.0.1:7800"
	DefaultMinDelay         = 250 * time.Millisecond
	DefaultMaxDelay         = 5 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	maxMessage              = 64 << 20
	statelessVersion        = "2026-07-28"
)

// Options configure Run. Zero values take the defaults; Stdin and Stdout
// are required.
type Options struct {
	// URL is the daemon (http://127.0.0.1:7800, the mount at /mcp) or the
	// mount's own URL when it has a path (/mcp/sessions/{id} attaches to a
	// session).
	URL    string
	Token  string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Client *http.Client
	// MinDelay and MaxDelay bound the retry delays (250 ms doubling to 5 s).
	MinDelay, MaxDelay time.Duration
	// HandshakeTimeout bounds how long the first message waits for the
	// daemon (10 s): past it the bridge exits 3.
	HandshakeTimeout time.Duration
}

// MountURL resolves the URL the bridge talks to: a URL without a path gets
// /mcp. Its errors are usage errors.
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
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// message is what the bridge reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func (m *message) isRequest() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

type relay struct {
	o   Options
	url string

	outMu sync.Mutex
	out   *bufio.Writer
	broke bool

	// The session, as the daemon knows it (stateful protocol versions).
	mu         sync.Mutex
	sessionID  string
	version    string          // negotiated by initialize
	initParams json.RawMessage // the client's initialize params
	ready      bool            // the client sent notifications/initialized
	subscribed map[string]bool // resources the client subscribed to
	epoch      int             // bumped by every new session
	getCancel  context.CancelFunc
	ownID      int
	reconnMu   sync.Mutex // one reconnection at a time

	ctx      context.Context
	wg       sync.WaitGroup
	answered bool // the daemon answered at least once
}

// Run relays until the client closes stdin (or ctx ends) and returns the
// exit code.
func Run(ctx context.Context, o Options) int {
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	target, err := MountURL(o.URL)
	if err != nil {
		fmt.Fprintln(o.Stderr, "surfaced mcp:", err)
		return ExitUsage
	}
	if o.Stdin == nil || o.Stdout == nil {
		fmt.Fprintln(o.Stderr, "surfaced mcp: no stdin or stdout to relay")
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &relay{o: o, url: target, out: bufio.NewWriterSize(o.Stdout, 64<<10), subscribed: map[string]bool{}, ctx: ctx}
	if o.Token != "" && !isLoopback(target) && strings.HasPrefix(target, "http://") {
		r.logf("warning: the token travels in cleartext to %s; use https:// for a daemon beyond this machine", target)
	}
	code := r.run()
	cancel()
	r.wg.Wait()
	return code
}

func (r *relay) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Stderr, "surfaced mcp: "+format+"\n", args...)
}

func (r *relay) run() int {
	br := bufio.NewReaderSize(r.o.Stdin, 64<<10)
	lines := make(chan []byte)
	errs := make(chan error, 1)
	go func() {
		for {
			line, err := br.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-r.ctx.Done():
					return
				}
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	for {
		select {
		case <-r.ctx.Done():
			return ExitOK
		case err := <-errs:
			if errors.Is(err, io.EOF) {
				return ExitOK
			}
			r.logf("reading from the client failed: %v", err)
			return ExitClientBroke
		case line := <-lines:
			if len(line) > maxMessage {
				r.logf("dropped a client message of %d bytes (the limit is %d)", len(line), maxMessage)
				continue
			}
			if code, exit := r.fromClient(bytes.TrimSpace(line)); exit {
				return code
			}
			if r.isBroken() {
				return ExitClientBroke
			}
		}
	}
}

// fromClient sends one client message. Requests run on their own goroutine
// (a prompt may stream for minutes); initialize, notifications and answers
// go in order.
func (r *relay) fromClient(line []byte) (int, bool) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		r.logf("the client sent a line that is not a JSON-RPC message: %v", err)
		r.write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: not JSON"}}`))
		return 0, false
	}
	switch {
	case m.Method == "initialize":
		r.mu.Lock()
		r.initParams = m.Params
		r.mu.Unlock()
		if !r.send(line, &m, true) {
			return ExitUnreachable, true
		}
	case m.isRequest():
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.send(line, &m, false)
		}()
	default:
		r.send(line, &m, false)
		if m.Method == "notifications/initialized" {
			r.mu.Lock()
			r.ready = true
			r.mu.Unlock()
			r.startGET()
		}
	}
	return 0, false
}

// errGone is a failure to reach the daemon (nothing was sent), or a
// session it no longer knows: the message may be sent again.
var errGone = errors.New("the daemon is gone")

// send posts a message until it is delivered: through outages, and through
// a new session when the daemon forgot this one. first: the first message
// of the bridge, which gives up after HandshakeTimeout.
func (r *relay) send(line []byte, m *message, first bool) bool {
	start := time.Now()
	delay := r.o.MinDelay
	for {
		epoch := r.currentEpoch()
		err := r.post(line, m)
		if err == nil {
			return true
		}
		if !errors.Is(err, errGone) {
			if m.isRequest() {
				r.answerError(m.ID, err.Error())
			}
			return true
		}
		if r.ctx.Err() != nil {
			return false
		}
		if first && !r.hasAnswered() && time.Since(start) > r.o.HandshakeTimeout {
			r.logf("the daemon at %s did not answer within %s: %v", r.url, r.o.HandshakeTimeout, err)
			if m.isRequest() {
				r.answerError(m.ID, "surfaced mcp: the daemon at "+r.url+" does not answer")
			}
			return false
		}
		if m.Method != "initialize" && r.hasSession() {
			if r.reconnect(epoch) {
				delay = r.o.MinDelay
				continue
			}
		}
		select {
		case <-r.ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(delay*2, r.o.MaxDelay)
	}
}

// post sends one message and relays its answer. errGone: not delivered.
func (r *relay) post(line []byte, m *message) error {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, r.url, bytes.NewReader(line))
	if err != nil {
		return fmt.Errorf("surfaced mcp: %w", err)
	}
	r.headers(req.Header, m)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := r.o.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errGone, err)
	}
	defer resp.Body.Close()
	r.setAnswered()
	sessionHeader := req.Header.Get("Mcp-Session-Id")
	switch {
	case resp.StatusCode == http.StatusNotFound && sessionHeader != "":
		// The daemon no longer knows the session: it restarted.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%w: session %s is unknown", errGone, sessionHeader)
	case resp.StatusCode == http.StatusAccepted:
		return nil
	case resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		// A JSON-RPC error answer is the client's to read.
		var em message
		if json.Unmarshal(b, &em) == nil && len(em.Error) > 0 {
			r.write(bytes.TrimSpace(b))
			return nil
		}
		return fmt.Errorf("the daemon answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if m.Method == "initialize" {
		r.initialized(resp.Header.Get("Mcp-Session-Id"), nil)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		answered, err := r.relayEvents(resp.Body, m)
		if !answered && m.isRequest() {
			why := "the stream ended"
			if err != nil {
				why = err.Error()
			}
			r.answerError(m.ID, "surfaced mcp: the daemon went away before answering ("+why+"); the request may or may not have run")
		}
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
	if err != nil {
		if m.isRequest() {
			r.answerError(m.ID, "surfaced mcp: the answer did not arrive: "+err.Error())
		}
		return nil
	}
	if m.Method == "initialize" {
		r.initialized(resp.Header.Get("Mcp-Session-Id"), b)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		r.write(bytes.TrimSpace(b))
	}
	return nil
}

// headers sets the session's headers on a request to the daemon.
func (r *relay) headers(h http.Header, m *message) {
	if r.o.Token != "" {
		h.Set("Authorization", "Bearer "+r.o.Token)
	}
	r.mu.Lock()
	sid, version := r.sessionID, r.version
	r.mu.Unlock()
	if v := metaVersion(m.Params); v != "" {
		version = v
	}
	if sid != "" && m.Method != "initialize" {
		h.Set("Mcp-Session-Id", sid)
	}
	if version != "" && m.Method != "initialize" {
		h.Set("Mcp-Protocol-Version", version)
	}
	if version >= statelessVersion && m.Method != "" {
		h.Set("Mcp-Method", m.Method)
		if name := nameOf(m); name != "" {
			h.Set("Mcp-Name", name)
		}
	}
}

func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return ""
	}
	v, _ := p.Meta["io.modelcontextprotocol/protocolVersion"].(string)
	return v
}

func nameOf(m *message) string {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "tools/call", "prompts/get":
		return p.Name
	case "resources/read":
		return p.URI
	}
	return ""
}

// initialized keeps what the daemon answered to initialize: the session
// and its protocol version (body is the answer, nil when it streams).
func (r *relay) initialized(sid string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sid != "" && sid != r.sessionID {
		r.sessionID = sid
		r.epoch++
	}
	if body != nil {
		var res struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(body, &res) == nil && res.Result.ProtocolVersion != "" {
			r.version = res.Result.ProtocolVersion
		}
	}
}

// relayEvents writes an SSE answer's messages to stdout; it reports
// whether the answer to m came.
func (r *relay) relayEvents(body io.Reader, m *message) (bool, error) {
	answered := false
	err := readEvents(body, func(data []byte) {
		var got message
		if json.Unmarshal(data, &got) == nil && len(got.ID) > 0 && got.Method == "" && bytes.Equal(got.ID, m.ID) {
			answered = true
			if m.Method == "initialize" {
				r.initialized("", data)
			}
			if m.Method == "resources/subscribe" || m.Method == "resources/unsubscribe" {
				r.noteSubscription(m, len(got.Error) == 0)
			}
		}
		r.write(data)
	})
	return answered, err
}

func (r *relay) noteSubscription(m *message, ok bool) {
	var p struct {
		URI string `json:"uri"`
	}
	if !ok || json.Unmarshal(m.Params, &p) != nil || p.URI == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Method == "resources/subscribe" {
		r.subscribed[p.URI] = true
	} else {
		delete(r.subscribed, p.URI)
	}
}

// readEvents calls fn with the data of each SSE event.
func readEvents(body io.Reader, fn func(data []byte)) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				fn(data)
				data = nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
}

func (r *relay) currentEpoch() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch
}

func (r *relay) hasSession() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initParams != nil && r.version < statelessVersion
}

func (r *relay) hasAnswered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered
}

func (r *relay) setAnswered() {
	r.mu.Lock()
	r.answered = true
	r.mu.Unlock()
}

// reconnect opens a new session for the client, unless another goroutine
// did since epoch: the client's initialize and initialized again, under the
// bridge's own ids, then its subscriptions. It reports whether the session
// is there now.
func (r *relay) reconnect(epoch int) bool {
	r.reconnMu.Lock()
	defer r.reconnMu.Unlock()
	if r.currentEpoch() != epoch {
		return true
	}
	r.mu.Lock()
	params := r.initParams
	ready := r.ready
	subs := make([]string, 0, len(r.subscribed))
	for uri := range r.subscribed {
		subs = append(subs, uri)
	}
	r.sessionID = ""
	if r.getCancel != nil {
		r.getCancel()
		r.getCancel = nil
	}
	r.mu.Unlock()
	init, _ := plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.nextOwnID("init"), "method": "initialize", "params": params})
	sid, err := r.quiet(init, "")
	if err != nil || sid == "" {
		return false
	}
	r.mu.Lock()
	r.sessionID = sid
	r.epoch++
	r.mu.Unlock()
	r.logf("the daemon is back: new session %s", sid)
	if ready {
		_, _ = r.quiet([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), sid)
		for _, uri := range subs {
			sub, _ := plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.nextOwnID("sub"), "method": "resources/subscribe", "params": map[string]string{"uri": uri}})
			if _, err := r.quiet(sub, sid); err != nil {
				r.logf("subscribing again to %s failed: %v", uri, err)
			}
		}
		r.startGET()
	}
	return true
}

// quiet posts a message of the bridge's own and reads its answer without
// relaying it; it returns the session id the daemon named.
func (r *relay) quiet(line []byte, sid string) (string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.o.HandshakeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(line))
	if err != nil {
		return "", err
	}
	var m message
	_ = json.Unmarshal(line, &m)
	r.headers(req.Header, &m)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := r.o.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessage))
	if resp.StatusCode >= 300 {
		return "", fmt.Errorf("the daemon answered %s", resp.Status)
	}
	return resp.Header.Get("Mcp-Session-Id"), nil
}

func (r *relay) nextOwnID(kind string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ownID++
	return fmt.Sprintf("surfaced-mcp-%s-%d", kind, r.ownID)
}

// startGET opens the session's GET stream (the notifications not tied to a
// request: resource updates), and keeps it open: a broken stream is opened
// again; one the daemon no longer knows makes a new session.
func (r *relay) startGET() {
	r.mu.Lock()
	if r.sessionID == "" || r.version >= statelessVersion {
		r.mu.Unlock()
		return
	}
	if r.getCancel != nil {
		r.getCancel()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.getCancel = cancel
	sid, epoch := r.sessionID, r.epoch
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		delay := r.o.MinDelay
		for ctx.Err() == nil {
			status, err := r.get(ctx, sid)
			if ctx.Err() != nil {
				return
			}
			if status == http.StatusNotFound {
				go r.reconnect(epoch)
				return
			}
			if status == http.StatusOK {
				delay = r.o.MinDelay
			} else if err != nil && delay >= r.o.MaxDelay {
				r.logf("the notification stream is down: %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(delay*2, r.o.MaxDelay)
		}
	}()
}

func (r *relay) get(ctx context.Context, sid string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return 0, err
	}
	r.headers(req.Header, &message{})
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := r.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, fmt.Errorf("GET answered %s", resp.Status)
	}
	return resp.StatusCode, readEvents(resp.Body, r.write)
}

// answerError answers a client request with -32000.
func (r *relay) answerError(id json.RawMessage, msg string) {
	b, _ := plainjson.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32000, "message": msg}})
	r.write(b)
}

// write puts one message on stdout.
func (r *relay) write(msg []byte) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.broke {
		return
	}
	_, err := r.out.Write(msg)
	if err == nil {
		err = r.out.WriteByte('\n')
	}
	if err == nil {
		err = r.out.Flush()
	}
	if err != nil {
		r.broke = true
		r.logf("writing to the client failed: %v", err)
	}
}

func (r *relay) isBroken() bool {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	return r.broke
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
