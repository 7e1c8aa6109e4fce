// Package webui holds the browser UI the gateway serves at "/": plain HTML, CSS and JavaScript
// embedded at build time, so `go build` needs no JavaScript toolchain and the binary carries
// everything. static/surfaced.js is also the public client library (served as /surfaced.js): the
// build of the npm package @surfaced/client (web/client), made by `make web` and checked against
// its source by the tests.
package webui

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the UI files, rooted so that "index.html", "surfaced.js", "app.js" and "style.css"
// are at the top level. The HTTP server serves "/" from index.html and the rest by name.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// fs.Sub fails only for an invalid path; "static" is a constant that go:embed checked.
		panic("webui: " + err.Error())
	}
	return sub
}
