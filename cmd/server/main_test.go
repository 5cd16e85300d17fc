package main

import (
	"os"
	"testing"

	"github.com/goovo/idem/internal/testkit/proctest"
)

// TestMain removes the binaries the process tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	proctest.Cleanup()
	os.Exit(code)
}
