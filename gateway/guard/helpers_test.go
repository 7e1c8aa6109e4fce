package guard

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"go.uber.org/goleak"

	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// logBuffer is a concurrency-safe log sink for assertions on log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func digestHex(tok string) string {
	d := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(d[:])
}

// writeTokensFile atomically replaces path with a tokens file naming the
// given subject → token pairs (rename: a new inode, as editors do).
func writeTokensFile(t *testing.T, path string, pairs ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"tokens":[`)
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"subject":%q,"sha256":%q}`, pairs[i], digestHex(pairs[i+1]))
	}
	b.WriteString("]}\n")
	writeFileAtomic(t, path, b.String())
}

func writeFileAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func isPublicPath(p string) bool {
	return p == "/" || p == "/index.html" || strings.HasPrefix(p, "/static/")
}

// testApp is the echo app the tests drive: pages, an API, an SSE stream
// bound to the guard's Context, a WebSocket, and an ACP-like mount with
// CORS in front of the gates.
func testApp(g *Guard) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	site := e.Group("", g.Middleware(isPublicPath))
	page := func(c echo.Context) error {
		id, ok := identity.FromContext(c.Request().Context())
		return c.String(http.StatusOK, fmt.Sprintf("page signed-in=%v subject=%s", ok, id.Subject))
	}
	site.GET("/", page)
	site.GET("/index.html", page)
	site.GET("/api/whoami", func(c echo.Context) error { return c.JSON(http.StatusOK, IdentityOf(c)) })
	site.POST("/api/echo", func(c echo.Context) error { return c.JSON(http.StatusOK, IdentityOf(c)) })
	site.GET("/api/events", func(c echo.Context) error {
		ctx, cancel := g.Context(c.Request().Context(), IdentityOf(c))
		defer cancel()
		w := c.Response()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": open\n\n")
		w.Flush()
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), identity.ErrRevoked) {
			_, _ = io.WriteString(w, "event: end\ndata: {\"reason\":\"revoked\"}\n\n")
		}
		return nil
	})
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }} // the guard checked
	site.GET("/api/ws", func(c echo.Context) error {
		conn, err := upgrader.Upgrade(c.Response(), c.Request(), nil)
		if err != nil {
			return nil
		}
		defer conn.Close()
		_ = conn.WriteMessage(websocket.TextMessage, []byte(IdentityOf(c).Subject))
		return nil
	})
	acp := e.Group("/acp", g.CORS(), g.Middleware(nil))
	acpHandler := func(c echo.Context) error {
		c.Response().Header().Set("Acp-Connection-Id", "conn-1")
		return c.JSON(http.StatusOK, map[string]string{"subject": IdentityOf(c).Subject})
	}
	acp.POST("", acpHandler)
	acp.GET("", acpHandler)
	return e
}

// server is a running test app on a real listener.
type server struct {
	g    *Guard
	srv  *httptest.Server
	port string
	logs *logBuffer
}

// startOn starts the test app on a listener at listenAddr and a guard
// whose Config.Addr is bindAddr with the listener's port (bindAddr ""
// means the listener's own address).
func startOn(t *testing.T, listenAddr, bindHost string, cfg Config) *server {
	t.Helper()
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", listenAddr, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg.Addr = ln.Addr().String()
	if bindHost != "" {
		cfg.Addr = net.JoinHostPort(bindHost, port)
		if bindHost == "*" {
			cfg.Addr = ":" + port
		}
	}
	log, logs := newLogger()
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	g, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewUnstartedServer(testApp(g))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		g.Close()
	})
	return &server{g: g, srv: srv, port: port, logs: logs}
}

func start(t *testing.T, cfg Config) *server {
	t.Helper()
	return startOn(t, "127.0.0.1:0", "", cfg)
}

// raw sends one request written by hand to addr and returns the response
// (with its body read). It lets tests send any Host, including none.
func raw(t *testing.T, addr, request string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", request, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// get sends a GET with the given Host and headers to the listener at addr.
func rawGet(t *testing.T, addr, path, hostHeader string, headers ...string) (*http.Response, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", path, hostHeader)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n")
	return raw(t, addr, b.String())
}

func client() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// do sends method url with headers (pairs) through a client without
// redirects and returns the response with its body read.
func do(t *testing.T, method, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// errorCode extracts error.code from a JSON error body ("" if none).
func errorCode(body string) string {
	var b errorBody
	if json.Unmarshal([]byte(body), &b) != nil {
		return ""
	}
	return b.Error.Code
}

// waitFor polls cond until it holds or the deadline passes. It is used for
// the tokens file watcher, whose poll interval makes changes asynchronous.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, within, cond, "%s", what)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func itoa(n int) string { return strconv.Itoa(n) }
