package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/wire"
	"github.com/surfaced/surfaced/store"
)

// The artifact routes: a thin translation of HTTP to artifact.Service.
//
//	POST   /api/sessions/{id}/artifacts        raw bytes (or multipart field "file") → 201 {artifact, url}
//	GET    /api/sessions/{id}/artifacts        ?mediaType&cursor&limit → {artifacts, nextCursor?}
//	GET    /api/sessions/{id}/artifacts/{att}  → {artifact, url}
//	DELETE /api/sessions/{id}/artifacts/{att}  → {ok:true}
//	GET    /api/artifacts/{att}/content        the bytes: the owner's credential or a signed URL

// MetaHeader carries an uploaded artifact's meta (JSON).
const MetaHeader = "Surfaced-Artifact-Meta"

// maxAttachments bounds the attachments of one prompt.
const maxAttachments = 32

// isContentPath reports whether path is /api/artifacts/{att}/content, which
// a signed URL opens without a credential (the guard passes it through
// unauthenticated; the handler decides).
func isContentPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/api/artifacts/")
	if !ok {
		return false
	}
	id, ok := strings.CutSuffix(rest, "/content")
	return ok && id != "" && !strings.Contains(id, "/")
}

func artifactJSON(a artifact.Artifact) json.RawMessage {
	return wire.AppendArtifact(nil, artifact.ToProto(a))
}

func noArtifact() *APIError { return apiErr(http.StatusNotFound, codes.NotFound, "no such artifact") }

// artifactErr maps the errors of artifact.Service; nil for others.
func artifactErr(err error) *APIError {
	var fe *artifact.FieldError
	switch {
	case errors.As(err, &fe):
		return apiErr(http.StatusBadRequest, codes.InvalidField, sentence(errors.New(fe.Message)), fe.Field)
	case errors.Is(err, artifact.ErrNotFound):
		return noArtifact()
	case errors.Is(err, artifact.ErrTooLarge):
		return apiErr(http.StatusRequestEntityTooLarge, codes.TooLarge, sentence(trimPrefix(err)))
	case errors.Is(err, artifact.ErrQuotaExceeded):
		return apiErr(http.StatusRequestEntityTooLarge, codes.QuotaExceeded, sentence(trimPrefix(err)))
	case errors.Is(err, artifact.ErrSessionEnded):
		return apiErr(http.StatusConflict, codes.SessionEnded, "the session has ended: its artifacts can be read and deleted, not added")
	}
	return nil
}

// trimPrefix drops the "artifact: too large: " of a Service error: the
// code says it already.
func trimPrefix(err error) error {
	m := err.Error()
	if i := strings.LastIndex(m, ": "); i >= 0 {
		m = m[i+2:]
	}
	return errors.New(m)
}

// ownSession answers 404 unless the caller owns the route's session.
func (s *Server) ownSession(c echo.Context) error {
	_, err := s.rt.Artifacts().Session(c.Request().Context(), c.Param("id"), guard.IdentityOf(c).Subject)
	if errors.Is(err, artifact.ErrNotFound) {
		return notFound()
	}
	return err
}

// bodyReader remembers whether reading the request body failed, to tell
// a client that went away from a store that failed.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (s *Server) putArtifact(c echo.Context) error {
	if err := s.ownSession(c); err != nil {
		return err
	}
	if s.isClosing() {
		return apiErr(http.StatusServiceUnavailable, codes.ShuttingDown, "the daemon is shutting down")
	}
	r := c.Request()
	o := artifact.PutOptions{Name: c.QueryParam("name"), DerivedFrom: c.QueryParam("derivedFrom"), Size: r.ContentLength}
	if metas := r.Header.Values(MetaHeader); len(metas) > 1 {
		return fieldErr("meta", "send one "+MetaHeader+" header")
	} else if len(metas) == 1 {
		if len(metas[0]) > artifact.MaxMetaBytes {
			return fieldErr("meta", fmt.Sprintf("the %s header is %d bytes, over the %d-byte limit", MetaHeader, len(metas[0]), artifact.MaxMetaBytes))
		}
		o.Meta = json.RawMessage(metas[0])
	}
	body := &bodyReader{r: r.Body}
	var src io.Reader = body
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "multipart/form-data" {
		part, err := filePart(r, body)
		if err != nil {
			return err
		}
		src, o.Size = part, -1
		o.MediaType = part.Header.Get("Content-Type")
		if o.Name == "" {
			o.Name = part.FileName()
		}
	} else {
		o.MediaType = ct
	}
	if o.MediaType == "" {
		o.MediaType = "application/octet-stream"
	}
	a, err := s.rt.Artifacts().Put(r.Context(), c.Param("id"), src, o)
	if err != nil {
		if ae := artifactErr(err); ae != nil {
			if errors.Is(err, artifact.ErrNotFound) {
				return notFound() // the session went meanwhile
			}
			return ae
		}
		if body.err != nil || errors.Is(err, store.ErrSourceFailed) {
			return apiErr(http.StatusBadRequest, codes.BadBody, "the request body could not be read to its end")
		}
		return err // the store's: 503 store_unavailable or 504 outcome_unknown (errorHandler)
	}
	url, _ := s.rt.Artifacts().URL(a.ID, 0)
	return c.JSON(http.StatusCreated, map[string]any{"artifact": artifactJSON(a), "url": url})
}

