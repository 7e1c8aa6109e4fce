package agentkit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// DefaultMaxLineBytes is the default hard cap on one input line (the daemon's line cap, 16 MiB).
const DefaultMaxLineBytes = agentproc.DefaultMaxLine

// lineTooLongError reports an input line longer than the cap. The line has
// been consumed up to its '\n', so the reader stays usable.
type lineTooLongError struct {
	size, max int
}

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("line of %d bytes exceeds the %d-byte cap; discarded", e.size, e.max)
}

// lineReader splits a Server-Sent Events stream into lines: on '\n' only,
// one trailing '\r' stripped, blank lines kept (they end an event, unlike in
// JSONL, where agentproc.Reader skips them). It is not a bufio.Scanner on
// purpose: the Scanner's 64 KiB default would break long lines.
type lineReader struct {
	br  *bufio.Reader
	max int
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its terminator. An unterminated tail at
// EOF is returned as a line; io.EOF comes on the call after. A line over the cap
// yields a *lineTooLongError and nothing else is lost.
func (r *lineReader) next() ([]byte, error) {
	var (
		buf     []byte
		size    int
		tooLong bool
	)
	for {
		chunk, err := r.br.ReadSlice('\n')
		size += len(chunk)
		if !tooLong {
			buf = append(buf, chunk...)
			// One byte of slack each for the '\n' and a '\r' that will be stripped.
			if len(buf) > r.max+2 {
				tooLong, buf = true, nil
			}
		}
		switch {
		case err == nil:
			// A whole line.
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if size == 0 {
				return nil, io.EOF
			}
		default:
			return nil, err
		}
		if tooLong {
			return nil, &lineTooLongError{size: size, max: r.max}
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if len(buf) > r.max {
			return nil, &lineTooLongError{size: size, max: r.max}
		}
		return buf, nil
	}
}

// errClosed is returned by sends after Run has returned.
var errClosed = errors.New("agentkit: agent is not running")

// lineWriter writes every record whole, with a single Write under a mutex, so
// lines from the turn, tools and surface dispatches never interleave.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	err    error // first write error; later sends fail fast with it
	closed bool
}

// send encodes v as one '\n'-terminated line.
func (lw *lineWriter) send(v any) error {
	// Without HTML escaping, which would only bloat text deltas.
	line, err := plainjson.Marshal(v)
	if err != nil {
		return fmt.Errorf("agentkit: encode %T: %w", v, err)
	}
	line = append(line, '\n')
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.closed {
		return errClosed
	}
	if lw.err != nil {
		return lw.err
	}
	if _, err := lw.w.Write(line); err != nil {
		lw.err = fmt.Errorf("agentkit: write to daemon: %w", err)
		return lw.err
	}
	return nil
}

func (lw *lineWriter) close() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	return lw.err
}
