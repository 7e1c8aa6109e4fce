package agentkit

import (
	"context"
	"fmt"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/plainjson"
)

// DataRequest is one data page a client asked of a domain the agent hosts:
// GET /api/sessions/{id}/surfaces/{domain}/data/{Path}?{Query}.
type DataRequest struct {
	Domain string
	// Path is the page's path below data/, without a leading slash.
	Path string
	// Query is the request's query.
	Query url.Values
	// RawQuery is the query as the client sent it.
	RawQuery string
	// Rev is the domain's rev the page is asked at.
	Rev uint64
}

// Page is a data page: JSON Data (at most 1 MiB once encoded), or the id of
// an artifact holding a larger one (the client is sent to its signed URL);
// exactly one of them. ETag, when set, lets a client revalidate: the daemon
// answers a request that carries it, for the same path, query and rev, 304
// without asking the agent again. MaxAge is how long a client may keep the
// page without asking.
type Page struct {
	Data     any
	Artifact string
	ETag     string
	MaxAge   time.Duration
}

// DataCtx is what a data handler sees besides the request.
type DataCtx struct {
	ctx   context.Context
	agent *Agent
}

// Context is the fetch's context; it ends when the agent stops.
func (c *DataCtx) Context() context.Context { return c.ctx }

// Artifacts returns the session's artifacts (to put a large page as one).
func (c *DataCtx) Artifacts() *Artifacts { return c.agent.Artifacts().WithContext(c.ctx) }

// DataHandler serves a domain's data pages. It runs on a goroutine of its
// own, beside the domain's commands and other fetches: it must only read.
// The agent holds no surface state; the page comes from the agent's own
// data (a file, a table), for the rev in the request. An *Error keeps its
// code (not_found answers the client 404); any other error or a panic is
// dispatch_failed.
type DataHandler func(ctx *DataCtx, req DataRequest) (Page, error)

func (a *Agent) serveFetch(f *agentproc.SurfaceFetch) {
	res := agentproc.SurfaceFetchResult{Type: agentproc.TypeSurfaceFetchResult, ID: f.ID}
	h, ok := a.surfaces[f.Domain]
	var handler DataHandler
	if ok {
		handler = h.data()
	}
	switch {
	case !ok:
		res.Error = &agentproc.ErrorBody{Code: agentproc.CodeSurfaceNotRegistered, Message: fmt.Sprintf("this agent hosts no surface %q", f.Domain)}
	case handler == nil:
		res.Error = &agentproc.ErrorBody{Code: agentproc.CodeNoDataPlane, Message: fmt.Sprintf("the surface %q serves no data pages", f.Domain)}
	default:
		q, err := url.ParseQuery(f.Query)
		if err != nil {
			res.Error = &agentproc.ErrorBody{Code: agentproc.CodeInvalidArgs, Message: "the query is not valid: " + err.Error()}
			break
		}
		page, err := a.runData(handler, DataRequest{Domain: f.Domain, Path: f.Path, Query: q, RawQuery: f.Query, Rev: f.Rev})
		if err != nil {
			r := errorResult(err)
			res.Error = r.Error
			break
		}
		res.OK, res.Artifact, res.ETag, res.MaxAge = true, page.Artifact, page.ETag, int64(page.MaxAge/time.Second)
		if page.Data != nil {
			b, err := plainjson.Marshal(page.Data)
			if err != nil {
				res.OK, res.Artifact, res.ETag, res.MaxAge = false, "", "", 0
				res.Error = &agentproc.ErrorBody{Code: agentproc.CodeDispatchFailed, Message: "the page does not encode: " + err.Error()}
				break
			}
			res.Data = b
		}
	}
	if err := a.send(res); err != nil {
		a.log.Error("send fetch result", "id", f.ID, "err", err)
	}
}

// runData calls h and turns a panic into an error.
func (a *Agent) runData(h DataHandler, req DataRequest) (page Page, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("data handler panicked", "domain", req.Domain, "path", req.Path,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			page, err = Page{}, &Error{Code: agentproc.CodeDispatchFailed, Message: fmt.Sprintf("panic: %v", r)}
		}
	}()
	return h(&DataCtx{ctx: a.base, agent: a}, req)
}
