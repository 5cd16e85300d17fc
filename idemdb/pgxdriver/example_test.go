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
// the completion, queued, with COMMIT. The completion fails by itself when
// its attempt was fenced out, which stops COMMIT.
func ExampleTx_Queue() {
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

	var ptx *pgxdriver.Tx
	tx, err := client.Tx(pgxdriver.CaptureTx(ctx, &ptx))
	if err != nil {
		log.Fatal(err)
	}
	o, err := tx.Order.Create().SetTenantID("acme").SetAmount(1200).SetCurrency("EUR").
		SetIdempotencyAttempt(1).Save(ctx) // round trip 1: BEGIN, INSERT
	if err != nil {
		log.Fatal(err)
	}
	ptx.Queue(`WITH done AS (UPDATE orders SET paid = true WHERE id = $1 AND idempotency_attempt = $2 RETURNING 1)
		SELECT CASE WHEN count(*) = 1 THEN 1 ELSE ('fenced out: ' || count(*))::int END FROM done`, o.ID, 1)
	if err := tx.Commit(); err != nil { // round trip 2: UPDATE, COMMIT
		log.Fatal(err)
	}
	fmt.Println("paid:", client.Order.GetX(ctx, o.ID).Paid)
	// Output: paid: true
}
