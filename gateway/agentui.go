package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/gateway/guard"
)

// AgentUI is what one agent ships for the web UI: a folder of files (its
// panel modules and whatever they load) and the panel module of each
// surface domain.
type AgentUI struct {
	// Dir is the folder served at /agents/{agent}/ui/ (absolute). Only
	// regular files inside it with a known type are served: no directory
	// listings, no hidden files, no symbolic links that lead out of it.
	Dir string
	// Panels maps a surface domain to its panel module, a slash path
	// inside Dir ("demo.js").
	Panels map[string]string
}

// AgentUIPrefix is the path under which agents' UI files are served:
// /agents/{agent}/ui/{file}.
const AgentUIPrefix = "/agents/"

// maxAgentFile bounds one served UI file: panels are modules and their
// assets, not data.
const maxAgentFile = 8 << 20

// agentFileTypes are the file types an agent's UI folder may serve, by
// extension. HTML is not among them: a page of the agent's on the daemon's
// origin would be a second UI with the person's credentials.
var agentFileTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".jpg":   "image/jpeg",
	".jpeg":  "image/jpeg",
	".gif":   "image/gif",
	".webp":  "image/webp",
	".avif":  "image/avif",
	".ico":   "image/x-icon",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// agentFileCSP is the policy of a served agent file. A module's own policy
// does not constrain it (the page's does), but a file opened on its own (an
// SVG, say) runs nothing and frames nothing.
const agentFileCSP = "default-src 'none'; img-src 'self' data:; style-src 'self'; font-src 'self'; frame-ancestors 'none'; sandbox"

// panelURLs is an agent's domain → panel module URL map, for the API.
func (s *Server) panelURLs(agent string) map[string]string {
	out := map[string]string{}
	ui, ok := s.opts.AgentUI[agent]
	if !ok || ui.Dir == "" {
		return out
	}
	for _, domain := range slices.Sorted(maps.Keys(ui.Panels)) {
		out[domain] = agentFileURL(agent, ui.Panels[domain])
	}
	return out
}

// agentFileURL is the URL of a file of an agent's UI folder.
func agentFileURL(agent, rel string) string {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return AgentUIPrefix + url.PathEscape(agent) + "/ui/" + strings.Join(segs, "/")
}

// agentFile serves GET /agents/{agent}/ui/{file...} from the agent's UI
// folder. Every refusal is the same 404: a probe learns nothing about what
// is on disk.
func (s *Server) agentFile(c echo.Context) error {
	agent := c.Param("agent")
	ui, ok := s.opts.AgentUI[agent]
	if !ok || ui.Dir == "" || !s.rt.Access().Allows(guard.IdentityOf(c), agent) {
		// An agent the caller may not use does not exist for it.
		return agentFileNotFound()
	}
	rel, err := agentFilePath(c.Request().URL, agent)
	if err != nil {
		s.log.DebugContext(c.Request().Context(), "agent file refused", "agent", agent, "path", c.Request().URL.EscapedPath(), "err", err)
		return agentFileNotFound()
	}
	ctype := agentFileTypes[path.Ext(rel)]
	if ctype == "" {
		return agentFileNotFound()
	}
	data, fi, err := readAgentFile(ui.Dir, rel)
	if err != nil {
		s.log.DebugContext(c.Request().Context(), "agent file refused", "agent", agent, "file", rel, "err", err)
		return agentFileNotFound()
	}
	sum := sha256.Sum256(data)
	h := c.Response().Header()
	h.Set("Content-Type", ctype)
	h.Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	// Revalidated on every load: an agent's developer edits a panel and
	// reloads; the ETag keeps that a 304.
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Content-Security-Policy", agentFileCSP)
	http.ServeContent(c.Response(), c.Request(), "", fi.ModTime(), bytes.NewReader(data))
	return nil
}

func agentFileNotFound() *APIError {
	return apiErr(http.StatusNotFound, codes.NotFound, "no such file")
}

// agentFilePath is the file a request names inside the agent's UI folder,
// from the escaped path so that an encoded slash or backslash cannot pass
// for a separator. It refuses "..", empty and hidden segments, and
// anything fs.ValidPath would not accept.
func agentFilePath(u *url.URL, agent string) (string, error) {
	escaped := u.EscapedPath()
	rest, ok := strings.CutPrefix(escaped, AgentUIPrefix+url.PathEscape(agent)+"/ui/")
	if !ok {
		return "", fmt.Errorf("path %q is not under the agent's ui/", escaped)
	}
	lower := strings.ToLower(rest)
	for _, bad := range []string{"%2f", "%5c", "%00", `\`} {
		if strings.Contains(lower, bad) {
			return "", fmt.Errorf("path %q has an encoded separator or NUL", escaped)
		}
	}
	rel, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", escaped, err)
	}
	if !fs.ValidPath(rel) || rel == "." {
		return "", fmt.Errorf("path %q is not a clean relative path", rel)
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if strings.HasPrefix(seg, ".") {
			return "", fmt.Errorf("path %q has a hidden segment", rel)
		}
	}
	return rel, nil
}

// readAgentFile reads a regular file inside dir through an os.Root, which
// refuses symbolic links (and "..") that lead out of dir.
func readAgentFile(dir, rel string) ([]byte, fs.FileInfo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open ui folder: %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	if fi.Size() > maxAgentFile {
		return nil, nil, fmt.Errorf("%d bytes, over the %d limit", fi.Size(), maxAgentFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxAgentFile+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	if len(data) > maxAgentFile {
		return nil, nil, fmt.Errorf("over the %d limit", maxAgentFile)
	}
	return data, fi, nil
}
