package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

const (
	aliceToken = "alice-secret-token"
	bobToken   = "bob-secret-token-1"
)

// artifactDaemon is a daemon with two people (alice, bob), small artifact
// limits and a fake clock for signed URLs.
func artifactDaemon(t *testing.T, opts ...daemon.Option) (*daemon.Daemon, *clock.Fake) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	daemon.WriteTokens(t, tokens, map[string]string{"alice": aliceToken, "bob": bobToken})
	clk := clock.NewFake(time.Now())
	d := daemon.Start(t, append([]daemon.Option{
		daemon.Guard(func(c *guard.Config) { c.TokensFile = tokens }),
		daemon.Config(func(c *surfaced.Config) {
			c.Artifacts = artifact.Limits{MaxBytes: 1 << 20, SessionBytes: 3 << 20}
			c.Clock = clk
		}),
	}, opts...)...)
	return d.As(aliceToken), clk
}

// raw sends a request with the given headers only (no token unless given).
func raw(t *testing.T, method, u string, body io.Reader, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return out
}

func errCode(t *testing.T, b []byte) string { return daemon.ErrCode(decode(t, b)) }

// upload POSTs data as a raw body and returns the answer.
func upload(t *testing.T, d *daemon.Daemon, session, query, contentType string, data []byte, h http.Header) (int, map[string]any) {
	t.Helper()
	hdr := bearer(d.Token)
	if contentType != "" {
		hdr.Set("Content-Type", contentType)
	}
	for k, v := range h {
		hdr[k] = v
	}
	resp, b := raw(t, "POST", d.URL+"/api/sessions/"+session+"/artifacts"+query, bytes.NewReader(data), hdr)
	return resp.StatusCode, decode(t, b)
}

