package guard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
)

// benchGuard has n tokens in its file set (built directly, no file).
func benchGuard(b *testing.B, n int) (*Guard, string) {
	b.Helper()
	g, err := New(Config{Addr: "127.0.0.1:7800", Token: testToken, Logger: discard(),
		BrowserOrigins: []string{"https://app.example.com"}})
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]tokenEntry, n)
	for i := range entries {
		entries[i] = newTokenEntry(fmt.Sprintf("token-%032d", i), fmt.Sprintf("user%d", i))
	}
	g.file.Store(newTokenSet(entries))
	return g, fmt.Sprintf("token-%032d", n-1) // the last entry: a full scan either way
}

func BenchmarkAuthenticate(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			g, tok := benchGuard(b, n)
			r := httptest.NewRequest(http.MethodGet, "/api/sessions", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGates(b *testing.B) {
	g, _ := benchGuard(b, 1)
	r := httptest.NewRequest(http.MethodPost, "/api/sessions", nil)
	r.Host = "localhost:7800"
	r.Header.Set("Origin", "http://localhost:7800")
	b.ReportAllocs()
	for b.Loop() {
		if !g.HostOK(r) || !g.OriginOK(r) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkMiddleware compares one authenticated API request through echo
// with the guard against the same app without it (the baseline).
func BenchmarkMiddleware(b *testing.B) {
	g, _ := benchGuard(b, 10)
	handler := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	for _, guarded := range []bool{false, true} {
		name := "baseline"
		e := echo.New()
		if guarded {
			name = "guarded"
			e.Use(g.Middleware(isPublicPath))
		}
		e.GET("/api/sessions", handler)
		b.Run(name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/api/sessions", nil)
			r.Host = "127.0.0.1:7800"
			r.Header.Set("Origin", "http://127.0.0.1:7800")
			r.Header.Set("Authorization", "Bearer "+testToken)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				e.ServeHTTP(w, r)
				if w.Code != http.StatusNoContent {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
