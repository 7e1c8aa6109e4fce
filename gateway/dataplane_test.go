package gateway_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// dataAgent is the agentkit agent of the artifact-line and data-plane tests.
func dataAgent(t *testing.T) surfaced.AgentSpec {
	return surfaced.AgentSpec{Name: "data", Argv: []string{testkit.Build(t, "./internal/dataagent")}}
}

// dataSession starts a session of the data agent in a fresh cwd and waits
// until its surface takes commands.
func dataSession(t *testing.T, d *daemon.Daemon) (id, cwd string) {
	t.Helper()
	cwd = t.TempDir()
	id = d.Create(map[string]any{"agent": "data", "cwd": cwd})
	testkit.Eventually(t, 20*time.Second, func() bool {
		st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/table/surface:table", map[string]any{})
		return st == http.StatusOK && out["ok"] == true
	}, "the data agent's surface to take commands")
	return id, cwd
}

// command runs a command of the table surface and returns its data (or fails
// the test with its error unless wantCode is given, then returns nil).
func command(t *testing.T, d *daemon.Daemon, id, action string, args any, wantCode ...string) map[string]any {
	t.Helper()
	st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/table/"+action, map[string]any{"args": args})
	if st != http.StatusOK {
		t.Fatalf("%s: %d %v", action, st, out)
	}
	if len(wantCode) > 0 {
		e, _ := out["error"].(map[string]any)
		if out["ok"] != false || e["code"] != wantCode[0] {
			t.Fatalf("%s: %v, want the error %s", action, out, wantCode[0])
		}
		msg, _ := e["message"].(string)
		return map[string]any{"message": msg}
	}
	if out["ok"] != true {
		t.Fatalf("%s: %v", action, out)
	}
	data, _ := out["data"].(map[string]any)
	return data
}

// TestAgentArtifactLines: a real agent process (agentkit) puts files from its
// scratch directory, gets them back by path, lists them and signs URLs; a
// path outside the scratch directory and the session's cwd, by a link or
// not, is refused with a clear error.
func TestAgentArtifactLines(t *testing.T) {
	d, _ := artifactDaemon(t, daemon.Agents(dataAgent(t)))
	id, cwd := dataSession(t, d)
	s := d.SSE(id, "")

	put := command(t, d, id, "put", map[string]any{"text": "hello, artifacts", "name": "hello.txt"})
	art := put["artifact"].(map[string]any)
	attID := art["id"].(string)
	if !strings.HasPrefix(attID, "att_") || art["size"] != float64(len("hello, artifacts")) || art["name"] != "hello.txt" ||
		art["mediaType"] != "text/plain" || art["sessionId"] != id || art["meta"].(map[string]any)["by"] != "dataagent" {
		t.Fatalf("put: %v", put)
	}
	// The browser hears of it like of an upload.
	s.Wait(t, 10*time.Second, "the artifact frame", func(e testkit.Event) bool {
		return e.Kind == "artifact" && strings.Contains(e.Raw, attID)
	})
	// The signed URL serves the bytes without a credential.
	resp, body := raw(t, "GET", d.URL+put["url"].(string), nil, nil)
	if resp.StatusCode != http.StatusOK || string(body) != "hello, artifacts" {
		t.Fatalf("the signed URL: %d %q", resp.StatusCode, body)
	}

	// Get writes the bytes to a file in the scratch directory.
	got := command(t, d, id, "get", map[string]any{"id": attID})
	path := got["path"].(string)
	if got["text"] != "hello, artifacts" || filepath.Ext(path) != ".txt" || !strings.Contains(path, id) {
		t.Fatalf("get: %v", got)
	}
	// An upload through HTTP is the agent's to get too.
	st, up := d.JSON("POST", "/api/sessions/"+id+"/artifacts?name=up.bin", "uploaded bytes", http.Header{"Content-Type": {"application/octet-stream"}})
	if st != http.StatusCreated {
		t.Fatal(st, up)
	}
	upID := up["artifact"].(map[string]any)["id"].(string)
	if g := command(t, d, id, "get", map[string]any{"id": upID}); g["text"] != "uploaded bytes" || filepath.Ext(g["path"].(string)) != ".bin" {
		t.Fatalf("get of an upload: %v", g)
	}
	command(t, d, id, "get", map[string]any{"id": "att_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, "not_found")

	// A prompt's attachments reach the surfaced/1 agent as ids (agentkit
	// tells its model; the scripted model quotes the prompt).
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "look", "attachmentIds": []string{attID, upID}}); st != http.StatusAccepted {
		t.Fatal(st, out)
	}
	var reply string
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, out := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
		msgs, _ := out["messages"].([]any)
		if len(msgs) < 2 {
			return false
		}
		reply, _ = msgs[1].(map[string]any)["text"].(string)
		return reply != ""
	}, "the agent's reply")
	if want := "Attached artifacts:\n- " + attID + " (text/plain, hello.txt)\n- " + upID + " (application/octet-stream, up.bin)"; !strings.Contains(reply, want) {
		t.Errorf("the agent's model saw %q, want %q in it", reply, want)
	}

	// A file in the session's cwd, named relative to it, may be put.
	if err := os.WriteFile(filepath.Join(cwd, "report.md"), []byte("# report"), 0o600); err != nil {
		t.Fatal(err)
	}
	md := command(t, d, id, "put", map[string]any{"path": "report.md", "mediaType": "text/markdown"})
	if md["artifact"].(map[string]any)["size"] != float64(len("# report")) {
		t.Fatalf("put from the cwd: %v", md)
	}

	list := command(t, d, id, "list", map[string]any{"limit": 2})
	arts := list["artifacts"].([]any)
	if len(arts) != 2 || arts[0].(map[string]any)["mediaType"] != "text/markdown" || list["nextCursor"] == "" {
		t.Fatalf("list: %v", list)
	}
	rest := command(t, d, id, "list", map[string]any{"cursor": list["nextCursor"]})
	if n := len(rest["artifacts"].([]any)); n != 1 || rest["nextCursor"] != "" {
		t.Fatalf("the second page: %v", rest)
	}
	if txt := command(t, d, id, "list", map[string]any{"mediaType": "text/*"}); len(txt["artifacts"].([]any)) != 2 {
		t.Fatalf("list text/*: %v", txt)
	}
	command(t, d, id, "list", map[string]any{"mediaType": "not a type"}, "invalid_field")

	u := command(t, d, id, "url", map[string]any{"id": attID, "ttl": 60})
	if resp, body := raw(t, "GET", d.URL+u["url"].(string), nil, nil); resp.StatusCode != http.StatusOK || string(body) != "hello, artifacts" {
		t.Fatalf("url: %d %q", resp.StatusCode, body)
	}
	command(t, d, id, "url", map[string]any{"id": attID, "ttl": 100 * 3600}, "invalid_field")

	// Paths outside the scratch directory and the cwd are refused, however
	// they are named.
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(cwd, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(cwd, "dir")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secret, "../" + filepath.Base(outside) + "/secret.txt", "link.txt", "dir/secret.txt", filepath.Join(cwd, "..", filepath.Base(outside), "secret.txt")} {
		e := command(t, d, id, "put", map[string]any{"path": p}, "path_refused")
		if !strings.Contains(e["message"].(string), "outside the scratch directory and the session's working directory") {
			t.Errorf("put %s: %v", p, e)
		}
	}
	command(t, d, id, "put", map[string]any{"path": "nothing-here.txt"}, "not_found")
	command(t, d, id, "put", map[string]any{"path": "."}, "invalid_field")
	command(t, d, id, "put", map[string]any{"text": "x", "mediaType": "no type"}, "invalid_field")
	// Over the artifact limit (1 MiB in this daemon), streamed, not held.
	command(t, d, id, "putsize", map[string]any{"bytes": 2 << 20}, "too_large")
}

// TestAgentArtifactScratchDirGoesWithTheSession: a purged session's scratch
// directory is deleted.
func TestAgentArtifactScratchDirGoesWithTheSession(t *testing.T) {
	d, _ := artifactDaemon(t, daemon.Agents(dataAgent(t)))
	id, _ := dataSession(t, d)
	command(t, d, id, "put", map[string]any{"text": "x"})
	st, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts", nil)
	if st != http.StatusOK || len(out["artifacts"].([]any)) != 1 {
		t.Fatal(st, out)
	}
	g := command(t, d, id, "get", map[string]any{"id": out["artifacts"].([]any)[0].(map[string]any)["id"]})
	dir := filepath.Dir(filepath.Dir(g["path"].(string)))
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Do("DELETE", "/api/sessions/"+id+"?purge=true", nil); st != http.StatusOK {
		t.Fatal(st)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	}, "the scratch directory %s to go with the session", dir)
}

// TestDataPlaneAgentHosted: a data page of an agent-hosted domain served,
// revalidated (304 with no surface_fetch reaching the agent), made anew at a
// new rev, redirected to an artifact, and served while a command of the same
// domain waits.
func TestDataPlaneAgentHosted(t *testing.T) {
	d, _ := artifactDaemon(t, daemon.Agents(dataAgent(t)))
	id, _ := dataSession(t, d)
	base := "/api/sessions/" + id + "/surfaces/table/data/"
	fetches := func() float64 {
		t.Helper()
		st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/table/fetches", map[string]any{})
		if st != http.StatusOK {
			t.Fatal(st, out)
		}
		return out["data"].(float64)
	}
	get := func(path string, h http.Header) (*http.Response, []byte) {
		t.Helper()
		hh := d.Auth()
		for k, v := range h {
			hh[k] = v
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest("GET", d.URL+base+path, nil)
		req.Header = hh
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	resp, body := get("rows?from=10&n=3", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("page: %d %s", resp.StatusCode, body)
	}
	var page struct {
		Rows []string `json:"rows"`
		Rev  uint64   `json:"rev"`
	}
	if err := json.Unmarshal(body, &page); err != nil || strings.Join(page.Rows, ",") != "row 10,row 11,row 12" || page.Rev != 1 {
		t.Fatalf("page: %s", body)
	}
	etag := resp.Header.Get("ETag")
	if etag != `"rows-10-3-1"` || resp.Header.Get("Cache-Control") != "private, max-age=60" {
		t.Fatalf("headers: %v", resp.Header)
	}
	if n := fetches(); n != 1 {
		t.Fatalf("the agent made %v pages, want 1", n)
	}
	// Revalidated: 304 without asking the agent.
	for range 3 {
		resp, body = get("rows?from=10&n=3", http.Header{"If-None-Match": {etag}})
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 || resp.Header.Get("ETag") != etag {
			t.Fatalf("revalidation: %d %s %v", resp.StatusCode, body, resp.Header)
		}
	}
	if n := fetches(); n != 1 {
		t.Fatalf("after three 304s the agent made %v pages, want 1", n)
	}
	// Another query is another page; a wrong tag is asked again.
	if resp, _ = get("rows?from=0&n=1", http.Header{"If-None-Match": {etag}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("another page: %d", resp.StatusCode)
	}
	// A new rev: the old tag no longer answers 304 without the agent; the
	// agent's new page has a new tag.
	command(t, d, id, "setrows", map[string]any{"n": 5})
	resp, body = get("rows?from=10&n=3", http.Header{"If-None-Match": {etag}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != `"rows-10-3-2"` || !strings.Contains(string(body), `"rev":2`) {
		t.Fatalf("after a new rev: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if n := fetches(); n != 3 {
		t.Fatalf("the agent made %v pages, want 3", n)
	}
	// The agent answers 304 itself when the page's tag matches (asked, and
	// the same tag): the client gets 304.
	resp, _ = get("rows?from=10&n=3", http.Header{"If-None-Match": {`"rows-10-3-2"`}})
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("a matching tag: %d", resp.StatusCode)
	}

	// A large page: 303 to the signed URL of an artifact.
	resp, _ = get("big", nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/api/artifacts/att_") || !strings.Contains(loc, "sig=") {
		t.Fatalf("big: %d %v", resp.StatusCode, resp.Header)
	}
	if r2, b2 := raw(t, "GET", d.URL+loc, nil, nil); r2.StatusCode != http.StatusOK || string(b2) != `{"rows":["a lot"]}` {
		t.Fatalf("the artifact of the page: %d %s", r2.StatusCode, b2)
	}

	// The handler's not_found, an unknown domain, another subject.
	if resp, body = get("missing", nil); resp.StatusCode != http.StatusNotFound || errCode(t, body) != "not_found" {
		t.Fatalf("missing: %d %s", resp.StatusCode, body)
	}
	if st, out := d.JSON("GET", "/api/sessions/"+id+"/surfaces/nope/data/x", nil); st != http.StatusNotFound || daemon.ErrCode(out) != "surface_not_registered" {
		t.Fatalf("unknown domain: %d %v", st, out)
	}
	if st, out := d.As(bobToken).JSON("GET", base+"rows?from=1&n=1", nil); st != http.StatusNotFound || daemon.ErrCode(out) != "not_found" {
		t.Fatalf("another subject: %d %v", st, out)
	}

	// A page is served while a command of the same domain waits for it: the
	// command ends only when the page releases it.
	var wg sync.WaitGroup
	var blocked map[string]any
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, blocked = d.JSON("POST", "/api/sessions/"+id+"/surfaces/table/block", map[string]any{})
	}()
	testkit.Eventually(t, 8*time.Second, func() bool {
		resp, body := get("release", nil)
		return resp.StatusCode == http.StatusOK && string(body) == "true"
	}, "a page to release the waiting command")
	wg.Wait()
	if blocked["data"] != "released" {
		t.Fatalf("the command: %v", blocked)
	}
}

// TestDataPlaneNative: a native domain's Data handler, at the domain's rev,
// with its ETag honoured without calling it again; a domain without one is
// 501.
func TestDataPlaneNative(t *testing.T) {
	type notes struct{ Items []string }
	var mu sync.Mutex
	calls := 0
	dom := surface.Define("notes", notes{Items: []string{"a", "b"}}, map[string]surface.Command[notes]{
		"add": surface.Typed(func(ctx *surface.Ctx[notes], a struct{ Text string }) (any, error) {
			ctx.SetState(func(n notes) notes { n.Items = append(n.Items, a.Text); return n })
			return nil, nil
		}),
	}, surface.Data(func(ctx *surface.DataCtx[notes], req surface.DataRequest) (surface.Page, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		if req.Path != "items" {
			return surface.Page{}, surface.Errorf("not_found", "no page %s", req.Path)
		}
		return surface.Page{Data: ctx.State.Items, ETag: fmt.Sprintf("items-%d", ctx.Rev), MaxAge: 5 * time.Second}, nil
	}))
	plain := surface.Define("plain", struct{}{}, map[string]surface.Command[struct{}]{})
	d := daemon.Start(t, daemon.Domains(surfaced.DomainBinding{Domain: dom}, surfaced.DomainBinding{Domain: plain}))
	id := d.Create(nil)
	base := "/api/sessions/" + id + "/surfaces/notes/data/"
	var etag string
	testkit.Eventually(t, 10*time.Second, func() bool {
		st, raw := d.Do("GET", base+"items", nil)
		return st == http.StatusOK && string(raw) == `["a","b"]`
	}, "the native page")
	req, _ := http.NewRequest("GET", d.URL+base+"items", nil)
	req.Header = d.Auth()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag = resp.Header.Get("ETag")
	if etag != `"items-1"` || resp.Header.Get("Cache-Control") != "private, max-age=5" {
		t.Fatalf("headers %v", resp.Header)
	}
	mu.Lock()
	before := calls
	mu.Unlock()
	if st, _ := d.Do("GET", base+"items", nil, http.Header{"If-None-Match": {etag}}); st != http.StatusNotModified {
		t.Fatalf("revalidation: %d", st)
	}
	mu.Lock()
	if calls != before {
		t.Errorf("the handler was called for a 304")
	}
	mu.Unlock()
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/notes/add", map[string]any{"args": map[string]string{"text": "c"}}); st != http.StatusOK || out["ok"] != true {
		t.Fatal(st, out)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		st, raw := d.Do("GET", base+"items", nil, http.Header{"If-None-Match": {etag}})
		return st == http.StatusOK && string(raw) == `["a","b","c"]`
	}, "the page at the new rev")
	if st, out := d.JSON("GET", base+"other", nil); st != http.StatusNotFound || daemon.ErrCode(out) != "not_found" {
		t.Fatalf("missing: %d %v", st, out)
	}
	if st, out := d.JSON("GET", "/api/sessions/"+id+"/surfaces/plain/data/x", nil); st != http.StatusNotImplemented || daemon.ErrCode(out) != "no_data_plane" {
		t.Fatalf("no data plane: %d %v", st, out)
	}
	// A command named data still routes to the command.
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/notes/data", map[string]any{}); st != http.StatusOK || daemon.ErrCode(map[string]any{"error": out["error"]}) != "unknown_action" {
		t.Fatalf("POST …/data: %d %v", st, out)
	}
}

// TestSleepingSessionKeepsNoEmptyScratchDir: a session that sleeps with an
// empty scratch directory leaves none behind (the next activation makes it
// again); one whose agent left files there keeps them.
func TestSleepingSessionKeepsNoEmptyScratchDir(t *testing.T) {
	sclk := clock.NewFake(time.Now())
	d, _ := artifactDaemon(t, daemon.Agents(dataAgent(t)), daemon.Config(func(c *surfaced.Config) {
		c.SessionClock = sclk
		c.Limits.IdleTimeout = time.Minute
	}))
	full, _ := dataSession(t, d)
	empty, _ := dataSession(t, d)
	command(t, d, full, "put", map[string]any{"text": "x"})
	_, out := d.JSON("GET", "/api/sessions/"+full+"/artifacts", nil)
	g := command(t, d, full, "get", map[string]any{"id": out["artifacts"].([]any)[0].(map[string]any)["id"]})
	fullDir := filepath.Dir(filepath.Dir(g["path"].(string)))
	emptyDir := filepath.Join(filepath.Dir(fullDir), empty)
	if _, err := os.Stat(emptyDir); err != nil {
		t.Fatalf("the live session's scratch directory: %v", err)
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		sclk.Advance(time.Minute)
		_, err := os.Stat(emptyDir)
		return len(d.Runtime.LiveSessions()) == 0 && errors.Is(err, os.ErrNotExist)
	}, "both sessions asleep, the empty scratch directory gone")
	if _, err := os.Stat(g["path"].(string)); err != nil {
		t.Fatalf("the file the agent left in its scratch directory: %v", err)
	}
	// Woken (a read activates it; commands would be past their deadline on
	// the advanced session clock), the session has its directory again.
	if st, _ := d.JSON("GET", "/api/sessions/"+empty, nil); st != http.StatusOK {
		t.Fatal(st)
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, err := os.Stat(emptyDir)
		return err == nil
	}, "the woken session's scratch directory made again")
}