// put uploads and fails the test unless it is stored; it returns the
// artifact's JSON and its signed URL.
func put(t *testing.T, d *daemon.Daemon, session, query, contentType string, data []byte) (map[string]any, string) {
	t.Helper()
	st, out := upload(t, d, session, query, contentType, data, nil)
	if st != http.StatusCreated {
		t.Fatalf("upload: %d %v", st, out)
	}
	return out["artifact"].(map[string]any), out["url"].(string)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestArtifactUpload(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	data := bytes.Repeat([]byte("png!"), 1000)

	a, u := put(t, d, id, "?name=cat%20%C3%A9.png", "image/png", data)
	if a["sessionId"] != id || a["mediaType"] != "image/png" || a["size"] != float64(len(data)) || a["sha256"] != sha(data) ||
		a["name"] != "cat é.png" || !strings.HasPrefix(a["id"].(string), "att_") || a["createdAt"] == nil || a["meta"] != nil {
		t.Errorf("artifact %v", a)
	}
	if !strings.HasPrefix(u, "/api/artifacts/"+a["id"].(string)+"/content?exp=") || !strings.Contains(u, "&sig=") {
		t.Errorf("url %q", u)
	}

	// Meta, derivedFrom, a media type with parameters.
	st, out := upload(t, d, id, "?derivedFrom="+a["id"].(string), "text/plain; charset=UTF-8", []byte("caption"),
		http.Header{artifactMetaHeader: {`{"seed": 7, "model": "m"}`}})
	if st != 201 {
		t.Fatalf("with meta: %d %v", st, out)
	}
	b := out["artifact"].(map[string]any)
	if b["derivedFrom"] != a["id"] || b["mediaType"] != "text/plain; charset=UTF-8" || b["meta"].(map[string]any)["seed"] != 7.0 {
		t.Errorf("artifact %v", b)
	}

	// No Content-Type: bytes.
	st, out = upload(t, d, id, "", "", []byte{1, 2, 3}, nil)
	if st != 201 || out["artifact"].(map[string]any)["mediaType"] != "application/octet-stream" {
		t.Errorf("no content type: %d %v", st, out)
	}

	// multipart/form-data, field file (another field before it is skipped).
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("note", "ignored")
	ph := textproto.MIMEHeader{}
	ph.Set("Content-Disposition", `form-data; name="file"; filename="report.pdf"`)
	ph.Set("Content-Type", "application/pdf")
	pw, _ := mw.CreatePart(ph)
	pw.Write([]byte("%PDF-1.7 ..."))
	mw.Close()
	st, out = upload(t, d, id, "", mw.FormDataContentType(), body.Bytes(), nil)
	if st != 201 {
		t.Fatalf("multipart: %d %v", st, out)
	}
	if m := out["artifact"].(map[string]any); m["name"] != "report.pdf" || m["mediaType"] != "application/pdf" || m["size"] != 12.0 {
		t.Errorf("multipart artifact %v", m)
	}

	// Refusals, each naming the field.
	for name, tc := range map[string]struct {
		query, ct string
		body      []byte
		h         http.Header
		status    int
		code      string
		field     string
	}{
		"bad media type":     {"", "not a type", []byte("x"), nil, 400, "invalid_field", "mediaType"},
		"bad name":           {"?name=a%0Ab", "text/plain", []byte("x"), nil, 400, "invalid_field", "name"},
		"unknown derivedFrm": {"?derivedFrom=" + artifact.NewID(), "text/plain", []byte("x"), nil, 400, "invalid_field", "derivedFrom"},
		"meta not JSON":      {"", "text/plain", []byte("x"), http.Header{artifactMetaHeader: {"{"}}, 400, "invalid_field", "meta"},
		"meta not an object": {"", "text/plain", []byte("x"), http.Header{artifactMetaHeader: {"[1]"}}, 400, "invalid_field", "meta"},
		"meta too large": {"", "text/plain", []byte("x"), http.Header{artifactMetaHeader: {`{"a":"` + strings.Repeat("a", 16<<10) + `"}`}},
			400, "invalid_field", "meta"},
		"two meta headers":   {"", "text/plain", []byte("x"), http.Header{artifactMetaHeader: {"{}", "{}"}}, 400, "invalid_field", "meta"},
		"multipart, no file": {"", "multipart/form-data; boundary=xyz", []byte("--xyz\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n--xyz--\r\n"), nil, 400, "invalid_field", "file"},
		"broken multipart":   {"", "multipart/form-data; boundary=xyz", []byte("garbage"), nil, 400, "bad_body", ""},
	} {
		st, out := upload(t, d, id, tc.query, tc.ct, tc.body, tc.h)
		fields, _ := out["error"].(map[string]any)["fields"].([]any)
		if st != tc.status || daemon.ErrCode(out) != tc.code || (tc.field != "" && (len(fields) != 1 || fields[0] != tc.field)) {
			t.Errorf("%s: %d %v, want %d %s on %s", name, st, out, tc.status, tc.code, tc.field)
		}
	}
}

const artifactMetaHeader = "Surfaced-Artifact-Meta"

func TestArtifactLimits(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	// Over the per-artifact limit, announced: refused before the body is
	// sent (the client waits for 100 Continue, which never comes).
	big := bytes.Repeat([]byte{7}, 1<<20+1)
	req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+id+"/artifacts", bytes.NewReader(big))
	req.Header = bearer(d.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Expect", "100-continue")
	tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || errCode(t, b) != "too_large" {
		t.Errorf("announced too large: %d %s", resp.StatusCode, b)
	}
	// Over it, streamed without a length: refused when the bytes pass it.
	resp, b = raw(t, "POST", d.URL+"/api/sessions/"+id+"/artifacts", io.MultiReader(bytes.NewReader(big)),
		http.Header{"Authorization": {"Bearer " + d.Token}, "Content-Type": {"application/octet-stream"}})
	if resp.StatusCode != 413 || errCode(t, b) != "too_large" {
		t.Errorf("streamed too large: %d %s", resp.StatusCode, b)
	}
	// Exactly the limit passes.
	put(t, d, id, "", "application/octet-stream", big[:1<<20])
	put(t, d, id, "", "application/octet-stream", bytes.Repeat([]byte{8}, 1<<20))
	put(t, d, id, "", "application/octet-stream", bytes.Repeat([]byte{9}, 1<<20-10))
	// The session's quota (3 MiB): 10 bytes left.
	st, out := upload(t, d, id, "", "text/plain", []byte("eleven byte"), nil)
	if st != 413 || daemon.ErrCode(out) != "quota_exceeded" {
		t.Errorf("over the quota: %d %v", st, out)
	}
	put(t, d, id, "", "text/plain", []byte("ten bytes!"))
	// Another session has a quota of its own.
	put(t, d, d.Create(nil), "", "application/octet-stream", big[:1<<20])
}

func TestArtifactReadListDelete(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	other := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))

	var ids []string   // in the order put
	var byAge []string // newest first: by createdAt, then id
	var stamps []string
	for i, mt := range []string{"image/png", "text/plain", "image/jpeg", "application/json"} {
		a, _ := put(t, d, id, fmt.Sprintf("?name=n%d", i), mt, []byte(fmt.Sprintf("artifact %d", i)))
		ids = append(ids, a["id"].(string))
		stamps = append(stamps, a["createdAt"].(string)+" "+a["id"].(string))
		ev := s.Wait(t, 5*time.Second, "artifact frame", testkit.IsKind("artifact"))
		if ev.Data["event"] != "added" || ev.Data["artifact"].(map[string]any)["id"] != a["id"] ||
			ev.Data["artifact"].(map[string]any)["sha256"] != a["sha256"] {
			t.Fatalf("frame %s for %v", ev.Raw, a)
		}
	}
	otherArt, _ := put(t, d, other, "", "image/png", []byte("other session"))
	// Two puts may share a millisecond: then the greater id comes first.
	sort.Slice(stamps, func(i, j int) bool {
		ti, _ := time.Parse(time.RFC3339Nano, strings.Fields(stamps[i])[0])
		tj, _ := time.Parse(time.RFC3339Nano, strings.Fields(stamps[j])[0])
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return strings.Fields(stamps[i])[1] > strings.Fields(stamps[j])[1]
	})
	for _, st := range stamps {
		byAge = append(byAge, strings.Fields(st)[1])
	}
	images := []string{}
	for _, x := range byAge {
		if x == ids[0] || x == ids[2] {
			images = append(images, x)
		}
	}

	list := func(query string) ([]string, string) {
		t.Helper()
		st, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts"+query, nil)
		if st != 200 {
			t.Fatalf("list %s: %d %v", query, st, out)
		}
		var got []string
		for _, a := range out["artifacts"].([]any) {
			got = append(got, a.(map[string]any)["id"].(string))
		}
		next, _ := out["nextCursor"].(string)
		return got, next
	}
	if got, next := list(""); strings.Join(got, ",") != strings.Join(byAge, ",") || next != "" {
		t.Errorf("newest first: %v (%q), want %v", got, next, byAge)
	}
	if got, _ := list("?mediaType=image/*"); strings.Join(got, ",") != strings.Join(images, ",") {
		t.Errorf("image/*: %v, want %v", got, images)
	}
	page1, next := list("?limit=3")
	page2, last := list("?limit=3&cursor=" + url.QueryEscape(next))
	if strings.Join(append(page1, page2...), ",") != strings.Join(byAge, ",") || len(page1) != 3 || last != "" {
		t.Errorf("paging: %v %v %q", page1, page2, last)
	}
	for q, field := range map[string]string{"?limit=0": "limit", "?limit=501": "limit", "?limit=x": "limit", "?cursor=nope": "cursor",
		"?mediaType=image": "mediaType"} {
		st, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts"+q, nil)
		if st != 400 || daemon.ErrCode(out) != "invalid_field" || out["error"].(map[string]any)["fields"].([]any)[0] != field {
			t.Errorf("list %s: %d %v", q, st, out)
		}
	}

	st, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts/"+ids[1], nil)
	if st != 200 || out["artifact"].(map[string]any)["name"] != "n1" || !strings.Contains(out["url"].(string), ids[1]) {
		t.Errorf("get: %d %v", st, out)
	}
	// Another session's artifact, a missing one, a malformed id: 404 alike.
	for _, att := range []string{otherArt["id"].(string), artifact.NewID(), "att_x", "%2e%2e"} {
		if st, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts/"+att, nil); st != 404 || daemon.ErrCode(out) != "not_found" {
			t.Errorf("get %s: %d %v", att, st, out)
		}
		if st, out := d.JSON("DELETE", "/api/sessions/"+id+"/artifacts/"+att, nil); st != 404 || daemon.ErrCode(out) != "not_found" {
			t.Errorf("delete %s: %d %v", att, st, out)
		}
	}

	// Delete: later reads answer 404, the signed URL too.
	_, u := put(t, d, id, "", "text/plain", []byte("doomed"))
	doomed := strings.TrimSuffix(strings.TrimPrefix(strings.Split(u, "?")[0], "/api/artifacts/"), "/content")
	s.Wait(t, 5*time.Second, "added", testkit.IsKind("artifact"))
	if st, out := d.JSON("DELETE", "/api/sessions/"+id+"/artifacts/"+doomed, nil); st != 200 || out["ok"] != true {
		t.Fatalf("delete: %d %v", st, out)
	}
	ev := s.Wait(t, 5*time.Second, "deleted frame", testkit.IsKind("artifact"))
	if ev.Data["event"] != "deleted" || ev.Data["artifact"].(map[string]any)["id"] != doomed {
		t.Errorf("frame %s", ev.Raw)
	}
	if st, _ := d.JSON("GET", "/api/sessions/"+id+"/artifacts/"+doomed, nil); st != 404 {
		t.Errorf("get after delete: %d", st)
	}
	if resp, _ := raw(t, "GET", d.URL+"/api/artifacts/"+doomed+"/content", nil, bearer(d.Token)); resp.StatusCode != 404 {
		t.Errorf("content after delete: %d", resp.StatusCode)
	}
	if resp, _ := raw(t, "GET", d.URL+u, nil, nil); resp.StatusCode != 404 {
		t.Errorf("signed URL after delete: %d", resp.StatusCode)
	}
	if got, _ := list(""); len(got) != 4 {
		t.Errorf("listed after delete: %v", got)
	}
	if st, _ := d.JSON("DELETE", "/api/sessions/"+id+"/artifacts/"+doomed, nil); st != 404 {
		t.Errorf("second delete: %d", st)
	}

	// An ended session: its artifacts are read and deleted, not added.
	if st, _ := d.JSON("DELETE", "/api/sessions/"+id, nil); st != 200 {
		t.Fatal("end")
	}
	if st, out := upload(t, d, id, "", "text/plain", []byte("late"), nil); st != 409 || daemon.ErrCode(out) != "session_ended" {
		t.Errorf("upload to an ended session: %d %v", st, out)
	}
	if got, _ := list(""); len(got) != 4 {
		t.Errorf("an ended session lists %v", got)
	}
	if st, _ := d.JSON("DELETE", "/api/sessions/"+id+"/artifacts/"+ids[0], nil); st != 200 {
		t.Errorf("delete in an ended session: %d", st)
	}
}

