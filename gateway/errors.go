package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// APIError is an error answer: {"error":{"code","message","fields?",
// "retryAfter?"}}. RetryAfter (seconds) is also the Retry-After header.
type APIError struct {
	Status     int      `json:"-"`
	Code       string   `json:"code"`
	Message    string   `json:"message"`
	Fields     []string `json:"fields,omitempty"`
	RetryAfter int      `json:"retryAfter,omitempty"`
}

// storeRetryAfter is the Retry-After of a change refused because the store
// cannot be written: the writer probes it about this often.
const storeRetryAfter = 1

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func apiErr(status int, code, msg string, fields ...string) *APIError {
	return &APIError{Status: status, Code: code, Message: msg, Fields: fields}
}

// fromPB turns a session's refusal into an API error.
func fromPB(e *pb.Error) *APIError {
	st := codes.Status(e.GetCode())
	if st == http.StatusNotFound {
		return notFound()
	}
	if st == http.StatusInternalServerError {
		return apiErr(st, codes.Internal, "internal error")
	}
	ae := apiErr(st, e.GetCode(), e.GetMessage())
	if e.GetCode() == codes.StoreUnavailable {
		ae.RetryAfter = storeRetryAfter
	}
	return ae
}

// storeUnavailable is the answer while the store cannot be used.
func storeUnavailable(msg string) *APIError {
	ae := apiErr(http.StatusServiceUnavailable, codes.StoreUnavailable, msg)
	ae.RetryAfter = storeRetryAfter
	return ae
}

func notFound() *APIError {
	return apiErr(http.StatusNotFound, codes.NotFound, "no such session")
}

// fromRequestErr maps a directory error.
func fromRequestErr(err error) *APIError {
	var quota *surfaced.QuotaError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return notFound()
	case errors.Is(err, session.ErrStoreUnavailable):
		return storeUnavailable("the session could not be read from the store; try again")
	case errors.Is(err, store.ErrOutcomeUnknown):
		return apiErr(http.StatusGatewayTimeout, codes.OutcomeUnknown, "the store did not answer in time: the change may or may not have been made")
	case errors.Is(err, store.ErrUnavailable):
		return storeUnavailable("the store cannot be written now; nothing was changed, try again")
	case errors.As(err, &quota):
		// A stored session this node has no room to wake.
		return apiErr(http.StatusTooManyRequests, codes.TooManySessions,
			fmt.Sprintf("this daemon already runs %d sessions (the limit); try again when one sleeps", quota.Count))
	case errors.Is(err, session.ErrTooManySessions):
		return apiErr(http.StatusTooManyRequests, codes.TooManySessions, "the node that serves this session runs as many sessions as it may; try again later")
	case errors.Is(err, session.ErrClosed), errors.Is(err, surfaced.ErrShuttingDown):
		return errShuttingDown()
	case errors.Is(err, session.ErrUnavailable):
		return apiErr(http.StatusServiceUnavailable, codes.Unavailable, "the session did not answer in time; try again")
	}
	return nil
}

// errorHandler writes every error as the API's JSON error; internal errors
// are logged with the request id and never leak their text.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *APIError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			ae = apiErr(he.Code, codes.NoRoute, "no such route")
		case http.StatusMethodNotAllowed:
			ae = apiErr(he.Code, codes.MethodNotAllowed, "this route does not take "+c.Request().Method)
		case http.StatusRequestEntityTooLarge:
			ae = apiErr(he.Code, codes.TooLarge, "the request body is too large")
		default:
			if he.Code >= 500 {
				ae = nil
			} else {
				ae = apiErr(he.Code, http.StatusText(he.Code), fmt.Sprint(he.Message))
			}
		}
	default:
		if mapped := fromRequestErr(err); mapped != nil {
			ae = mapped
		}
	}
	if ae == nil {
		rid := c.Response().Header().Get(echo.HeaderXRequestID)
		s.log.ErrorContext(c.Request().Context(), "internal error", "request_id", rid, "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		ae = apiErr(http.StatusInternalServerError, codes.Internal, "internal error (request id "+rid+")")
	}
	if ae.Status >= 500 && ae.Code != codes.Internal {
		s.log.WarnContext(c.Request().Context(), "request failed", "status", ae.Status, "code", ae.Code, "path", c.Request().URL.Path)
	}
	if ae.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", "Bearer")
	}
	if ae.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ae.Status)
		return
	}
	_ = c.JSON(ae.Status, map[string]*APIError{"error": ae})
}

var _ = slog.Default
