package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Headers of the Streamable HTTP transport (acpgw's names, repeated here so
// that the bridge stays a plain client of the wire protocol).
const (
	headerConnectionID = "Acp-Connection-Id"
	headerSessionID    = "Acp-Session-Id"
	headerAgent        = "Surfaced-Agent"
)

// maxMessage bounds one message in either direction.
const maxMessage = 64 << 20

// silenceLimit: a stream that says nothing, not even its 15 s keep-alive,
// for this long is dead.
const silenceLimit = 45 * time.Second

// inbound is one message from the daemon and the stream it came on ("" the
// connection stream).
type inbound struct {
	stream string
	msg    []byte
}

// httpRefusal is a non-2xx answer of the daemon.
type httpRefusal struct {
	status int
	body   string
}

func (e *httpRefusal) Error() string {
	b := strings.TrimSpace(e.body)
	if len(b) > 300 {
		b = b[:300] + "…"
	}
	if b == "" {
		return fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.status, http.StatusText(e.status), b)
}

// connectionFatal reports whether a refusal means the connection is gone
// (the TypeScript SDK's rule): bad credentials, or an id the daemon no
// longer knows.
func (e *httpRefusal) connectionFatal() bool {
	switch e.status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		return true
	}
	return false
}

// postJob is one message to POST, in order.
type postJob struct {
	msg       []byte
	sessionID string
	// request is set for a request, whose refusal answers the editor.
	request *peeked
}

// rejected is a request the daemon refused over HTTP (not a lost connection).
type rejected struct {
	request *peeked
	err     error
}

// transport is one ACP connection to the daemon: its connection stream, the
// session streams it opened, and a worker that POSTs messages in order.
type transport struct {
	url    string
	header http.Header // Authorization and Surfaced-Agent
	client *http.Client
	connID string

	ctx    context.Context
	cancel context.CancelFunc
	in     chan inbound
	failed chan error    // the first fatal error
	reject chan rejected // requests refused over HTTP
	posts  chan postJob

	mu       sync.Mutex
	sessions map[string]*sessionStream
	fail1    sync.Once
}

type sessionStream struct {
	ready chan struct{}
	err   error
}

func newTransport(url string, header http.Header, client *http.Client) *transport {
	ctx, cancel := context.WithCancel(context.Background())
	return &transport{url: url, header: header, client: client, ctx: ctx, cancel: cancel,
		in: make(chan inbound, 256), failed: make(chan error, 1), reject: make(chan rejected, 16),
		posts: make(chan postJob, 1024), sessions: map[string]*sessionStream{}}
}

// fail records the first fatal error and stops everything.
func (t *transport) fail(err error) {
	t.fail1.Do(func() {
		t.failed <- err
		t.cancel()
	})
}

// close ends the transport; with del, it DELETEs the connection first (best
// effort, bounded).
func (t *transport) close(del bool) {
	if del && t.connID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.url, nil)
		if err == nil {
			t.headers(req, "")
			if resp, err := t.client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		cancel()
	}
	t.fail1.Do(func() { t.cancel() })
	t.cancel()
}

func (t *transport) headers(req *http.Request, sessionID string) {
	for k, v := range t.header {
		req.Header[k] = v
	}
	if t.connID != "" {
		req.Header.Set(headerConnectionID, t.connID)
	}
	if sessionID != "" {
		req.Header.Set(headerSessionID, sessionID)
	}
}

// initialize POSTs initialize and opens the connection stream. The answer's
// body is returned as the daemon sent it. unreachable is true when the
// daemon never answered at the HTTP level.
func (t *transport) initialize(ctx context.Context, msg []byte) (body []byte, unreachable bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(msg))
	if err != nil {
		return nil, true, err
	}
	t.headers(req, "")
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxMessage))
	if err != nil {
		return nil, true, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, false, &httpRefusal{status: resp.StatusCode, body: string(body)}
	}
	t.connID = resp.Header.Get(headerConnectionID)
	if t.connID == "" {
		return body, false, errors.New("the initialize answer carries no " + headerConnectionID)
	}
	ready := make(chan error, 1)
	go t.readStream("", ready)
	select {
	case err := <-ready:
		if err != nil {
			return body, false, fmt.Errorf("opening the connection stream: %w", err)
		}
	case <-ctx.Done():
		return body, true, ctx.Err()
	}
	go t.postLoop()
	return body, false, nil
}

// openSession opens a session's stream once; the channel closes when its
// headers arrived (or it failed).
func (t *transport) openSession(sessionID string) *sessionStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[sessionID]; s != nil {
		return s
	}
	s := &sessionStream{ready: make(chan struct{})}
	t.sessions[sessionID] = s
	ready := make(chan error, 1)
	go func() {
		err := <-ready
		t.mu.Lock()
		s.err = err
		t.mu.Unlock()
		close(s.ready)
	}()
	go t.readStream(sessionID, ready)
	return s
}