// Ownership exactly as for sessions: another subject's session or
// artifact is a 404 like a missing one, on every route.
func TestArtifactForeignSubjects(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	a, u := put(t, d, id, "", "text/plain", []byte("alice's"))
	att := a["id"].(string)
	bob := d.As(bobToken)
	missing := "does-not-exist"
	for _, sid := range []string{id, missing} {
		for _, tc := range []struct{ method, path string }{
			{"GET", "/api/sessions/" + sid + "/artifacts"},
			{"GET", "/api/sessions/" + sid + "/artifacts/" + att},
			{"DELETE", "/api/sessions/" + sid + "/artifacts/" + att},
			{"DELETE", "/api/sessions/" + sid + "?purge=true"},
		} {
			st, out := bob.JSON(tc.method, tc.path, nil)
			if st != 404 || daemon.ErrCode(out) != "not_found" {
				t.Errorf("bob %s %s: %d %v", tc.method, tc.path, st, out)
			}
		}
		st, out := upload(t, bob, sid, "", "text/plain", []byte("x"), nil)
		if st != 404 || daemon.ErrCode(out) != "not_found" {
			t.Errorf("bob uploads to %s: %d %v", sid, st, out)
		}
		st, out = bob.JSON("POST", "/api/sessions/"+sid+"/prompt", map[string]any{"message": "hi", "attachmentIds": []string{att}})
		if st != 404 || daemon.ErrCode(out) != "not_found" {
			t.Errorf("bob prompts %s with alice's attachment: %d %v", sid, st, out)
		}
	}
	// The bytes: bob's credential reaches nothing, like a missing artifact...
	for _, target := range []string{att, artifact.NewID()} {
		resp, b := raw(t, "GET", d.URL+"/api/artifacts/"+target+"/content", nil, bearer(bobToken))
		if resp.StatusCode != 404 || errCode(t, b) != "not_found" {
			t.Errorf("bob reads %s: %d %s", target, resp.StatusCode, b)
		}
	}
	// ...but a signed URL is for whoever holds it.
	if resp, b := raw(t, "GET", d.URL+u, nil, bearer(bobToken)); resp.StatusCode != 200 || string(b) != "alice's" {
		t.Errorf("bob with alice's signed URL: %d %s", resp.StatusCode, b)
	}
	// Nothing of alice's changed.
	if st, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts/"+att, nil); st != 200 {
		t.Errorf("alice's artifact after bob's tries: %d %v", st, out)
	}
}

