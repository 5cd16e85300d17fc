package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"ariga.io/atlas/sql/migrate"
	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect/sql/schema"

	entmigrate "github.com/goovo/idem/ent/migrate"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
)

// entTables serialises ent's migrations in this process: ent's migration
// engine writes into the generated tables (entmigrate.Tables, a package
// variable) as it prepares them, so two at once are a data race (the
// tests run diffs, checks and automatic migrations in parallel).
var entTables sync.Mutex

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

// entDiff replays dir on a fresh schema (PostgreSQL) or database (MySQL)
// of the dev server, compares the
// result with the ent schema (the generated ent/migrate tables) and, if they
// differ, writes the migration that closes the gap into dir, with atlas.sum.
// This is ent's versioned-migration diff (NamedDiff in replay mode), with
// dropped columns and indexes included.
func entDiff(ctx context.Context, fl *flavor, devURL string, dir migrate.Dir, name string) (res diffResult, err error) {
	dev, err := fl.openDev(ctx, devURL)
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
		schema.WithDialect(fl.entDialect),
		schema.WithFormatter(migrate.DefaultFormatter),
		schema.WithDropColumn(true),
		schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
		schema.WithDiffHook(recordDroppedTables(&res.ExtraTables)),
	)
	if err != nil {
		return res, err
	}
	entTables.Lock()
	err = m.NamedDiff(ctx, name, entmigrate.Tables...)
	entTables.Unlock()
	switch {
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
// River's (river_*, PostgreSQL), the example's receipt outbox
// (graph.ReceiptTable, MySQL, where River does not run), and the tables of
// the example's simulated provider and mailer, which stand in for services
// that keep their records in systems of their own (the migrations
// add_example_stand_ins and add_example_tables; the server's -migrate
// creates the same).
func foreignTable(name string) bool {
	return strings.HasPrefix(name, "river_") || name == graph.ReceiptTable || name == provider.Table || name == mailer.Table
}

func extraTablesHelp(fl *flavor, tables []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the migrations create table(s) %s, which the ent schema no longer has.\n", strings.Join(tables, ", "))
	b.WriteString("ent's diff never writes DROP TABLE (dropping data is a decision): add a hand-written migration,\n")
	fmt.Fprintf(&b, "  go run ./cmd/migrate new%s drop_<table>\n", fl.flag())
	fmt.Fprintf(&b, "write the DROP TABLE statement(s) in the new file, then run go run ./cmd/migrate hash%s", fl.flag())
	return b.String()
}

// cmdDiff: go run ./cmd/migrate diff <name>.
func cmdDiff(ctx context.Context, stdout io.Writer, fl *flavor, dirPath, devURL, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir, dirName, err := openValidDir(fl, dirPath)
	if err != nil {
		return err
	}
	res, err := entDiff(ctx, fl, devURL, dir, name)
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
		return errors.New(extraTablesHelp(fl, res.ExtraTables))
	}
	return nil
}

// errDrift is returned by check when the migrations and the ent schema
// disagree.
var errDrift = errors.New("migrations out of date")

// cmdCheck: the migrations, replayed on an empty schema, produce exactly the
// ent schema, and atlas.sum matches the files. Nothing is written.
func cmdCheck(ctx context.Context, stdout io.Writer, fl *flavor, dirPath, devURL string) error {
	dir, dirName, err := openValidDir(fl, dirPath)
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
	res, err := entDiff(ctx, fl, devURL, scratch, "missing")
	if err != nil {
		return err
	}
	var problems []string
	if res.File != nil {
		problems = append(problems, fmt.Sprintf(
			"the ent schema has changes that no migration in %s makes; the missing migration would be:\n\n%s\n"+
				"Generate it and commit it with atlas.sum:\n  go run ./cmd/migrate diff%s <name>",
			dirName, indent(string(res.File.Bytes())), fl.flag()))
	}
	if len(res.ExtraTables) > 0 {
		problems = append(problems, extraTablesHelp(fl, res.ExtraTables))
	}
	if fl.river {
		river, err := checkRiver(dir, dirName)
		if err != nil {
			return err
		}
		if river != "" {
			problems = append(problems, river)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errDrift, strings.Join(problems, "\n\n"))
	}
	what := "the ent schema"
	if fl.river {
		what += " and River's tables"
	}
	fmt.Fprintf(stdout, "ok (%s): the %d migration(s) in %s produce exactly %s, and %s matches them\n",
		fl.name, len(files), dirName, what, migrate.HashFileName)
	return nil
}

// cmdHash rewrites atlas.sum from the files.
func cmdHash(stdout io.Writer, fl *flavor, dirPath string) error {
	dir, dirName, err := openDir(fl, dirPath)
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
func cmdNew(stdout io.Writer, fl *flavor, dirPath, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	dir, dirName, err := openValidDir(fl, dirPath)
	if err != nil {
		return err
	}
	file := migrate.NewVersion() + "_" + name + ".sql"
	body := "-- Hand-written migration: write its statements below, each ending with ';'.\n" +
		"-- Then run: go run ./cmd/migrate hash" + fl.flag() + " && go run ./cmd/migrate check" + fl.flag() + "\n"
	if err := dir.WriteFile(file, []byte(body)); err != nil {
		return err
	}
	if err := cmdHash(io.Discard, fl, dirPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/%s; edit it, then run go run ./cmd/migrate hash%s\n", dirName, file, fl.flag())
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
