package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/jackc/pgx/v5/stdlib"

	entmigrate "github.com/goovo/idem/ent/migrate"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
)

// DefaultDevURL is the PostgreSQL server the developer's commands borrow a
// throwaway schema from, when neither -dev-url nor TEST_DATABASE_URL is set.
const DefaultDevURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// registerPostgres makes pgx answer to the database/sql name "postgres",
// which Atlas's URL opener (sqlclient) asks for. Through that opener the
// Atlas driver is bound to the schema of the URL's search_path, so that
// replaying and normalizing stay inside the throwaway schema instead of
// requiring the whole database to be empty.
var registerPostgres = sync.OnceFunc(func() {
	if !slices.Contains(sql.Drivers(), "postgres") {
		sql.Register("postgres", stdlib.GetDefaultDriver())
	}
})

// devSchema is a fresh, empty PostgreSQL schema for one command, dropped by
// close.
type devSchema struct {
	url   string // base URL with search_path set to the schema
	name  string
	admin *sql.DB
}

func openDevSchema(ctx context.Context, base string) (*devSchema, error) {
	if !strings.HasPrefix(base, "postgres://") && !strings.HasPrefix(base, "postgresql://") {
		return nil, fmt.Errorf("dev database %q: want a postgres:// URL", redact(base))
	}
	registerPostgres()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := admin.PingContext(pctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("dev database %s is unreachable (the diff and check commands need a PostgreSQL server to replay the migrations on; set -dev-url or TEST_DATABASE_URL, or start it): %w", redact(base), err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "idem_migrate_dev_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("dev database: create schema: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		admin.Close()
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return &devSchema{url: u.String(), name: name, admin: admin}, nil
}

func (d *devSchema) close() error {
	defer d.admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+d.name+" CASCADE"); err != nil {
		return fmt.Errorf("dev database: drop schema %s: %w", d.name, err)
	}
	return nil
}

// diffResult is what comparing a migration directory with the ent schema
// found.
type diffResult struct {
	// File is the migration written into the directory, nil if the
	// directory already produces the ent schema.
	File migrate.File
	// ExtraTables exist after replaying the directory but not in the ent
	// schema. ent never writes DROP TABLE, so these need a hand-written
	// migration.
	ExtraTables []string
}

// entDiff replays dir on a fresh schema of the dev database, compares the
// result with the ent schema (the generated ent/migrate tables) and, if they
// differ, writes the migration that closes the gap into dir, with atlas.sum.
// This is ent's versioned-migration diff (NamedDiff in replay mode), with
// dropped columns and indexes included.
func entDiff(ctx context.Context, devURL string, dir migrate.Dir, name string) (res diffResult, err error) {
	dev, err := openDevSchema(ctx, devURL)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := dev.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%w (drop it by hand)", cerr))
		}
	}()
	before, err := dir.Files()
	if err != nil {
		return res, err
	}
	m, err := schema.NewMigrateURL(dev.url,
		schema.WithDir(dir),
		schema.WithMigrationMode(schema.ModeReplay),
		schema.WithDialect(dialect.Postgres),
		schema.WithFormatter(migrate.DefaultFormatter),
		schema.WithDropColumn(true),
		schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
		schema.WithDiffHook(recordDroppedTables(&res.ExtraTables)),
	)
	if err != nil {
		return res, err
	}
	switch err := m.NamedDiff(ctx, name, entmigrate.Tables...); {
	case errors.Is(err, migrate.ErrNoPlan):
		return res, nil
	case err != nil:
		return res, fmt.Errorf("diff: %w", err)
	}
	after, err := dir.Files()
	if err != nil {
		return res, err
	}
	for _, f := range after {
		if !slices.ContainsFunc(before, func(b migrate.File) bool { return b.Name() == f.Name() }) {
			res.File = f
		}
	}
	if res.File == nil {
		return res, errors.New("diff: ent reported changes but wrote no migration file")
	}
	return res, nil
}

// recordDroppedTables is an ent diff hook that notes the tables the
// migrations create and the ent schema does not have: ent's diff keeps only
// created and modified tables, so they would go unnoticed. The tables that
// are not ent's (foreignTable) are left out of the diff: their migrations
// are River's SQL and the example's stand-ins.
func recordDroppedTables(tables *[]string) schema.DiffHook {
	return func(next schema.Differ) schema.Differ {
		return schema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
			changes, err := next.Diff(current, desired)
			kept := changes[:0]
			for _, c := range changes {
				if foreignChange(c) {
					continue
				}
				if d, ok := c.(*atlas.DropTable); ok {
					*tables = append(*tables, d.T.Name)
				}
				kept = append(kept, c)
			}
			return kept, err
		})
	}
}

