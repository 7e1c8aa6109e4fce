package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// Auth is the bearer header of the daemon's token.
func (d *Daemon) Auth() http.Header {
	return http.Header{"Authorization": {"Bearer " + d.Token}}
}

// As is the daemon seen with another token.
func (d *Daemon) As(token string) *Daemon {
	return &Daemon{t: d.t, URL: d.URL, ACPURL: d.ACPURL, MCPURL: d.MCPURL, Addr: d.Addr, Token: token, TokensFile: d.TokensFile,
		Runtime: d.Runtime, Gateway: d.Gateway, ACP: d.ACP, MCP: d.MCP, AGUI: d.AGUI, Guard: d.Guard, Inspector: d.Inspector, Debug: d.Debug, Events: d.Events}
}

// Do sends a request with the token and returns the status and the raw
// body. body may be nil, a string or []byte (sent as JSON as it is) or a
// value (marshalled). Headers in hdr replace the defaults: "Host" sets the
// Host, an empty value deletes the header.
func (d *Daemon) Do(method, path string, body any, hdr ...http.Header) (int, []byte) {
	d.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, d.URL+path, r)
	if err != nil {
		d.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range d.Auth() {
		req.Header[k] = v
	}
	for _, h := range hdr {
		for k, v := range h {
			switch {
			case k == "Host":
				req.Host = v[0]
			case len(v) == 0 || v[0] == "":
				req.Header.Del(k)
			default:
				req.Header[k] = v
			}
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// JSON is Do with the body decoded as a JSON object (a body that is not one
// is under "_raw").
func (d *Daemon) JSON(method, path string, body any, hdr ...http.Header) (int, map[string]any) {
	d.t.Helper()
	st, raw := d.Do(method, path, body, hdr...)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"_raw": string(raw)}
	}
	return st, out
}

// Create creates a session (body: the POST's, nil for {}) and returns its id.
func (d *Daemon) Create(body any) string {
	d.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	st, out := d.JSON("POST", "/api/sessions", body)
	if st != http.StatusCreated {
		d.t.Fatalf("create session: %d %v", st, out)
	}
	return out["sessionId"].(string)
}

// SSE opens a session's event stream, resumed after last when it is set.
func (d *Daemon) SSE(id, last string) *testkit.SSE {
	d.t.Helper()
	h := d.Auth()
	if last != "" {
		h.Set("Last-Event-ID", last)
	}
	return testkit.OpenSSE(d.t, d.URL+"/api/sessions/"+id+"/events", h)
}

// Chat posts body (marshalled) to a session's per-turn chat endpoint and
// reads the answer's event stream: a non-200 answer is returned with its
// status and body instead.
func (d *Daemon) Chat(id string, body any) (*testkit.SSE, int, string) {
	d.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		d.t.Fatal(err)
	}
	s, status, text := testkit.TryOpenSSERequest(http.MethodPost, d.URL+"/api/sessions/"+id+"/chat", d.Auth(), b)
	if s != nil {
		d.t.Cleanup(s.Close)
	}
	return s, status, text
}

// ChatBody is the body the AI SDK's DefaultChatTransport sends for a user
// message of text.
func ChatBody(text string) map[string]any {
	return map[string]any{"id": "chat", "trigger": "submit-message", "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}},
	}}
}

// ErrCode is the code of an API error answer.
func ErrCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// SHA256Hex is a token's digest as a tokens file lists it.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// WriteTokens writes a tokens file (subject -> token) at path, atomically,
// as an operator would.
func WriteTokens(t testing.TB, path string, entries map[string]string) {
	t.Helper()
	type tok struct {
		Subject string `json:"subject"`
		SHA256  string `json:"sha256"`
	}
	var list []tok
	for subject, token := range entries {
		list = append(list, tok{Subject: subject, SHA256: SHA256Hex(token)})
	}
	b, _ := json.Marshal(map[string]any{"tokens": list})
	tmp := filepath.Join(filepath.Dir(path), ".tokens.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
