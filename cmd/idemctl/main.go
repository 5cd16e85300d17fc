// Command idemctl is the example application's operator command: it
// inspects and sweeps the idempotency records of the example's database
// (see package idemctl for the commands, their flags and exit codes).
//
//	go run ./cmd/idemctl stats                      # the SQLite file idem-example.db, like cmd/server
//	go run ./cmd/idemctl -db other.db -json stats
//	DATABASE_URL=postgres://… go run ./cmd/idemctl sweep -dry-run
//
// The database is chosen as cmd/server chooses it: DATABASE_URL (a
// postgres:// URL) when it is set, otherwise the SQLite file of -db. -db is
// a global flag: it goes before the command, with -json, -retention,
// -horizon and -lease. The SQLite file must exist: idemctl never creates or
// migrates a database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/goovo/idem/ent"
	_ "github.com/goovo/idem/ent/runtime" // the idemschema mixin's interceptors
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var (
		dbPath string
		client *ent.Client
	)
	cmd := idemctl.Command{
		Name: "idemctl",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&dbPath, "db", "idem-example.db", "SQLite file of the example, used when DATABASE_URL is not set")
		},
		Open: func(ctx context.Context) (idembackend.Backend, error) {
			dsn, err := database(dbPath)
			if err != nil {
				return nil, err
			}
			drv, err := idemdb.Open(dsn)
			if err != nil {
				return nil, err
			}
			client = ent.NewClient(ent.Driver(drv))
			return client.IdempotencyBackend(), nil
		},
		// The server's schema, for each mutation's retentionSeconds: the
		// sweep archives by it, as the server's own sweeper does. Its
		// resolvers never run here.
		Schema: graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}}),
	}
	code := cmd.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if client != nil {
		client.Close()
	}
	stop()
	os.Exit(code)
}

// database returns the data source: DATABASE_URL, or the SQLite file at
// path, which must exist.
func database(path string) (string, error) {
	if url := os.Getenv("DATABASE_URL"); url != "" {
		if !idemdb.IsPostgres(url) && !idemdb.IsMySQL(url) {
			return "", errors.New("DATABASE_URL must be a postgres:// or mysql:// URL; for SQLite use -db")
		}
		return url, nil
	}
	file := strings.TrimPrefix(strings.TrimPrefix(path, "sqlite://"), "sqlite:")
	if strings.HasPrefix(file, "file:") {
		return path, nil // a SQLite URI: its options may say what to do
	}
	if _, err := os.Stat(file); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			abs, _ := filepath.Abs(file)
			return "", fmt.Errorf("no SQLite database at %s: start the server once to create it, or pass -db FILE or DATABASE_URL", abs)
		}
		return "", fmt.Errorf("SQLite database %s: %w", file, err)
	}
	return path, nil
}
