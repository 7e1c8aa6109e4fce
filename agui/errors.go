package agui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// Error is a refusal before a run's stream starts, written as the daemon's
// API error: {"error": {"code", "message", "fields"?, "retryAfter"?}}
// (docs/http-api.md).
type Error struct {
	Status     int
	Code       string
	Message    string
	Fields     []string
	RetryAfter int // seconds; also the Retry-After header
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func refuse(status int, code, msg string, fields ...string) *Error {
	return &Error{Status: status, Code: code, Message: msg, Fields: fields}
}

// write answers the refusal.
func (e *Error) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	type body struct {
		Code       string   `json:"code"`
		Message    string   `json:"message"`
		Fields     []string `json:"fields,omitempty"`
		RetryAfter int      `json:"retryAfter,omitempty"`
	}
	b, _ := plainjson.Marshal(map[string]body{"error": {e.Code, e.Message, e.Fields, e.RetryAfter}})
	_, _ = w.Write(append(b, '\n'))
}

// storeRetryAfter is the Retry-After of a change the store could not take:
// the store's writer probes it about this often.
const storeRetryAfter = 1

func notFound() *Error { return refuse(http.StatusNotFound, codes.NotFound, "no such session") }

func shuttingDown() *Error {
	return refuse(http.StatusServiceUnavailable, codes.ShuttingDown, "the daemon is shutting down; try again when it is back")
}

// fieldRefusal is a FieldError as the API answers it.
func fieldRefusal(err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return refuse(http.StatusBadRequest, codes.InvalidField, sentence(fe.Message), fe.Field)
	}
	return err
}

func sentence(m string) string {
	if m == "" {
		return m
	}
	m = strings.ToUpper(m[:1]) + m[1:]
	if !strings.HasSuffix(m, ".") {
		m += "."
	}
	return m
}

// fromPB is a session's refusal.
func fromPB(e *pb.Error) *Error {
	st := codes.Status(e.GetCode())
	switch st {
	case http.StatusNotFound:
		return notFound()
	case http.StatusInternalServerError:
		return refuse(st, codes.Internal, "internal error")
	}
	r := refuse(st, e.GetCode(), e.GetMessage())
	if e.GetCode() == codes.StoreUnavailable {
		r.RetryAfter = storeRetryAfter
	}
	return r
}

// fromRequestErr maps the error of a request to a session (the directory's
// and the runtime's); nil for others.
func fromRequestErr(err error) *Error {
	var quota *surfaced.QuotaError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return notFound()
	case errors.Is(err, session.ErrStoreUnavailable), errors.Is(err, store.ErrUnavailable):
		r := refuse(http.StatusServiceUnavailable, codes.StoreUnavailable, "the store cannot be written now; nothing was changed, try again")
		r.RetryAfter = storeRetryAfter
		return r
	case errors.Is(err, store.ErrOutcomeUnknown):
		return refuse(http.StatusGatewayTimeout, codes.OutcomeUnknown, "the store did not answer in time: the change may or may not have been made")
	case errors.As(err, &quota):
		if quota.Scope == surfaced.QuotaTotal {
			return refuse(http.StatusTooManyRequests, codes.TooManySessions, fmt.Sprintf("this daemon already runs %d sessions", quota.Count))
		}
		return refuse(http.StatusTooManyRequests, codes.TooManySessions, fmt.Sprintf("you already have %d open sessions; delete one first", quota.Count))
	case errors.Is(err, session.ErrTooManySessions):
		return refuse(http.StatusTooManyRequests, codes.TooManySessions, "the node that serves this session runs as many sessions as it may; try again later")
	case errors.Is(err, session.ErrClosed), errors.Is(err, surfaced.ErrShuttingDown):
		return shuttingDown()
	case errors.Is(err, session.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return refuse(http.StatusServiceUnavailable, codes.Unavailable, "the session did not answer in time; try again")
	}
	return nil
}

// artifactRefusal maps the errors of storing or finding a prompt's file,
// naming the file's field; nil for others.
func artifactRefusal(err error, field string) *Error {
	var fe *artifact.FieldError
	switch {
	case errors.As(err, &fe):
		return refuse(http.StatusBadRequest, codes.InvalidField, sentence(field+": "+fe.Message), field)
	case errors.Is(err, artifact.ErrTooLarge):
		return refuse(http.StatusRequestEntityTooLarge, codes.TooLarge, sentence(field+": "+lastPart(err)), field)
	case errors.Is(err, artifact.ErrQuotaExceeded):
		return refuse(http.StatusRequestEntityTooLarge, codes.QuotaExceeded, sentence(field+": "+lastPart(err)), field)
	case errors.Is(err, artifact.ErrSessionEnded):
		return refuse(http.StatusConflict, codes.SessionEnded, "the session has ended")
	}
	return nil
}

// lastPart drops the "artifact: too large: " of an artifact error: the code
// says it already.
func lastPart(err error) string {
	m := err.Error()
	if i := strings.LastIndex(m, ": "); i >= 0 {
		return m[i+2:]
	}
	return m
}
