// Package exampletest is test support for the example application (package
// graph, the orders and payments server of cmd/server): it runs the
// application in-process, on a fresh database of a test backend, with its
// simulated payment provider, behind a local HTTP server (testkit's). The
// suites of graph and idemclient share it, so that they test the same
// application.
//
// It imports testing and is meant for _test.go files only.
package exampletest

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
)

// Config is what a test chooses about the application it starts.
type Config struct {
	// Options are the handler's (graph.NewHandler). A nil Logger is
	// slog.Default(), as in graph.NewHandler.
	Options graph.Options
	// Provider, if not nil, is given the simulated provider before the
	// handler is made and returns the provider the handler calls: the
	// simulated one with its latencies set, or a wrapper around it. Nil:
	// the simulated provider as it is.
	Provider func(*provider.Simulated) provider.Provider
	// MaxConns, if not 0, bounds the connections of the application's
	// client (App.Driver): pgx's pool of its own on PostgreSQL, database/sql's
	// SetMaxOpenConns on SQLite or with
	// IDEMTEST_POSTGRES_DRIVER=database/sql.
	MaxConns int
	// Workers, if not nil, starts the workers with this configuration
	// (graph.StartWorkers; its Mailer is the app's: River's client, or on
	// MariaDB the receipt table's), which deliver the receipts. Nil: none,
	// and receipts wait in River's table or the receipt table (a test
	// that checks no delivery spares the machine a client per app).
	Workers *graph.Workers
}

// App is the example application of one test, serving over HTTP. Everything
// is closed by the test's cleanup.
type App struct {
	// DB is the test's database (idemtest.Open), set up with the example's
	// schema.
	DB *idemtest.DB
	// Client is the ent client over DB, on Driver.
	Client *ent.Client
	// Driver is Client's driver: DB.Driver, or one of its own when
	// Config.MaxConns bounds it.
	Driver idemtest.Driver
	// Provider is the simulated payment provider, its ledger in DB's
	// PostgreSQL schema or, on SQLite, in a file of its own beside DB's. A
	// test may change its latencies and failure rate between requests.
	Provider *provider.Simulated
	// Mailer is the simulated mailer whose receipts the River client
	// sends, its records beside the provider's ledger.
	Mailer *mailer.Simulated
	// Server serves the handler; a test may replace Server.Config.Handler
	// (with one from Handler, say). Its Send and GQL post GraphQL as a
	// tenant (the X-Tenant-ID header); its URL is the server's, and the
	// GraphQL endpoint is URL+"/query".
	*testkit.Server

	t    testing.TB
	prov provider.Provider // the provider the handler calls
}

// Start starts the example application on a fresh database of backend.
func Start(t testing.TB, backend idemtest.Kind, cfg Config) *App {
	t.Helper()
	db := idemtest.Open(t, backend)
	client := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
	drv := db.Driver
	if _, onPgx := drv.(*pgxdriver.Driver); onPgx && cfg.MaxConns > 0 {
		small, err := idemdb.OpenPool(db.DSN, idemdb.Pool{MaxConns: cfg.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		testkit.CloseInCleanup(t, "the application's pool", func() { small.Close() })
		drv, client = small, ent.NewClient(ent.Driver(small))
	} else if cfg.MaxConns > 0 {
		drv.DB().SetMaxOpenConns(cfg.MaxConns)
	}
	a := &App{t: t, DB: db, Client: client, Driver: drv}
	a.Provider, a.Mailer = openProvider(t, db)
	a.prov = a.Provider
	if err := graph.MigrateOutbox(context.Background(), drv); err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != nil {
		w := *cfg.Workers
		w.Mailer = a.Mailer
		if w.Logger == nil {
			w.Logger = testkit.Logger(t)
		}
		stop, err := graph.StartWorkers(context.Background(), client, drv, w)
		if err != nil {
			t.Fatal(err)
		}
		testkit.CloseInCleanup(t, "the River client", func() { _ = stop(context.Background()) })
	}
	if cfg.Provider != nil {
		a.prov = cfg.Provider(a.Provider)
	}
	a.Server = testkit.Serve(t, a.Handler(client, cfg.Options), "/query", graph.TenantHeader)
	return a
}

// Handler returns the example's handler over client (Client, or another
// one, such as a client of a database that is down) with the app's
// provider and opts.
func (a *App) Handler(client *ent.Client, opts graph.Options) http.Handler {
	a.t.Helper()
	if opts.Done == nil {
		// The recoverer, if on, stops before the database closes.
		done := make(chan struct{})
		a.t.Cleanup(func() { close(done) })
		opts.Done = done
	}
	hook, err := graph.NewHook(client, opts)
	if err != nil {
		a.t.Fatalf("hook: %v", err)
	}
	h, err := graph.NewHandler(client, a.prov, a.Mailer, hook)
	if err != nil {
		a.t.Fatalf("handler: %v", err)
	}
	return h
}

// openProvider opens the simulated provider's ledger, and the mailer's
// records beside it: the test's PostgreSQL schema, or a SQLite file of
// their own.
func openProvider(t testing.TB, db *idemtest.DB) (*provider.Simulated, *mailer.Simulated) {
	t.Helper()
	dsn := db.DSN
	if db.Kind == idemtest.SQLite {
		dsn = filepath.Join(filepath.Dir(db.DSN), "provider.db")
	}
	name, source, _ := idemdb.Resolve(dsn)
	pdb, err := sql.Open(name, source)
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	t.Cleanup(func() { pdb.Close() })
	if err := errors.Join(provider.Migrate(context.Background(), pdb, db.Driver.Dialect()),
		mailer.Migrate(context.Background(), pdb, db.Driver.Dialect())); err != nil {
		t.Fatalf("provider: %v", err)
	}
	p, err := provider.NewSimulated(context.Background(), pdb, db.Driver.Dialect())
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	m, err := mailer.NewSimulated(context.Background(), pdb, db.Driver.Dialect())
	if err != nil {
		t.Fatalf("mailer: %v", err)
	}
	return p, m
}
