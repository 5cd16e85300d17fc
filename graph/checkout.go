package graph

import (
	"embed"
	"io/fs"
	"net/http"

	idemjs "github.com/goovo/idem/clients/js"
)

// checkoutFiles is the checkout page: a person's way to try the example
// (create an order, pay it; click twice, reload in the middle) on the
// JavaScript client's fetch function.
//
//go:embed checkout
var checkoutFiles embed.FS

// checkoutHandler serves the checkout page at /checkout/ and the
// JavaScript client it imports at /checkout/idem/, both from the binary: no
// bundler, no CDN.
func checkoutHandler() http.Handler {
	page, err := fs.Sub(checkoutFiles, "checkout")
	if err != nil {
		panic(err) // "checkout" is a literal directory of the embedded tree
	}
	mux := http.NewServeMux()
	mux.Handle("/checkout/idem/", http.StripPrefix("/checkout/idem/", http.FileServerFS(idemjs.Dist)))
	mux.Handle("/checkout/", http.StripPrefix("/checkout/", http.FileServerFS(page)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Embedded files carry no modification time, so nothing tells a
		// browser when a new binary changed them: always revalidate.
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	})
}
