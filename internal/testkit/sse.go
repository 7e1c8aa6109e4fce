package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Event is one SSE event as a client sees it.
type Event struct {
	Kind string
	ID   string
	Data map[string]any
	Raw  string
}

// SSE is a real SSE client reading a stream in a goroutine.
type SSE struct {
	Resp   *http.Response
	Events chan Event
	cancel context.CancelFunc
	mu     sync.Mutex
	all    []Event
	done   chan struct{}
	Err    error
	lastID string
}

// LastID is the id of the last event received with one.
func (s *SSE) LastID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID
}

// OpenSSE opens url with the headers; it fails the test unless the answer is 200.
func OpenSSE(t testing.TB, url string, header http.Header) *SSE {
	t.Helper()
	s, status, body := TryOpenSSE(url, header)
	if status != http.StatusOK {
		t.Fatalf("SSE %s: status %d: %s", url, status, body)
	}
	t.Cleanup(s.Close)
	return s
}

// TryOpenSSE opens url; a non-200 answer is returned with its body.
func TryOpenSSE(url string, header http.Header) (*SSE, int, string) {
	return TryOpenSSERequest(http.MethodGet, url, header, nil)
}

// TryOpenSSERequest sends a request whose answer is an event stream (a POST
// with a JSON body: a per-turn chat stream); a non-200 answer is returned
// with its body.
func TryOpenSSERequest(method, url string, header http.Header, body []byte) (*SSE, int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, r)
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, 0, err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(b)
	}
	s := &SSE{Resp: resp, Events: make(chan Event, 100000), cancel: cancel, done: make(chan struct{})}
	go s.read()
	return s, resp.StatusCode, ""
}

func (s *SSE) read() {
	defer close(s.done)
	defer close(s.Events)
	r := bufio.NewReaderSize(s.Resp.Body, 64<<10)
	var ev Event
	var data strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			s.Err = err
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if ev.Kind != "" || data.Len() > 0 {
				ev.Raw = data.String()
				_ = json.Unmarshal([]byte(ev.Raw), &ev.Data)
				s.mu.Lock()
				if ev.ID != "" {
					s.lastID = ev.ID
				}
				s.all = append(s.all, ev)
				s.mu.Unlock()
				s.Events <- ev
			}
			ev = Event{}
			data.Reset()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			ev.Kind = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(line[len("data: "):])
		}
	}
}

// Close disconnects.
func (s *SSE) Close() {
	s.cancel()
	s.Resp.Body.Close()
	<-s.done
}

// Done is closed when the stream ended (the server closed it or Close was called).
func (s *SSE) Done() <-chan struct{} { return s.done }

// All returns the events received so far.
func (s *SSE) All() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.all...)
}

// Wait returns the next event matching pred.
func (s *SSE) Wait(t testing.TB, timeout time.Duration, what string, pred func(Event) bool) Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				t.Fatalf("stream closed while waiting for %s (err %v); events:\n%s", what, s.Err, s.dump())
			}
			if pred(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s; events:\n%s", timeout, what, s.dump())
		}
	}
}

func (s *SSE) dump() string {
	var b strings.Builder
	for _, e := range s.All() {
		fmt.Fprintf(&b, "  %s %s %s\n", e.ID, e.Kind, e.Raw)
	}
	return b.String()
}

// IsChat matches a chat event of a chunk type.
func IsChat(typ string) func(Event) bool {
	return func(e Event) bool { return e.Kind == "chat" && e.Data["type"] == typ }
}

// IsStatus matches a session event with a status.
func IsStatus(status string) func(Event) bool {
	return func(e Event) bool { return e.Kind == "session" && e.Data["status"] == status }
}

// IsState matches a state event of key (and rev when rev > 0).
func IsState(key string, rev float64) func(Event) bool {
	return func(e Event) bool {
		return e.Kind == "state" && e.Data["key"] == key && (rev == 0 || e.Data["rev"] == rev)
	}
}

// IsKind matches an event kind.
func IsKind(kind string) func(Event) bool { return func(e Event) bool { return e.Kind == kind } }
