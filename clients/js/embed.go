// Package idemjs holds the JavaScript client (the npm package
// @goovo/idem-client in this directory) for Go servers that serve it: Dist
// is its compiled ES modules, which a page imports as they are, without a
// bundler or a CDN. The example server's checkout page does
// (graph.NewHandler serves it at /checkout/).
package idemjs

import (
	"embed"
	"io/fs"
)

//go:embed dist/*.js
var dist embed.FS

// Dist holds the package's modules by file name: index.js (intents, the
// fetch function, the codes) and the modules it imports; also apollo.js,
// urql.js and react.js, which import their frameworks by bare name and so
// need an import map or a bundler, and node.js, which is for Node only.
var Dist fs.FS = func() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a literal directory of the embedded tree
	}
	return sub
}()
