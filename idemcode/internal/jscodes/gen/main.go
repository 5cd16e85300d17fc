// Command gen writes the JavaScript client's codes module
// (clients/js/src/codes.ts) and its header and outcome names
// (clients/js/src/wire.ts) from package idemcode; go generate runs it in
// idemcode's directory. The client's dist/codes.js is compiled from it by
// `npm run build` in clients/js.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goovo/idem/idemcode/internal/jscodes"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jscodes:", err)
		os.Exit(1)
	}
}

func run() error {
	src, err := os.ReadFile("idemcode.go")
	if err != nil {
		return fmt.Errorf("run it in idemcode's directory (go generate ./idemcode): %w", err)
	}
	out, err := jscodes.Render(src)
	if err != nil {
		return err
	}
	if err := write(jscodes.Module, out); err != nil {
		return err
	}
	wire, err := os.ReadFile("wire.go")
	if err != nil {
		return err
	}
	if out, err = jscodes.RenderWire(wire); err != nil {
		return err
	}
	return write(jscodes.WireModule, out)
}

// write writes a module, given by its path from the repository's root,
// unless it holds out already: an unchanged file keeps its time, and npm's
// build stays quiet.
func write(module string, out []byte) error {
	path := filepath.Join("..", filepath.FromSlash(module))
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}
