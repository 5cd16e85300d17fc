// Package counter is the article's counter pattern in the example
// application: "turn update t set count = count + 1 into insert into events
// ... on conflict do nothing, and let a background job materialize the
// count". recordPageView inserts one PageView per idempotency key (its claim);
// Fold moves unfolded views into PageViewCount.
//
// Fold is exactly once because counting a batch and marking it folded happen
// in one transaction: a crash between the two is a crash before the commit,
// which undoes both. Several materializers may run at once: on PostgreSQL
// and MySQL each locks its batch with FOR UPDATE SKIP LOCKED, on SQLite the
// database serialises them.
package counter

import (
	"context"
	stdsql "database/sql"
	"fmt"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/pageview"
	"github.com/goovo/idem/ent/pageviewcount"
)

// Fold counts up to batch unfolded page views into PageViewCount and marks
// them folded, in one transaction. It returns how many it folded.
func Fold(ctx context.Context, client *ent.Client, batch int) (int, error) {
	d := client.IdempotencyBackend().Dialect()
	begin := client.Tx
	if d == dialect.MySQL {
		// InnoDB's REPEATABLE READ reads a snapshot (two folders would
		// count one view twice without the lock) and its locking reads
		// take gap locks, which would hold back the inserts of new views:
		// READ COMMITTED takes none.
		begin = func(ctx context.Context) (*ent.Tx, error) {
			return client.BeginTx(ctx, &stdsql.TxOptions{Isolation: stdsql.LevelReadCommitted})
		}
	}
	tx, err := begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op

	q := tx.PageView.Query().Where(pageview.Folded(false)).Order(pageview.ByID()).Limit(batch)
	if d == dialect.Postgres || d == dialect.MySQL {
		q = q.ForUpdate(sql.WithLockAction(sql.SkipLocked))
	}
	views, err := q.All(ctx)
	if err != nil || len(views) == 0 {
		return 0, err
	}
	type page struct{ tenant, page string }
	counts := map[page]int{}
	ids := make([]int, 0, len(views))
	for _, v := range views {
		counts[page{v.TenantID, v.Page}]++
		ids = append(ids, v.ID)
	}
	for p, n := range counts {
		err := tx.PageViewCount.Create().
			SetTenantID(p.tenant).SetPage(p.page).SetCount(n).
			OnConflictColumns(pageviewcount.FieldTenantID, pageviewcount.FieldPage).
			AddCount(n).
			Exec(ctx)
		if err != nil {
			return 0, fmt.Errorf("count %s: %w", p.page, err)
		}
	}
	if err := tx.PageView.Update().Where(pageview.IDIn(ids...)).SetFolded(true).Exec(ctx); err != nil {
		return 0, err
	}
	return len(views), tx.Commit()
}

// Count returns the folded count of a tenant's page.
func Count(ctx context.Context, client *ent.Client, tenant, page string) (int, error) {
	c, err := client.PageViewCount.Query().
		Where(pageviewcount.TenantID(tenant), pageviewcount.Page(page)).
		Only(ctx)
	if ent.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return c.Count, nil
}
