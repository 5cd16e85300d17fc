package graph

import (
	"embed"
	"io/fs"
	"net/http"
)

// playgroundFiles is the page at /: a form that posts a GraphQL request to
// /query and shows the answer. gqlgen's playground loaded React and
// GraphiQL from a CDN, so it did not work without the internet; this one
// is served from the binary, like the checkout page.
//
//go:embed playground
var playgroundFiles embed.FS

// playgroundHandler serves the page (at /) and its script
// (/playground.js); NewHandler routes only those two paths to it.
func playgroundHandler() http.Handler {
	page, err := fs.Sub(playgroundFiles, "playground")
	if err != nil {
		panic(err) // "playground" is a literal directory of the embedded tree
	}
	files := http.FileServerFS(page)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
		h.Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
