package pgxdriver_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/order"
	"github.com/goovo/idem/ent/pageview"
	"github.com/goovo/idem/ent/payment"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// TestExampleAppThroughTheDriver runs the example application's generated
// ent code (ent/) through the driver: every kind of statement ent makes,
// every kind of value its schema has, and what ent reads back compared with
// what the same code reads through database/sql.
func TestExampleAppThroughTheDriver(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c := e.client

	// Create, with bytes, times (microseconds: PostgreSQL's precision) and
	// NULLs.
	lease := time.Date(2026, 11, 30, 12, 34, 56, 789012000, time.UTC)
	response := []byte{0, 1, 2, 0xfe, 0xff, '"', '\\'}
	o1, err := c.Order.Create().SetTenantID("t1").SetAmount(1200).SetCurrency("EUR").
		SetIdempotencyKey("k1").SetIdempotencyStatus(order.IdempotencyStatusSucceeded).SetIdempotencyAttempt(1).
		SetIdempotencyFingerprint("fp").SetIdempotencyResponse(response).SetIdempotencyLeaseExpiresAt(lease).Save(ctx)
	must(t, err)
	o2, err := c.Order.Create().SetTenantID("t1").SetAmount(300).SetCurrency("USD").Save(ctx)
	must(t, err)
	got, err := c.Order.Get(ctx, o1.ID)
	must(t, err)
	if !bytes.Equal(*got.IdempotencyResponse, response) || !got.IdempotencyLeaseExpiresAt.Equal(lease) || *got.IdempotencyKey != "k1" {
		t.Errorf("read back %q, %v, %q; want %q, %v, k1", *got.IdempotencyResponse, got.IdempotencyLeaseExpiresAt, *got.IdempotencyKey, response, lease)
	}
	// ent points at a nil slice for a NULL bytea, through database/sql too.
	if got, err := c.Order.Get(ctx, o2.ID); err != nil || got.IdempotencyKey != nil || *got.IdempotencyResponse != nil || got.IdempotencyCompletedAt != nil {
		t.Errorf("NULLs read back as %v, %#v, %v (%v), want nil", got.IdempotencyKey, *got.IdempotencyResponse, got.IdempotencyCompletedAt, err)
	}

	// Edges: create with a foreign key, eager loading two levels deep.
	p1, err := c.Payment.Create().SetTenantID("t1").SetAmount(1200).SetOrder(o1).SetProviderChargeID("ch_1").Save(ctx)
	must(t, err)
	_, err = c.Payment.Create().SetTenantID("t1").SetAmount(100).SetOrderID(o1.ID).Save(ctx)
	must(t, err)
	_, err = c.Refund.Create().SetTenantID("t1").SetAmount(50).SetPayment(p1).Save(ctx)
	must(t, err)
	orders, err := c.Order.Query().Where(order.TenantID("t1")).WithPayments(func(q *ent.PaymentQuery) {
		q.WithRefunds().Order(ent.Asc(payment.FieldID))
	}).Order(ent.Asc(order.FieldID)).All(ctx)
	must(t, err)
	if len(orders) != 2 || len(orders[0].Edges.Payments) != 2 || len(orders[0].Edges.Payments[0].Edges.Refunds) != 1 || len(orders[1].Edges.Payments) != 0 {
		t.Fatalf("eager loading: %d orders, want 2 with 2 payments and 1 refund, and 0", len(orders))
	}
	if ord, err := p1.QueryOrder().Only(ctx); err != nil || ord.ID != o1.ID {
		t.Errorf("edge query: %v, %v", ord, err)
	}

	// Updates (ent reads the row back), bulk updates, deletes, counts,
	// aggregates, not found.
	if _, err := c.Order.UpdateOneID(o2.ID).SetPaid(true).AddAmount(1).Save(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Payment.Update().Where(payment.HasOrderWith(order.ID(o1.ID))).AddRefundedAmount(10).Save(ctx); err != nil || n != 2 {
		t.Errorf("bulk update: %d rows, %v; want 2", n, err)
	}
	if sum, err := c.Payment.Query().Aggregate(ent.Sum(payment.FieldAmount)).Int(ctx); err != nil || sum != 1300 {
		t.Errorf("sum: %d, %v; want 1300", sum, err)
	}
	var groups []struct {
		Currency string
		Count    int
	}
	if err := c.Order.Query().GroupBy(order.FieldCurrency).Aggregate(ent.Count()).Scan(ctx, &groups); err != nil || len(groups) != 2 {
		t.Errorf("group by: %v, %v", groups, err)
	}
	if _, err := c.Order.Get(ctx, 1<<30); !ent.IsNotFound(err) {
		t.Errorf("missing row: %v, want not found", err)
	}
	if n, err := c.Refund.Delete().Exec(ctx); err != nil || n != 1 {
		t.Errorf("delete: %d, %v; want 1", n, err)
	}

	// The claim: ON CONFLICT DO NOTHING that finds the key taken is
	// sql.ErrNoRows and nothing else, outside and inside a transaction.
	claim := func(c *ent.Client) error {
		cr := c.Order.Create().SetTenantID("t1").SetIdempotencyKey("k1").SetAmount(1).SetCurrency("EUR")
		cr.OnConflictColumns(order.FieldTenantID, order.FieldIdempotencyKey).DoNothing()
		_, err := cr.Save(ctx)
		return err
	}
	if err := claim(c); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("claim of a taken key: %v, want sql.ErrNoRows", err)
	}
	tx, err := c.Tx(ctx)
	must(t, err)
	if err := claim(tx.Client()); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("claim of a taken key in a transaction: %v, want sql.ErrNoRows", err)
	}
	must(t, tx.Rollback())

	// Constraint errors are recognised as ent recognises database/sql's.
	_, err = c.Order.Create().SetTenantID("t1").SetIdempotencyKey("k1").SetAmount(1).SetCurrency("EUR").Save(ctx)
	if !ent.IsConstraintError(err) {
		t.Errorf("duplicate key: %v, want a constraint error", err)
	}
	// (An update: the example's hooks refuse a new payment of no order
	// before the insert, so that no database error is seen.)
	_, err = c.Payment.UpdateOneID(p1.ID).SetOrderID(1 << 30).Save(ctx)
	if !ent.IsConstraintError(err) {
		t.Errorf("missing foreign row: %v, want a constraint error", err)
	}

	// Transactions: a rollback leaves nothing, a commit runs ent's hooks.
	tx, err = c.Tx(ctx)
	must(t, err)
	_, err = tx.Order.Create().SetTenantID("t1").SetAmount(7).SetCurrency("EUR").Save(ctx)
	must(t, err)
	must(t, tx.Rollback())
	if n := c.Order.Query().Where(order.Amount(7)).CountX(ctx); n != 0 {
		t.Errorf("rolled back row visible (%d)", n)
	}
	tx, err = c.Tx(ctx)
	must(t, err)
	committed := false
	tx.OnCommit(func(next ent.Committer) ent.Committer {
		return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
			err := next.Commit(ctx, tx)
			committed = err == nil
			return err
		})
	})
	_, err = tx.Order.Create().SetTenantID("t1").SetAmount(8).SetCurrency("EUR").Save(ctx)
	must(t, err)
	must(t, tx.Commit())
	if n := c.Order.Query().Where(order.Amount(8)).CountX(ctx); n != 1 || !committed {
		t.Errorf("committed row: %d, hook ran: %v", n, committed)
	}
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("rollback after commit: %v, want sql.ErrTxDone", err)
	}

	// SELECT … FOR UPDATE SKIP LOCKED (the page-view materializer's).
	_, err = c.PageView.Create().SetTenantID("t1").SetPage("/").Save(ctx)
	must(t, err)
	tx, err = c.Tx(ctx)
	must(t, err)
	locked, err := tx.PageView.Query().Where(pageview.Folded(false)).ForUpdate(entsql.WithLockAction(entsql.SkipLocked)).All(ctx)
	must(t, err)
	other, err := c.PageView.Query().Where(pageview.Folded(false)).ForUpdate(entsql.WithLockAction(entsql.SkipLocked)).All(ctx)
	must(t, err)
	if len(locked) != 1 || len(other) != 0 {
		t.Errorf("skip locked: %d rows in the transaction, %d outside; want 1 and 0", len(locked), len(other))
	}
	must(t, tx.Commit())

	// entgql pagination: totalCount, cursors.
	for i := range 5 {
		_, err := c.Order.Create().SetTenantID("t2").SetAmount(i).SetCurrency("EUR").Save(ctx)
		must(t, err)
	}
	two := 2
	page, err := c.Order.Query().Where(order.TenantID("t2")).Paginate(ctx, nil, &two, nil, nil)
	must(t, err)
	if page.TotalCount != 5 || len(page.Edges) != 2 || !page.PageInfo.HasNextPage {
		t.Fatalf("first page: total %d, %d edges, next %v", page.TotalCount, len(page.Edges), page.PageInfo.HasNextPage)
	}
	next, err := c.Order.Query().Where(order.TenantID("t2")).Paginate(ctx, page.PageInfo.EndCursor, &two, nil, nil)
	must(t, err)
	if len(next.Edges) != 2 || next.Edges[0].Node.Amount != 2 {
		t.Errorf("second page: %d edges starting at amount %d, want 2 from 2", len(next.Edges), next.Edges[0].Node.Amount)
	}

	// What ent reads through the driver is what it reads through
	// database/sql, the claims hidden by the mixin included.
	read := func(c *ent.Client) []byte {
		all, err := c.Order.Query().WithPayments(func(q *ent.PaymentQuery) {
			q.WithRefunds().Order(ent.Asc(payment.FieldID))
		}).Order(ent.Asc(order.FieldID)).All(idemschema.IncludeUnfinished(ctx))
		must(t, err)
		b, err := json.Marshal(all)
		must(t, err)
		return b
	}
	if viaPgx, viaStd := read(c), read(e.std); !bytes.Equal(viaPgx, viaStd) {
		t.Errorf("ent reads differ:\npgx:          %s\ndatabase/sql: %s", viaPgx, viaStd)
	}
}

