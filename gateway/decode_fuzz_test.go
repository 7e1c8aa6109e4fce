package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// The shapes of the request bodies the handlers decode, field for field
// (the handlers declare theirs inline).
type (
	fuzzCreateBody struct {
		Agent *string `json:"agent"`
		Cwd   *string `json:"cwd"`
		Title *string `json:"title"`
	}
	fuzzPromptBody struct {
		Message *string `json:"message"`
		Images  []struct {
			MimeType *string `json:"mimeType"`
			Data     *string `json:"data"`
		} `json:"images"`
	}
	fuzzCommandBody struct {
		Args json.RawMessage `json:"args"`
	}
	fuzzStateBody struct {
		Key   *string         `json:"key"`
		Value json.RawMessage `json:"value"`
		Op    *string         `json:"op"`
	}
	fuzzUIBody struct {
		ID        *string `json:"id"`
		Value     *string `json:"value"`
		Confirmed *bool   `json:"confirmed"`
		Cancelled *bool   `json:"cancelled"`
	}
	fuzzWSBody struct {
		ID        *string         `json:"id"`
		Type      *string         `json:"type"`
		Domain    *string         `json:"domain"`
		Action    *string         `json:"action"`
		Args      json.RawMessage `json:"args"`
		Message   *string         `json:"message"`
		Key       *string         `json:"key"`
		Value     json.RawMessage `json:"value"`
		Op        *string         `json:"op"`
		UIID      *string         `json:"uiId"`
		Confirmed *bool           `json:"confirmed"`
		Cancelled *bool           `json:"cancelled"`
		Counts    []int           `json:"counts"` // numbers and arrays, which the real bodies lack
		Limit     int64           `json:"limit"`
		Ratio     float64         `json:"ratio"`
	}
	fuzzAbortBody struct{}
)

var fuzzBodies = []func() any{
	func() any { return new(fuzzCreateBody) },
	func() any { return new(fuzzPromptBody) },
	func() any { return new(fuzzCommandBody) },
	func() any { return new(fuzzStateBody) },
	func() any { return new(fuzzUIBody) },
	func() any { return new(fuzzWSBody) },
	func() any { return new(fuzzAbortBody) },
}

var decodeSeeds = []string{
	`{}`, ` {"agent":"demo","cwd":"/tmp","title":null} `,
	`{"message":"hi","images":[{"mimeType":"image/png","data":"iVBO"}]}`,
	`{"args":{"n":[1,2,{"x":null}]}}`, `{"key":"ui.theme","value":"dark","op":"set"}`,
	`{"id":"d1","value":"x","confirmed":true}`,
	`{"id":"w1","type":"command","domain":"demo","action":"increment","counts":[1,2],"limit":9007199254740993,"ratio":1e-3}`,
	`{"agent":1}`, `{"images":{}}`, `{"images":[1]}`, `{"limit":1e400}`, `{"counts":[1.5]}`,
	`{"nope":1}`, `{"agent":"a","agent":"b"}`, `{"AGENT":"a"}`,
	`{"":""}`, `{"a\"b":1}`, `{"line\nbreak":1}`, // unknown keys an error must still name
	`[]`, `"s"`, `null`, `1`, `{`, `{"a":}`, `{"a" 1}`,
	`{} {}`, `{} x`,
	`{}}`, `{}]`, `{"message":"hi"}]`, // trailing bytes once went unnoticed: decoder.More is false before } and ] "{}\n\t", "\xef\xbb\xbf{}",
	`{"message":"\ud800"}`, "{\"message\":\"\xff\"}",
}

