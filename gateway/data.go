package gateway

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The data plane of a domain: large, cold, read-only pages on request.
//
//	GET /api/sessions/{id}/surfaces/{domain}/data/{path…}?{query}
//	  → 200 the page's JSON, 303 to the signed URL of the artifact holding
//	    it, or 304 (If-None-Match); ETag and Cache-Control from the page.

// fetchData asks the domain's data plane for one page.
func (s *Server) fetchData(c echo.Context) error {
	req := c.Request()
	path, err := dataPath(req.URL.EscapedPath())
	if err != nil {
		return apiErr(http.StatusBadRequest, codes.InvalidField, "the page's path is not valid: "+err.Error(), "path")
	}
	res, err := s.ask(c, &pb.SurfaceFetch{Caller: s.caller(c), Domain: c.Param("domain"), Path: path,
		Query: req.URL.RawQuery, IfNoneMatch: req.Header.Get("If-None-Match")})
	if err != nil {
		return err
	}
	r := res.(*pb.SurfaceFetchResult)
	if r.GetRefused() != nil {
		return fromPB(r.GetRefused())
	}
	if e := r.GetError(); e != nil {
		return dataErr(e)
	}
	h := c.Response().Header()
	if r.GetEtag() != "" {
		h.Set("ETag", r.GetEtag())
	}
	h.Set("Cache-Control", "private, max-age="+strconv.FormatInt(r.GetMaxAge(), 10))
	switch {
	case r.GetNotModified():
		return c.NoContent(http.StatusNotModified)
	case r.GetArtifact() != "":
		a, err := s.rt.Artifacts().Get(req.Context(), c.Param("id"), r.GetArtifact())
		if errors.Is(err, artifact.ErrNotFound) {
			return apiErr(http.StatusBadGateway, codes.BadPage, "the page names an artifact the session does not have")
		}
		if err != nil {
			return err
		}
		url, _ := s.rt.Artifacts().URL(a.ID, 0)
		return c.Redirect(http.StatusSeeOther, url)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, r.GetData())
}

// dataPath is the page's path in an escaped request path
// (/api/sessions/{id}/surfaces/{domain}/data/{path…}): what follows data/,
// unescaped once.
func dataPath(escaped string) (string, error) {
	_, rest, ok := strings.Cut(escaped, "/surfaces/")
	if ok {
		_, rest, ok = strings.Cut(rest, "/") // the domain
	}
	rest, found := strings.CutPrefix(rest, "data/")
	if !ok || !found {
		return "", errors.New("it is not below /surfaces/{domain}/data/")
	}
	return url.PathUnescape(rest)
}

// dataErr maps a data plane failure to its status: the handler's not_found
// is 404, a domain without a data plane 501, an agent that is not running
// 503, a page not made in time 504; any other failure of the handler 502
// with its code.
func dataErr(e *pb.Error) *APIError {
	switch e.GetCode() {
	case codes.NotFound, codes.SurfaceNotRegistered:
		return apiErr(http.StatusNotFound, e.GetCode(), e.GetMessage())
	case codes.NoDataPlane:
		return apiErr(http.StatusNotImplemented, e.GetCode(), e.GetMessage())
	case codes.AgentUnavailable:
		return apiErr(http.StatusServiceUnavailable, e.GetCode(), e.GetMessage())
	case codes.Timeout:
		return apiErr(http.StatusGatewayTimeout, e.GetCode(), e.GetMessage())
	case codes.InvalidArgs:
		return apiErr(http.StatusBadRequest, e.GetCode(), e.GetMessage())
	}
	return apiErr(http.StatusBadGateway, e.GetCode(), e.GetMessage())
}