// foreignChange reports whether c changes a table that is not ent's.
func foreignChange(c atlas.Change) bool {
	var t *atlas.Table
	switch c := c.(type) {
	case *atlas.DropTable:
		t = c.T
	case *atlas.ModifyTable:
		t = c.T
	case *atlas.AddTable:
		t = c.T
	}
	return t != nil && foreignTable(t.Name)
}

// foreignTable reports whether the migrations' table name is not ent's:
// River's (river_*), and the tables of the example's simulated provider
// and mailer, which stand in for services that keep their records in
// systems of their own (the migration add_example_stand_ins; the server's
// -migrate creates the same with provider.Migrate and mailer.Migrate).
func foreignTable(name string) bool {
	return strings.HasPrefix(name, "river_") || name == provider.Table || name == mailer.Table
}

func extraTablesHelp(tables []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the migrations create table(s) %s, which the ent schema no longer has.\n", strings.Join(tables, ", "))
	b.WriteString("ent's diff never writes DROP TABLE (dropping data is a decision): add a hand-written migration,\n")
	b.WriteString("  go run ./cmd/migrate new drop_<table>\n")
	b.WriteString("write the DROP TABLE statement(s) in the new file, then run go run ./cmd/migrate hash")
	return b.String()
}

// cmdDiff: go run ./cmd/migrate diff <name>.
func cmdDiff(ctx context.Context, stdout io.Writer, dirPath, devURL, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir, dirName, err := openValidDir(dirPath)
	if err != nil {
		return err
	}
	res, err := entDiff(ctx, devURL, dir, name)
	if err != nil {
		return err
	}
	if res.File == nil {
		fmt.Fprintf(stdout, "no changes: the migrations in %s already produce the ent schema; nothing written\n", dirName)
	} else {
		fmt.Fprintf(stdout, "wrote %s/%s and %s/%s:\n\n%s\n", dirName, res.File.Name(), dirName, migrate.HashFileName, res.File.Bytes())
		fmt.Fprintln(stdout, "Review it (DROP COLUMN and DROP INDEX are included), then commit both files.")
	}
	if len(res.ExtraTables) > 0 {
		return errors.New(extraTablesHelp(res.ExtraTables))
	}
	return nil
}

// errDrift is returned by check when the migrations and the ent schema
// disagree.
var errDrift = errors.New("migrations out of date")

// cmdCheck: the migrations, replayed on an empty schema, produce exactly the
// ent schema, and atlas.sum matches the files. Nothing is written.
func cmdCheck(ctx context.Context, stdout io.Writer, dirPath, devURL string) error {
	dir, dirName, err := openValidDir(dirPath)
	if err != nil {
		return err
	}
	files, err := dir.Files()
	if err != nil {
		return err
	}
	scratch, err := copyDir(dir)
	if err != nil {
		return err
	}
	res, err := entDiff(ctx, devURL, scratch, "missing")
	if err != nil {
		return err
	}
	var problems []string
	if res.File != nil {
		problems = append(problems, fmt.Sprintf(
			"the ent schema has changes that no migration in %s makes; the missing migration would be:\n\n%s\n"+
				"Generate it and commit it with atlas.sum:\n  go run ./cmd/migrate diff <name>",
			dirName, indent(string(res.File.Bytes()))))
	}
	if len(res.ExtraTables) > 0 {
		problems = append(problems, extraTablesHelp(res.ExtraTables))
	}
	river, err := checkRiver(dir, dirName)
	if err != nil {
		return err
	}
	if river != "" {
		problems = append(problems, river)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errDrift, strings.Join(problems, "\n\n"))
	}
	fmt.Fprintf(stdout, "ok: the %d migration(s) in %s produce exactly the ent schema and River's tables, and %s matches them\n",
		len(files), dirName, migrate.HashFileName)
	return nil
}

// cmdHash rewrites atlas.sum from the files.
func cmdHash(stdout io.Writer, dirPath string) error {
	dir, dirName, err := openDir(dirPath)
	if err != nil {
		return err
	}
	sum, err := dir.Checksum()
	if err != nil {
		return err
	}
	if err := migrate.WriteSumFile(dir, sum); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/%s (%d files)\n", dirName, migrate.HashFileName, len(sum))
	return nil
}

// cmdNew creates an empty migration for hand-written statements.
func cmdNew(stdout io.Writer, dirPath, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir, dirName, err := openValidDir(dirPath)
	if err != nil {
		return err
	}
	file := migrate.NewVersion() + "_" + name + ".sql"
	body := "-- Hand-written migration: write its statements below, each ending with ';'.\n" +
		"-- Then run: go run ./cmd/migrate hash && go run ./cmd/migrate check\n"
	if err := dir.WriteFile(file, []byte(body)); err != nil {
		return err
	}
	if err := cmdHash(io.Discard, dirPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/%s; edit it, then run go run ./cmd/migrate hash\n", dirName, file)
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
