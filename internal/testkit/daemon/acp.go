package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/internal/testkit"
)

// ACPClient is a raw client of the ACP mount's Streamable HTTP transport,
// for the transport's own rules: it POSTs JSON-RPC messages and reads the
// connection's streams with real SSE clients.
type ACPClient struct {
	d       *Daemon
	t       testing.TB
	Token   string
	Agent   string
	ConnID  string
	nextID  atomic.Int64
	Conn    *testkit.SSE
	streams map[string]*testkit.SSE
	mu      sync.Mutex
}

// ACPClient returns a client with the daemon's token (Token and Agent may
// be changed before Initialize).
func (d *Daemon) ACPClient() *ACPClient {
	return &ACPClient{d: d, t: d.t, Token: d.Token, streams: map[string]*testkit.SSE{}}
}

// Header is what the client's requests carry: its token, its connection,
// the session (when set) and its agent.
func (c *ACPClient) Header(sessionID string) http.Header {
	h := http.Header{}
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	if c.ConnID != "" {
		h.Set(acpgw.HeaderConnectionID, c.ConnID)
	}
	if sessionID != "" {
		h.Set(acpgw.HeaderSessionID, sessionID)
	}
	if c.Agent != "" {
		h.Set(acpgw.HeaderAgent, c.Agent)
	}
	return h
}

// SendACP sends a raw request to the ACP mount (method, body, headers as
// given); it returns the status, the body and the response headers.
func (d *Daemon) SendACP(t testing.TB, method string, body []byte, h http.Header) (int, string, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, d.ACPURL, r)
	for k, v := range h {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, d.ACPURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Initialize opens the connection and its connection stream.
func (c *ACPClient) Initialize() map[string]any {
	c.t.Helper()
	st, body, h := c.d.SendACP(c.t, "POST", MustJSON(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw-test", "version": "1"}}}), c.Header(""))
	if st != http.StatusOK {
		c.t.Fatalf("initialize: %d %s", st, body)
	}
	c.ConnID = h.Get(acpgw.HeaderConnectionID)
	if c.ConnID == "" {
		c.t.Fatalf("initialize: no %s header", acpgw.HeaderConnectionID)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		c.t.Fatal(err)
	}
	c.Conn = testkit.OpenSSE(c.t, c.d.ACPURL, c.Header(""))
	return res
}

// Stream opens (once) the session's stream.
func (c *ACPClient) Stream(sessionID string) *testkit.SSE {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.streams[sessionID]; s != nil {
		return s
	}
	s := testkit.OpenSSE(c.t, c.d.ACPURL, c.Header(sessionID))
	c.streams[sessionID] = s
	return s
}

// CloseStream closes the session's stream, if the client opened it.
func (c *ACPClient) CloseStream(sessionID string) {
	c.mu.Lock()
	s := c.streams[sessionID]
	delete(c.streams, sessionID)
	c.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

// Request POSTs a request (202 expected) and returns its id.
func (c *ACPClient) Request(method string, params any, sessionID string) int64 {
	c.t.Helper()
	id := c.nextID.Add(1)
	st, body, _ := c.d.SendACP(c.t, "POST", MustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}), c.Header(sessionID))
	if st != http.StatusAccepted {
		c.t.Fatalf("%s: %d %s", method, st, body)
	}
	return id
}

func (c *ACPClient) Notify(method string, params any, sessionID string) {
	c.t.Helper()
	st, body, _ := c.d.SendACP(c.t, "POST", MustJSON(map[string]any{"jsonrpc": "2.0", "method": method, "params": params}), c.Header(sessionID))
	if st != http.StatusAccepted {
		c.t.Fatalf("%s: %d %s", method, st, body)
	}
}

// Response waits on a stream for the response to id.
func (c *ACPClient) Response(s *testkit.SSE, id int64) map[string]any {
	c.t.Helper()
	ev := s.Wait(c.t, 15*time.Second, fmt.Sprintf("response %d", id), func(e testkit.Event) bool {
		v, ok := e.Data["id"].(float64)
		_, isReq := e.Data["method"]
		return ok && int64(v) == id && !isReq
	})
	return ev.Data
}

// Call sends a connection-scoped request and waits for its answer on the
// connection stream.
func (c *ACPClient) Call(method string, params any) map[string]any {
	c.t.Helper()
	return c.Response(c.Conn, c.Request(method, params, ""))
}

// NewSession creates a session and opens its stream.
func (c *ACPClient) NewSession(cwd string) string {
	c.t.Helper()
	res := c.Call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	r, ok := res["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("session/new: %v", res)
	}
	sid := r["sessionId"].(string)
	c.Stream(sid)
	return sid
}

// Prompt sends a text prompt; the answer comes on the session stream.
func (c *ACPClient) Prompt(sid, text string) int64 {
	c.t.Helper()
	c.Stream(sid)
	return c.Request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}, sid)
}

// StartSlowTurn starts the fake agent's slow turn (40 chunks, 25 ms apart)
// on sid and waits for its first update; it returns the session stream and
// the prompt's id.
func (c *ACPClient) StartSlowTurn(sid string) (*testkit.SSE, int64) {
	c.t.Helper()
	s := c.Stream(sid)
	id := c.Prompt(sid, "slow")
	s.Wait(c.t, 10*time.Second, "the first chunk", func(e testkit.Event) bool { return e.Data["method"] == "session/update" })
	return s, id
}

// Turn returns the session/update kinds and texts received on s before
// the response to id, and the response.
func (c *ACPClient) Turn(sid string, id int64) (texts string, kinds []string, resp map[string]any) {
	c.t.Helper()
	s := c.Stream(sid)
	var b strings.Builder
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				c.t.Fatalf("session stream closed: %v", s.Err)
			}
			if ev.Data["method"] == "session/update" {
				u := ev.Data["params"].(map[string]any)["update"].(map[string]any)
				k := u["sessionUpdate"].(string)
				kinds = append(kinds, k)
				if k == "agent_message_chunk" {
					b.WriteString(u["content"].(map[string]any)["text"].(string))
				}
				continue
			}
			if v, ok := ev.Data["id"].(float64); ok && int64(v) == id {
				if _, isReq := ev.Data["method"]; !isReq {
					return b.String(), kinds, ev.Data
				}
			}
		case <-deadline:
			c.t.Fatalf("no answer to prompt %d; got %v", id, kinds)
		}
	}
}

// StopReason is the stopReason of a prompt's answer.
func StopReason(resp map[string]any) string {
	r, _ := resp["result"].(map[string]any)
	s, _ := r["stopReason"].(string)
	return s
}

// RPCError is the code, message and data of a JSON-RPC error answer.
func RPCError(resp map[string]any) (int, string, map[string]any) {
	e, ok := resp["error"].(map[string]any)
	if !ok {
		return 0, "", nil
	}
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	data, _ := e["data"].(map[string]any)
	return int(code), msg, data
}
