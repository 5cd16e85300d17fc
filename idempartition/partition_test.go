package idempartition_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/goovo/idem/ent"
	_ "github.com/goovo/idem/ent/runtime"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idempartition"
	"github.com/goovo/idem/idemtest"
)

// The example's schema, partitioned: every table with a tenant column is
// hash-partitioned by it, keys carry the tenant, the indexes are those ent
// made, foreign keys are composite, and running it again changes nothing.
func TestByTenantExampleSchema(t *testing.T) {
	ctx := context.Background()
	db := idemtest.Open(t, idemtest.Postgres)
	client := ent.NewClient(ent.Driver(db.Driver))
	if err := client.Schema.Create(ctx); err != nil {
		t.Fatal(err)
	}
	sqlDB := db.Driver.DB()
	tables := []string{"idempotency_archives", "orders", "page_view_counts", "page_views", "payments", "refunds"}
	before := map[string][]string{}
	for _, table := range tables {
		before[table] = indexDefs(t, sqlDB, table)
	}

	p, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pt := range p.Tables {
		got = append(got, pt.Table)
		if pt.Scope != "tenant_id" || !slices.Equal(pt.PrimaryKey, []string{"tenant_id", "id"}) || len(pt.Widened) != 0 || pt.Existing ||
			pt.IDIndex != pt.Table+"_id_idx" {
			t.Errorf("report of %s: %+v", pt.Table, pt)
		}
	}
	if !slices.Equal(got, tables) {
		t.Fatalf("partitioned %v, want %v", got, tables)
	}
	for _, table := range tables {
		key, parts := partitioning(t, sqlDB, table)
		if key != "HASH (tenant_id)" || parts != 4 {
			t.Errorf("%s: partitioned by %q into %d partitions", table, key, parts)
		}
		if pk := constraintDefs(t, sqlDB, table, "p"); !slices.Equal(pk, []string{"PRIMARY KEY (tenant_id, id)"}) {
			t.Errorf("%s: primary key %v", table, pk)
		}
		// Every index ent made is there, with its name, columns and
		// predicate (the mixin's partial indexes included), and one on id
		// for the lookups by id alone.
		want := append(before[table], "CREATE INDEX "+table+"_id_idx ON "+table+" USING btree (id)")
		slices.Sort(want)
		if after := indexDefs(t, sqlDB, table); !slices.Equal(after, want) {
			t.Errorf("%s: indexes\nbefore %q\nafter  %q", table, before[table], after)
		}
	}
	fks := append(constraintDefs(t, sqlDB, "payments", "f"), constraintDefs(t, sqlDB, "refunds", "f")...)
	want := []string{
		"FOREIGN KEY (tenant_id, order_payments) REFERENCES orders(tenant_id, id)",
		"FOREIGN KEY (tenant_id, payment_id) REFERENCES payments(tenant_id, id)",
	}
	if !slices.Equal(fks, want) {
		t.Errorf("foreign keys %q, want %q", fks, want)
	}
	if pay := p.Tables[4]; !slices.Equal(pay.ForeignKeys, []string{"payments_orders_payments"}) {
		t.Errorf("report of payments: %+v", pay)
	}

	// Identity ids, defaults, and rows spread over the partitions.
	var orders []*ent.Order
	for i := range 24 {
		o, err := client.Order.Create().SetTenantID(fmt.Sprintf("tenant-%d", i)).SetAmount(100).SetCurrency("EUR").Save(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if o.ID != i+1 || o.Paid {
			t.Fatalf("order %d: id %d paid %v", i, o.ID, o.Paid)
		}
		orders = append(orders, o)
	}
	var used int
	if err := sqlDB.QueryRowContext(ctx, "SELECT count(DISTINCT tableoid) FROM orders").Scan(&used); err != nil || used < 2 {
		t.Fatalf("24 tenants' orders in %d partitions (%v)", used, err)
	}
	// A payment refers to an order of its own tenant, never another's.
	if _, err := client.Payment.Create().SetTenantID("tenant-0").SetAmount(100).SetOrder(orders[0]).Save(ctx); err != nil {
		t.Fatalf("payment of the tenant's own order: %v", err)
	}
	// (In SQL: the example's schema hook refuses it before the database.)
	_, err = sqlDB.ExecContext(ctx, "INSERT INTO payments (tenant_id, amount, order_payments) VALUES ('tenant-1', 100, $1)", orders[0].ID)
	if code := sqlState(err); code != "23503" {
		t.Fatalf("payment of another tenant's order: %v, want a foreign key violation", err)
	}

	// Again: already done, nothing to do.
	again, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{Partitions: 4})
	if err != nil || len(again.Statements) != 0 {
		t.Fatalf("second run: %+v %v", again, err)
	}
	for _, pt := range again.Tables {
		if !pt.Existing || !slices.Equal(pt.PrimaryKey, []string{"tenant_id", "id"}) {
			t.Errorf("second run, %s: %+v", pt.Table, pt)
		}
	}
	// Ent's automatic migration would undo the layout: it refuses.
	if err := client.Schema.Create(ctx); err == nil || !strings.Contains(err.Error(), "partition key") {
		t.Fatalf("Schema.Create on the partitioned layout: %v", err)
	}
}