func TestArtifactContent(t *testing.T) {
	d, clk := artifactDaemon(t)
	id := d.Create(nil)
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	a, u := put(t, d, id, "?name=letters.txt", "text/plain; charset=utf-8", data)
	att := a["id"].(string)
	content := d.URL + "/api/artifacts/" + att + "/content"

	check := func(what string, resp *http.Response) {
		t.Helper()
		h := resp.Header
		for k, want := range map[string]string{
			"Content-Type":            "text/plain; charset=utf-8",
			"Etag":                    `"` + sha(data) + `"`,
			"Accept-Ranges":           "bytes",
			"X-Content-Type-Options":  "nosniff",
			"Content-Security-Policy": "sandbox",
			"Content-Disposition":     `inline; filename=letters.txt`,
		} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: %s: %q, want %q", what, k, got, want)
			}
		}
		if cc := h.Get("Cache-Control"); !strings.HasPrefix(cc, "private, max-age=") || !strings.HasSuffix(cc, ", immutable") {
			t.Errorf("%s: Cache-Control %q", what, cc)
		}
	}
	// The owner's token.
	resp, b := raw(t, "GET", content, nil, bearer(aliceToken))
	if resp.StatusCode != 200 || !bytes.Equal(b, data) || resp.Header.Get("Content-Length") != fmt.Sprint(len(data)) {
		t.Fatalf("owner: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	check("owner", resp)
	if cc := resp.Header.Get("Cache-Control"); cc != "private, max-age=3600, immutable" {
		t.Errorf("owner Cache-Control %q", cc)
	}
	// The owner's cookie.
	resp, b = raw(t, "GET", content, nil, http.Header{"Cookie": {guard.DefaultCookieName + "=" + aliceToken}})
	if resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Errorf("owner's cookie: %d %s", resp.StatusCode, b)
	}
	// If-None-Match: 304.
	resp, b = raw(t, "GET", content, nil, http.Header{"Authorization": {"Bearer " + aliceToken}, "If-None-Match": {`"` + sha(data) + `"`}})
	if resp.StatusCode != 304 || len(b) != 0 {
		t.Errorf("If-None-Match: %d %q", resp.StatusCode, b)
	}
	// Range: 206.
	resp, b = raw(t, "GET", content, nil, http.Header{"Authorization": {"Bearer " + aliceToken}, "Range": {"bytes=10-19"}})
	if resp.StatusCode != 206 || string(b) != "abcdefghij" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", len(data)) {
		t.Errorf("Range: %d %q %q", resp.StatusCode, b, resp.Header.Get("Content-Range"))
	}
	check("range", resp)
	resp, _ = raw(t, "GET", content, nil, http.Header{"Authorization": {"Bearer " + aliceToken}, "Range": {"bytes=100-200"}})
	if resp.StatusCode != 416 {
		t.Errorf("unsatisfiable Range: %d", resp.StatusCode)
	}
	// HEAD: the headers alone.
	resp, b = raw(t, "HEAD", content, nil, bearer(aliceToken))
	if resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Content-Length") != fmt.Sprint(len(data)) {
		t.Errorf("HEAD: %d %q %v", resp.StatusCode, b, resp.Header)
	}

	// The signed URL, without any credential.
	resp, b = raw(t, "GET", d.URL+u, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("signed URL: %d %s", resp.StatusCode, b)
	}
	check("signed", resp)
	resp, b = raw(t, "GET", d.URL+u, nil, http.Header{"Range": {"bytes=-5"}})
	if resp.StatusCode != 206 || string(b) != "vwxyz" {
		t.Errorf("signed URL with Range: %d %q", resp.StatusCode, b)
	}
	q, _ := url.ParseQuery(strings.SplitN(u, "?", 2)[1])
	exp, sig := q.Get("exp"), q.Get("sig")
	other, _ := put(t, d, id, "", "text/plain", []byte("other"))
	unauth := func(what, u string, want int, code string) {
		t.Helper()
		resp, b := raw(t, "GET", u, nil, nil)
		if resp.StatusCode != want || errCode(t, b) != code {
			t.Errorf("%s: %d %s, want %d %s", what, resp.StatusCode, b, want, code)
		}
		if want == 401 && resp.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s: 401 without WWW-Authenticate", what)
		}
	}
	bump := func(s string) string {
		if s[len(s)-1] == '0' {
			return s[:len(s)-1] + "1"
		}
		return s[:len(s)-1] + "0"
	}
	unauth("no signature", content, 401, "unauthorized")
	unauth("sig only", content+"?sig="+sig, 401, "unauthorized")
	unauth("exp only", content+"?exp="+exp, 401, "unauthorized")
	unauth("tampered sig", content+"?exp="+exp+"&sig="+bump(sig), 401, "unauthorized")
	unauth("tampered exp", content+"?exp="+bump(exp)+"&sig="+sig, 401, "unauthorized")
	unauth("garbage", content+"?exp=soon&sig=zz", 401, "unauthorized")
	unauth("a valid signature for another artifact", d.URL+"/api/artifacts/"+other["id"].(string)+"/content?exp="+exp+"&sig="+sig, 404, "not_found")
	unauth("a valid signature on a missing artifact", d.URL+"/api/artifacts/"+artifact.NewID()+"/content?exp="+exp+"&sig="+sig, 404, "not_found")
	// A bad credential is no credential: the signature decides.
	if resp, b := raw(t, "GET", d.URL+u, nil, bearer("wrong-token-xxxxxxxx")); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Errorf("signed URL with a bad token: %d %s", resp.StatusCode, b)
	}
	// Expiry (an hour by default), by the daemon's clock.
	clk.Advance(time.Hour + 2*time.Second)
	unauth("expired", d.URL+u, 403, "signature_expired")
	if resp, b := raw(t, "GET", d.URL+u, nil, bearer(bobToken)); resp.StatusCode != 403 || errCode(t, b) != "signature_expired" {
		t.Errorf("expired, with another subject's token: %d %s", resp.StatusCode, b)
	}
	// The owner needs no signature, expired or not.
	if resp, b := raw(t, "GET", d.URL+u, nil, bearer(aliceToken)); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Errorf("owner with an expired URL: %d %s", resp.StatusCode, b)
	}
	// A fresh URL from GET .../artifacts/{att} works again.
	_, out := d.JSON("GET", "/api/sessions/"+id+"/artifacts/"+att, nil)
	if resp, _ := raw(t, "GET", d.URL+out["url"].(string), nil, nil); resp.StatusCode != 200 {
		t.Errorf("a fresh URL: %d", resp.StatusCode)
	}
}

