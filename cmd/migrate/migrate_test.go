package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/schema"

	"github.com/goovo/idem/ent"
	entmigrate "github.com/goovo/idem/ent/migrate"
	"github.com/goovo/idem/ent/migrate/migrations"
	"github.com/goovo/idem/idemoutbox"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// repoDir is the committed migration directory, seen from this package.
const repoDir = "../../" + DefaultDir

// migrateCmd runs one migrate command line in-process with DATABASE_URL
// set to dsn (empty: unset).
func migrateCmd(t *testing.T, dsn string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dsn
		}
		return os.Getenv(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, args, &out, &errOut, getenv)
	return out.String() + errOut.String(), err
}

func mustMigrate(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	out, err := migrateCmd(t, dsn, args...)
	if err != nil {
		t.Fatalf("migrate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// committedFiles lists the committed migration files.
func committedFiles(t *testing.T) []migrate.File {
	t.Helper()
	d, err := migrate.NewLocalDir(repoDir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := d.Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no committed migrations")
	}
	return files
}

// copyMigrations copies the committed directory to a temporary one.
func copyMigrations(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range committedFiles(t) {
		writeFile(t, dst, f.Name(), string(f.Bytes()))
	}
	sum, err := os.ReadFile(filepath.Join(repoDir, migrate.HashFileName))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, migrate.HashFileName, string(sum))
	return dst
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rehash rewrites atlas.sum of dir, as a developer would.
func rehash(t *testing.T, dir string) {
	t.Helper()
	mustMigrate(t, "", "hash", "-dir", dir)
}

func tables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`)
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
	return names
}

func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func lastVersion(t *testing.T) string {
	files := committedFiles(t)
	return files[len(files)-1].Version()
}

// entChanges compares the database's ent tables with the ent schema the way
// ent's automatic migration does (inspection), but keeping every change,
// drops included, and returns them.
func entChanges(t *testing.T, db *idemtest.DB) []atlas.Change {
	t.Helper()
	var changes []atlas.Change
	m, err := schema.NewMigrate(db.Driver,
		schema.WithDir(&migrate.MemDir{}),
		schema.WithMigrationMode(schema.ModeInspect),
		schema.WithDialect(dialect.Postgres),
		schema.WithDropColumn(true), schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
		schema.WithDiffHook(func(next schema.Differ) schema.Differ {
			return schema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
				cs, err := next.Diff(current, desired)
				changes = append(changes, cs...)
				return cs, err
			})
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.NamedDiff(context.Background(), "x", entmigrate.Tables...); err != nil && !errors.Is(err, migrate.ErrNoPlan) {
		t.Fatal(err)
	}
	return changes
}

// The committed migrations, applied to an empty PostgreSQL schema, produce
// exactly the schema the ent client expects: the schema ent's own automatic
// migration (client.Schema.Create) makes from scratch, column by column and
// index by index, as PostgreSQL stores them.
func TestMigrationsProduceTheEntSchema(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	out := mustMigrate(t, db.DSN, "up")
	if !strings.Contains(out, "applied "+fmt.Sprint(len(committedFiles(t)))+" migration(s)") {
		t.Fatalf("up: %s", out)
	}
	want := []string{RevisionsTable, "river_job", "river_leader", "river_migration", "river_notification", "river_queue",
		provider.Table, mailer.Table}
	for _, tb := range entmigrate.Tables {
		want = append(want, tb.Name)
	}
	slices.Sort(want)
	if got := tables(t, openSQL(t, db.DSN)); !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}

	// The server's automatic migration: ent's, then River's own migrator.
	ref := idemtest.Open(t, idemtest.Postgres)
	if err := ent.NewClient(ent.Driver(ref.Driver)).Schema.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := idemoutbox.Migrate(context.Background(), ref.Driver.DB(), "postgres"); err != nil {
		t.Fatal(err)
	}
	migrated, created := inspectEnt(t, db.DSN), inspectEnt(t, ref.DSN)
	created.Name = migrated.Name
	if cs := diffSchemas(t, db.DSN, migrated, created); len(cs) > 0 {
		t.Fatalf("the migrated schema differs from the one ent creates: %d changes:\n%s", len(cs), describe(cs))
	}

	// The simulated provider's and mailer's tables: those the server's
	// -migrate makes (provider.Migrate, mailer.Migrate), column by column.
	refDB := ref.Driver.DB()
	if err := errors.Join(provider.Migrate(context.Background(), refDB, dialect.Postgres), mailer.Migrate(context.Background(), refDB, dialect.Postgres)); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{provider.Table, mailer.Table} {
		if got, want := columns(t, openSQL(t, db.DSN), table), columns(t, refDB, table); !slices.Equal(got, want) {
			t.Fatalf("%s: the migrations make columns\n%v\nthe server's -migrate makes\n%v", table, got, want)
		}
	}
}

// columns describes table's columns and constraints in the schema of db.
func columns(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1
		UNION ALL SELECT constraint_type || ' ' || count(*) FROM information_schema.table_constraints
		WHERE table_schema = current_schema() AND table_name = $1 AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')
		GROUP BY constraint_type ORDER BY 1`, table)
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
	if err := rows.Err(); err != nil || len(cols) == 0 {
		t.Fatalf("%s: %v (%d columns)", table, err, len(cols))
	}
	return cols
}

// What cmd/server does at start, client.Schema.Create, on a migrated
// database. It is not a no-op: ent compares the partial indexes' WHERE
// clauses as written in the ent schema with the text PostgreSQL stores
// (parenthesized, with casts), finds them different, and drops and re-creates
// those indexes at every start, migrated database or not. The re-created
// indexes are the same, so the schema stays as the migrations made it (the
// server test checks that too). This test pins that down: anything more
// than re-creating partial indexes would be drift.
func TestServerStartupMigrationOnAMigratedDatabase(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	mustMigrate(t, db.DSN, "up")
	var stmts []string
	client := ent.NewClient(ent.Driver(db.Driver))
	err := client.Schema.Create(context.Background(), schema.WithApplyHook(func(next schema.Applier) schema.Applier {
		return schema.ApplyFunc(func(ctx context.Context, conn dialect.ExecQuerier, plan *migrate.Plan) error {
			for _, c := range plan.Changes {
				stmts = append(stmts, c.Cmd)
			}
			return next.Apply(ctx, conn, plan)
		})
	}))
	if err != nil {
		t.Fatal(err)
	}
	// The server migrates at start: on a database the migrations made, that
	// must change nothing (a rebuilt index would block writes at every
	// start of every replica).
	if len(stmts) > 0 {
		t.Fatalf("client.Schema.Create on the migrated schema changes it:\n%s", strings.Join(stmts, "\n"))
	}
	if cs := entChanges(t, db); len(cs) > 0 {
		t.Fatalf("ent sees changes on the migrated schema:\n%s", describe(cs))
	}
}

func describe(cs []atlas.Change) string {
	var b strings.Builder
	for _, c := range cs {
		if mt, ok := c.(*atlas.ModifyTable); ok {
			for _, cc := range mt.Changes {
				fmt.Fprintf(&b, "  %s: %T %+v\n", mt.T.Name, cc, cc)
			}
			continue
		}
		fmt.Fprintf(&b, "  %T\n", c)
	}
	return b.String()
}

// up twice: the second run applies nothing and changes nothing.
func TestUpTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	mustMigrate(t, db.DSN, "up")
	conn := openSQL(t, db.DSN)
	before := tables(t, conn)
	var revsBefore string
	if err := conn.QueryRow(`SELECT json_agg(r ORDER BY version)::text FROM ` + RevisionsTable + ` r`).Scan(&revsBefore); err != nil {
		t.Fatal(err)
	}

	out := mustMigrate(t, db.DSN, "up")
	if !strings.Contains(out, "no pending migrations") || strings.Contains(out, "applying") {
		t.Fatalf("second up: %s", out)
	}
	var revsAfter string
	_ = conn.QueryRow(`SELECT json_agg(r ORDER BY version)::text FROM ` + RevisionsTable + ` r`).Scan(&revsAfter)
	if revsAfter != revsBefore {
		t.Fatalf("the second up changed the revisions:\n%s\n%s", revsBefore, revsAfter)
	}
	if after := tables(t, conn); !slices.Equal(after, before) {
		t.Fatalf("tables %v, then %v", before, after)
	}
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM ` + RevisionsTable + ` WHERE error IS NULL AND applied = total`).Scan(&n); err != nil || n != len(committedFiles(t)) {
		t.Fatalf("%d applied revisions (%v), want %d", n, err, len(committedFiles(t)))
	}
}

// Concurrent ups on one schema (two deploys at once) apply each file once.
func TestConcurrentUpsApplyOnce(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	var (
		wg   sync.WaitGroup
		outs [3]string
		errs [3]error
	)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = migrateCmd(t, db.DSN, "up")
		}()
	}
	wg.Wait()
	applying := 0
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("up %d: %v\n%s", i, errs[i], outs[i])
		}
		applying += strings.Count(outs[i], "applying ")
	}
	if applying != len(committedFiles(t)) {
		t.Fatalf("files applied %d times in all, want %d:\n%s", applying, len(committedFiles(t)), strings.Join(outs[:], "\n---\n"))
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	files := committedFiles(t)
	out := mustMigrate(t, db.DSN, "status")
	for _, f := range files {
		if !strings.Contains(out, f.Version()) || !strings.Contains(out, f.Desc()) {
			t.Fatalf("status does not list %s:\n%s", f.Name(), out)
		}
	}
	if strings.Count(out, "pending") < len(files) || !strings.Contains(out, "empty schema") {
		t.Fatalf("status before up:\n%s", out)
	}
	if ts := tables(t, openSQL(t, db.DSN)); len(ts) != 0 {
		t.Fatalf("status created tables: %v", ts)
	}
	mustMigrate(t, db.DSN, "up")
	out = mustMigrate(t, db.DSN, "status")
	if strings.Contains(out, "pending") || strings.Count(out, "applied 20") != len(files) ||
		!strings.Contains(out, "up to date at version "+lastVersion(t)) {
		t.Fatalf("status after up:\n%s", out)
	}
	t.Logf("migrate status:\n%s", out)
}

// A migration file changed after atlas.sum was written is refused, and
// nothing runs. So are an added file and a removed one.
func TestTamperedDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	files := committedFiles(t)
	last := files[len(files)-1]
	for _, tc := range []struct {
		name, reason string
		tamper       func(dir string)
	}{
		{"edited", "edited", func(dir string) {
			writeFile(t, dir, last.Name(), string(last.Bytes())+"-- edited by hand\n")
		}},
		{"added", "added", func(dir string) {
			writeFile(t, dir, "99990101000000_sneaky.sql", "CREATE TABLE sneaky (id int);\n")
		}},
		{"removed", "removed", func(dir string) {
			if err := os.Remove(filepath.Join(dir, last.Name())); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := copyMigrations(t)
			tc.tamper(dir)
			db := idemtest.Open(t, idemtest.Postgres)
			out, err := migrateCmd(t, db.DSN, "up", "-dir", dir)
			if err == nil || !strings.Contains(err.Error(), "atlas.sum does not match") || !strings.Contains(err.Error(), "was "+tc.reason) {
				t.Fatalf("up on a tampered directory: %v\n%s", err, out)
			}
			if ts := tables(t, openSQL(t, db.DSN)); len(ts) != 0 {
				t.Fatalf("tables created: %v", ts)
			}
			if _, err := migrateCmd(t, db.DSN, "status", "-dir", dir); err == nil || !strings.Contains(err.Error(), "atlas.sum does not match") {
				t.Fatalf("status on a tampered directory: %v", err)
			}
			if _, err := migrateCmd(t, "", "check", "-dir", dir); err == nil || !strings.Contains(err.Error(), "atlas.sum does not match") {
				t.Fatalf("check on a tampered directory: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// A file that fails runs in a transaction: nothing of it stays, the failure
// is recorded and reported, and up retries it once the cause is fixed. A
// file without a transaction (atlas:txmode none) is dirty after a failure
// and resumes where it stopped.
func TestFailedMigrationIsReported(t *testing.T) {
	t.Parallel()
	t.Run("transactional", func(t *testing.T) {
		t.Parallel()
		dir := copyMigrations(t)
		writeFile(t, dir, "99990101000000_broken.sql", "CREATE TABLE broken_a (id int);\nINSERT INTO no_such_table VALUES (1);\n")
		rehash(t, dir)
		db := idemtest.Open(t, idemtest.Postgres)
		conn := openSQL(t, db.DSN)
		out, err := migrateCmd(t, db.DSN, "up", "-dir", dir)
		if err == nil {
			t.Fatalf("up succeeded:\n%s", out)
		}
		for _, want := range []string{"99990101000000_broken.sql failed at statement 2 of 2", "no_such_table", "42P01", "rolled back", "still at version " + lastVersion(t)} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("the error does not say %q:\n%v", want, err)
			}
		}
		if slices.Contains(tables(t, conn), "broken_a") {
			t.Fatal("the failed file's first statement stayed applied")
		}
		st, serr := migrateCmd(t, db.DSN, "status", "-dir", dir)
		if serr == nil || !strings.Contains(st, "FAILED") || !strings.Contains(st, "0 of 2 statements applied") || !strings.Contains(st, "no_such_table") {
			t.Fatalf("status after the failure: %v\n%s", serr, st)
		}
		t.Logf("up: %v\nstatus (%v):\n%s", err, serr, st)

		writeFile(t, dir, "99990101000000_broken.sql", "CREATE TABLE broken_a (id int);\nCREATE TABLE broken_b (id int);\n")
		rehash(t, dir)
		out = mustMigrate(t, db.DSN, "up", "-dir", dir)
		if !strings.Contains(out, "retrying") || !slices.Contains(tables(t, conn), "broken_b") {
			t.Fatalf("up after the fix:\n%s", out)
		}
		if st := mustMigrate(t, db.DSN, "status", "-dir", dir); !strings.Contains(st, "up to date at version 99990101000000") {
			t.Fatalf("status after the fix:\n%s", st)
		}
	})
	t.Run("withdrawn", func(t *testing.T) {
		// A failed file that is then deleted (it never ran anywhere) does
		// not block the next up, since nothing of it was applied.
		t.Parallel()
		dir := copyMigrations(t)
		writeFile(t, dir, "99990101000000_broken.sql", "INSERT INTO no_such_table VALUES (1);\n")
		rehash(t, dir)
		db := idemtest.Open(t, idemtest.Postgres)
		if _, err := migrateCmd(t, db.DSN, "up", "-dir", dir); err == nil {
			t.Fatal("up succeeded")
		}
		out := mustMigrate(t, db.DSN, "up") // the embedded directory, without the file
		if !strings.Contains(out, "forgetting it") || !strings.Contains(out, "no pending migrations") {
			t.Fatalf("up without the failed file:\n%s", out)
		}
		if st := mustMigrate(t, db.DSN, "status"); !strings.Contains(st, "up to date at version "+lastVersion(t)) {
			t.Fatalf("status:\n%s", st)
		}
	})
	t.Run("txmode none", func(t *testing.T) {
		t.Parallel()
		dir := copyMigrations(t)
		const first = "-- atlas:txmode none\n\nCREATE TABLE part_a (id int);\n"
		writeFile(t, dir, "99990101000000_partial.sql", first+"INSERT INTO no_such_table VALUES (1);\nCREATE TABLE part_c (id int);\n")
		rehash(t, dir)
		db := idemtest.Open(t, idemtest.Postgres)
		conn := openSQL(t, db.DSN)
		_, err := migrateCmd(t, db.DSN, "up", "-dir", dir)
		if err == nil || !strings.Contains(err.Error(), "DIRTY") || !strings.Contains(err.Error(), "1 of its 3 statements stay applied") ||
			!strings.Contains(err.Error(), "resumes at statement 2") {
			t.Fatalf("up: %v", err)
		}
		if !slices.Contains(tables(t, conn), "part_a") {
			t.Fatal("part_a was not applied")
		}
		st, serr := migrateCmd(t, db.DSN, "status", "-dir", dir)
		if serr == nil || !strings.Contains(st, "FAILED") || !strings.Contains(st, "1 of 3 statements applied") {
			t.Fatalf("status: %v\n%s", serr, st)
		}
		t.Logf("up: %v\nstatus (%v):\n%s", err, serr, st)
		writeFile(t, dir, "99990101000000_partial.sql", first+"CREATE TABLE part_b (id int);\nCREATE TABLE part_c (id int);\n")
		rehash(t, dir)
		out := mustMigrate(t, db.DSN, "up", "-dir", dir)
		ts := tables(t, conn)
		if !strings.Contains(out, "retrying") || !slices.Contains(ts, "part_b") || !slices.Contains(ts, "part_c") {
			t.Fatalf("resume:\n%s\ntables %v", out, ts)
		}
	})
}

// check passes on the committed migrations, and fails with the way out when
// the ent schema has changes no migration makes.
func TestCheckDetectsDrift(t *testing.T) {
	t.Parallel()
	if out := mustMigrate(t, "", "check", "-dir", repoDir); !strings.Contains(out, "ok:") {
		t.Fatalf("check on the committed migrations: %s", out)
	}
	t.Run("last migration missing", func(t *testing.T) {
		// A schema change without its migration: the last migration was
		// never generated.
		t.Parallel()
		dir := copyMigrations(t)
		// The last of ent's: River's are River's SQL, which diff does not
		// write (see "River's migration missing"), and the example's
		// stand-ins are hand-written.
		var files []migrate.File
		for _, f := range committedFiles(t) {
			if !strings.Contains(f.Name(), "river") && !strings.Contains(f.Name(), "stand_ins") {
				files = append(files, f)
			}
		}
		last := files[len(files)-1]
		if err := os.Remove(filepath.Join(dir, last.Name())); err != nil {
			t.Fatal(err)
		}
		rehash(t, dir)
		out, err := migrateCmd(t, "", "check", "-dir", dir)
		if !errors.Is(err, errDrift) || !strings.Contains(err.Error(), "go run ./cmd/migrate diff <name>") {
			t.Fatalf("check without the last migration: %v\n%s", err, out)
		}
		t.Logf("check: %v", err)
		// The developer's fix: diff writes the missing migration, and the
		// check passes. When the removed migration was generated from the
		// previous one, the new one is the same SQL.
		out = mustMigrate(t, "", "diff", "-dir", dir, "again")
		d, _ := migrate.NewLocalDir(dir)
		after, _ := d.Files()
		if len(after) != len(committedFiles(t)) || after[len(after)-1].Desc() != "again" {
			t.Fatalf("diff wrote %v:\n%s", after, out)
		}
		if len(files) == 1 && !bytes.Equal(after[0].Bytes(), last.Bytes()) {
			t.Fatalf("diff from nothing differs from the committed initial migration:\n%s\n---\n%s", after[0].Bytes(), last.Bytes())
		}
		mustMigrate(t, "", "check", "-dir", dir)
	})
	t.Run("River's migration missing", func(t *testing.T) {
		// River's tables behind the River the module requires (a River
		// upgrade without its migration).
		t.Parallel()
		dir := copyMigrations(t)
		for _, f := range committedFiles(t) {
			if strings.Contains(f.Name(), "river") {
				if err := os.Remove(filepath.Join(dir, f.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
		rehash(t, dir)
		_, err := migrateCmd(t, "", "check", "-dir", dir)
		if !errors.Is(err, errDrift) || !strings.Contains(err.Error(), "River's tables to its version 0") {
			t.Fatalf("check without River's migration: %v", err)
		}
	})
	t.Run("column dropped", func(t *testing.T) {
		t.Parallel()
		dir := copyMigrations(t)
		writeFile(t, dir, "99990101000000_drop_paid.sql", `ALTER TABLE "orders" DROP COLUMN "paid";`+"\n")
		rehash(t, dir)
		_, err := migrateCmd(t, "", "check", "-dir", dir)
		if !errors.Is(err, errDrift) || !strings.Contains(err.Error(), `ADD COLUMN "paid"`) {
			t.Fatalf("check: %v", err)
		}
	})
	t.Run("index dropped", func(t *testing.T) {
		t.Parallel()
		dir := copyMigrations(t)
		writeFile(t, dir, "99990101000000_drop_index.sql", `DROP INDEX "order_idempotency_lease_expires_at";`+"\n")
		rehash(t, dir)
		_, err := migrateCmd(t, "", "check", "-dir", dir)
		if !errors.Is(err, errDrift) || !strings.Contains(err.Error(), `CREATE INDEX "order_idempotency_lease_expires_at"`) {
			t.Fatalf("check: %v", err)
		}
	})
	t.Run("extra table", func(t *testing.T) {
		t.Parallel()
		dir := copyMigrations(t)
		writeFile(t, dir, "99990101000000_legacy.sql", "CREATE TABLE legacy (id int);\n")
		rehash(t, dir)
		_, err := migrateCmd(t, "", "check", "-dir", dir)
		if !errors.Is(err, errDrift) || !strings.Contains(err.Error(), "legacy") || !strings.Contains(err.Error(), "DROP TABLE") {
			t.Fatalf("check: %v", err)
		}
	})
	t.Run("no change writes nothing", func(t *testing.T) {
		t.Parallel()
		dir := copyMigrations(t)
		before, _ := os.ReadDir(dir)
		out := mustMigrate(t, "", "diff", "-dir", dir, "nothing")
		after, _ := os.ReadDir(dir)
		if len(after) != len(before) || !strings.Contains(out, "no changes") {
			t.Fatalf("diff without a schema change: %s (%d files, then %d)", out, len(before), len(after))
		}
	})
}

// A database made by ent's automatic migration (the server before
// versioned migrations) is refused by up until it is baselined.
func TestBaselineOfAnAutoMigratedDatabase(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	if err := ent.NewClient(ent.Driver(db.Driver)).Schema.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := migrateCmd(t, db.DSN, "up")
	if err == nil || !strings.Contains(err.Error(), "no migration history but is not empty") || !strings.Contains(err.Error(), "-baseline") {
		t.Fatalf("up on an auto-migrated schema: %v", err)
	}
	if st, _ := migrateCmd(t, db.DSN, "status"); !strings.Contains(st, "no migration history, but the schema is not empty") {
		t.Fatalf("status:\n%s", st)
	}
	// The automatic migration made the current schema: the newest version.
	files := committedFiles(t)
	newest := files[len(files)-1].Version()
	out := mustMigrate(t, db.DSN, "up", "-baseline", newest)
	if !strings.Contains(out, "baseline") {
		t.Fatalf("up -baseline: %s", out)
	}
	st := mustMigrate(t, db.DSN, "status")
	if !strings.Contains(st, "baseline (recorded as applied, not run)") || !strings.Contains(st, "up to date") {
		t.Fatalf("status:\n%s", st)
	}
	if out := mustMigrate(t, db.DSN, "up"); !strings.Contains(out, "no pending migrations") {
		t.Fatalf("up after the baseline: %s", out)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn  string
		args []string
		want string
	}{
		{"", []string{"up"}, "DATABASE_URL is not set"},
		{"idem-example.db", []string{"up"}, "must be a postgres://"},
		{"sqlite:app.db", []string{"status"}, "must be a postgres://"},
		{"mysql://root@localhost/app", []string{"up"}, "must be a postgres://"},
		{"", []string{"diff"}, "want a migration NAME"},
		{"", []string{"diff", "Bad Name"}, "migration name"},
		{"", []string{"frobnicate"}, "unknown command"},
	} {
		out, err := migrateCmd(t, tc.dsn, tc.args...)
		if err == nil || !strings.Contains(err.Error()+out, tc.want) {
			t.Errorf("migrate %v with DATABASE_URL=%q: %v\n%s", tc.args, tc.dsn, err, out)
		}
	}
	for _, h := range [][]string{{"-h"}, {"up", "-h"}} {
		out, err := migrateCmd(t, "", h...)
		if err != nil || !strings.Contains(out, "migrate up [-baseline VERSION]") || !strings.Contains(out, "migrate diff [-dev-url URL] NAME") {
			t.Errorf("migrate %v: %v\n%s", h, err, out)
		}
	}
}

// The binary's embedded migrations are the committed directory.
func TestEmbeddedMigrationsAreTheDirectory(t *testing.T) {
	t.Parallel()
	for _, f := range committedFiles(t) {
		b, err := fs.ReadFile(migrations.FS, f.Name())
		if err != nil || !bytes.Equal(b, f.Bytes()) {
			t.Fatalf("embedded %s differs: %v", f.Name(), err)
		}
	}
	sum, _ := os.ReadFile(filepath.Join(repoDir, migrate.HashFileName))
	if b, err := fs.ReadFile(migrations.FS, migrate.HashFileName); err != nil || !bytes.Equal(b, sum) {
		t.Fatalf("embedded atlas.sum differs: %v", err)
	}
}

// The example server starts on a database made by migrate up without its
// automatic migration, leaves its schema as it is, and serves a mutation.
func TestServerStartsOnTheMigratedDatabase(t *testing.T) {
	t.Parallel()
	db := idemtest.Open(t, idemtest.Postgres)
	mustMigrate(t, db.DSN, "up")
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/goovo/idem/cmd/server").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/server: %v\n%s", err, out)
	}
	before := inspectEnt(t, db.DSN)

	// The server must start on the migrated database: WaitListening fails
	// the test, with the server's output, if it exits instead.
	addr := proctest.FreeAddr(t)
	// -migrate=false, as in production: the migrations hold every table
	// the server needs, the simulated provider's and mailer's included.
	server := proctest.Start(t, bin, []string{"DATABASE_URL=" + db.DSN}, []string{"-addr", addr, "-migrate=false"})
	server.WaitListening(t, addr, testkit.WaitBound)

	body := `{"query":"mutation { createOrder(idempotencyKey: \"order-1\", input: {amount: 1200, currency: \"EUR\"}) { id amount currency paid } }"}`
	post := func() (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/query", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant-ID", "acme")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		return res, buf.Bytes()
	}
	res, b := post()
	var got struct {
		Data struct {
			CreateOrder struct {
				ID       string
				Amount   int
				Currency string
				Paid     bool
			}
		}
		Errors []any
	}
	if err := json.Unmarshal(b, &got); err != nil || res.StatusCode != http.StatusOK || len(got.Errors) > 0 {
		t.Fatalf("createOrder: %d %s (%v)\n%s", res.StatusCode, b, err, server.Output())
	}
	if o := got.Data.CreateOrder; o.ID == "" || o.Amount != 1200 || o.Currency != "EUR" || o.Paid {
		t.Fatalf("createOrder: %s", b)
	}
	// The retry is replayed from the row the migrations' tables stored.
	res2, b2 := post()
	if res2.Header.Get("Idempotent-Replayed") != "true" || !bytes.Contains(b2, []byte(`"id":"`+got.Data.CreateOrder.ID+`"`)) {
		t.Fatalf("retry: %v %s", res2.Header, b2)
	}
	var n int
	if err := openSQL(t, db.DSN).QueryRow(`SELECT count(*) FROM orders WHERE tenant_id = 'acme' AND idempotency_key = 'order-1' AND idempotency_status = 'succeeded'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d orders (%v)", n, err)
	}
	// The server's start-up migration (client.Schema.Create) changed nothing
	// in the ent tables.
	if changes := diffSchemas(t, db.DSN, before, inspectEnt(t, db.DSN)); len(changes) > 0 {
		t.Fatalf("the server changed the migrated schema: %v", changes)
	}
	if out := mustMigrate(t, db.DSN, "status"); !strings.Contains(out, "up to date") {
		t.Fatalf("status after the server ran:\n%s", out)
	}
}

// inspectEnt inspects the ent tables of the schema of dsn.
func inspectEnt(t *testing.T, dsn string) *atlas.Schema {
	t.Helper()
	tg, err := openTarget(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	var names []string
	for _, tb := range entmigrate.Tables {
		names = append(names, tb.Name)
	}
	s, err := tg.drv.InspectSchema(context.Background(), "", &atlas.InspectOptions{Tables: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tables) != len(names) {
		t.Fatalf("%d ent tables, want %d", len(s.Tables), len(names))
	}
	return s
}

func diffSchemas(t *testing.T, dsn string, from, to *atlas.Schema) []atlas.Change {
	t.Helper()
	tg, err := openTarget(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	changes, err := tg.drv.SchemaDiff(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return changes
}
