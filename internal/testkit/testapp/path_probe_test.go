package testapp_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp"
)

// probeCreates is how many creates of each field completionUpdates sends.
const probeCreates = 20

// completionUpdates tells which path the first call of a key of each field
// takes on backend, counted by the database: on a fresh database of its
// own (triggers would slow the timed ones), a trigger counts the UPDATEs of
// the shipments and idempotency_records rows, and probeCreates creates of
// each field are sent. It returns the UPDATEs per create of each field: 0
// for a claim born completed (the one-statement create, one INSERT), 1 or
// more for a path with a completion (the atomic path: claim, resolver,
// completion UPDATE; lease mode).
func completionUpdates(b *testing.B, backend idemtest.Kind, fields ...string) map[string]float64 {
	b.Helper()
	be := testapp.NewBench(b, backend, idem.Config{})
	ctx := context.Background()
	for _, q := range updateCounter(backend) {
		if _, err := be.Client.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	perCreate := map[string]float64{}
	for _, field := range fields {
		if _, err := be.Client.ExecContext(ctx, "DELETE FROM probe_updates"); err != nil {
			b.Fatal(err)
		}
		for i := range probeCreates {
			sendCreate(b, be.Server.Config.Handler, createBody(field, fmt.Sprintf("probe-%s-%d", field, i)))
		}
		rows, err := be.Client.QueryContext(ctx, "SELECT COUNT(*) FROM probe_updates")
		if err != nil {
			b.Fatal(err)
		}
		var n int
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
		perCreate[field] = float64(n) / probeCreates
	}
	return perCreate
}

// updateCounter is the SQL of backend that makes every UPDATE of a row of
// shipments or idempotency_records add a row to probe_updates.
func updateCounter(backend idemtest.Kind) []string {
	tables := []string{"shipments", "idempotency_records"}
	stmts := []string{"CREATE TABLE probe_updates (tbl VARCHAR(64) NOT NULL)"}
	for _, t := range tables {
		switch {
		case backend.IsPostgres():
			if len(stmts) == 1 {
				stmts = append(stmts, `CREATE FUNCTION probe_update() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN INSERT INTO probe_updates VALUES (TG_TABLE_NAME); RETURN NULL; END $$`)
			}
			stmts = append(stmts, fmt.Sprintf("CREATE TRIGGER probe_%s AFTER UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION probe_update()", t, t))
		case backend == idemtest.MariaDB:
			stmts = append(stmts, fmt.Sprintf("CREATE TRIGGER probe_%s AFTER UPDATE ON %s FOR EACH ROW INSERT INTO probe_updates VALUES ('%s')", t, t, t))
		default: // SQLite
			stmts = append(stmts, fmt.Sprintf("CREATE TRIGGER probe_%s AFTER UPDATE ON %s BEGIN INSERT INTO probe_updates VALUES ('%s'); END", t, t, t))
		}
	}
	return stmts
}
