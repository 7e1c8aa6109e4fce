package agentproc

import "sync"

// ring keeps the last len(buf) bytes written to it: the tail of an agent's stderr, which is what
// explains a crash. It is safe for concurrent use: the stderr goroutine writes while the actor
// reads.
type ring struct {
	mu   sync.Mutex
	size int    // the most bytes kept
	buf  []byte // grows up to size before it wraps: a quiet agent costs little
	pos  int    // where the next byte goes
	full bool   // buf has wrapped at least once, so buf[pos:] holds the oldest bytes
}

func newRing(size int) *ring {
	return &ring{size: size}
}

// Write appends p, overwriting the oldest bytes. It never fails.
func (r *ring) Write(p []byte) (int, error) {
	n := len(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size == 0 {
		return n, nil
	}
	if !r.full && len(r.buf) < r.size {
		if room := r.size - len(r.buf); len(p) <= room {
			r.buf = append(r.buf, p...)
			r.pos = len(r.buf)
			if r.pos == r.size {
				r.pos, r.full = 0, true
			}
			return n, nil
		}
		// Grow to the full size, then wrap as usual.
		nb := make([]byte, r.size)
		copy(nb, r.buf)
		r.buf = nb
	}
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.pos, r.full = 0, true
		return n, nil
	}
	c := copy(r.buf[r.pos:], p)
	if c < len(p) {
		copy(r.buf, p[c:])
		r.full = true
	}
	r.pos += len(p)
	if r.pos >= len(r.buf) {
		r.pos -= len(r.buf)
		r.full = true
	}
	return n, nil
}

// Bytes returns a copy of the kept bytes, oldest first.
func (r *ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.pos]...)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.pos:]...)
	return append(out, r.buf[:r.pos]...)
}

// tail returns a copy of the last n kept bytes (all of them when n is larger) and whether older
// bytes were dropped before them, by the ring or by n.
func (r *ring) tail(n int) (b []byte, cut bool) {
	b = r.Bytes()
	r.mu.Lock()
	cut = r.full
	r.mu.Unlock()
	if len(b) > n {
		b, cut = b[len(b)-n:], true
	}
	return b, cut
}
