package delivery

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// SSE is the plumbing of a Server-Sent Events stream, shared by the
// browser's transport (event, id and data lines) and ACP's (data only): the
// headers, comments, flushing and deadlines. A transport encodes its items
// into Buffer and the writer's Flush sends them.
type SSE struct {
	out      io.Writer
	flush    func() error // nil: what out takes is sent
	deadline func(time.Time) error
	scratch  *scratch // held during a batch only: an idle stream holds none
	progress func()   // the writer's: a piece of a large write went out
}

// SetProgress implements ProgressReporter.
func (s *SSE) SetProgress(f func()) { s.progress = f }

func (s *SSE) write(b []byte) error { return WriteInPieces(s.out, b, s.progress) }

func setSSEHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// StartSSE answers 200 with the headers of an event stream and a first
// comment, flushed at once so that proxies and browsers see a live stream.
func StartSSE(w http.ResponseWriter, comment string) (*SSE, error) {
	h := w.Header()
	setSSEHeaders(h)
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	s := &SSE{out: w, flush: rc.Flush, deadline: rc.SetWriteDeadline}
	return s, s.Comment(comment)
}

// OpenSSE answers 200 with the headers of an event stream and writes no
// body yet: the caller encodes its first events into Buffer and Flush sends
// them (an AG-UI stream, whose first bytes must be its RUN_STARTED event).
func OpenSSE(w http.ResponseWriter) *SSE {
	h := w.Header()
	setSSEHeaders(h)
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	return &SSE{out: w, flush: rc.Flush, deadline: rc.SetWriteDeadline}
}

// StartSSEConn starts an event stream on a connection taken over from
// net/http (Hijack): it writes the status line, the headers in h (those
// middleware set, the request id) with the event stream's, and the first
// comment, at once. The body is the rest of the connection (Connection:
// close), so that the stream needs neither net/http's buffers nor its
// goroutine while it is idle.
func StartSSEConn(conn net.Conn, h http.Header, comment string) (*SSE, error) {
	setSSEHeaders(h)
	h.Set("Connection", "close")
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	s := &SSE{out: conn, deadline: conn.SetWriteDeadline}
	b := s.Buffer()
	b.WriteString("HTTP/1.1 200 OK\r\n")
	if err := h.Write(b); err != nil {
		return nil, err
	}
	b.WriteString("\r\n")
	return s, s.Comment(comment)
}

// Buffer is where a transport encodes the items of the current batch.
func (s *SSE) Buffer() *bytes.Buffer { return &s.scratchOf().line }

// Data is a scratch slice for a transport to render an item's data into
// before encoding it (reset by the caller).
func (s *SSE) Data() *[]byte { return &s.scratchOf().data }

func (s *SSE) scratchOf() *scratch {
	if s.scratch == nil {
		s.scratch = scratchPool.Get().(*scratch)
	}
	return s.scratch
}

// spillAt is how much a batch encodes before it is handed to the response.
const spillAt = 32 << 10

// Spill hands what was encoded so far to the response once it is large,
// so that a burst does not build one huge buffer. Transports call it after
// each item.
func (s *SSE) Spill() error {
	sc := s.scratch
	if sc == nil || sc.line.Len() < spillAt {
		return nil
	}
	err := s.write(sc.line.Bytes())
	sc.line.Reset()
	return err
}

// Flush sends what was encoded and flushes the response.
func (s *SSE) Flush() error {
	if sc := s.scratch; sc != nil {
		s.scratch = nil
		err := s.write(sc.line.Bytes())
		sc.release()
		if err != nil {
			return err
		}
	}
	if s.flush == nil {
		return nil
	}
	return s.flush()
}

// Comment writes the comment ": text" (":" alone when text is empty) and
// flushes it.
func (s *SSE) Comment(text string) error {
	b := s.Buffer()
	b.WriteByte(':')
	if text != "" {
		b.WriteByte(' ')
		b.WriteString(text)
	}
	b.WriteString("\n\n")
	return s.Flush()
}

// SetWriteDeadline bounds the writes to the response.
func (s *SSE) SetWriteDeadline(t time.Time) error { return s.deadline(t) }

// WriteEvent encodes one event: "event: kind", "id: id" when id is set, and
// the data. JSON never holds a raw newline; if data did, each of its lines
// gets its own data field.
func WriteEvent(b *bytes.Buffer, kind, id string, data []byte) {
	if kind != "" {
		b.WriteString("event: ")
		b.WriteString(kind)
		b.WriteByte('\n')
	}
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	for {
		i := bytes.IndexByte(data, '\n')
		b.WriteString("data: ")
		if i < 0 {
			b.Write(data)
			b.WriteString("\n\n")
			return
		}
		b.Write(bytes.TrimSuffix(data[:i], []byte("\r")))
		b.WriteByte('\n')
		data = data[i+1:]
	}
}

// scratch is a batch's encoding buffers, pooled across streams.
type scratch struct {
	line bytes.Buffer
	data []byte
}

// maxPooled bounds the buffers kept for reuse: a huge frame's are dropped.
const maxPooled = 64 << 10

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (sc *scratch) release() {
	if sc.line.Cap() > maxPooled || cap(sc.data) > maxPooled {
		return
	}
	sc.line.Reset()
	sc.data = sc.data[:0]
	scratchPool.Put(sc)
}