// A dry run changes nothing and returns the statements the real run
// executes, the same ones: a migration.
func TestByTenantDryRun(t *testing.T) {
	ctx := context.Background()
	db := idemtest.Open(t, idemtest.Postgres)
	client := ent.NewClient(ent.Driver(db.Driver))
	if err := client.Schema.Create(ctx); err != nil {
		t.Fatal(err)
	}
	dry, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := partitioning(t, db.Driver.DB(), "orders"); key != "" {
		t.Fatalf("the dry run partitioned orders: %s", key)
	}
	bare, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{DryRun: true, NoIDIndex: true})
	if err != nil || len(bare.Statements) != len(dry.Statements)-len(bare.Tables) || bare.Tables[0].IDIndex != "" {
		t.Fatalf("NoIDIndex: %d statements, %d without it (%v)", len(bare.Statements), len(dry.Statements), err)
	}
	for _, s := range bare.Statements {
		if strings.Contains(s, "_id_idx") {
			t.Fatalf("NoIDIndex: %s", s)
		}
	}
	real, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Statements, real.Statements) || len(real.Statements) == 0 {
		t.Fatalf("dry run and real run differ:\n%s\n--\n%s", strings.Join(dry.Statements, "\n"), strings.Join(real.Statements, "\n"))
	}
	// The tables are in the current schema: the statements do not name it,
	// so they apply to any schema (search_path), as a migration must.
	var schema string
	if err := db.Driver.DB().QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for _, s := range real.Statements {
		if strings.Contains(s, schema) {
			t.Fatalf("a statement names the schema %s: %s", schema, s)
		}
	}
	if key, parts := partitioning(t, db.Driver.DB(), "orders"); key != "HASH (tenant_id)" || parts != idempartition.DefaultPartitions {
		t.Fatalf("orders: %q, %d partitions", key, parts)
	}

	// The dry run's statements, run as a migration on another database
	// (another schema) that ent made, give the same layout.
	other := idemtest.Open(t, idemtest.Postgres)
	if err := ent.NewClient(ent.Driver(other.Driver)).Schema.Create(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Driver.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range dry.Statements {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"orders", "payments", "refunds", "idempotency_archives"} {
		if a, b := indexDefs(t, db.Driver.DB(), table), indexDefs(t, other.Driver.DB(), table); !slices.Equal(a, b) {
			t.Errorf("%s: indexes differ:\n%q\n%q", table, a, b)
		}
		if a, b := constraintDefs(t, db.Driver.DB(), table, ""), constraintDefs(t, other.Driver.DB(), table, ""); !slices.Equal(a, b) {
			t.Errorf("%s: constraints differ:\n%q\n%q", table, a, b)
		}
		if key, parts := partitioning(t, other.Driver.DB(), table); key != "HASH (tenant_id)" || parts != idempartition.DefaultPartitions {
			t.Errorf("%s after the migration: %q, %d partitions", table, key, parts)
		}
	}
}

