// Command migrate manages the example application's versioned migrations:
// SQL files generated from the ent schema by ent's migration engine (Atlas)
// and checked by atlas.sum, for PostgreSQL in ent/migrate/migrations and
// for MySQL and MariaDB in ent/migrate/mysqlmigrations.
//
// The developer, after changing the ent schema:
//
//	go generate ./...                              # ent code, as always
//	go run ./cmd/migrate diff add_x                # writes ent/migrate/migrations/<version>_add_x.sql and atlas.sum
//	go run ./cmd/migrate diff -dialect mysql add_x # the same in ent/migrate/mysqlmigrations
//	git add ent/migrate                            # commit them
//
// CI (scripts/test) runs "migrate check" and "migrate check -dialect
// mysql": the committed migrations, replayed on an empty schema or
// database, must produce exactly the ent schema.
//
// The operator, before starting a new server version:
//
//	DATABASE_URL=postgres://… migrate up       # applies what is pending (mysql://… for MySQL)
//	DATABASE_URL=postgres://… migrate status   # what is applied, pending, failed
//
// The binary carries the migrations it was built with; -dir reads a
// directory instead. Run "migrate -h" for everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = `migrate manages the versioned migrations of the ent schema: SQL files
named <version>_<name>.sql, and atlas.sum, the checksum that makes any edit
of a file visible; for PostgreSQL in ent/migrate/migrations, for MySQL and
MariaDB (ent's mysql dialect) in ent/migrate/mysqlmigrations.

Operator commands (DATABASE_URL=postgres://…, whose search_path selects the
schema, or mysql://user:password@host:port/database, which selects the
migrations of its kind):

  migrate up [-baseline VERSION] [-lock-timeout D] [-v] [-dir DIR]
      Apply the pending migrations, oldest first, each file in a transaction
      of its own (a file that starts with "-- atlas:txmode none" runs
      statement by statement; on MySQL every file does, since its DDL
      commits by itself). Applied versions are recorded in the table
      atlas_schema_revisions of the same schema; running up again applies
      nothing. Refuses a directory whose atlas.sum does not match its files,
      a migration added out of order, and a non-empty schema without history
      (a database created by ent's automatic migration: baseline it with
      -baseline VERSION, which records VERSION and older as applied without
      running them). A failed file is recorded with its error: up reports
      the statement and the state left behind, status shows it, and the next
      up retries it (a txmode none file resumes after its last applied
      statement). Concurrent ups on one schema wait for each other.

  migrate status [-dir DIR]
      List every migration: applied (when), pending, FAILED (statement count
      and error), baseline. Exits 1 when a migration failed or the directory
      does not match atlas.sum, 0 otherwise (pending included).

  By default up and status use the migrations compiled into this binary
  (ent/migrate/migrations or ent/migrate/mysqlmigrations as it was at build
  time); -dir DIR reads DIR.

Developer commands (run from the repository root). -dialect postgres, the
default, reads and writes ent/migrate/migrations and borrows a throwaway
schema of the dev server -dev-url (default $TEST_DATABASE_URL or
` + DefaultDevURL + `);
-dialect mysql reads and writes ent/migrate/mysqlmigrations and borrows a
throwaway database of the dev server (default $TEST_MYSQL_URL, a mysql://
URL or a go-sql-driver data source, or ` + DefaultMySQLDevURL + `).
-dir DIR, before the other arguments, reads and writes DIR instead. After
a change of the ent schema, run diff for both dialects.

  migrate diff [-dialect D] [-dev-url URL] NAME
      After changing the ent schema and running go generate: replay the
      migrations on an empty schema, compare with the ent schema and write
      the difference as <version>_NAME.sql, with atlas.sum. Writes nothing
      when there is no difference. Dropped columns and indexes are included;
      dropped tables are reported (write DROP TABLE by hand, see new).

  migrate check [-dialect D] [-dev-url URL]
      Fail unless atlas.sum matches the files and the migrations, replayed
      on an empty schema, produce exactly the ent schema. CI runs it for
      both dialects. Tables that are not ent's are left out of the
      comparison: River's (river_*, on PostgreSQL, whose version check
      checks), the example's receipt outbox (receipt_outbox, on MySQL,
      where River does not run) and its simulated provider's and mailer's
      (provider_charges, mailer_receipts: stand-ins for services with
      systems of their own).

  migrate new [-dialect D] NAME
      Create an empty <version>_NAME.sql for hand-written SQL (data
      migrations, DROP TABLE) and update atlas.sum.

  migrate hash [-dialect D]
      Rewrite atlas.sum after editing a migration that has not run anywhere.

