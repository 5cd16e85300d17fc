package idemdb_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemtest"
)

// Open opens PostgreSQL on pgx directly. ent's generated client, its
// migrations and the hook run on it unchanged.
func ExampleOpen_postgres() {
	ctx := context.Background()
	db, err := idemtest.Connect(ctx, idemtest.Postgres) // a fresh schema
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	drv, err := idemdb.Open(db.DSN)
	if err != nil {
		log.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(drv))
	defer client.Close()
	if err := client.Schema.Create(ctx); err != nil {
		log.Fatal(err)
	}
	o, err := client.Order.Create().SetTenantID("acme").SetAmount(1200).SetCurrency("EUR").Save(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Amount, o.Currency, "pool of", drv.(*pgxdriver.Driver).Pool().Config().MaxConns)
	// Output: 1200 EUR pool of 16
}
