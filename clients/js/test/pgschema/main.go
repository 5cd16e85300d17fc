// Command pgschema gives a test of the JavaScript client a PostgreSQL
// schema of its own, as idemtest.Open does for a Go test, for the example
// server the test starts: it creates a schema in TEST_DATABASE_URL's
// database (default idemtest.DefaultPostgresURL), prints a DATABASE_URL
// whose search_path selects it, and drops it when its standard input
// closes, which happens when the test ends, however it ends.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/goovo/idem/idemtest"
)

func main() {
	db, err := idemtest.Connect(context.Background(), idemtest.Postgres)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgschema:", err)
		os.Exit(1)
	}
	fmt.Println(db.DSN)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := db.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "pgschema:", err)
		os.Exit(1)
	}
}
