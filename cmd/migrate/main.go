// Command migrate manages the example application's versioned PostgreSQL
// migrations: SQL files in ent/migrate/migrations, generated from the ent
// schema by ent's migration engine (Atlas) and checked by atlas.sum.
//
// The developer, after changing the ent schema:
//
//	go generate ./...                      # ent code, as always
//	go run ./cmd/migrate diff add_x        # writes ent/migrate/migrations/<version>_add_x.sql and atlas.sum
//	git add ent/migrate/migrations         # commit both
//
// CI (scripts/test) runs "migrate check": the committed migrations, replayed
// on an empty schema, must produce exactly the ent schema.
//
// The operator, before starting a new server version:
//
//	DATABASE_URL=postgres://… migrate up       # applies what is pending
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

const usage = `migrate manages the versioned PostgreSQL migrations of the ent schema
(ent/migrate/migrations: SQL files named <version>_<name>.sql, and atlas.sum,
the checksum that makes any edit of a file visible).

Operator commands (DATABASE_URL=postgres://…; its search_path selects the schema):

  migrate up [-baseline VERSION] [-lock-timeout D] [-v] [-dir DIR]
      Apply the pending migrations, oldest first, each file in a transaction
      of its own (a file that starts with "-- atlas:txmode none" runs
      statement by statement). Applied versions are recorded in the table
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
  (ent/migrate/migrations as it was at build time); -dir DIR reads DIR.

Developer commands (run from the repository root; they read and write
ent/migrate/migrations unless -dir DIR is given before the other arguments, and borrow a throwaway schema of
the dev database -dev-url, default $TEST_DATABASE_URL or
` + DefaultDevURL + `):

  migrate diff [-dev-url URL] NAME
      After changing the ent schema and running go generate: replay the
      migrations on an empty schema, compare with the ent schema and write
      the difference as <version>_NAME.sql, with atlas.sum. Writes nothing
      when there is no difference. Dropped columns and indexes are included;
      dropped tables are reported (write DROP TABLE by hand, see new).

  migrate check [-dev-url URL]
      Fail unless atlas.sum matches the files and the migrations, replayed
      on an empty schema, produce exactly the ent schema. CI runs it. Tables
      that are not ent's are left out of the comparison: River's (river_*)
      and the example's simulated provider's and mailer's (provider_charges,
      mailer_receipts: stand-ins for services with systems of their own).

  migrate new NAME
      Create an empty <version>_NAME.sql for hand-written SQL (data
      migrations, DROP TABLE) and update atlas.sum.

  migrate hash
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

// run runs one command line. getenv reads DATABASE_URL and
// TEST_DATABASE_URL.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("migrate "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	devDefault := getenv("TEST_DATABASE_URL")
	if devDefault == "" {
		devDefault = DefaultDevURL
	}
	var (
		dir         = fs.String("dir", "", "migration directory (default: embedded for up/status, "+DefaultDir+" otherwise)")
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
	case "status", "hash":
	case "diff", "check":
		devURL = fs.String("dev-url", devDefault, "PostgreSQL server to borrow a throwaway schema from")
	case "new":
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
	switch cmd {
	case "up", "status":
		d, dirName, err := openDir(*dir)
		if err != nil {
			return err
		}
		t, err := openTarget(ctx, getenv("DATABASE_URL"))
		if err != nil {
			return err
		}
		defer t.Close()
		if cmd == "status" {
			return cmdStatus(ctx, stdout, t, d, dirName)
		}
		return cmdUp(ctx, stdout, t, d, dirName, upOptions{baseline: *baseline, lockTimeout: *lockTimeout, verbose: *verbose})
	}
	if *dir == "" {
		*dir = DefaultDir
	}
	switch cmd {
	case "diff":
		return cmdDiff(ctx, stdout, *dir, *devURL, fs.Arg(0))
	case "check":
		return cmdCheck(ctx, stdout, *dir, *devURL)
	case "new":
		return cmdNew(stdout, *dir, fs.Arg(0))
	default: // hash
		return cmdHash(stdout, *dir)
	}
}