// readStream GETs a stream and forwards its messages. The connection stream
// ending is fatal; a session stream ending is forgotten, and opened again
// when the session is next used.
func (t *transport) readStream(sessionID string, ready chan<- error) {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	started := false
	report := func(err error) {
		if !started {
			started = true
			ready <- err
		}
	}
	end := func(err error) {
		report(err)
		if sessionID == "" {
			t.fail(fmt.Errorf("the connection stream ended: %w", err))
			return
		}
		t.mu.Lock()
		delete(t.sessions, sessionID)
		t.mu.Unlock()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		end(err)
		return
	}
	t.headers(req, sessionID)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := t.client.Do(req)
	if err != nil {
		end(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		end(&httpRefusal{status: resp.StatusCode, body: string(b)})
		return
	}
	report(nil)
	watchdog := time.AfterFunc(silenceLimit, cancel)
	defer watchdog.Stop()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var data []byte
	for {
		line, err := readLine(r, maxMessage+16)
		if err != nil {
			if ctx.Err() != nil && t.ctx.Err() == nil {
				err = fmt.Errorf("no data for %s", silenceLimit)
			}
			if t.ctx.Err() == nil {
				end(err)
			}
			return
		}
		watchdog.Reset(silenceLimit)
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				select {
				case t.in <- inbound{stream: sessionID, msg: data}:
				case <-t.ctx.Done():
					return
				}
				data = nil
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
}

// errLineTooLong is returned by readLine for a line over its bound; the
// rest of that line is still unread.
var errLineTooLong = errors.New("line too long")

// readLine reads one line without its end, bounded. A last line without a
// newline is a line; io.EOF comes after it.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(out)+len(chunk) > max {
			return nil, fmt.Errorf("%w: more than %d bytes", errLineTooLong, max)
		}
		out = append(out, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && !(errors.Is(err, io.EOF) && len(out) > 0) {
			return nil, err
		}
		return bytes.TrimRight(out, "\r\n"), nil
	}
}

// send queues a message to POST after the ones before it.
func (t *transport) send(j postJob) {
	select {
	case t.posts <- j:
	case <-t.ctx.Done():
	}
}

// postLoop POSTs messages one at a time, in order; a session's stream is
// open (its headers in) before a message for it goes out, so that nothing
// the daemon answers waits unread.
func (t *transport) postLoop() {
	for {
		select {
		case <-t.ctx.Done():
			return
		case j := <-t.posts:
			if j.sessionID != "" {
				s := t.openSession(j.sessionID)
				select {
				case <-s.ready:
				case <-t.ctx.Done():
					return
				case <-time.After(10 * time.Second):
				}
			}
			if err := t.post(j); err != nil {
				var hr *httpRefusal
				if errors.As(err, &hr) && !hr.connectionFatal() {
					if j.request != nil {
						select {
						case t.reject <- rejected{request: j.request, err: err}:
						case <-t.ctx.Done():
						}
					}
					continue
				}
				t.fail(err)
				return
			}
		}
	}
}

func (t *transport) post(j postJob) error {
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(j.msg))
	if err != nil {
		return err
	}
	t.headers(req, j.sessionID)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	if resp.StatusCode/100 != 2 {
		return &httpRefusal{status: resp.StatusCode, body: string(b)}
	}
	return nil
}

// peeked is what the bridge reads of a message: it relays the bytes as they
// are and looks only at these.
type peeked struct {
	id        json.RawMessage
	method    string
	sessionID string
	cwd       string
	isResult  bool
	errCode   int
	hasError  bool
	resultSID string // result.sessionId (session/new)
}

func (p *peeked) isRequest() bool      { return p.method != "" && p.id != nil }
func (p *peeked) isNotification() bool { return p.method != "" && p.id == nil }
func (p *peeked) isResponse() bool     { return p.method == "" && p.id != nil }

func peek(msg []byte) (*peeked, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	p := &peeked{method: m.Method}
	if len(m.ID) > 0 {
		p.id = m.ID
	}
	var params struct {
		SessionID json.RawMessage `json:"sessionId"`
		Cwd       json.RawMessage `json:"cwd"`
	}
	if json.Unmarshal(m.Params, &params) == nil {
		_ = json.Unmarshal(params.SessionID, &p.sessionID)
		_ = json.Unmarshal(params.Cwd, &p.cwd)
	}
	if len(m.Result) > 0 {
		p.isResult = true
		var r struct {
			SessionID json.RawMessage `json:"sessionId"`
		}
		if json.Unmarshal(m.Result, &r) == nil {
			_ = json.Unmarshal(r.SessionID, &p.resultSID)
		}
	}
	if m.Error != nil {
		p.hasError = true
		p.errCode = m.Error.Code
	}
	return p, nil
}

// idKey is a map key for a JSON-RPC id.
func idKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }
