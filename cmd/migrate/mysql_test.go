package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/goovo/idem/ent"
	entmigrate "github.com/goovo/idem/ent/migrate"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
)

// mysqlTables lists the tables of the database db is connected to.
func mysqlTables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	slices.Sort(names) // information_schema's collation is not byte order
	return names
}

// mysqlColumns describes table's columns, indexes and collation in the
// database db is connected to.
func mysqlColumns(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT CONCAT_WS(' ', column_name, column_type, is_nullable, IFNULL(column_default, 'NULL'), extra, IFNULL(collation_name, ''))
		FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?
		UNION ALL SELECT CONCAT_WS(' ', 'index', index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index))
		FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? GROUP BY index_name, non_unique
		UNION ALL SELECT CONCAT('table ', table_collation) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`,
		table, table, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil || len(cols) < 2 {
		t.Fatalf("%s: %v (%d columns)", table, err, len(cols))
	}
	slices.Sort(cols)
	return cols
}

// The committed MySQL migrations, applied to an empty MariaDB database,
// produce exactly the schema ent's automatic migration makes there (as
// idemdb.MigrateLocked runs it at a server's start), the mixin's MySQL
// column types included, and the example's other tables as its -migrate
// makes them; the automatic migration then finds nothing to change on the
// migrated database, and up again applies nothing.
func TestMySQLMigrationsProduceTheEntSchema(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.MariaDB)
	files := committedFilesIn(t, repoMySQLDir)
	out := mustMigrate(t, db.DSN, "up")
	if !strings.Contains(out, fmt.Sprintf("applied %d migration(s)", len(files))) {
		t.Fatalf("up: %s", out)
	}
	want := []string{RevisionsTable, provider.Table, mailer.Table, graph.ReceiptTable}
	for _, tb := range entmigrate.Tables {
		want = append(want, tb.Name)
	}
	slices.Sort(want)
	conn := db.Driver.DB()
	if got := mysqlTables(t, conn); !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}

	// The mixin's columns are what docs/mysql.md says: times to the
	// microsecond, responses and operations of any size.
	for column, typ := range map[string]string{
		"idempotency_claimed_at":       "datetime(6)",
		"idempotency_lease_expires_at": "datetime(6)",
		"idempotency_response":         "longblob",
		"idempotency_operation":        "longblob",
	} {
		var got string
		err := conn.QueryRow(`SELECT column_type FROM information_schema.columns
			WHERE table_schema = DATABASE() AND table_name = 'orders' AND column_name = ?`, column).Scan(&got)
		if err != nil || got != typ {
			t.Errorf("orders.%s: %q (%v), want %s", column, got, err, typ)
		}
	}

	ref := idemtest.Open(t, idemtest.MariaDB)
	client := ent.NewClient(ent.Driver(ref.Driver))
	if err := idemdb.MigrateLocked(context.Background(), ref.Driver, func(context.Context) error { return schemaCreate(client) }); err != nil {
		t.Fatal(err)
	}
	migrated, created := inspectEnt(t, db.DSN), inspectEnt(t, ref.DSN)
	created.Name = migrated.Name
	if cs := diffSchemas(t, db.DSN, migrated, created); len(cs) > 0 {
		t.Fatalf("the migrated database differs from the one ent creates: %d changes:\n%s", len(cs), describe(cs))
	}
	if cs := entChanges(t, db); len(cs) > 0 {
		t.Fatalf("ent's automatic migration would change the migrated database:\n%s", describe(cs))
	}

	// The example's tables that are not ent's: those the server's -migrate
	// makes (graph.MySQLTables), column by column and index by index.
	refDB := ref.Driver.DB()
	for _, stmt := range graph.MySQLTables() {
		if _, err := refDB.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{provider.Table, mailer.Table, graph.ReceiptTable} {
		if got, want := mysqlColumns(t, conn, table), mysqlColumns(t, refDB, table); !slices.Equal(got, want) {
			t.Errorf("%s: the migrations make\n%v\nthe server's -migrate makes\n%v", table, got, want)
		}
	}
	if out := mustMigrate(t, db.DSN, "up"); !strings.Contains(out, "no pending migrations") {
		t.Fatalf("second up: %s", out)
	}
	if out := mustMigrate(t, db.DSN, "status"); !strings.Contains(out, "up to date at version "+files[len(files)-1].Version()) {
		t.Fatalf("status:\n%s", out)
	}
}

// check -dialect mysql passes on the committed MySQL migrations and fails,
// with the command that fixes it, when the ent schema has a change they
// do not make; diff -dialect mysql then writes the missing migration.
func TestMySQLCheckDetectsDrift(t *testing.T) {
	t.Parallel()
	if out := mustMigrate(t, "", "check", "-dialect", "mysql", "-dir", repoMySQLDir); !strings.Contains(out, "ok (mysql):") {
		t.Fatalf("check -dialect mysql on the committed migrations: %s", out)
	}
	dir := copyMigrationsOf(t, repoMySQLDir)
	writeFile(t, dir, "99990101000000_drop_paid.sql", "ALTER TABLE `orders` DROP COLUMN `paid`;\n")
	mustMigrate(t, "", "hash", "-dialect", "mysql", "-dir", dir)
	out, err := migrateCmd(t, "", "check", "-dialect", "mysql", "-dir", dir)
	if !errors.Is(err, errDrift) || !strings.Contains(err.Error(), "ADD COLUMN `paid`") ||
		!strings.Contains(err.Error(), "go run ./cmd/migrate diff -dialect mysql <name>") {
		t.Fatalf("check after a dropped column: %v\n%s", err, out)
	}

	// The developer's way out, from nothing: diff writes the migrations'
	// schema again (the committed initial migration, while it is the only
	// one), and check passes.
	empty := t.TempDir()
	mustMigrate(t, "", "hash", "-dialect", "mysql", "-dir", empty)
	out = mustMigrate(t, "", "diff", "-dialect", "mysql", "-dir", empty, "initial")
	written := committedFilesIn(t, empty)
	if committed := committedFilesIn(t, repoMySQLDir); len(committed) == 1 && !bytes.Equal(written[0].Bytes(), committed[0].Bytes()) {
		t.Fatalf("diff from nothing differs from the committed initial migration:\n%s\n---\n%s", written[0].Bytes(), committed[0].Bytes())
	}
	mustMigrate(t, "", "check", "-dialect", "mysql", "-dir", empty)
}

// MySQL's DDL commits by itself, so a file runs statement by statement: a
// failure leaves the statements before it applied, status says so, and up
// resumes at the failed statement once the file is fixed.
func TestMySQLFailedMigrationResumes(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.MariaDB)
	dir := copyMigrationsOf(t, repoMySQLDir)
	bad := "99990101000000_two_tables.sql"
	writeFile(t, dir, bad, "CREATE TABLE `first` (`id` bigint PRIMARY KEY);\nCREATE TABLE `second` (`id` no_such_type);\n")
	mustMigrate(t, "", "hash", "-dialect", "mysql", "-dir", dir)
	out, err := migrateCmd(t, db.DSN, "up", "-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "at statement 2 of 2") || !strings.Contains(err.Error(), "DIRTY") {
		t.Fatalf("up with a failing statement: %v\n%s", err, out)
	}
	conn := db.Driver.DB()
	if ts := mysqlTables(t, conn); !slices.Contains(ts, "first") || slices.Contains(ts, "second") {
		t.Fatalf("tables after the failure: %v", ts)
	}
	if st, err := migrateCmd(t, db.DSN, "status", "-dir", dir); err == nil || !strings.Contains(st, "FAILED") {
		t.Fatalf("status after the failure: %v\n%s", err, st)
	}
	// The developer fixes the failed statement (the applied one stays).
	writeFile(t, dir, bad, "CREATE TABLE `first` (`id` bigint PRIMARY KEY);\nCREATE TABLE `second` (`id` bigint PRIMARY KEY);\n")
	mustMigrate(t, "", "hash", "-dialect", "mysql", "-dir", dir)
	out = mustMigrate(t, db.DSN, "up", "-dir", dir)
	if ts := mysqlTables(t, conn); !slices.Contains(ts, "second") {
		t.Fatalf("tables after the retry: %v\n%s", ts, out)
	}
	if st := mustMigrate(t, db.DSN, "status", "-dir", dir); !strings.Contains(st, "up to date at version 99990101000000") {
		t.Fatalf("status after the retry:\n%s", st)
	}
}