// filePart finds the multipart body's part named file, skipping others.
func filePart(r *http.Request, body io.Reader) (*multipart.Part, error) {
	r.Body = io.NopCloser(body)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, apiErr(http.StatusBadRequest, codes.BadBody, "the multipart body cannot be read: "+err.Error())
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, fieldErr("file", "the multipart body has no part named file")
		}
		if err != nil {
			return nil, apiErr(http.StatusBadRequest, codes.BadBody, "the multipart body cannot be read: "+err.Error())
		}
		if p.FormName() == "file" {
			return p, nil
		}
		// Another field: skipped, within reason.
		if n, _ := io.Copy(io.Discard, io.LimitReader(p, 64<<10+1)); n > 64<<10 {
			return nil, apiErr(http.StatusBadRequest, codes.BadBody, "a multipart field other than file is over 64 KiB")
		}
	}
}

func (s *Server) listArtifacts(c echo.Context) error {
	if err := s.ownSession(c); err != nil {
		return err
	}
	q := artifact.Query{MediaType: c.QueryParam("mediaType"), Cursor: c.QueryParam("cursor")}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 || strconv.Itoa(n) != l {
			return fieldErr("limit", "limit must be a number from 1 to 500")
		}
		q.Limit = n
	}
	page, next, err := s.rt.Artifacts().List(c.Request().Context(), c.Param("id"), q)
	if err != nil {
		if ae := artifactErr(err); ae != nil {
			return ae
		}
		return err
	}
	out := struct {
		Artifacts  []json.RawMessage `json:"artifacts"`
		NextCursor string            `json:"nextCursor,omitempty"`
	}{Artifacts: make([]json.RawMessage, 0, len(page)), NextCursor: next}
	for _, a := range page {
		out.Artifacts = append(out.Artifacts, artifactJSON(a))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getArtifact(c echo.Context) error {
	if err := s.ownSession(c); err != nil {
		return err
	}
	a, err := s.rt.Artifacts().Get(c.Request().Context(), c.Param("id"), c.Param("att"))
	if err != nil {
		if ae := artifactErr(err); ae != nil {
			return ae
		}
		return err
	}
	url, _ := s.rt.Artifacts().URL(a.ID, 0)
	return c.JSON(http.StatusOK, map[string]any{"artifact": artifactJSON(a), "url": url})
}

func (s *Server) deleteArtifact(c echo.Context) error {
	if err := s.ownSession(c); err != nil {
		return err
	}
	if _, err := s.rt.Artifacts().Delete(c.Request().Context(), c.Param("id"), c.Param("att")); err != nil {
		if ae := artifactErr(err); ae != nil {
			return ae
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// artifactContent serves an artifact's bytes to its owner (token or
// cookie), or to whoever holds a signed URL for it. Anything else looks
// like a missing artifact (404), except a request with neither credential
// nor valid signature (401) and a genuine signature past its time (403).
func (s *Server) artifactContent(c echo.Context) error {
	ctx := c.Request().Context()
	arts := s.rt.Artifacts()
	id := c.Param("att")
	q := c.Request().URL.Query()
	signed := q.Has("exp") || q.Has("sig")
	ident, authed := identity.FromContext(ctx)
	if authed {
		a, err := arts.Lookup(ctx, id)
		switch {
		case err == nil && a.Owner == ident.Subject:
			return s.serveArtifact(c, id, arts.Limits().URLTTL)
		case err != nil && !errors.Is(err, artifact.ErrNotFound):
			return err
		case !signed:
			return noArtifact()
		}
	} else if !signed {
		return apiErr(http.StatusUnauthorized, codes.Unauthorized,
			"No credential: send Authorization: Bearer <token>, or open the artifact's signed URL (its exp and sig).")
	}
	err := arts.Verify(ctx, id, q.Get("exp"), q.Get("sig"))
	switch {
	case errors.Is(err, artifact.ErrSignatureExpired):
		return apiErr(http.StatusForbidden, codes.SignatureExpired, "This signed URL has expired; ask for a new one.")
	case errors.Is(err, artifact.ErrBadSignature) && !authed:
		return apiErr(http.StatusUnauthorized, codes.Unauthorized, "The signature of this URL is not valid.")
	case err != nil:
		return noArtifact() // another artifact's signature; or, with a credential, none that holds
	}
	exp, _ := strconv.ParseInt(q.Get("exp"), 10, 64)
	return s.serveArtifact(c, id, time.Unix(exp, 0).Sub(arts.Now()))
}

// serveArtifact writes the bytes with http.ServeContent (Range, ETag and
// If-None-Match, HEAD), under headers that keep a browser from running
// them on the daemon's origin. maxAge is how long a browser may cache them.
func (s *Server) serveArtifact(c echo.Context, id string, maxAge time.Duration) error {
	a, r, err := s.rt.Artifacts().Open(c.Request().Context(), id)
	if errors.Is(err, artifact.ErrNotFound) {
		return noArtifact()
	}
	if err != nil {
		return err
	}
	defer r.Close()
	// The writer under echo's, so that a file goes out with sendfile.
	w := c.Response().Writer
	h := w.Header()
	h.Set("Content-Type", a.MediaType)
	h.Set("ETag", `"`+a.SHA256+`"`)
	h.Set("Cache-Control", fmt.Sprintf("private, max-age=%d, immutable", max(int64(maxAge/time.Second), 0)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Content-Disposition", disposition(a))
	http.ServeContent(w, c.Request(), "", a.Created, r)
	c.Response().Committed = true
	return nil
}

// disposition is the Content-Disposition of an artifact: attachment for the
// types a browser would run (HTML, anything XML, SVG and XHTML included,
// anything with "script" in its type), so that an uploaded page never runs
// on the daemon's origin; inline otherwise. The name, when there is one,
// is the file name to save under.
func disposition(a artifact.Artifact) string {
	d := "inline"
	if RunsInBrowser(a.MediaType) {
		d = "attachment"
	}
	if a.Name == "" {
		return d
	}
	if v := mime.FormatMediaType(d, map[string]string{"filename": a.Name}); v != "" {
		return v
	}
	return d
}

// RunsInBrowser reports whether a browser would run content of media type
// mt (scripts, markup that can hold scripts): such content is served as an
// attachment.
func RunsInBrowser(mt string) bool {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return true // unreadable: the safe side
	}
	return t == "text/html" || strings.Contains(t, "xml") || strings.Contains(t, "script") || strings.Contains(t, "html")
}

// attachments resolves a prompt's attachment ids to the session's
// artifacts: each must be one of the caller's session's own.
func (s *Server) attachments(c echo.Context, ids []string) ([]artifact.Artifact, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > maxAttachments {
		return nil, fieldErr("attachmentIds", fmt.Sprintf("a prompt takes at most %d attachments", maxAttachments))
	}
	if err := s.ownSession(c); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	out := make([]artifact.Artifact, 0, len(ids))
	for i, id := range ids {
		field := fmt.Sprintf("attachmentIds[%d]", i)
		if seen[id] {
			return nil, fieldErr(field, fmt.Sprintf("%s repeats %s", field, clipID(id)))
		}
		seen[id] = true
		a, err := s.rt.Artifacts().Get(ctx, c.Param("id"), id)
		if errors.Is(err, artifact.ErrNotFound) {
			return nil, fieldErr(field, fmt.Sprintf("%s (%s) is not an artifact of this session", field, clipID(id)))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func clipID(id string) string {
	if len(id) > 40 {
		return strconv.Quote(id[:40] + "…")
	}
	return strconv.Quote(id)
}
