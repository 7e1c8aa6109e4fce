package gateway

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/codes"
)

// HeaderIdempotencyKey names a surface command's idempotency key over HTTP;
// HeaderIdempotentReplayed marks an answer that is the remembered result of
// an earlier attempt with the same key.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// maxIdempotencyKey is the longest idempotency key a client may send.
const maxIdempotencyKey = 255

// Idempotency keys are namespaced by who chose them: a client's own key
// (HTTP header or WebSocket field), or a WebSocket request id, which is
// unique only within its connection.
const (
	clientKeyPrefix = "client:"
	wsKeyPrefix     = "ws:"
)

// idempotencyKey returns the client's idempotency key of a command request
// (empty: none), or a 400 when the header is malformed.
func idempotencyKey(c echo.Context) (string, error) {
	vals := c.Request().Header.Values(HeaderIdempotencyKey)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", apiErr(http.StatusBadRequest, codes.InvalidIdempotencyKey, "send one Idempotency-Key header, not several")
	}
	k := vals[0]
	// The IETF draft's form is a quoted string; a bare token is common too.
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if err := checkIdempotencyKey(k); err != nil {
		return "", err
	}
	return clientKeyPrefix + k, nil
}

// checkIdempotencyKey accepts 1 to 255 visible ASCII characters but the
// double quote.
func checkIdempotencyKey(k string) error {
	bad := func(r rune) bool { return r < 0x21 || r > 0x7e || r == '"' }
	if k == "" || len(k) > maxIdempotencyKey || strings.IndexFunc(k, bad) >= 0 {
		return apiErr(http.StatusBadRequest, codes.InvalidIdempotencyKey,
			"an idempotency key is 1 to 255 visible ASCII characters (a UUID, say), without spaces or quotes inside")
	}
	return nil
}
