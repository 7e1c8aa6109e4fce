package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/codes"
)

// decodeBody reads a JSON body into v, strictly: the content type must be
// JSON (an empty body counts as {} and needs none), the body must fit in max
// bytes, unknown fields are refused, and every error names the field.
// The body must arrive within the server's read timeout: a client that
// trickles it is answered 408 body_timeout.
func decodeBody(c echo.Context, max int64, v any) error {
	data, err := readBody(c, max)
	if err != nil {
		return err
	}
	return decodeJSON(data, v)
}

// decodeBodyLoose is decodeBody for a body whose sender may add fields of
// its own (the AI SDK's chat transport sends the app's extra body fields):
// unknown fields are ignored, everything else is as strict.
func decodeBodyLoose(c echo.Context, max int64, v any) error {
	data, err := readBody(c, max)
	if err != nil {
		return err
	}
	return decodeJSONWith(data, v, false)
}

// readBody reads a JSON body of at most max bytes; an empty body is {}.
func readBody(c echo.Context, max int64) ([]byte, error) {
	r := c.Request()
	body := http.MaxBytesReader(c.Response(), r.Body, max)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, apiErr(http.StatusRequestEntityTooLarge, codes.TooLarge, fmt.Sprintf("the request body is over the %d-byte limit", max))
		case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			c.Response().Header().Set("Connection", "close")
			return nil, apiErr(http.StatusRequestTimeout, codes.BodyTimeout, "the request body did not arrive in time")
		}
		return nil, apiErr(http.StatusBadRequest, codes.BadBody, "the request body could not be read")
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return []byte("{}"), nil
	}
	if err := requireJSON(r); err != nil {
		return nil, err
	}
	return data, nil
}

func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return apiErr(http.StatusUnsupportedMediaType, codes.UnsupportedMediaType, "send the body as application/json")
	}
	return nil
}

// decodeJSON decodes data into v strictly, mapping errors to API errors.
func decodeJSON(data []byte, v any) error { return decodeJSONWith(data, v, true) }

// decodeJSONWith decodes data into v, refusing unknown fields when strict.
func decodeJSONWith(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// Only JSON whitespace may follow the value. (dec.More is not enough:
	// it reports false before a stray } or ].)
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return apiErr(http.StatusBadRequest, codes.InvalidJSON, "the body must be one JSON value with nothing after it")
	}
	return nil
}

func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return apiErr(http.StatusBadRequest, codes.InvalidJSON, fmt.Sprintf("the body is not valid JSON (at byte %d: %v)", se.Offset, err))
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return apiErr(http.StatusBadRequest, codes.InvalidJSON, "the body must be a JSON object")
		}
		return apiErr(http.StatusBadRequest, codes.InvalidField, fmt.Sprintf("%s must be %s, not %s", field, jsonKind(te.Type.String()), te.Value), field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return apiErr(http.StatusBadRequest, codes.InvalidJSON, "the body is not valid JSON (it ends too early)")
	}
	if quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		// encoding/json quotes the key with %q: unquote it, so that the
		// error names the key the client sent, not its escaped spelling.
		name, uerr := strconv.Unquote(quoted)
		if uerr != nil {
			name = strings.Trim(quoted, `"`)
		}
		return apiErr(http.StatusBadRequest, codes.UnknownField, fmt.Sprintf("%s is not a field of this request", showField(name)), name)
	}
	return apiErr(http.StatusBadRequest, codes.InvalidJSON, "the body is not valid JSON: "+err.Error())
}

// showField is a field name as a message shows it: as it is when it is a
// plain name, quoted when it is empty or holds spaces, quotes or control
// characters, so that the message says which key was meant.
func showField(name string) string {
	plain := name != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return r == '"' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	})
	if plain {
		return name
	}
	return strconv.Quote(name)
}

func jsonKind(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "a string"
	case strings.Contains(goType, "int") || strings.Contains(goType, "float"):
		return "a number"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.HasPrefix(goType, "[]") || strings.HasPrefix(goType, "*[]"):
		return "an array"
	default:
		return "an object"
	}
}

func fieldErr(field, msg string) error {
	return apiErr(http.StatusBadRequest, codes.InvalidField, msg, field)
}
