// Package debug serves the mailbox inspector of development mode over HTTP,
// mounted at /debug behind the gateway's gates (Host, Origin, auth):
//
//	GET /debug/actors?kind=&session=&sort=depth|latency   JSON snapshot
//	GET /debug/actors/stream?kind=&session=&sort=...      the same as SSE, once a second
//	GET /debug/                                           a live page (embedded, no CDN)
//
// The daemon mounts it only with --dev; without it nothing here exists and
// /debug/* answers 404.
package debug

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// Prefix is where the daemon mounts the Handler.
const Prefix = "/debug"

// DefaultInterval is the period of the stream.
const DefaultInterval = time.Second

//go:embed static
var static embed.FS

// Options configure a Handler.
type Options struct {
	// Inspector is the source of the data (required).
	Inspector *inspect.Inspector
	// Node names this node in the answers.
	Node string
	// Guard, when set, ends a stream as soon as its token is revoked.
	Guard *guard.Guard
	// Interval is the stream period (DefaultInterval).
	Interval time.Duration
	// WriteTimeout bounds each write to a stream client (10 s): a client
	// that stops reading is dropped.
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

// Handler serves the debug endpoints under Prefix.
type Handler struct {
	o     Options
	files fs.FS
	log   *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
}

// New returns a Handler.
func New(o Options) *Handler {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	files, err := fs.Sub(static, "static")
	if err != nil {
		// Only an invalid constant path fails, and go:embed checked it.
		panic("debug: " + err.Error())
	}
	return &Handler{o: o, files: files, log: log, closed: make(chan struct{})}
}

// Close ends every open stream (with an end event, reason shutdown) and
// refuses new ones. Call it before shutting the HTTP server down: a stream
// never goes idle by itself.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.closed) })
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	route, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		writeError(w, http.StatusNotFound, codes.NoRoute, "no such route")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, codes.MethodNotAllowed, "this route does not take "+r.Method)
		return
	}
	switch route {
	case "":
		// Relative links of the page need the trailing slash.
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
	case "/", "/index.html":
		h.file(w, r, "index.html", "text/html; charset=utf-8")
	case "/inspector.js":
		h.file(w, r, "inspector.js", "text/javascript; charset=utf-8")
	case "/inspector.css":
		h.file(w, r, "inspector.css", "text/css; charset=utf-8")
	case "/actors":
		h.actors(w, r)
	case "/actors/stream":
		h.stream(w, r)
	default:
		writeError(w, http.StatusNotFound, codes.NoRoute, "no such route")
	}
}

func (h *Handler) file(w http.ResponseWriter, r *http.Request, name, contentType string) {
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		writeError(w, http.StatusNotFound, codes.NoRoute, "no such route")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// queryParams are the parameters the endpoints take.
var queryParams = []string{"kind", "session", "sort"}

// parseQuery reads ?kind=&session=&sort=. Unknown or repeated parameters
// are refused, so that a typo never looks like an empty node.
func parseQuery(v url.Values) (inspect.Query, *apiError) {
	for k, vs := range v {
		known := false
		for _, p := range queryParams {
			known = known || k == p
		}
		if !known {
			return inspect.Query{}, &apiError{Code: codes.InvalidField, Message: "unknown query parameter " + quote(k) + "; the parameters are kind, session and sort", Fields: []string{k}}
		}
		if len(vs) > 1 {
			return inspect.Query{}, &apiError{Code: codes.InvalidField, Message: "the query parameter " + k + " is given more than once", Fields: []string{k}}
		}
	}
	q := inspect.Query{Kind: v.Get("kind"), Session: v.Get("session"), Sort: v.Get("sort")}
	if err := q.Validate(); err != nil {
		var qe *inspect.QueryError
		errors.As(err, &qe)
		return inspect.Query{}, &apiError{Code: codes.InvalidField, Message: qe.Message, Fields: []string{qe.Field}}
	}
	return q, nil
}

func quote(s string) string {
	b, _ := plainjson.Marshal(s)
	return string(b)
}

func (h *Handler) report(q inspect.Query) inspect.Report {
	return inspect.Report{Node: h.o.Node, Actors: h.o.Inspector.Snapshot(q)}
}

func (h *Handler) actors(w http.ResponseWriter, r *http.Request) {
	q, ae := parseQuery(r.URL.Query())
	if ae != nil {
		writeError(w, http.StatusBadRequest, ae.Code, ae.Message, ae.Fields...)
		return
	}
	b, err := plainjson.Marshal(h.report(q))
	if err != nil {
		h.log.Error("debug: encode actors", "err", err)
		writeError(w, http.StatusInternalServerError, codes.Internal, "internal error")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(b, '\n'))
	}
}

// stream sends the snapshot at once and then every Interval, as SSE events
// "actors"; it ends with an "end" event on shutdown ({"reason":"shutdown"})
// or when the token is revoked ({"reason":"revoked"}).
func (h *Handler) stream(w http.ResponseWriter, r *http.Request) {
	q, ae := parseQuery(r.URL.Query())
	if ae != nil {
		writeError(w, http.StatusBadRequest, ae.Code, ae.Message, ae.Fields...)
		return
	}
	select {
	case <-h.closed:
		writeError(w, http.StatusServiceUnavailable, codes.ShuttingDown, "the daemon is shutting down")
		return
	default:
	}
	ctx := r.Context()
	if h.o.Guard != nil {
		if id, ok := identity.FromContext(ctx); ok {
			var cancel context.CancelFunc
			ctx, cancel = h.o.Guard.Context(ctx, id)
			defer cancel()
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	tick := time.NewTicker(h.o.Interval)
	defer tick.Stop()
	var buf bytes.Buffer
	send := func(event string, v any) bool {
		buf.Reset()
		buf.WriteString("event: ")
		buf.WriteString(event)
		buf.WriteString("\ndata: ")
		b, err := plainjson.Marshal(v) // JSON has no raw newline
		if err != nil {
			h.log.Error("debug: encode actors", "err", err)
			return false
		}
		buf.Write(b)
		buf.WriteString("\n\n")
		_ = rc.SetWriteDeadline(time.Now().Add(h.o.WriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("actors", h.report(q)) {
		return
	}
	for {
		select {
		case <-tick.C:
			if !send("actors", h.report(q)) {
				return
			}
		case <-h.closed:
			send("end", map[string]string{"reason": "shutdown"})
			return
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), identity.ErrRevoked) {
				send("end", map[string]string{"reason": "revoked"})
			}
			return
		}
	}
}

type apiError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Fields  []string `json:"fields,omitempty"`
}

// writeError writes the API's error shape {"error":{"code","message","fields?"}}.
func writeError(w http.ResponseWriter, status int, code, msg string, fields ...string) {
	b, _ := plainjson.Marshal(map[string]apiError{"error": {Code: code, Message: msg, Fields: fields}})
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