// Any schema: a scope column named otherwise, serial and UUID keys, a
// unique constraint and a unique expression index without the tenant, a
// self-reference with ON DELETE SET NULL, a reference to a table without
// tenant (kept), checks, comments and grants.
func TestByTenantAnySchema(t *testing.T) {
	ctx := context.Background()
	db := idemtest.Open(t, idemtest.Postgres)
	sqlDB := db.Driver.DB()
	exec(t, sqlDB, `
		CREATE TABLE currencies (code text PRIMARY KEY);
		CREATE TABLE accounts (
			id bigserial PRIMARY KEY,
			org text NOT NULL,
			email text NOT NULL,
			currency text REFERENCES currencies (code),
			parent_id bigint REFERENCES accounts (id) ON DELETE SET NULL,
			balance bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
			idempotency_key text,
			CONSTRAINT accounts_email_key UNIQUE (email)
		);
		CREATE UNIQUE INDEX accounts_org_key ON accounts (org, idempotency_key);
		CREATE UNIQUE INDEX accounts_lower_email ON accounts (lower(email)) WHERE balance > 0;
		CREATE INDEX accounts_balance ON accounts (balance DESC);
		COMMENT ON TABLE accounts IS 'accounts of an organisation';
		COMMENT ON COLUMN accounts.balance IS 'in cents';
		GRANT SELECT ON accounts TO PUBLIC;
		CREATE TABLE notes (
			id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
			tenant_id text NOT NULL,
			account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
			body text
		);
		INSERT INTO currencies VALUES ('EUR');`)
	backend := sqlBackend{db: sqlDB, records: []*idembackend.RecordTable{{Entity: "Account", Table: "accounts", ScopeColumn: "org", IDColumn: "id"}}}

	p, err := idempartition.ByTenant(ctx, backend, idempartition.Options{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tables) != 2 || p.Tables[0].Table != "accounts" || p.Tables[1].Table != "notes" {
		t.Fatalf("tables: %+v", p.Tables)
	}
	acc, notes := p.Tables[0], p.Tables[1]
	if acc.Scope != "org" || !slices.Equal(acc.PrimaryKey, []string{"org", "id"}) ||
		!slices.Equal(acc.Widened, []string{"accounts_email_key", "accounts_lower_email"}) ||
		!slices.Equal(acc.ForeignKeys, []string{"accounts_parent_id_fkey"}) {
		t.Errorf("accounts: %+v", acc)
	}
	if notes.Scope != "tenant_id" || !slices.Equal(notes.PrimaryKey, []string{"tenant_id", "id"}) || !slices.Equal(notes.ForeignKeys, []string{"notes_account_id_fkey"}) {
		t.Errorf("notes: %+v", notes)
	}
	if acc.IDIndex != "accounts_id_idx" || notes.IDIndex != "notes_id_idx" {
		t.Errorf("id indexes: %q, %q", acc.IDIndex, notes.IDIndex)
	}
	if key, parts := partitioning(t, sqlDB, "accounts"); key != "HASH (org)" || parts != 3 {
		t.Errorf("accounts: %q, %d partitions", key, parts)
	}
	if key, _ := partitioning(t, sqlDB, "currencies"); key != "" {
		t.Errorf("currencies, which has no tenant, was partitioned: %s", key)
	}
	wantCons := []string{
		"CHECK ((balance >= 0))",
		"FOREIGN KEY (currency) REFERENCES currencies(code)",
		"FOREIGN KEY (org, parent_id) REFERENCES accounts(org, id) ON DELETE SET NULL (parent_id)",
		"PRIMARY KEY (org, id)",
		"UNIQUE (org, email)",
	}
	if got := constraintDefs(t, sqlDB, "accounts", ""); !slices.Equal(got, wantCons) {
		t.Errorf("accounts' constraints:\n%q\nwant\n%q", got, wantCons)
	}
	if got := constraintDefs(t, sqlDB, "notes", "f"); !slices.Equal(got, []string{"FOREIGN KEY (tenant_id, account_id) REFERENCES accounts(org, id) ON DELETE CASCADE"}) {
		t.Errorf("notes' foreign key: %q", got)
	}
	idx := indexDefs(t, sqlDB, "accounts")
	for _, want := range []string{
		"CREATE INDEX accounts_balance ON accounts USING btree (balance DESC)",
		"CREATE UNIQUE INDEX accounts_lower_email ON accounts USING btree (org, lower(email)) WHERE (balance > 0)",
		"CREATE UNIQUE INDEX accounts_org_key ON accounts USING btree (org, idempotency_key)",
		"CREATE INDEX accounts_id_idx ON accounts USING btree (id)",
	} {
		if !slices.Contains(idx, want) {
			t.Errorf("accounts: no %q in %q", want, idx)
		}
	}
	var comment, colComment, seq sql.NullString
	var public bool
	if err := sqlDB.QueryRowContext(ctx, `SELECT obj_description('accounts'::regclass, 'pg_class'), col_description('accounts'::regclass, 6),
		pg_get_serial_sequence('accounts', 'id'), has_table_privilege('public', 'accounts', 'SELECT')`).Scan(&comment, &colComment, &seq, &public); err != nil {
		t.Fatal(err)
	}
	if comment.String != "accounts of an organisation" || colComment.String != "in cents" || !seq.Valid || !public {
		t.Errorf("comment %q, column comment %q, sequence %v, public select %v", comment.String, colComment.String, seq, public)
	}

	// The rows behave: the serial key counts, the check holds, a child
	// refers within its tenant only, and SET NULL keeps the tenant.
	var parent, child int64
	if err := sqlDB.QueryRowContext(ctx, "INSERT INTO accounts (org, email, currency) VALUES ('a', 'x@a', 'EUR') RETURNING id").Scan(&parent); err != nil || parent != 1 {
		t.Fatalf("insert: id %d %v", parent, err)
	}
	if err := sqlDB.QueryRowContext(ctx, "INSERT INTO accounts (org, email, parent_id) VALUES ('a', 'y@a', $1) RETURNING id", parent).Scan(&child); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlDB.ExecContext(ctx, "INSERT INTO accounts (org, email, balance) VALUES ('a', 'z@a', -1)"); sqlState(err) != "23514" {
		t.Errorf("negative balance: %v", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "INSERT INTO accounts (org, email) VALUES ('b', 'x@a')"); err != nil {
		t.Errorf("the same email in another org (unique per org now): %v", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "INSERT INTO accounts (org, email) VALUES ('a', 'x@a')"); sqlState(err) != "23505" {
		t.Errorf("the same email in the same org: %v", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "INSERT INTO accounts (org, email, parent_id) VALUES ('b', 'w@b', $1)", parent); sqlState(err) != "23503" {
		t.Errorf("a parent in another org: %v", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "INSERT INTO notes (tenant_id, account_id) VALUES ('b', $1)", parent); sqlState(err) != "23503" {
		t.Errorf("a note of another tenant's account: %v", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "INSERT INTO notes (tenant_id, account_id) VALUES ('a', $1)", child); err != nil {
		t.Errorf("a note of the tenant's account: %v", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "DELETE FROM accounts WHERE org = 'a' AND id = $1", parent); err != nil {
		t.Fatal(err)
	}
	var org string
	var parentID sql.NullInt64
	if err := sqlDB.QueryRowContext(ctx, "SELECT org, parent_id FROM accounts WHERE id = $1", child).Scan(&org, &parentID); err != nil || org != "a" || parentID.Valid {
		t.Errorf("after the parent's deletion: org %q parent %v (%v)", org, parentID, err)
	}
}

// What it refuses, and that a refusal changes nothing.
func TestByTenantRefuses(t *testing.T) {
	ctx := context.Background()
	t.Run("rows", func(t *testing.T) {
		db := idemtest.Open(t, idemtest.Postgres)
		client := ent.NewClient(ent.Driver(db.Driver))
		if err := client.Schema.Create(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Order.Create().SetTenantID("acme").SetAmount(1).SetCurrency("EUR").Save(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{})
		if err == nil || !strings.Contains(err.Error(), "table orders holds rows") {
			t.Fatalf("non-empty table: %v", err)
		}
		for _, table := range []string{"idempotency_archives", "orders", "payments"} {
			if key, _ := partitioning(t, db.Driver.DB(), table); key != "" {
				t.Errorf("%s was partitioned: %s", table, key)
			}
		}
		if fks := constraintDefs(t, db.Driver.DB(), "payments", "f"); len(fks) != 1 {
			t.Errorf("payments' foreign keys: %q", fks)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		db := idemtest.Open(t, idemtest.SQLite)
		client := ent.NewClient(ent.Driver(db.Driver))
		if err := client.Schema.Create(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{})
		if err == nil || !strings.Contains(err.Error(), `the database is "sqlite3": hash partitioning by tenant needs PostgreSQL`) {
			t.Fatalf("SQLite: %v", err)
		}
	})
	t.Run("reference without tenant", func(t *testing.T) {
		db := idemtest.Open(t, idemtest.Postgres)
		sqlDB := db.Driver.DB()
		exec(t, sqlDB, `
			CREATE TABLE accounts (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, tenant_id text NOT NULL);
			CREATE TABLE audit (id bigint PRIMARY KEY, account_id bigint REFERENCES accounts (id));`)
		_, err := idempartition.ByTenant(ctx, sqlBackend{db: sqlDB}, idempartition.Options{})
		if err == nil || !strings.Contains(err.Error(), "refers to") || !strings.Contains(err.Error(), "has no tenant column") {
			t.Fatalf("reference from a table without tenant: %v", err)
		}
		if key, _ := partitioning(t, sqlDB, "accounts"); key != "" {
			t.Errorf("accounts was partitioned: %s", key)
		}
	})
	t.Run("nullable tenant", func(t *testing.T) {
		db := idemtest.Open(t, idemtest.Postgres)
		sqlDB := db.Driver.DB()
		exec(t, sqlDB, `CREATE TABLE logs (id bigint PRIMARY KEY, tenant_id text)`)
		_, err := idempartition.ByTenant(ctx, sqlBackend{db: sqlDB}, idempartition.Options{})
		if err == nil || !strings.Contains(err.Error(), "may be NULL") {
			t.Fatalf("nullable tenant column: %v", err)
		}
		// Skip leaves it as it is.
		if _, err := idempartition.ByTenant(ctx, sqlBackend{db: sqlDB}, idempartition.Options{Skip: []string{"logs"}}); err != nil {
			t.Fatalf("skipped: %v", err)
		}
	})
}

// sqlBackend is an idembackend.Backend on a plain *sql.DB with hand-made record
// tables: ByTenant only needs the dialect, transactions and the
// record tables' scope columns.
type sqlBackend struct {
	idembackend.Backend
	db      *sql.DB
	records []*idembackend.RecordTable
}

func (b sqlBackend) Dialect() string                          { return dialect.Postgres }
func (b sqlBackend) RecordTables() []*idembackend.RecordTable { return b.records }
func (b sqlBackend) BeginTx(ctx context.Context) (context.Context, idembackend.Tx, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	return ctx, tx, err
}

func exec(t *testing.T, db *sql.DB, stmts string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), stmts); err != nil {
		t.Fatal(err)
	}
}

// partitioning returns a table's partition key ("" for a plain table) and
// its number of partitions.
func partitioning(t *testing.T, db *sql.DB, table string) (string, int) {
	t.Helper()
	var key sql.NullString
	var parts int
	err := db.QueryRowContext(context.Background(), `SELECT CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,
		(SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid) FROM pg_class c WHERE c.oid = to_regclass($1)`, table).Scan(&key, &parts)
	if err != nil {
		t.Fatalf("%s: %v", table, err)
	}
	return key.String, parts
}

// constraintDefs returns the definitions of a table's constraints of one
// type ("" for all), sorted.
func constraintDefs(t *testing.T, db *sql.DB, table, contype string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = to_regclass($1) AND conparentid = 0 AND contype <> 'n' AND ($2 = '' OR contype::text = $2) ORDER BY 1`, table, contype)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var defs []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
	}
	return defs
}

// indexDefs returns the definitions of a table's indexes other than its
// primary key, without the schema, sorted.
func indexDefs(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT pg_get_indexdef(i.indexrelid), n.nspname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.indrelid = to_regclass($1) AND NOT i.indisprimary ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var defs []string
	for rows.Next() {
		var d, schema string
		if err := rows.Scan(&d, &schema); err != nil {
			t.Fatal(err)
		}
		d = strings.Replace(d, " ON ONLY ", " ON ", 1) // a partitioned table's index
		defs = append(defs, strings.Replace(d, " "+schema+".", " ", 1))
	}
	return defs
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Two conversions at once: one converts, the other waits for it and finds
// the work done.
func TestByTenantConcurrently(t *testing.T) {
	ctx := context.Background()
	db := idemtest.Open(t, idemtest.Postgres)
	client := ent.NewClient(ent.Driver(db.Driver))
	if err := client.Schema.Create(ctx); err != nil {
		t.Fatal(err)
	}
	results := make([]*idempartition.Partitioning, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = idempartition.ByTenant(ctx, client.IdempotencyBackend(), idempartition.Options{Partitions: 4})
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("%v / %v", errs[0], errs[1])
	}
	if (len(results[0].Statements) == 0) == (len(results[1].Statements) == 0) {
		t.Fatalf("%d and %d statements: want one conversion", len(results[0].Statements), len(results[1].Statements))
	}
	if key, parts := partitioning(t, db.Driver.DB(), "payments"); key != "HASH (tenant_id)" || parts != 4 {
		t.Fatalf("payments: %q, %d partitions", key, parts)
	}
}
