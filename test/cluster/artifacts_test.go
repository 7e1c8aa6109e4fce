package cluster_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// raw sends a request to the node with the token (unless auth is false)
// and returns the answer.
func (nd *node) raw(t testing.TB, method, path string, body []byte, h http.Header, auth bool) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, nd.base+path, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s via node %d: %v", method, path, nd.i, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// An artifact put through one node is read through every other one: its
// bytes live in the shared PostgreSQL store, the signing key too, and the
// session (on whichever node hosts it) tells its clients on every node.
func TestArtifactsAcrossNodes(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.startAll(3)
	id, host, others := e.remoteSession(t)
	in, out := others[0], others[1] // neither hosts the session
	watch := out.sse(t, id, "")
	watch.Wait(t, 20*time.Second, "ready", testkit.IsStatus("ready"))

	data := make([]byte, 5<<20+321) // several chunks
	rand.Read(data)
	resp, b := in.raw(t, "POST", "/api/sessions/"+id+"/artifacts?name=big.bin", data, http.Header{"Content-Type": {"application/octet-stream"}}, true)
	if resp.StatusCode != 201 {
		t.Fatalf("upload via node %d: %d %s", in.i, resp.StatusCode, b)
	}
	var up struct {
		Artifact map[string]any `json:"artifact"`
		URL      string         `json:"url"`
	}
	json.Unmarshal(b, &up)
	att := up.Artifact["id"].(string)
	ev := watch.Wait(t, 20*time.Second, "the artifact frame on a third node", testkit.IsKind("artifact"))
	if ev.Data["event"] != "added" || ev.Data["artifact"].(map[string]any)["id"] != att {
		t.Fatalf("frame %s", ev.Raw)
	}

	// Every node serves it: with the token, with Range, and the URL node
	// "in" signed without any credential.
	for _, nd := range e.nodes {
		resp, b := nd.raw(t, "GET", "/api/artifacts/"+att+"/content", nil, nil, true)
		if resp.StatusCode != 200 || !bytes.Equal(b, data) {
			t.Errorf("node %d (host %v): %d, %d bytes", nd.i, nd == host, resp.StatusCode, len(b))
		}
		from := 1<<20 - 10 + nd.i
		resp, b = nd.raw(t, "GET", "/api/artifacts/"+att+"/content", nil, http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", from, from+2<<20)}}, true)
		if resp.StatusCode != 206 || !bytes.Equal(b, data[from:from+2<<20+1]) {
			t.Errorf("node %d, Range: %d, %d bytes", nd.i, resp.StatusCode, len(b))
		}
		resp, b = nd.raw(t, "GET", up.URL, nil, nil, false)
		if resp.StatusCode != 200 || !bytes.Equal(b, data) {
			t.Errorf("node %d, the signed URL node %d made: %d, %d bytes", nd.i, in.i, resp.StatusCode, len(b))
		}
		var list struct {
			Artifacts []map[string]any `json:"artifacts"`
		}
		if st, err := nd.get("/api/sessions/"+id+"/artifacts", &list); st != 200 || err != nil || len(list.Artifacts) != 1 {
			t.Errorf("node %d lists %d %v %v", nd.i, st, err, list)
		}
	}

	// A prompt through a node that does not host the session attaches it.
	if st, err := out.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "see", "attachmentIds": []string{att}}, nil); st != 202 || err != nil {
		t.Fatalf("prompt with the attachment: %d %v", st, err)
	}
	um := watch.Wait(t, 20*time.Second, "user message", testkit.IsChat("data-user-message"))
	if ids, _ := um.Data["data"].(map[string]any)["attachmentIds"].([]any); len(ids) != 1 || ids[0] != att {
		t.Errorf("data-user-message %s", um.Raw)
	}

	// Deleted through one node: gone from all.
	if st, err := out.do("DELETE", "/api/sessions/"+id+"/artifacts/"+att, nil, nil); st != 200 || err != nil {
		t.Fatalf("delete via node %d: %d %v", out.i, st, err)
	}
	watch.Wait(t, 20*time.Second, "the deleted frame", func(f testkit.Event) bool { return f.Kind == "artifact" && f.Data["event"] == "deleted" })
	for _, nd := range e.nodes {
		if resp, _ := nd.raw(t, "GET", up.URL, nil, nil, false); resp.StatusCode != 404 {
			t.Errorf("node %d serves a deleted artifact: %d", nd.i, resp.StatusCode)
		}
	}

	// Purged through one node: the session is gone for every node.
	resp, b = in.raw(t, "POST", "/api/sessions/"+id+"/artifacts", []byte("kept until the purge"), http.Header{"Content-Type": {"text/plain"}}, true)
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	json.Unmarshal(b, &up)
	if st, err := in.do("DELETE", "/api/sessions/"+id+"?purge=true", nil, nil); st != 200 || err != nil {
		t.Fatalf("purge via node %d: %d %v", in.i, st, err)
	}
	end := watch.Wait(t, 20*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "deleted" {
		t.Errorf("end %s", end.Raw)
	}
	for _, nd := range e.nodes {
		// Every node forgot its route to the session's grain before the
		// purge answered: 404 at once, never a 503 while it finds out.
		if st, _ := nd.get("/api/sessions/"+id, nil); st != 404 {
			t.Errorf("node %d right after the purge: %d, want 404", nd.i, st)
		}
		if resp, _ := nd.raw(t, "GET", up.URL, nil, nil, false); resp.StatusCode != 404 {
			t.Errorf("node %d serves a purged session's artifact: %d", nd.i, resp.StatusCode)
		}
	}
}

// Sessions purged through one node while every node has a route to their
// grains (each was read through every node, a client watches each): right
// after each purge answers, every node answers 404 for the session, at
// once. Each node forgot its route and the session's owner before the
// purge answered; a node that still had them would ask a grain that is
// gone, and a request caught in its mailbox as it stops waits out its
// deadline (503 unavailable).
func TestPurgedSessionGoneOnEveryNode(t *testing.T) {
	e := newEnv(t, "automanaged", 3)
	e.startAll(3)
	const sessions = 9
	for i := 0; i < sessions; i++ {
		id := e.nodes[i%3].create(t)
		for _, nd := range e.nodes {
			nd.summary(t, id)
		}
		watch := e.nodes[(i+2)%3].sse(t, id, "")
		via := e.nodes[(i+1)%3]
		if st, err := via.do("DELETE", "/api/sessions/"+id+"?purge=true", nil, nil); st != 200 || err != nil {
			t.Fatalf("purge via node %d: %d %v", via.i, st, err)
		}
		// Every node at once, as clients after the purge would.
		sts := make([]int, len(e.nodes))
		var wg sync.WaitGroup
		for j, nd := range e.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sts[j], _ = nd.get("/api/sessions/"+id, nil)
			}()
		}
		wg.Wait()
		for j, st := range sts {
			if st != 404 {
				t.Errorf("session %d, purged via node %d: node %d answered %d right after, want 404", i, via.i, j, st)
			}
		}
		watch.Close()
	}
}
