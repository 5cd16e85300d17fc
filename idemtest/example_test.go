package idemtest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime"
)

// Connect opens a fresh database outside a test, as a TestMain does to
// share one among the tests of a package:
//
//	func TestMain(m *testing.M) {
//		db, err := idemtest.Connect(context.Background(), idemtest.Postgres)
//		...
//		code := m.Run()
//		db.Close()
//		os.Exit(code)
//	}
//
// Inside a test, idemtest.Open(t, backend) does the same and removes the
// database when the test ends.
func ExampleConnect() {
	ctx := context.Background()
	db, err := idemtest.Connect(ctx, idemtest.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	client := ent.NewClient(ent.Driver(db.Driver))
	if err := db.Setup(ctx, client.IdempotencyBackend(), client.Schema.Create); err != nil {
		log.Fatal(err)
	}
	n, err := client.Shipment.Query().Count(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d shipments\n", db.Kind, n)
	// Output: sqlite: 0 shipments
}
