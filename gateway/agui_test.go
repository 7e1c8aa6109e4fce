package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/agui"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/store/memstore"
)

// aguiBody is a RunAgentInput with one user message.
func aguiBody(thread, text string) map[string]any {
	return map[string]any{"threadId": thread, "runId": "run-1",
		"messages": []any{map[string]any{"id": "m1", "role": "user", "content": text}}}
}

// apiError decodes the API's JSON error.
func apiError(t *testing.T, body []byte) (code string, fields []string) {
	t.Helper()
	var e struct {
		Error struct {
			Code   string   `json:"code"`
			Fields []string `json:"fields"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not a JSON error: %s", body)
	}
	return e.Error.Code, e.Error.Fields
}

// Everything that can be refused is refused before the stream starts, as a
// JSON error that names the field.
func TestAGUIRefusals(t *testing.T) {
	d := daemon.Start(t, daemon.Gateway(gateway.Limits{PromptBodyBytes: 64 << 10}))
	id := d.Create(nil)
	cases := []struct {
		name   string
		path   string
		body   any
		hdr    http.Header
		status int
		code   string
		fields []string
	}{
		{"no token", "/ag-ui/fake", aguiBody("t", "hi"), http.Header{"Authorization": {""}}, 401, "unauthorized", nil},
		{"another origin", "/ag-ui/fake", aguiBody("t", "hi"), http.Header{"Origin": {"http://evil.example.com"}}, 403, "origin_not_allowed", nil},
		{"another origin, a session's route", "/api/sessions/" + id + "/ag-ui", aguiBody("t", "hi"), http.Header{"Origin": {"http://evil.example.com"}}, 403, "origin_not_allowed", nil},
		{"another host", "/ag-ui/fake", aguiBody("t", "hi"), http.Header{"Host": {"evil.example.com"}}, 403, "host_not_allowed", nil},
		{"unknown agent", "/ag-ui/nope", aguiBody("t", "hi"), nil, 404, "unknown_agent", nil},
		{"unknown session", "/api/sessions/nope/ag-ui", aguiBody("t", "hi"), nil, 404, "not_found", nil},
		{"not JSON", "/ag-ui/fake", `{"threadId": `, nil, 400, "invalid_json", nil},
		{"not JSON content", "/ag-ui/fake", aguiBody("t", "hi"), http.Header{"Content-Type": {"text/plain"}}, 415, "unsupported_media_type", nil},
		{"too large", "/ag-ui/fake", aguiBody("t", strings.Repeat("x", 70<<10)), nil, 413, "too_large", nil},
		{"no threadId", "/ag-ui/fake", map[string]any{"runId": "r", "messages": []any{}}, nil, 400, "invalid_field", []string{"threadId"}},
		{"no messages", "/ag-ui/fake", map[string]any{"threadId": "t", "runId": "r"}, nil, 400, "invalid_field", []string{"messages"}},
		{"null optional", "/ag-ui/fake", map[string]any{"threadId": "t", "runId": "r", "parentRunId": nil, "messages": []any{}}, nil, 400, "invalid_field", []string{"parentRunId"}},
		{"unknown role", "/ag-ui/fake", map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "robot", "content": "x"}}}, nil, 400, "invalid_field", []string{"messages[0].role"}},
		{"bad part", "/ag-ui/fake", map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user",
			"content": []any{map[string]any{"type": "sticker"}}}}}, nil, 400, "invalid_field", []string{"messages[0].content[0].type"}},
		{"tools null", "/ag-ui/fake", map[string]any{"threadId": "t", "runId": "r", "messages": []any{}, "tools": nil}, nil, 400, "invalid_field", []string{"tools"}},
		{"empty message", "/api/sessions/" + id + "/ag-ui", aguiBody("t", "  "), nil, 400, "invalid_field", []string{"messages[0].content"}},
		{"a URL to download", "/api/sessions/" + id + "/ag-ui", map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user",
			"content": []any{map[string]any{"type": "text", "text": "look"}, map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": "https://example.invalid/cat.png"}}}}}},
			nil, 400, "invalid_field", []string{"messages[0].content[1].source.value"}},
		{"another provider's file", "/api/sessions/" + id + "/ag-ui", map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user",
			"content": []any{map[string]any{"type": "document", "source": map[string]any{"type": "file", "value": "file-abc", "provider": "openai"}}}}}},
			nil, 400, "invalid_field", []string{"messages[0].content[0].source.value"}},
		{"resume without payload", "/api/sessions/" + id + "/ag-ui", map[string]any{"threadId": "t", "runId": "r", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": "x", "status": "resolved"}}}, nil, 400, "invalid_field", []string{"resume[0].payload"}},
		{"resume bad status", "/api/sessions/" + id + "/ag-ui", map[string]any{"threadId": "t", "runId": "r", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": "x", "status": "maybe"}}}, nil, 400, "invalid_field", []string{"resume[0].status"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hdr []http.Header
			if c.hdr != nil {
				hdr = append(hdr, c.hdr)
			}
			st, body := d.Do("POST", c.path, c.body, hdr...)
			if st != c.status {
				t.Fatalf("status %d, want %d: %s", st, c.status, body)
			}
			code, fields := apiError(t, body)
			if code != c.code || (c.fields != nil && !reflect.DeepEqual(fields, c.fields)) {
				t.Fatalf("error %s %v, want %s %v: %s", code, fields, c.code, c.fields, body)
			}
		})
	}
}

// A thread whose session was deleted is over (409 session_ended); a
// session's route says the same.
func TestAGUIEndedThread(t *testing.T) {
	d := daemon.Start(t)
	id := agui.SessionID("local", "fake", "over")
	if st, body := d.Do("POST", "/ag-ui/fake", aguiBody("over", "hello")); st != 200 {
		t.Fatalf("first run: %d %s", st, body)
	}
	if st, body := d.Do("DELETE", "/api/sessions/"+id, nil); st != 200 {
		t.Fatalf("delete %s: %d %s", id, st, body)
	}
	for _, path := range []string{"/ag-ui/fake", "/api/sessions/" + id + "/ag-ui"} {
		st, body := d.Do("POST", path, aguiBody("over", "again"))
		if code, _ := apiError(t, body); st != 409 || code != "session_ended" {
			t.Fatalf("%s: %d %s", path, st, body)
		}
	}
}

// A run's stream counts against limits.sse_streams_per_subject.
func TestAGUIStreamCap(t *testing.T) {
	d := daemon.Start(t, daemon.Gateway(gateway.Limits{SSEPerSubject: 1}))
	id := d.Create(nil)
	events := d.SSE(id, "")
	defer events.Close()
	st, body := d.Do("POST", "/api/sessions/"+id+"/ag-ui", aguiBody("t", "hello"))
	if code, _ := apiError(t, body); st != 429 || code != "too_many_streams" {
		t.Fatalf("run past the cap: %d %s", st, body)
	}
}

// A user message's media parts become the prompt's attachments: a data
// source's bytes a new artifact of the session, a file source one it has.
func TestAGUIAttachments(t *testing.T) {
	d := daemon.Start(t)
	id := d.Create(nil)
	st, body := d.Do("POST", "/api/sessions/"+id+"/artifacts?name=notes.txt", "plain notes", http.Header{"Content-Type": {"text/plain"}})
	if st != 201 {
		t.Fatalf("upload: %d %s", st, body)
	}
	var up struct {
		Artifact struct {
			ID string `json:"id"`
		} `json:"artifact"`
	}
	_ = json.Unmarshal(body, &up)
	in := map[string]any{"threadId": "t", "runId": "r", "messages": []any{map[string]any{"id": "1", "role": "user", "content": []any{
		map[string]any{"type": "text", "text": "read these"},
		map[string]any{"type": "document", "source": map[string]any{"type": "data", "mimeType": "text/plain",
			"value": base64.StdEncoding.EncodeToString([]byte("inline notes"))}, "metadata": map[string]any{"filename": "inline.txt"}},
		map[string]any{"type": "document", "source": map[string]any{"type": "file", "value": up.Artifact.ID, "provider": "surfaced"}},
	}}}}
	if st, body := d.Do("POST", "/api/sessions/"+id+"/ag-ui", in); st != 200 {
		t.Fatalf("run: %d %s", st, body)
	}
	st, msgs := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	if st != 200 {
		t.Fatalf("messages: %d", st)
	}
	user := msgs["messages"].([]any)[0].(map[string]any)
	atts, _ := user["attachmentIds"].([]any)
	if user["text"] != "read these" || len(atts) != 2 || atts[1] != up.Artifact.ID {
		t.Fatalf("the user entry: %v", user)
	}
}

// A thread's session is found again after the daemon restarts (any node
// would find it: its id is derived, not looked up).
func TestAGUIThreadSurvivesRestart(t *testing.T) {
	st := memstore.New()
	d := daemon.Start(t, daemon.Config(func(c *surfaced.Config) { c.Store = st }))
	run := func(d *daemon.Daemon, text string) (string, string) {
		t.Helper()
		status, body := d.Do("POST", "/ag-ui/fake", aguiBody("kept", text))
		if status != 200 || !strings.Contains(string(body), `"type":"RUN_FINISHED"`) {
			t.Fatalf("run %q: %d %s", text, status, body)
		}
		var start struct {
			Metadata struct {
				Surfaced struct {
					SessionID string `json:"sessionId"`
				} `json:"surfaced"`
			} `json:"metadata"`
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(string(body), "data: "), "\n")
		if err := json.Unmarshal([]byte(first), &start); err != nil {
			t.Fatalf("RUN_STARTED %s: %v", first, err)
		}
		return start.Metadata.Surfaced.SessionID, string(body)
	}
	id1, _ := run(d, "one")
	d.Stop()
	d2 := daemon.Start(t, daemon.Config(func(c *surfaced.Config) { c.Store = st }))
	id2, body := run(d2, "two")
	if id1 == "" || id2 != id1 || !strings.Contains(body, `"delta":"two"`) {
		t.Fatalf("sessions %q then %q; the second run: %s", id1, id2, body)
	}
	if status, msgs := d2.JSON("GET", "/api/sessions/"+id1+"/messages", nil); status != 200 || len(msgs["messages"].([]any)) != 4 {
		t.Fatalf("transcript: %d %v", status, msgs)
	}
}