// Types a browser would run are sent as attachments, sandboxed, never sniffed.
func TestArtifactActiveContent(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	for mt, want := range map[string]string{
		"text/html; charset=utf-8": "attachment",
		"image/svg+xml":            "attachment",
		"application/xhtml+xml":    "attachment",
		"text/javascript":          "attachment",
		"application/ecmascript":   "attachment",
		"text/xml":                 "attachment",
		"image/png":                "inline",
		"application/pdf":          "inline",
		"text/plain":               "inline",
	} {
		_, u := put(t, d, id, "", mt, []byte("<script>alert(1)</script>"))
		resp, _ := raw(t, "GET", d.URL+u, nil, nil)
		if got := resp.Header.Get("Content-Disposition"); got != want {
			t.Errorf("%s: Content-Disposition %q, want %q", mt, got, want)
		}
		if resp.Header.Get("Content-Security-Policy") != "sandbox" || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
			resp.Header.Get("Content-Type") != mt {
			t.Errorf("%s: headers %v", mt, resp.Header)
		}
	}
	_, u := put(t, d, id, "?name=page%20%22x%22.html", "text/html", []byte("<h1>hi</h1>"))
	resp, _ := raw(t, "GET", d.URL+u, nil, nil)
	if got := resp.Header.Get("Content-Disposition"); got != `attachment; filename="page \"x\".html"` {
		t.Errorf("named page: Content-Disposition %q", got)
	}
}

