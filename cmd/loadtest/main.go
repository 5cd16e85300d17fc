// Command loadtest proves the example server's idempotency under load and
// faults, and measures it. It is five tools on one fleet of example server
// processes (fleet.go), one PostgreSQL or MariaDB database (setup.go,
// postgres.go, mariadb.go, engine.go) and one client (client.go):
//
//	go run ./cmd/loadtest faults -short              # CI: kill -9, PostgreSQL restarts, a burst, the audit (faults.go)
//	go run ./cmd/loadtest faults -short -pgbouncer   # the same behind PgBouncer in transaction pooling mode
//	go run ./cmd/loadtest faults -short -mysql       # the same on a private MariaDB, killed with kill -9 and restarted (mariadb.go)
//	go run ./cmd/loadtest faults -long               # for reports: 3 minutes, 12 kills, 4 restarts, a burst of 2×600 requests
//	go run ./cmd/loadtest bench                      # mutations per second, no faults (bench.go, BENCHMARKS.md)
//	go run ./cmd/loadtest anchor                     # the same create without the hook, by hand, in both modes (anchor.go); also bench -anchor
//	go run ./cmd/loadtest adversary                  # one tenant's hostile requests against another's latency (adversary.go)
//	go run ./cmd/loadtest soak                       # hostile and honest traffic, then memory, fds and goroutines back (soak.go)
//
// `loadtest SUBCOMMAND -h` lists a subcommand's flags; the database flags
// are every subcommand's. The flags of the tool before its subcommands
// (-bench, -adversary, -soak and their prefixed flags) are gone without a
// shim, as the CHANGELOG says of every name until the module is tagged.
//
// PostgreSQL: a private cluster (initdb into a temporary directory, a free
// port, max_connections = 100, fsync off: see internal/testkit/pgcluster), run as
// the user postgres when the tool runs as root; -pg-bin names its binaries.
// Its restarts and its connection budget touch nobody else's database.
// With -pgbouncer the servers reach it through PgBouncer (Debian's package
// pgbouncer) in transaction pooling mode, with pgx's
// default_query_exec_mode=exec (-query-exec-mode). -database-url points the
// tool at an external PostgreSQL instead, in a schema of its own; restarting
// that needs a local Debian-style cluster (pg_ctlcluster, run as root or
// postgres), or faults -pg-restarts 0. The tool always leaves an external
// PostgreSQL running.
//
// MariaDB (-mysql, loadtest faults only): a private server
// (mariadb-install-db into a temporary directory, a free port,
// max_connections = 100: see internal/testkit/mariacluster), run with
// --user=root when the tool runs as root. Its restarts are a kill -9 of
// mariadbd and a start on the same data directory. The tool's own SQL that
// differs from PostgreSQL's is in engine.go.
//
// A new subcommand is a type that implements command, in a file of its
// own, and a line in subcommands; a new fault of the faults subcommand is
// an entry in faultKinds (faults.go).
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
)

// command is one subcommand, its flags parsed.
type command interface {
	// check refuses flags that exclude each other and fills in what
	// depends on others (fs: the subcommand's flags, to see which were
	// set; dc: the database's, already checked).
	check(fs *flag.FlagSet, dc *dbConfig) error
	// needs says what the run needs set up.
	needs() needs
	// run runs it; errFailed (exit status 1) when it found violations.
	run(e *runEnv) error
}

// subcommand names a command and defines its flags.
type subcommand struct {
	name, summary string
	// mysql: it runs on MariaDB too (-mysql).
	mysql bool
	// define adds the subcommand's own flags to fs and returns the
	// command they fill in.
	define func(fs *flag.FlagSet) command
}

// subcommands are the tool's, in the order of its usage.
var subcommands = []subcommand{
	{"faults", "load with kill -9, database restarts and a burst, then the audit, on PostgreSQL or MariaDB (-mysql) (exit 1 on a violation)", true, defineFaults},
	{"bench", "mutations per second without faults, or statements per mutation (-count-statements)", false, defineBench},
	{"anchor", "the plain anchor of throughput: the same create without the hook, by hand, in both modes (bench -anchor)", false, defineAnchor},
	{"adversary", "one tenant's hostile requests against another tenant's latency, on SQLite and PostgreSQL", false, defineAdversary},
	{"soak", "hostile and honest traffic, then the server's memory, descriptors and goroutines back where they started", false, defineSoak},
}

func main() {
	cmd, dc, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, dc, cmd.needs(), cmd.run)
	stop()
	os.Exit(code)
}

// parse reads the subcommand and its flags.
func parse(args []string, stderr io.Writer) (command, *dbConfig, error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		usage(stderr)
		return nil, nil, flag.ErrHelp
	}
	if len(args) == 0 || len(args[0]) > 1 && args[0][0] == '-' {
		usage(stderr)
		return nil, nil, errors.New("give a subcommand first (loadtest faults -short, not loadtest -short)")
	}
	var sc *subcommand
	for i := range subcommands {
		if subcommands[i].name == args[0] {
			sc = &subcommands[i]
		}
	}
	if sc == nil {
		usage(stderr)
		return nil, nil, fmt.Errorf("unknown subcommand %q", args[0])
	}
	fs := flag.NewFlagSet("loadtest "+sc.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dc := &dbConfig{}
	addDBFlags(fs, dc)
	cmd := sc.define(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./cmd/loadtest %s [flags]\n\n%s.\n\nflags:\n", sc.name, sc.summary)
		printFlags(stderr, fs, false)
		fmt.Fprintln(stderr, "\ndatabase flags (every subcommand's):")
		printFlags(stderr, fs, true)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := dc.check(); err != nil {
		return nil, nil, err
	}
	if dc.mysql && !sc.mysql {
		return nil, nil, fmt.Errorf("-mysql: loadtest %s runs on PostgreSQL only", sc.name)
	}
	if err := cmd.check(fs, dc); err != nil {
		return nil, nil, err
	}
	return cmd, dc, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./cmd/loadtest SUBCOMMAND [flags]   (loadtest SUBCOMMAND -h: its flags)\n\nsubcommands:")
	for _, sc := range subcommands {
		fmt.Fprintf(w, "  %-10s %s\n", sc.name, sc.summary)
	}
}

// printFlags prints the defaults of fs's database flags (db) or of the
// others.
func printFlags(w io.Writer, fs *flag.FlagSet, db bool) {
	dbFlags := flag.NewFlagSet("", flag.ContinueOnError)
	addDBFlags(dbFlags, &dbConfig{})
	part := flag.NewFlagSet("", flag.ContinueOnError)
	part.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if (dbFlags.Lookup(f.Name) != nil) == db {
			part.Var(f.Value, f.Name, f.Usage)
			part.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	part.PrintDefaults()
}
