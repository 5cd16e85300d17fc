// Command benchserver serves the test application (internal/testkit/testapp)
// over HTTP on PostgreSQL, for the load tool's plain-anchored throughput
// (go run ./cmd/loadtest anchor): one process serves the same
// create of a shipment without the hook (createShipmentPlain), idempotent
// in lease and atomic mode (createShipmentLease, createShipmentAtomic) and
// made retry-safe by hand (createShipmentHandwritten), and as a hand-written
// mutation that opts in with @idempotent (createShipmentOptIn,
// createShipmentOptInLease), so that the load tool compares them on the
// same servers. The tenant is the X-Org header.
//
//	DATABASE_URL=postgres://… go run ./internal/testkit/testapp/benchserver -addr 127.0.0.1:8090
//
// It is a benchmark subject, not an example: no sweeper, no recoverer, no
// limits beyond the hook's defaults.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime" // the idemschema mixin's interceptors and the fields' validators
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	driver := flag.String("db-driver", "pgx", "pgx (the hook's statements pipelined) or database/sql")
	maxConns := flag.Int("db-max-conns", idemdb.DefaultMaxConns, "most database connections")
	flag.Parse()
	dsn := os.Getenv("DATABASE_URL")
	if !idemdb.IsPostgres(dsn) {
		return errors.New("DATABASE_URL must be a postgres:// URL")
	}
	var (
		drv idemdb.Driver
		err error
	)
	switch *driver {
	case "pgx":
		drv, err = idemdb.OpenPool(dsn, idemdb.Pool{MaxConns: *maxConns})
	case "database/sql":
		drv, err = idemdb.OpenSQL(dsn, idemdb.Pool{MaxConns: *maxConns})
	default:
		err = fmt.Errorf("-db-driver %q: want pgx or database/sql", *driver)
	}
	if err != nil {
		return err
	}
	client := ent.NewClient(ent.Driver(drv))
	defer client.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := idemdb.WaitReady(ctx, drv.DB(), time.Minute, logger); err != nil {
		return err
	}
	if err := client.Schema.Create(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := graph.CreateHandwrittenTable(ctx, client); err != nil {
		return fmt.Errorf("handwritten_keys: %w", err)
	}

	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: client}}))
	srv.AddTransport(transport.POST{})
	hook, err := idem.New(idem.Config{
		Backend:       client.IdempotencyBackend(),
		Tenant:        graph.OrgFromContext,
		TenantContext: graph.OrgContext,
		Logger:        logger,
		Done:          ctx.Done(),
	})
	if err != nil {
		return err
	}
	h, err := hook.Handler(srv)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/query", graph.WithOrg(h))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Warn("serving", "url", "http://"+ln.Addr().String()+"/query")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return hs.Shutdown(shutdown)
	}
}
