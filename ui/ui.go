// Package ui is the operator console: static HTML, CSS and JavaScript
// modules embedded in the binary. The pages call the public REST API with
// the operator's key like any other client; the server only serves files.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the console's files. Mount it under a prefix with
// http.StripPrefix; a request for the prefix's root gets index.html.
func Handler() http.Handler {
	root, err := fs.Sub(static, "static")
	if err != nil {
		// The directory is embedded at build time, so this cannot happen.
		panic(err)
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Only this origin's files and API: no inline scripts, no third
		// parties, and no framing of a page that holds a key.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		files.ServeHTTP(w, r)
	})
}
