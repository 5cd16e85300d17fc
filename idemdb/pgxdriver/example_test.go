package pgxdriver_test

import (
	"context"
	"fmt"
	"log"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/migrate"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemtest"
)

// A transaction in two round trips: BEGIN travels with ent's insert, and
// COMMIT goes alone; a transaction that sends nothing costs none.
func ExampleDriver() {
	ctx := context.Background()
	db, err := idemtest.Connect(ctx, idemtest.Postgres) // a fresh schema
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	drv, err := pgxdriver.Open(db.DSN)
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	if err := migrate.NewSchema(entsql.OpenDB(dialect.Postgres, drv.DB())).Create(ctx); err != nil {
		log.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(drv))

	tx, err := client.Tx(ctx)
	if err != nil {
		log.Fatal(err)
	}
	o, err := tx.Order.Create().SetTenantID("acme").SetAmount(1200).SetCurrency("EUR").
		SetIdempotencyAttempt(1).Save(ctx) // round trip 1: BEGIN, INSERT
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // round trip 2: COMMIT
		log.Fatal(err)
	}
	fmt.Println("amount:", client.Order.GetX(ctx, o.ID).Amount)
	// Output: amount: 1200
}