func TestPromptAttachments(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	other := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	img, _ := put(t, d, id, "?name=cat.png", "image/png", []byte("png"))
	doc, _ := put(t, d, id, "", "application/pdf", []byte("pdf"))
	foreign, _ := put(t, d, other, "", "image/png", []byte("other"))

	st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "look", "attachmentIds": []string{img["id"].(string), doc["id"].(string)}})
	if st != 202 {
		t.Fatalf("prompt: %d %v", st, out)
	}
	um := s.Wait(t, 5*time.Second, "user message", testkit.IsChat("data-user-message"))
	ids, _ := um.Data["data"].(map[string]any)["attachmentIds"].([]any)
	if len(ids) != 2 || ids[0] != img["id"] || ids[1] != doc["id"] {
		t.Errorf("data-user-message %s", um.Raw)
	}
	if strings.Contains(string(um.Raw), "png") && !strings.Contains(string(um.Raw), img["id"].(string)) {
		t.Errorf("bytes in the frame: %s", um.Raw)
	}
	s.Wait(t, 5*time.Second, "finish", testkit.IsChat("finish"))
	_, out = d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	first := out["messages"].([]any)[0].(map[string]any)
	if got, _ := first["attachmentIds"].([]any); first["role"] != "user" || len(got) != 2 || got[0] != img["id"] {
		t.Errorf("transcript %v", first)
	}
	// Attachments alone are a prompt.
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "", "attachmentIds": []string{img["id"].(string)}}); st != 202 {
		t.Errorf("attachments without text: %d %v", st, out)
	}
	for name, tc := range map[string]struct {
		ids   any
		field string
	}{
		"missing":           {[]string{artifact.NewID()}, "attachmentIds[0]"},
		"malformed":         {[]string{img["id"].(string), "nope"}, "attachmentIds[1]"},
		"another session's": {[]string{foreign["id"].(string)}, "attachmentIds[0]"},
		"repeated":          {[]string{img["id"].(string), img["id"].(string)}, "attachmentIds[1]"},
		"too many":          {strings.Split(strings.Repeat("x,", 33)[:65], ","), "attachmentIds"},
		"not a list":        {"att_x", "attachmentIds"},
	} {
		st, out := d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "x", "attachmentIds": tc.ids})
		fields, _ := out["error"].(map[string]any)["fields"].([]any)
		if st != 400 || len(fields) != 1 || fields[0] != tc.field {
			t.Errorf("%s: %d %v, want 400 on %s", name, st, out, tc.field)
		}
	}
}

