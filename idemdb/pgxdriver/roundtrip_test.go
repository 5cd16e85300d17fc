package pgxdriver_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/order"
	"github.com/goovo/idem/internal/pgxpipe"
)

// oneConn makes the pool a single connection that is never pinged, so
// that a warmed-up statement costs exactly its round trips.
func oneConn(cfg *pgxpool.Config) {
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
}

// complete is the shape of the protocol's completion: an UPDATE fenced by
// the attempt that raises an error when it matches no row, so that it can
// travel with COMMIT (a statement queued with COMMIT cannot be looked at
// before COMMIT runs). The cast fails only when nothing was updated.
const complete = `WITH done AS (
	UPDATE orders SET paid = true WHERE id = $1 AND idempotency_attempt = $2 RETURNING 1)
SELECT CASE WHEN count(*) = 1 THEN 1 ELSE ('fenced out: ' || count(*))::int END FROM done`

// TestRoundTrips counts, through a proxy, the round trips of the
// operations the pipelined store is built from, against database/sql's.
func TestRoundTrips(t *testing.T) {
	e := newEnv(t, oneConn)
	ctx := context.Background()
	create := func(c *ent.Client) *ent.Order {
		o, err := c.Order.Create().SetTenantID("t").SetAmount(100).SetCurrency("EUR").SetIdempotencyAttempt(1).Save(ctx)
		must(t, err)
		return o
	}
	check := func(what string, trips, want int) {
		t.Helper()
		if trips != want {
			t.Errorf("%s: %d round trips, want %d", what, trips, want)
		}
	}

	warm(func() { create(e.client) })
	trips, stmts := e.roundTrips(func() { create(e.client) })
	check("plain create", trips, 1)
	if stmts != 1 {
		t.Errorf("plain create: %d statements, want 1", stmts)
	}

	// The transaction of the benchmark: insert, the fenced UPDATE, commit.
	txNatural := func() {
		tx, err := e.client.Tx(ctx)
		must(t, err)
		o := create(tx.Client())
		_, err = tx.ExecContext(ctx, complete, o.ID, 1)
		must(t, err)
		must(t, tx.Commit())
	}
	warm(txNatural)
	trips, stmts = e.roundTrips(txNatural)
	check("transaction: BEGIN with the insert, UPDATE, COMMIT", trips, 3)
	if stmts != 4 {
		t.Errorf("transaction: %d statements, want 4", stmts)
	}

	txPipelined := func() {
		var ptx pgxpipe.Tx
		tx, err := e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
		must(t, err)
		o := create(tx.Client())
		ptx.Queue(complete, o.ID, 1)
		must(t, tx.Commit())
	}
	warm(txPipelined)
	trips, _ = e.roundTrips(txPipelined)
	check("transaction: BEGIN with the insert, UPDATE with COMMIT", trips, 2)

	trips, _ = e.roundTrips(func() {
		tx, err := e.client.Tx(ctx)
		must(t, err)
		must(t, tx.Commit())
		tx, err = e.client.Tx(ctx)
		must(t, err)
		must(t, tx.Rollback())
	})
	check("transactions that send nothing", trips, 0)

	// Atomic mode's first round trip: BEGIN, the claim (ent's insert) and
	// SAVEPOINT after it; the savepoint travels with the next statement.
	atomic := func() {
		var ptx pgxpipe.Tx
		tx, err := e.client.Tx(pgxpipe.CaptureTx(ctx, &ptx))
		must(t, err)
		o := create(tx.Client())
		ptx.Queue("SAVEPOINT idem_resolver")
		_, err = tx.Order.UpdateOneID(o.ID).SetAmount(200).Save(ctx) // the resolver's write
		must(t, err)
		ptx.Queue(complete, o.ID, 1)
		must(t, tx.Commit())
	}
	warm(atomic)
	trips, stmts = e.roundTrips(atomic)
	// BEGIN+INSERT; SAVEPOINT+UPDATE; ent's re-read of the updated row;
	// UPDATE+COMMIT.
	check("atomic mode with a resolver write", trips, 4)
	if stmts != 7 {
		t.Errorf("atomic mode: %d statements, want 7", stmts)
	}

	// A claim that finds its key taken reads the record in the same round
	// trip: the lookup travels behind ent's INSERT … ON CONFLICT DO NOTHING.
	_, err := e.client.Order.Create().SetTenantID("t").SetIdempotencyKey("k").SetAmount(1).SetCurrency("EUR").
		SetIdempotencyAttempt(1).Save(ctx)
	must(t, err)
	claim := func() (*pgxpipe.Piggyback, int, error) {
		var attempt int
		lookup := &pgx.Batch{}
		lookup.Queue("SELECT idempotency_attempt FROM orders WHERE tenant_id = $1 AND idempotency_key = $2", "t", "k").
			QueryRow(func(row pgx.Row) error { return row.Scan(&attempt) })
		pb := &pgxpipe.Piggyback{After: lookup}
		c := e.client.Order.Create().SetTenantID("t").SetIdempotencyKey("k").SetAmount(1).SetCurrency("EUR")
		c.OnConflictColumns(order.FieldTenantID, order.FieldIdempotencyKey).DoNothing()
		_, err := c.Save(pgxpipe.With(ctx, pb))
		return pb, attempt, err
	}
	warm(func() { claim() })
	var (
		claimErr error
		pb       *pgxpipe.Piggyback
		attempt  int
	)
	trips, _ = e.roundTrips(func() { pb, attempt, claimErr = claim() })
	check("claim of a taken key, with its lookup", trips, 1)
	if !errors.Is(claimErr, sql.ErrNoRows) || pb.Err() != nil || attempt != 1 {
		t.Errorf("claim of a taken key: %v (lookup: %v, attempt %d), want sql.ErrNoRows and attempt 1", claimErr, pb.Err(), attempt)
	}

	// database/sql, for reference: BEGIN, INSERT, UPDATE, COMMIT.
	std := stdThroughProxy(e)
	stdTx := func() {
		tx, err := std.Tx(ctx)
		must(t, err)
		o := create(tx.Client())
		_, err = tx.ExecContext(ctx, complete, o.ID, 1)
		must(t, err)
		must(t, tx.Commit())
	}
	warm(stdTx)
	trips, _ = e.roundTrips(stdTx)
	check("database/sql transaction", trips, 4)
}

// stdThroughProxy opens the database/sql path (pgx's stdlib, as idemdb.Open
// does) through e's proxy, with one connection that is never pinged.
func stdThroughProxy(e *env) *ent.Client {
	cfg, err := pgx.ParseConfig(e.proxied)
	must(e.t, err)
	db := stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	e.t.Cleanup(func() { db.Close() })
	return ent.NewClient(ent.Driver(entsql.OpenDB("postgres", db)))
}
