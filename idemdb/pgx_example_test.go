package idemdb_test

import (
	"context"
	"fmt"
	"log"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/migrate"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
)

// OpenPgx opens PostgreSQL on pgx directly. ent's generated client runs on
// it unchanged; migrations run on its database/sql view of the same pool.
func ExampleOpenPgx() {
	ctx := context.Background()
	db, err := idemtest.Connect(ctx, idemtest.Postgres) // a fresh schema
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	drv, err := idemdb.OpenPgx(db.DSN)
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	if err := migrate.NewSchema(entsql.OpenDB(dialect.Postgres, drv.DB())).Create(ctx); err != nil {
		log.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(drv))
	o, err := client.Order.Create().SetTenantID("acme").SetAmount(1200).SetCurrency("EUR").Save(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Amount, o.Currency, "pool of", drv.Pool().Config().MaxConns)
	// Output: 1200 EUR pool of 16
}