func TestPurgeSession(t *testing.T) {
	d, _ := artifactDaemon(t)
	id := d.Create(nil)
	keep := d.Create(nil)
	s := d.SSE(id, "")
	s.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	a, u := put(t, d, id, "", "text/plain", []byte("shared bytes"))
	kept, _ := put(t, d, keep, "", "text/plain", []byte("shared bytes"))
	d.JSON("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "canvas.model", "value": "m1"})
	d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "hello"})
	s.Wait(t, 5*time.Second, "finish", testkit.IsChat("finish"))

	if st, out := d.JSON("DELETE", "/api/sessions/"+id+"?purge=maybe", nil); st != 400 || daemon.ErrCode(out) != "invalid_field" {
		t.Errorf("purge=maybe: %d %v", st, out)
	}
	if st, out := d.JSON("DELETE", "/api/sessions/"+id+"?purge=true", nil); st != 200 || out["ok"] != true {
		t.Fatalf("purge: %d %v", st, out)
	}
	end := s.Wait(t, 5*time.Second, "end", testkit.IsKind("end"))
	if end.Data["reason"] != "deleted" {
		t.Errorf("end %s", end.Raw)
	}
	for _, path := range []string{"/api/sessions/" + id, "/api/sessions/" + id + "/messages", "/api/sessions/" + id + "/state",
		"/api/sessions/" + id + "/artifacts", "/api/sessions/" + id + "/artifacts/" + a["id"].(string)} {
		if st, out := d.JSON("GET", path, nil); st != 404 {
			t.Errorf("GET %s after purge: %d %v", path, st, out)
		}
	}
	if resp, _ := raw(t, "GET", d.URL+"/api/artifacts/"+a["id"].(string)+"/content", nil, bearer(aliceToken)); resp.StatusCode != 404 {
		t.Errorf("content after purge: %d", resp.StatusCode)
	}
	if resp, _ := raw(t, "GET", d.URL+u, nil, nil); resp.StatusCode != 404 {
		t.Errorf("signed URL after purge: %d", resp.StatusCode)
	}
	if st, _ := d.JSON("DELETE", "/api/sessions/"+id+"?purge=true", nil); st != 404 {
		t.Errorf("second purge: %d", st)
	}
	_, out := d.JSON("GET", "/api/sessions", nil)
	if n := len(out["sessions"].([]any)); n != 1 {
		t.Errorf("%d sessions listed after the purge, want 1", n)
	}
	// The other session's artifact of the same bytes is whole.
	if resp, b := raw(t, "GET", d.URL+"/api/artifacts/"+kept["id"].(string)+"/content", nil, bearer(aliceToken)); resp.StatusCode != 200 || string(b) != "shared bytes" {
		t.Errorf("the other session's artifact: %d %s", resp.StatusCode, b)
	}
}

