// Command gen writes the JavaScript client's codes module
// (clients/js/src/codes.ts) from package idemcode; go generate runs it in
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
	path := filepath.Join("..", filepath.FromSlash(jscodes.Module))
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out) {
		return nil // unchanged: keep the file's time, and npm's build quiet
	}
	return os.WriteFile(path, out, 0o644)
}
