package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/gateway/guard"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

const panelSource = "export function mount(el, api) { el.textContent = api.domain; }\n"

// agentUIDaemon is a daemon whose agent "fake" ships a UI folder: a panel,
// a stylesheet, an image, and files the route must refuse (an HTML page, a
// hidden file, a directory, symbolic links out, the manifest next to ui/).
func agentUIDaemon(t *testing.T) (*daemon.Daemon, string) {
	t.Helper()
	agentDir := t.TempDir()
	outside := t.TempDir()
	ui := filepath.Join(agentDir, "ui")
	files := map[string]string{
		"demo.js":          panelSource,
		"lib/util.mjs":     "export const x = 1;\n",
		"demo.css":         ".x { color: red }\n",
		"icon.svg":         `<svg xmlns="http://www.w3.org/2000/svg"/>`,
		"page.html":        "<script>alert(1)</script>",
		".secret.js":       "secret",
		"notes.unknown":    "?",
		"dir.js/keep.js":   "",
		"../agent.json":    `{"name":"fake"}`,
		"../secret.js":     "the agent's own code",
		"lib/.git/HEAD.js": "hidden dir",
	}
	for name, body := range files {
		p := filepath.Join(ui, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "stolen.js"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"out.js":      filepath.Join(outside, "stolen.js"),
		"outdir":      outside,
		"rel.js":      "../secret.js",
		"inside.js":   "demo.js", // a link that stays inside is fine
		"lib/back.js": "../demo.js",
	} {
		if err := os.Symlink(target, filepath.Join(ui, link)); err != nil {
			t.Fatal(err)
		}
	}
	d := daemon.Start(t, daemon.AgentUI("fake", gateway.AgentUI{Dir: ui, Panels: map[string]string{"demo": "demo.js", "board": "lib/util.mjs"}}))
	return d, ui
}

func TestAgentUIServesFiles(t *testing.T) {
	d, _ := agentUIDaemon(t)
	for _, c := range []struct{ path, ctype, body string }{
		{"/agents/fake/ui/demo.js", "text/javascript; charset=utf-8", panelSource},
		{"/agents/fake/ui/lib/util.mjs", "text/javascript; charset=utf-8", "export const x = 1;\n"},
		{"/agents/fake/ui/demo.css", "text/css; charset=utf-8", ".x { color: red }\n"},
		{"/agents/fake/ui/icon.svg", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"/>`},
		{"/agents/fake/ui/inside.js", "text/javascript; charset=utf-8", panelSource},
		{"/agents/fake/ui/lib/back.js", "text/javascript; charset=utf-8", panelSource},
		{"/agents/fake/ui/%64emo.js", "text/javascript; charset=utf-8", panelSource}, // an encoded letter is that letter
	} {
		resp := get(t, d, c.path, d.Auth())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != c.body {
			t.Errorf("%s: %d %q", c.path, resp.StatusCode, body)
			continue
		}
		h := resp.Header
		if h.Get("Content-Type") != c.ctype || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-cache" ||
			h.Get("Cross-Origin-Resource-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", c.path, h)
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", c.path, csp)
		}
		if etag := h.Get("ETag"); len(etag) < 10 || etag[0] != '"' {
			t.Errorf("%s: ETag %q", c.path, etag)
		}
	}
}

func TestAgentUIETag(t *testing.T) {
	d, ui := agentUIDaemon(t)
	resp := get(t, d, "/agents/fake/ui/demo.js", d.Auth())
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	hdr := d.Auth()
	hdr.Set("If-None-Match", etag)
	resp = get(t, d, "/agents/fake/ui/demo.js", hdr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match with the ETag: %d, want 304", resp.StatusCode)
	}
	// An edited panel has a new ETag: the developer's reload sees it.
	if err := os.WriteFile(filepath.Join(ui, "demo.js"), []byte("export function mount() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp = get(t, d, "/agents/fake/ui/demo.js", hdr)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == etag || string(body) != "export function mount() {}\n" {
		t.Fatalf("after an edit: %d etag %q body %q", resp.StatusCode, resp.Header.Get("ETag"), body)
	}
	// HEAD answers the headers without the body.
	req, _ := http.NewRequest("HEAD", d.URL+"/agents/fake/ui/demo.js", nil)
	req.Header = d.Auth()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("HEAD: %d %v", resp.StatusCode, resp.Header)
	}
}

// Every path that is not a served file is the same 404, whatever the reason.
func TestAgentUIRefuses(t *testing.T) {
	d, _ := agentUIDaemon(t)
	for _, p := range []string{
		"/agents/fake/ui/",                    // a listing
		"/agents/fake/ui/lib",                 // a directory
		"/agents/fake/ui/lib/",                // a directory
		"/agents/fake/ui/dir.js",              // a directory with a served extension
		"/agents/fake/ui/nope.js",             // missing
		"/agents/fake/ui/page.html",           // a type the route does not serve
		"/agents/fake/ui/notes.unknown",       // an unknown type
		"/agents/fake/ui/.secret.js",          // hidden
		"/agents/fake/ui/lib/.git/HEAD.js",    // inside a hidden folder
		"/agents/fake/ui/out.js",              // a symbolic link out of ui/
		"/agents/fake/ui/outdir/stolen.js",    // through a linked folder out of ui/
		"/agents/fake/ui/rel.js",              // a relative link to ../
		"/agents/fake/ui/../agent.json",       // dot-dot
		"/agents/fake/ui/../secret.js",        // dot-dot
		"/agents/fake/ui/lib/../../secret.js", // dot-dot deeper
		"/agents/fake/ui/%2e%2e/secret.js",    // encoded dot-dot
		"/agents/fake/ui/..%2fsecret.js",      // encoded slash
		"/agents/fake/ui/..%2Fsecret.js",      // encoded slash, upper case
		"/agents/fake/ui/lib%2futil.mjs",      // an encoded slash even inside ui/
		"/agents/fake/ui/..%5csecret.js",      // encoded backslash
		"/agents/fake/ui/..\\secret.js",       // backslash
		"/agents/fake/ui/demo.js%00.css",      // NUL
		"/agents/fake/ui//demo.js",            // empty segment
		"/agents/fake/ui/./demo.js",           // dot segment
		"/agents/nobody/ui/demo.js",           // no such agent
		"/agents/fake/ui/demo.js/",            // a file as a folder
		"/agents/fake/ui/" + strings.Repeat("a/", 10) + "x.js",
	} {
		st, body := rawGet(t, d, p, "Authorization: Bearer "+d.Token)
		if st != 404 || !strings.Contains(body, `"not_found"`) {
			t.Errorf("%s: %d %q, want 404 not_found", p, st, body)
		}
		if strings.Contains(body, "outside") || strings.Contains(body, "agent's own code") || strings.Contains(body, "secret") {
			t.Errorf("%s leaked a file: %q", p, body)
		}
	}
	// Outside the route, and a request line the HTTP server refuses itself.
	if st, _ := rawGet(t, d, "/agents/fake/demo.js", "Authorization: Bearer "+d.Token); st != 404 {
		t.Errorf("not under ui/: %d", st)
	}
	if st, _ := rawGet(t, d, "/agents/fake/ui/%zz.js", "Authorization: Bearer "+d.Token); st != 400 {
		t.Errorf("a bad escape: %d", st)
	}
}

func TestAgentUIGatesAndAuth(t *testing.T) {
	d, _ := agentUIDaemon(t)
	const p = "/agents/fake/ui/demo.js"
	if st, _ := rawGet(t, d, p); st != 401 {
		t.Errorf("no credential: %d, want 401", st)
	}
	if st, _ := rawGet(t, d, p, "Authorization: Bearer wrong"); st != 401 {
		t.Errorf("a wrong token: %d, want 401", st)
	}
	// The browser's way: the cookie the start URL set.
	if st, body := rawGet(t, d, p, "Cookie: "+guard.DefaultCookieName+"="+d.Token); st != 200 || body != panelSource {
		t.Errorf("cookie: %d %q", st, body)
	}
	if st, out := d.JSON("GET", p, nil, http.Header{"Host": {"evil.example.com"}}); st != 403 || daemon.ErrCode(out) != "host_not_allowed" {
		t.Errorf("Host gate: %d %v", st, out)
	}
	if st, out := d.JSON("GET", p, nil, http.Header{"Origin": {"http://evil.example.com"}}); st != 403 || daemon.ErrCode(out) != "origin_not_allowed" {
		t.Errorf("Origin gate: %d %v", st, out)
	}
	if st, _ := d.Do("GET", p, nil, http.Header{"Origin": {d.URL}}); st != 200 {
		t.Errorf("the daemon's own origin: %d", st)
	}
	if st, _ := d.Do("POST", p, nil); st != 405 && st != 404 {
		t.Errorf("POST: %d", st)
	}
}

func TestAgentsListPanels(t *testing.T) {
	d, _ := agentUIDaemon(t)
	st, out := d.JSON("GET", "/api/agents", nil)
	agents, _ := out["agents"].([]any)
	if st != 200 || len(agents) != 1 {
		t.Fatalf("%d %v", st, out)
	}
	panels, _ := agents[0].(map[string]any)["panels"].(map[string]any)
	if panels["demo"] != "/agents/fake/ui/demo.js" || panels["board"] != "/agents/fake/ui/lib/util.mjs" || len(panels) != 2 {
		t.Fatalf("panels %v", panels)
	}
	// An agent without panels lists an empty map, and its UI path is a 404.
	plain := daemon.Start(t)
	_, out = plain.JSON("GET", "/api/agents", nil)
	if p := out["agents"].([]any)[0].(map[string]any)["panels"]; fmt.Sprint(p) != "map[]" {
		t.Fatalf("panels of an agent without any: %v", p)
	}
	if st, _ := plain.Do("GET", "/agents/fake/ui/demo.js", nil); st != 404 {
		t.Fatalf("an agent without a UI folder: %d", st)
	}
}

func get(t *testing.T, d *daemon.Daemon, path string, hdr http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", d.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawGet sends the request line exactly as written (no client cleans or
// re-escapes the path) and returns the status and body.
func rawGet(t *testing.T, d *daemon.Daemon, path string, headers ...string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", d.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + d.Addr + "\r\nConnection: close\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
