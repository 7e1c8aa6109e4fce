package surface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// MaxPage bounds the JSON of a data page; a larger page belongs in an
// artifact (Page.Artifact), to which the client is redirected.
const MaxPage = 1 << 20

// DataRequest is one data page asked of a domain:
// GET /api/sessions/{id}/surfaces/{domain}/data/{Path}?{Query}.
type DataRequest struct {
	// Path is the page's path below data/, without a leading slash.
	Path string
	// Query is the request's query.
	Query url.Values
	// Rev is the domain's rev the page is asked at (the state a native
	// handler sees).
	Rev uint64
}

// Page is a data page: JSON Data (at most MaxPage bytes once marshalled),
// or the id of an artifact of the session holding a larger page (the client
// is sent to its signed URL). Exactly one of them.
//
// ETag, when set, lets a client revalidate: a request whose If-None-Match
// matches it, for the same path, query and rev, is answered 304 without
// asking the handler again. MaxAge is how long a client may keep the page
// without asking (Cache-Control: private, max-age).
type Page struct {
	Data     any
	Artifact string
	ETag     string
	MaxAge   time.Duration
}

// DataCtx is what a native data handler sees: the domain's state as of
// Rev, shared by the fetches running at once and so read only, and the
// request's context (cancelled when the client is gone or the fetch timed
// out).
type DataCtx[S any] struct {
	context.Context
	State S
	Rev   uint64
}

// DataHandler serves a native domain's data pages. It runs beside the
// domain's commands, never behind them, and may run for several requests at
// once: it must not change State. An *Error keeps its code (not_found
// answers 404); any other error is dispatch_failed.
type DataHandler[S any] func(ctx *DataCtx[S], req DataRequest) (Page, error)

// Option configures a domain Define builds.
type Option[S any] func(*typedDomain[S])

// Data gives a domain a data plane served by h.
func Data[S any](h DataHandler[S]) Option[S] {
	return func(d *typedDomain[S]) { d.data = h }
}

// DataDomain is a native domain with a data plane. Define's domains
// implement it; HasData says whether one was given (Data).
type DataDomain interface {
	Domain
	HasData() bool
	// View returns a read-only view of a snapshot this domain wrote, at
	// rev: it serves the data pages of that rev.
	View(snapshot json.RawMessage, rev uint64) (View, error)
}

// View serves the data pages of one rev of a domain. Fetch may be called
// from several goroutines at once.
type View interface {
	Fetch(ctx context.Context, req DataRequest) (Page, error)
}

// HasData reports whether d serves data pages.
func HasData(d Domain) bool {
	dd, ok := d.(DataDomain)
	return ok && dd.HasData()
}

func (d *typedDomain[S]) HasData() bool { return d.data != nil }

func (d *typedDomain[S]) View(snapshot json.RawMessage, rev uint64) (View, error) {
	if d.data == nil {
		return nil, fmt.Errorf("surface %s: no data handler", d.name)
	}
	var s S
	if err := json.Unmarshal(snapshot, &s); err != nil {
		return nil, fmt.Errorf("surface %s: the snapshot does not fit the state type: %w", d.name, err)
	}
	return &typedView[S]{h: d.data, state: s, rev: rev}, nil
}

type typedView[S any] struct {
	h     DataHandler[S]
	state S
	rev   uint64
}

func (v *typedView[S]) Fetch(ctx context.Context, req DataRequest) (Page, error) {
	// A panic goes up to the fetcher, which logs it with its stack and
	// answers dispatch_failed.
	return v.h(&DataCtx[S]{Context: ctx, State: v.state, Rev: v.rev}, req)
}

// PageResult is a page as the data plane answers it: JSON data or an
// artifact id, checked; or a coded error.
type PageResult struct {
	Data     json.RawMessage
	Artifact string
	ETag     string // quoted
	MaxAge   int64  // seconds
	Err      *Error
}

// nativePage checks what a native handler returned.
func nativePage(p Page, err error) PageResult {
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return PageResult{Err: &Error{Code: se.Code, Message: se.Message}}
		}
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: err.Error()}}
	}
	var data json.RawMessage
	if p.Data != nil {
		b, err := plainjson.Marshal(p.Data)
		if err != nil {
			return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: "the page is not JSON: " + err.Error()}}
		}
		data = b
	}
	return checkPage(data, p.Artifact, p.ETag, int64(p.MaxAge/time.Second))
}

// agentPage checks an agent's surface_fetch_result.
func agentPage(line []byte) PageResult {
	var r agentproc.SurfaceFetchResult
	if err := json.Unmarshal(line, &r); err != nil {
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: "the agent's surface_fetch_result is not valid: " + err.Error()}}
	}
	if !r.OK {
		if r.Error == nil || !agentproc.ValidCode(r.Error.Code) {
			return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: "the agent reported a failure without a valid error code"}}
		}
		return PageResult{Err: &Error{Code: r.Error.Code, Message: r.Error.Message}}
	}
	data := r.Data
	if string(data) == "null" {
		data = nil
	}
	return checkPage(data, r.Artifact, r.ETag, r.MaxAge)
}

func checkPage(data json.RawMessage, art, etag string, maxAge int64) PageResult {
	switch {
	case data != nil && art != "":
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: "a page is data or an artifact, not both"}}
	case data == nil && art == "":
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: "a page needs data or an artifact"}}
	case len(data) > MaxPage:
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: fmt.Sprintf("the page is %d bytes of JSON, over the %d-byte limit; put larger pages in an artifact", len(data), MaxPage)}}
	case maxAge < 0:
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: "maxAge is negative"}}
	}
	q, ok := QuoteETag(etag)
	if !ok {
		return PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: fmt.Sprintf("the etag %q is not one HTTP can carry", etag)}}
	}
	return PageResult{Data: data, Artifact: art, ETag: q, MaxAge: maxAge}
}

// QuoteETag returns etag as an HTTP entity tag: kept when already quoted
// (weak or strong), quoted otherwise. ok is false for one that cannot be an
// entity tag (a quote or a control character inside).
func QuoteETag(etag string) (string, bool) {
	if etag == "" {
		return "", true
	}
	inner := etag
	prefix := ""
	if strings.HasPrefix(inner, "W/") {
		prefix, inner = "W/", inner[2:]
	}
	if len(inner) >= 2 && inner[0] == '"' && inner[len(inner)-1] == '"' {
		inner = inner[1 : len(inner)-1]
	} else if prefix != "" {
		return "", false
	}
	for i := 0; i < len(inner); i++ {
		if c := inner[i]; c == '"' || c < 0x21 || c == 0x7f {
			return "", false
		}
	}
	return prefix + `"` + inner + `"`, true
}

// ETagMatch reports whether an If-None-Match header matches etag (weak
// comparison, as If-None-Match uses).
func ETagMatch(ifNoneMatch, etag string) bool {
	if etag == "" || ifNoneMatch == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}