// TestRawSQLThroughTheDriver checks the values of raw SQL (ent's
// sql/execquery feature, and scans into destinations ent uses for columns it
// does not know) against database/sql's, outside and inside a transaction.
func TestRawSQLThroughTheDriver(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	const query = `SELECT 42::int4, 7::int8, 2.5::float8, 1.25::numeric, true, 'text', '\x00ff'::bytea,
		'{"a": [1, 2]}'::jsonb, '2026-11-30 12:00:00.123456+00'::timestamptz, '2026-11-30'::date,
		'5a7d1a2e-0b8f-4f57-9f0f-2a7c0c1b6c3e'::uuid, NULL::text, $1::text`
	scan := func(rows *sql.Rows) []any {
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("no row: %v", rows.Err())
		}
		vals := make([]any, 13)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		must(t, rows.Scan(ptrs...))
		return vals
	}
	stdRows, err := e.std.QueryContext(ctx, query, "arg")
	must(t, err)
	want := scan(stdRows)

	rows, err := e.client.QueryContext(ctx, query, "arg")
	must(t, err)
	if got := scan(rows); !equalValues(got, want) {
		t.Errorf("QueryContext:\n got  %#v\nwant %#v", got, want)
	}
	tx, err := e.client.Tx(ctx)
	must(t, err)
	rows, err = tx.QueryContext(ctx, query, "arg")
	must(t, err)
	if got := scan(rows); !equalValues(got, want) {
		t.Errorf("QueryContext in a transaction:\n got  %#v\nwant %#v", got, want)
	}
	// ent's own Query, scanning into *any as entsql.ScanValue does
	// (generated code replaces its *entsql.UnknownType with
	// entsql.ScanTypeOf, from the column types): database/sql's rows, as
	// on pgx's database/sql driver.
	var r entsql.Rows
	must(t, e.drv.Query(ctx, query, []any{"arg"}, &r))
	if !r.Next() {
		t.Fatalf("no row: %v", r.Err())
	}
	vals := make([]any, 13)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if cts, err := r.ColumnTypes(); err != nil || len(cts) != len(vals) {
		t.Errorf("ColumnTypes: %d, %v", len(cts), err)
	}
	must(t, r.Scan(ptrs...))
	must(t, r.Close())
	if !equalValues(vals, want) {
		t.Errorf("ent's Query into *any:\n got  %#v\nwant %#v", vals, want)
	}
	if res, err := tx.ExecContext(ctx, "UPDATE orders SET paid = true"); err != nil {
		t.Error(err)
	} else if n, err := res.RowsAffected(); err != nil || n != 0 {
		t.Errorf("rows affected: %d, %v", n, err)
	}
	must(t, tx.Commit())
}