// FuzzDecodeJSON feeds decodeJSON (the JSON body of every HTTP handler and
// WebSocket request) arbitrary bytes for each body shape. It never panics;
// a refusal is always an *APIError with status 400, one of the documented
// codes, a message, and the field it names; what it accepts is exactly one
// JSON value (whitespace around it), and decodes again to the same value
// once written out.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		for i := range fuzzBodies {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, shape uint8, data []byte) {
		newBody := fuzzBodies[int(shape)%len(fuzzBodies)]
		v := newBody()
		err := decodeJSON(data, v)
		if err != nil {
			checkDecodeError(t, data, err, http.StatusBadRequest)
			return
		}
		if !json.Valid(data) {
			t.Fatalf("%T accepted %q, which is not one JSON value", v, data)
		}
		out, merr := json.Marshal(v)
		if merr != nil {
			t.Fatalf("%T decoded from %q does not encode: %v", v, data, merr)
		}
		v2 := newBody()
		if err := decodeJSON(out, v2); err != nil {
			t.Fatalf("%T decoded from %q, written as %s, is refused: %v", v, data, out, err)
		}
		// Written out, the value is a fixed point (a json.RawMessage that
		// was absent reads back as null, and null writes as null).
		if out2, _ := json.Marshal(v2); !bytes.Equal(out, out2) {
			t.Fatalf("%T from %q: written as %s, read back as %s", v, data, out, out2)
		}
	})
}

// FuzzDecodeBody is decodeBody on a real request: any content type, any
// body, a small limit. Every refusal is an *APIError whose status says why
// (415 for a content type, 413 for the size, 400 for the JSON), and an
// accepted body had a JSON content type unless it was empty.
func FuzzDecodeBody(f *testing.F) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/merge-patch+json",
		"text/plain", "", "application/json; charset", "APPLICATION/JSON", "multipart/form-data; boundary=x"} {
		for _, s := range []string{``, `  `, `{}`, `{"message":"hi"}`, `{"message":"` + strings.Repeat("x", 300) + `"}`, `{}}`, `x`} {
			f.Add(ct, []byte(s))
		}
	}
	const limit = 256
	e := echo.New()
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/sessions/s/prompt", bytes.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		c := e.NewContext(req, httptest.NewRecorder())
		var v fuzzPromptBody
		err := decodeBody(c, limit, &v)
		empty := len(strings.TrimSpace(string(body))) == 0
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("%q %q: %T %v is not an API error", contentType, body, err, err)
			}
			switch ae.Status {
			case http.StatusRequestEntityTooLarge:
				if len(body) <= limit || ae.Code != "too_large" {
					t.Fatalf("%q %q (%d bytes): %v", contentType, body, len(body), ae)
				}
			case http.StatusUnsupportedMediaType:
				if empty || ae.Code != "unsupported_media_type" {
					t.Fatalf("%q %q: %v", contentType, body, ae)
				}
			default:
				checkDecodeError(t, body, err, http.StatusBadRequest)
			}
			return
		}
		if len(body) > limit {
			t.Fatalf("%q: a %d-byte body passed the %d-byte limit", contentType, len(body), limit)
		}
		if !empty {
			if err := requireJSON(req); err != nil {
				t.Fatalf("%q %q: accepted with a content type requireJSON refuses", contentType, body)
			}
			if !json.Valid(body) {
				t.Fatalf("%q %q: accepted, but it is not one JSON value", contentType, body)
			}
		} else if !reflect.DeepEqual(v, fuzzPromptBody{}) {
			t.Fatalf("an empty body decoded as %+v, not {}", v)
		}
	})
}

// checkDecodeError checks that err is a clear API error with status.
func checkDecodeError(t *testing.T, data []byte, err error, status int) {
	t.Helper()
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%q: %T %v is not an API error", data, err, err)
	}
	if ae.Status != status || strings.TrimSpace(ae.Message) == "" {
		t.Fatalf("%q: %+v, want status %d and a message", data, ae, status)
	}
	switch ae.Code {
	case "invalid_json":
		if len(ae.Fields) != 0 {
			t.Fatalf("%q: %+v names fields for a body that is not JSON", data, ae)
		}
	case "invalid_field", "unknown_field":
		if len(ae.Fields) != 1 || !strings.Contains(ae.Message, showField(ae.Fields[0])) {
			t.Fatalf("%q: %+v does not name its field", data, ae)
		}
		var tree any
		if ae.Code == "unknown_field" && json.Unmarshal(data, &tree) == nil && !hasKey(tree, ae.Fields[0]) {
			t.Fatalf("%q: %+v names a key the body does not hold", data, ae)
		}
	default:
		t.Fatalf("%q: code %q for a body that does not decode", data, ae.Code)
	}
}

// hasKey reports whether an object anywhere in the decoded JSON v has key.
func hasKey(v any, key string) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == key || hasKey(x, key) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasKey(x, key) {
				return true
			}
		}
	}
	return false
}