// A signature opens the one artifact it was made for, and nothing else:
// another subject holding a valid signature (for an artifact of its own,
// or for another of the owner's) reaches the owner's artifact on no route,
// and finds it exactly as it finds a missing one.
func TestArtifactForeignSignatures(t *testing.T) {
	d, _ := artifactDaemon(t)
	bob := d.As(bobToken)
	alices := d.Create(nil)
	bobs := bob.Create(nil)
	secret, _ := put(t, d, alices, "", "text/plain", []byte("alice's secret"))
	_, aliceOther := put(t, d, alices, "", "text/plain", []byte("alice's other"))
	_, bobOwn := put(t, bob, bobs, "", "text/plain", []byte("bob's"))
	att := secret["id"].(string)
	missing := artifact.NewID()
	sigOf := func(u string) string { return "?" + strings.SplitN(u, "?", 2)[1] }

	for _, signed := range []struct{ name, query string }{
		{"bob's own signature", sigOf(bobOwn)},
		{"a signature for another of alice's", sigOf(aliceOther)},
	} {
		// The content: with bob's credential or none, alice's artifact
		// answers as a missing one does.
		for _, who := range []struct {
			name string
			h    http.Header
		}{{"bob", bearer(bobToken)}, {"no credential", nil}} {
			got, gotBody := raw(t, "GET", d.URL+"/api/artifacts/"+att+"/content"+signed.query, nil, who.h)
			want, wantBody := raw(t, "GET", d.URL+"/api/artifacts/"+missing+"/content"+signed.query, nil, who.h)
			if got.StatusCode != 404 || errCode(t, gotBody) != "not_found" || string(gotBody) != string(wantBody) || want.StatusCode != 404 {
				t.Errorf("%s, %s: alice's %d %s; a missing one %d %s", signed.name, who.name, got.StatusCode, gotBody, want.StatusCode, wantBody)
			}
		}
		// The session routes take no signature: bob's credential with one
		// is still bob's, and alice's session is missing to him.
		for _, tc := range []struct{ method, path string }{
			{"GET", "/api/sessions/" + alices + "/artifacts"},
			{"GET", "/api/sessions/" + alices + "/artifacts/" + att},
			{"DELETE", "/api/sessions/" + alices + "/artifacts/" + att},
			{"POST", "/api/sessions/" + alices + "/artifacts"},
		} {
			resp, b := raw(t, tc.method, d.URL+tc.path+signed.query, strings.NewReader("x"), bearer(bobToken))
			if resp.StatusCode != 404 || errCode(t, b) != "not_found" {
				t.Errorf("%s: bob %s %s: %d %s", signed.name, tc.method, tc.path, resp.StatusCode, b)
			}
			// Without a credential a signature opens no session route.
			resp, b = raw(t, tc.method, d.URL+tc.path+signed.query, strings.NewReader("x"), nil)
			if resp.StatusCode != 401 || errCode(t, b) != "unauthorized" {
				t.Errorf("%s: no credential %s %s: %d %s", signed.name, tc.method, tc.path, resp.StatusCode, b)
			}
		}
	}

	// Alice's artifact attached to bob's own session: refused as a missing
	// one is, by the prompt and by the chat endpoint (even by its signed
	// URL, which bob may hold).
	_, aliceSigned := put(t, d, alices, "", "image/png", []byte("png"))
	aliceSignedID := strings.TrimSuffix(strings.TrimPrefix(strings.Split(aliceSigned, "?")[0], "/api/artifacts/"), "/content")
	for _, id := range []string{aliceSignedID, missing} {
		st, out := bob.JSON("POST", "/api/sessions/"+bobs+"/prompt", map[string]any{"message": "x", "attachmentIds": []string{id}})
		if st != 400 || daemon.ErrCode(out) != "invalid_field" || !strings.Contains(fmt.Sprint(out), "not an artifact of this session") {
			t.Errorf("bob attaches %s by id: %d %v", id, st, out)
		}
	}
	for _, u := range []string{aliceSigned, "/api/artifacts/" + missing + "/content"} {
		_, st, text := bob.Chat(bobs, chatWith(filePart(u, "image/png", "")))
		if st != 400 || !strings.Contains(text, "invalid_field") || !strings.Contains(text, "not an artifact of this session") {
			t.Errorf("bob attaches %s in a chat: %d %s", u, st, text)
		}
	}
	// Nothing of alice's changed, and bob's session holds only its own.
	if st, _ := d.JSON("GET", "/api/sessions/"+alices+"/artifacts/"+att, nil); st != 200 {
		t.Errorf("alice's artifact after bob's tries: %d", st)
	}
	if got := listIDs(t, bob, bobs); len(got) != 1 {
		t.Errorf("bob's session holds %v", got)
	}
}
