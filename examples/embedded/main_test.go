package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// The embedded daemon hosts its own native domain: the HTTP API runs its
// commands and lists it beside the agent's.
func TestEmbeddedNativeDomain(t *testing.T) {
	bin := testkit.Build(t, "./examples/embedded")
	s, err := Start("127.0.0.1:0", []string{bin, "agent"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	}()
	call := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, s.URL+path, bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	st, out := call("POST", "/api/sessions", "{}")
	if st != 201 {
		t.Fatalf("create: %d %v", st, out)
	}
	id := out["sessionId"].(string)
	st, out = call("POST", "/api/sessions/"+id+"/surfaces/notes/add", `{"args":{"text":"buy milk"}}`)
	if st != 200 || out["ok"] != true {
		t.Fatalf("add: %d %v", st, out)
	}
	st, out = call("POST", "/api/sessions/"+id+"/surfaces/notes/add", `{"args":{"text":"  "}}`)
	if out["ok"] != false || out["error"].(map[string]any)["code"] != "empty_note" {
		t.Fatalf("empty note: %d %v", st, out)
	}
	_, out = call("GET", "/api/sessions/"+id+"/state", "")
	notes := out["entries"].(map[string]any)["surface:notes"].(map[string]any)
	if notes["rev"] != 2.0 || len(notes["value"].(map[string]any)["items"].([]any)) != 1 {
		t.Fatalf("notes: %v", notes)
	}
	_, out = call("GET", "/api/sessions/"+id+"/surfaces", "")
	if s := out["surfaces"].([]any); len(s) != 1 || s[0].(map[string]any)["hosted"] != "native" {
		t.Fatalf("surfaces: %v", out)
	}
}
