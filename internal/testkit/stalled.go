package testkit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stalled is an HTTP client connection that sent its request and does not
// read: the server's writes back up as they would for a frozen browser tab.
type Stalled struct {
	conn net.Conn
}

// StalledDialer dials with a tiny receive buffer, so that a client that
// does not read backs the server's writes up after a few KiB.
func StalledDialer() *net.Dialer {
	return &net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

// DialStalledSSE opens base+path with a tiny receive buffer and stops reading.
func DialStalledSSE(t testing.TB, base, path string, header http.Header) *Stalled {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := StalledDialer().Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n", path, u.Host)
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatalf("write request: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Stalled{conn: conn}
}

// ReadAll finally reads everything until the server closes (or timeout).
func (s *Stalled) ReadAll(t testing.TB, timeout time.Duration) string {
	t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(timeout))
	// Read until the server closes, or ends a chunked response (then the
	// connection itself may stay open for the next request).
	var b []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := s.conn.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil || strings.HasSuffix(string(b), "\r\n0\r\n\r\n") {
			break
		}
	}
	// De-chunk crudely: the SSE payload lines survive chunk framing as text.
	return dechunk(string(b))
}

// dechunk returns the body of a response: as it is when the body ends with
// the connection, de-chunked when the response is chunked.
func dechunk(s string) string {
	i := strings.Index(s, "\r\n\r\n")
	if i < 0 {
		return s
	}
	body := s[i+4:]
	if !strings.Contains(strings.ToLower(s[:i]), "\r\ntransfer-encoding: chunked") {
		return body
	}
	var out strings.Builder
	r := bufio.NewReader(strings.NewReader(body))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%x", &n); err != nil || n == 0 {
			break
		}
		chunk := make([]byte, n)
		if k, err := io.ReadFull(r, chunk); err != nil {
			out.Write(chunk[:k])
			break
		}
		out.Write(chunk)
		r.ReadString('\n')
	}
	return out.String()
}