// equalValues compares database/sql values, times by instant.
func equalValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		switch x := a[i].(type) {
		case time.Time:
			y, ok := b[i].(time.Time)
			if !ok || !x.Equal(y) {
				return false
			}
		case []byte:
			y, ok := b[i].([]byte)
			if !ok || !bytes.Equal(x, y) {
				return false
			}
		default:
			if a[i] != b[i] {
				return false
			}
		}
	}
	return true
}

// ent's automatic migration runs on the driver: Atlas reads *sql.Rows,
// which the driver's queries hand to ent.
func TestMigrateOnTheDriver(t *testing.T) {
	db := idemtest.Open(t, idemtest.Postgres)
	drv, err := pgxdriver.Open(db.DSN)
	must(t, err)
	testkit.CloseInCleanup(t, "the pgx pool", func() { drv.Close() })
	client := ent.NewClient(ent.Driver(drv))
	ctx := context.Background()
	testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
	must(t, client.Schema.Create(ctx)) // again: nothing to change
	o := client.Order.Create().SetTenantID("acme").SetAmount(100).SetCurrency("EUR").SaveX(ctx)
	if got := client.Order.GetX(ctx, o.ID); got.Amount != 100 || got.TenantID != "acme" {
		t.Fatalf("read back %+v", got)
	}
}