Exit status: 0 success, 1 failure, 2 usage error.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

// errUsage is returned after a usage message was printed.
var errUsage = errors.New("usage")

// run runs one command line. getenv reads DATABASE_URL, TEST_DATABASE_URL
// and TEST_MYSQL_URL.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("migrate "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	var (
		dir         = fs.String("dir", "", "migration directory (default: embedded for up/status, "+DefaultDir+" or "+DefaultMySQLDir+" otherwise)")
		dialectName *string
		devURL      *string
		baseline    *string
		lockTimeout *time.Duration
		verbose     *bool
	)
	switch cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "up":
		baseline = fs.String("baseline", "", "on a non-empty schema without history: record this version and older as applied, without running them")
		lockTimeout = fs.Duration("lock-timeout", time.Minute, "how long to wait for another migrate up on the same schema")
		verbose = fs.Bool("v", false, "print every statement")
	case "status":
	case "diff", "check", "new", "hash":
		dialectName = fs.String("dialect", "postgres", "the migrations' database: postgres ("+DefaultDir+") or mysql ("+DefaultMySQLDir+")")
		if cmd == "diff" || cmd == "check" {
			devURL = fs.String("dev-url", "", "the server to borrow a throwaway schema (PostgreSQL) or database (MySQL) from (default $TEST_DATABASE_URL or $TEST_MYSQL_URL)")
		}
	default:
		fmt.Fprintf(stderr, "migrate: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	wantArgs := map[string]int{"diff": 1, "new": 1}[cmd]
	if fs.NArg() != wantArgs {
		if wantArgs == 1 {
			fmt.Fprintf(stderr, "migrate %s: want a migration NAME, e.g. migrate %s add_refund_reason\n", cmd, cmd)
		} else {
			fmt.Fprintf(stderr, "migrate %s: unexpected arguments %q\n", cmd, fs.Args())
		}
		return errUsage
	}
	if cmd == "up" || cmd == "status" {
		fl, err := flavorOf(getenv("DATABASE_URL"))
		if err != nil {
			return err
		}
		d, dirName, err := openDir(fl, *dir)
		if err != nil {
			return err
		}
		t, err := openTarget(ctx, fl, getenv("DATABASE_URL"))
		if err != nil {
			return err
		}
		defer t.Close()
		if cmd == "status" {
			return cmdStatus(ctx, stdout, t, d, dirName)
		}
		return cmdUp(ctx, stdout, t, d, dirName, upOptions{baseline: *baseline, lockTimeout: *lockTimeout, verbose: *verbose})
	}
	fl, err := flavorNamed(*dialectName)
	if err != nil {
		fmt.Fprintf(stderr, "migrate %s: %v\n", cmd, err)
		return errUsage
	}
	if *dir == "" {
		*dir = fl.dir
	}
	if devURL != nil && *devURL == "" {
		*devURL = fl.devURL(getenv)
	}
	switch cmd {
	case "diff":
		return cmdDiff(ctx, stdout, fl, *dir, *devURL, fs.Arg(0))
	case "check":
		return cmdCheck(ctx, stdout, fl, *dir, *devURL)
	case "new":
		return cmdNew(stdout, fl, *dir, fs.Arg(0))
	default: // hash
		return cmdHash(stdout, fl, *dir)
	}
}
