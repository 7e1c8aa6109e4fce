package gateway_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// chatWith is a chat body whose last user message has parts.
func chatWith(parts ...any) map[string]any {
	return map[string]any{"id": "chat", "trigger": "submit-message",
		"messages": []any{map[string]any{"id": "u1", "role": "user", "parts": parts}}}
}

func textPart(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func filePart(url, mediaType, filename string) map[string]any {
	p := map[string]any{"type": "file", "url": url, "mediaType": mediaType}
	if filename != "" {
		p["filename"] = filename
	}
	return p
}

func dataURL(mediaType string, b []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// listIDs is the ids of a session's artifacts, newest first.
func listIDs(t *testing.T, d *daemon.Daemon, session string) []string {
	t.Helper()
	st, out := d.JSON("GET", "/api/sessions/"+session+"/artifacts", nil)
	if st != 200 {
		t.Fatalf("list: %d %v", st, out)
	}
	var ids []string
	for _, a := range out["artifacts"].([]any) {
		ids = append(ids, a.(map[string]any)["id"].(string))
	}
	return ids
}

// The chat endpoint's file parts become the prompt's attachments: a data:
// URL is stored as a new artifact of the session, an artifact URL of the
// session names one it has; the user message and the transcript carry
// their ids.
func TestChatFileParts(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	pdf, signed := put(t, d, id, "?name=doc.pdf", "application/pdf", []byte("%PDF-1.7"))
	s.Wait(t, 5*time.Second, "the upload's artifact frame", testkit.IsKind("artifact"))
	img := bytes.Repeat([]byte("\x89PNG"), 300)

	chat, st, text := d.Chat(id, chatWith(
		textPart("what is in these?"),
		filePart(dataURL("image/png", img), "image/png", "cat.png"),
		filePart(d.URL+signed, "application/pdf", "ignored.pdf"), // absolute, as a client resolves it
	))
	if st != http.StatusOK {
		t.Fatalf("chat: %d %s", st, text)
	}
	if got := compact(types(readChat(t, chat))); !strings.HasSuffix(got, "finish [DONE]") {
		t.Fatalf("chat stream: %s", got)
	}
	added := s.Wait(t, 5*time.Second, "artifact added", testkit.IsKind("artifact"))
	stored := added.Data["artifact"].(map[string]any)
	if added.Data["event"] != "added" || stored["mediaType"] != "image/png" || stored["name"] != "cat.png" ||
		stored["size"] != float64(len(img)) || stored["sha256"] != sha(img) {
		t.Fatalf("artifact frame %s", added.Raw)
	}
	um := s.Wait(t, 5*time.Second, "user message", testkit.IsChat("data-user-message"))
	ids, _ := um.Data["data"].(map[string]any)["attachmentIds"].([]any)
	if len(ids) != 2 || ids[0] != stored["id"] || ids[1] != pdf["id"] || strings.Contains(string(um.Raw), "base64") {
		t.Fatalf("data-user-message %s", um.Raw)
	}
	// The stored bytes are the part's.
	resp, body := raw(t, "GET", d.URL+"/api/artifacts/"+stored["id"].(string)+"/content", nil, bearer(d.Token))
	if resp.StatusCode != 200 || !bytes.Equal(body, img) || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("content: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	_, out := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	first := out["messages"].([]any)[0].(map[string]any)
	if got, _ := first["attachmentIds"].([]any); first["role"] != "user" || len(got) != 2 || got[0] != stored["id"] || got[1] != pdf["id"] {
		t.Fatalf("transcript %v", first)
	}

	// Files alone are a prompt; a percent-encoded data: URL too, and the
	// session's own artifact path.
	chat, st, text = d.Chat(id, chatWith(
		filePart("data:,hello%20there", "text/plain", ""),
		filePart("/api/sessions/"+id+"/artifacts/"+pdf["id"].(string), "application/pdf", ""),
	))
	if st != http.StatusOK {
		t.Fatalf("files alone: %d %s", st, text)
	}
	readChat(t, chat)
	if got := listIDs(t, d, id); len(got) != 3 {
		t.Fatalf("artifacts after two chats: %v", got)
	}
	plain := s.Wait(t, 5*time.Second, "artifact added", testkit.IsKind("artifact")).Data["artifact"].(map[string]any)
	resp, body = raw(t, "GET", d.URL+"/api/artifacts/"+plain["id"].(string)+"/content", nil, bearer(d.Token))
	if resp.StatusCode != 200 || string(body) != "hello there" {
		t.Fatalf("percent-encoded content: %d %q", resp.StatusCode, body)
	}
}

// A file part the daemon cannot attach is refused before the prompt goes
// out, and what the request stored is deleted: the session keeps no
// artifact of a refused chat, and no turn runs.
func TestChatFilePartsRefused(t *testing.T) {
	d, _ := artifactDaemon(t)
	bob := d.As(bobToken)
	id := d.Create(nil)
	other := d.Create(nil)
	ended := d.Create(nil)
	if st, out := d.JSON("DELETE", "/api/sessions/"+ended, nil); st != 200 {
		t.Fatalf("delete: %d %v", st, out)
	}
	mine, _ := put(t, d, id, "", "image/png", []byte("mine"))
	foreign, foreignURL := put(t, d, other, "", "image/png", []byte("foreign"))
	png := dataURL("image/png", []byte("png"))
	many := []any{}
	for range 33 {
		many = append(many, filePart("data:,x", "text/plain", ""))
	}

	cases := []struct {
		name    string
		who     *daemon.Daemon
		session string
		body    map[string]any
		status  int
		code    string
		field   string
		says    string
	}{
		{"https URL", d, id, chatWith(textPart("see"), filePart("https://example.invalid/cat.png", "image/png", "")),
			400, "invalid_field", "messages[0].parts[1].url", "does not download"},
		{"ftp URL", d, id, chatWith(filePart("ftp://example.invalid/cat.png", "image/png", "")),
			400, "invalid_field", "messages[0].parts[0].url", "a ftp: URL"},
		{"another session's artifact", d, id, chatWith(filePart(foreignURL, "image/png", "")),
			400, "invalid_field", "messages[0].parts[0].url", "not an artifact of this session"},
		{"another session's artifact after a data URL", d, id, chatWith(filePart(png, "image/png", ""), filePart("/api/artifacts/"+foreign["id"].(string)+"/content", "image/png", "")),
			400, "invalid_field", "messages[0].parts[1].url", "not an artifact of this session"},
		{"a repeated artifact", d, id, chatWith(filePart("/api/artifacts/"+mine["id"].(string)+"/content", "image/png", ""), filePart("/api/artifacts/"+mine["id"].(string)+"/content", "image/png", "")),
			400, "invalid_field", "messages[0].parts[1].url", "repeats"},
		{"a bad media type", d, id, chatWith(filePart("data:,x", "no type", "")),
			400, "invalid_field", "messages[0].parts[0].mediaType", ""},
		{"a bad file name", d, id, chatWith(filePart("data:,x", "text/plain", "a\x01b")),
			400, "invalid_field", "messages[0].parts[0].filename", ""},
		{"too many files", d, id, chatWith(many...),
			400, "invalid_field", "messages[0].parts[32]", "at most 32"},
		{"over the artifact limit", d, id, chatWith(filePart(png, "image/png", ""), filePart(dataURL("application/octet-stream", make([]byte, 1<<20+1)), "application/octet-stream", "")),
			413, "too_large", "messages[0].parts[1]", ""},
		{"an ended session", d, ended, chatWith(filePart(png, "image/png", "")),
			409, "session_ended", "", ""},
		{"a foreign session", bob, id, chatWith(filePart(png, "image/png", "")),
			404, "not_found", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, st, text := c.who.Chat(c.session, c.body)
			out := decode(t, []byte(text))
			if st != c.status || daemon.ErrCode(out) != c.code || !strings.Contains(text, c.says) {
				t.Fatalf("%d %s; want %d %s saying %q", st, text, c.status, c.code, c.says)
			}
			if c.field != "" {
				fields, _ := out["error"].(map[string]any)["fields"].([]any)
				if len(fields) != 1 || fields[0] != c.field {
					t.Fatalf("fields %v; want [%s]", fields, c.field)
				}
			}
		})
	}
	if got := listIDs(t, d, id); len(got) != 1 || got[0] != mine["id"] {
		t.Fatalf("refused chats left artifacts: %v", got)
	}
	if got := listIDs(t, d, ended); len(got) != 0 {
		t.Fatalf("the ended session has artifacts: %v", got)
	}
	_, out := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	if n := len(out["messages"].([]any)); n != 0 {
		t.Fatalf("refused chats left %d transcript entries", n)
	}

	// Over the session's quota (3 MiB) on the second file: the first,
	// stored already, is deleted again.
	full := d.Create(nil)
	for i := range 3 {
		put(t, d, full, "", "application/octet-stream", bytes.Repeat([]byte{byte(i)}, 1<<20-40))
	}
	before := listIDs(t, d, full)
	_, st, text := d.Chat(full, chatWith(filePart(dataURL("text/plain", make([]byte, 100)), "text/plain", ""), filePart(dataURL("text/plain", make([]byte, 100)), "text/plain", "")))
	if st != 413 || daemon.ErrCode(decode(t, []byte(text))) != "quota_exceeded" || !strings.Contains(text, "messages[0].parts[1]") {
		t.Fatalf("over the quota: %d %s", st, text)
	}
	if after := listIDs(t, d, full); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("artifacts before %v, after the refused chat %v", before, after)
	}
}
