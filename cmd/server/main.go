// Command server runs the example application: orders and payments whose
// mutations are retry-safe.
//
//	go run ./cmd/server                      # embedded SQLite file idem-example.db
//	DATABASE_URL=postgres://… go run ./cmd/server
//
// The simulated payment provider keeps its ledger in the same database, or
// in PROVIDER_DATABASE_URL when set (behind PgBouncer, a pool of its own:
// see docs/operations.md).
//
// GraphQL is served at /query and a playground at /. The caller's tenant is
// the X-Tenant-ID header, sent once (a request that sends it twice is
// refused: UNAUTHENTICATED, HTTP 401), and its user, if any, the X-User-ID
// header: the provider's charges record the user, and the recoverer
// (-recover-after) finishes a payment as the user who made it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/idemoutbox"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr         = flag.String("addr", "127.0.0.1:8080", "address to listen on (port 0: a free port, which the start's log line names)")
		dbPath       = flag.String("db", "idem-example.db", "SQLite file, used when DATABASE_URL is not set")
		latency      = flag.Duration("provider-latency", 0, "latency of every simulated provider charge, before it executes")
		respLatency  = flag.Duration("provider-response-latency", 0, "latency of the provider's answer, after the charge executed")
		failureRate  = flag.Float64("provider-failure-rate", 0, "probability (0-1) that a provider charge fails before it executes")
		gate         = flag.String("provider-gate", "", "URL the simulated provider asks (GET, with the charge's tenant, key and order) after each charge executed: the charge answers once that answers 2xx, so a test holds a payment in flight until it releases it (off when empty)")
		lease        = flag.Duration("lease", 0, "lease of a pending claim (default 30s)")
		wait         = flag.Duration("wait-in-flight", 0, "how long a duplicate waits for an in-flight result before IDEMPOTENCY_IN_PROGRESS")
		sweepEvery   = flag.Duration("sweep-every", time.Minute, "how often to archive expired idempotency records and purge old tombstones (0: never)")
		recoverAfter = flag.Duration("recover-after", idem.DefaultRecoverAfter, "how long after a lease runs out the server finishes a claim whose client never came back, by running it again with its key, as the user who made it (0: never; the claim then waits for its client's retry, which may never come)")
		retention    = flag.Duration("retention", 0, "how long a finished record's response is replayable (default 24h)")
		foldEvery    = flag.Duration("materialize-every", time.Second, "how often to fold page views into counts: a River periodic job, which the leader of the servers enqueues, so give every server the same (0: never)")
		mailLatency  = flag.Duration("mailer-latency", 0, "latency of the simulated mailer, before it records a receipt: a crash in it falls between the payment's commit and the receipt's delivery")
		riverID      = flag.String("river-id", "", "this process's River client id, the same across its restarts, so that River tells its jobs from other processes' (default: one River makes up)")
		riverPoll    = flag.Bool("river-poll-only", false, "River polls for jobs instead of listening (behind PgBouncer's transaction pooling, which cannot hold a LISTEN)")
		riverPollInt = flag.Duration("river-poll-interval", 0, "how often River polls for jobs (default 1s)")
		riverRescue  = flag.Duration("river-rescue-after", time.Minute, "how long a job may run before River takes it for stuck (its process died) and runs it again; jobs time out at half of it")
		foldBatch    = flag.Int("materialize-batch", 500, "page views folded per transaction")
		autoMigrate  = flag.Bool("migrate", true, "create or update the tables at start with ent's automatic migration (production PostgreSQL: apply cmd/migrate's versioned migrations and pass -migrate=false)")
		metricsAddr  = flag.String("metrics-addr", "", "serve the hook's metrics in Prometheus format at http://ADDR/metrics (off when empty)")
		verbose      = flag.Bool("v", false, "log every refusal and takeover")
		maxConns     = flag.Int("db-max-conns", idemdb.DefaultMaxConns, "most database connections of the application (PostgreSQL: keep the sum over all processes below max_connections); a request waits for a free one")
		provConns    = flag.Int("provider-max-conns", 4, "most database connections of the simulated provider's ledger")
		dbDriver     = flag.String("db-driver", "pgx", "PostgreSQL only: pgx (the hook's statements pipelined, the default) or database/sql (one statement per round trip: the path before the pipelined store, kept to compare)")
		connectWait  = flag.Duration("db-connect-timeout", time.Minute, "how long to keep trying to connect at start while the database is down, restarting or full, before giving up")
	)
	// Request limits (idemhttp.Limits): 0 keeps the default, a negative value
	// turns the limit off.
	var limits idemhttp.Limits
	flag.Int64Var(&limits.MaxBodyBytes, "max-body-bytes", 0, "largest request body, refused with HTTP 413 before it is read (default 1 MiB)")
	flag.IntVar(&limits.MaxTokens, "max-tokens", 0, "most tokens in a GraphQL document (default 15000)")
	flag.IntVar(&limits.MaxFields, "max-fields", 0, "most fields an operation selects, fragments expanded (default 1000)")
	flag.IntVar(&limits.MaxAliases, "max-aliases", 0, "most aliased fields in an operation (default 100)")
	flag.IntVar(&limits.MaxDepth, "max-depth", 0, "deepest nesting of an operation's selections (default 12)")
	flag.IntVar(&limits.MaxNodes, "max-nodes", 0, "most nodes of a document, each fragment counted where it is spread (default 20000)")
	flag.IntVar(&limits.MaxFieldPairs, "max-field-pairs", 0, "most pairs of fields sharing a response name in one selection set, which validation compares (default 10000)")
	flag.IntVar(&limits.MaxComplexity, "max-complexity", 0, "gqlgen complexity limit of an operation (default 1000)")
	flag.Parse()
	if *failureRate < 0 || *failureRate > 1 {
		return errors.New("-provider-failure-rate must be between 0 and 1")
	}
	if *maxConns < 1 || *provConns < 1 {
		return errors.New("-db-max-conns and -provider-max-conns must be at least 1")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		dsn = *dbPath
	} else if !idemdb.IsPostgres(dsn) {
		return errors.New("DATABASE_URL must be a postgres:// URL; for SQLite use -db")
	}
	providerDSN := os.Getenv("PROVIDER_DATABASE_URL")
	switch {
	case providerDSN == "" && idemdb.IsPostgres(dsn):
		providerDSN = dsn
	case providerDSN == "":
		// A SQLite file of its own: a second writer in the application's
		// file would wait on the application's transaction.
		providerDSN = strings.TrimSuffix(dsn, ".db") + "-provider.db"
	case !idemdb.IsPostgres(providerDSN):
		return errors.New("PROVIDER_DATABASE_URL must be a postgres:// URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	drv, err := openDriver(dsn, *dbDriver, *maxConns)
	if err != nil {
		return err
	}
	client := ent.NewClient(ent.Driver(drv))
	defer client.Close()
	if err := idemdb.WaitReady(ctx, drv.DB(), *connectWait, logger); err != nil {
		return err
	}
	if *autoMigrate {
		if err := client.Schema.Create(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if err := graph.MigrateRiver(ctx, drv); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	} else if err := idemoutbox.Validate(ctx, drv.DB(), drv.Dialect()); err != nil {
		// Versioned migrations: River's must have been applied with the
		// rest (cmd/migrate up).
		return err
	}

	prov, mail, closeProv, err := openProvider(ctx, providerDSN, *provConns, *connectWait, logger)
	if err != nil {
		return err
	}
	defer closeProv()
	prov.Latency, prov.ResponseLatency, prov.FailureRate = *latency, *respLatency, *failureRate
	mail.Latency = *mailLatency
	if *gate != "" {
		if prov.Gate, err = httpGate(*gate); err != nil {
			return err
		}
	}

	opts := graph.Options{Lease: *lease, WaitForInFlight: *wait, Retention: *retention, Logger: logger, Limits: limits,
		RecoverAfter: *recoverAfter, Done: ctx.Done()}
	if *recoverAfter <= 0 {
		opts.RecoverAfter = idem.RecoverNever
	}
	if *metricsAddr != "" {
		mp, err := serveMetrics(ctx, *metricsAddr, logger)
		if err != nil {
			return err
		}
		opts.MeterProvider = mp
		// How many effects wait in the outbox, how old the oldest is.
		if err := idemoutbox.RegisterMetrics(mp, client.IdempotencyBackend().DB(), drv.Dialect()); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	hook, err := graph.NewHook(client, opts)
	if err != nil {
		return err
	}
	h, err := graph.NewHandler(client, prov, mail, hook)
	if err != nil {
		return err
	}
	if *sweepEvery > 0 {
		go idemctl.New(hook).RunSweeper(ctx, *sweepEvery, idemctl.SweepOptions{})
	}
	// River works the outbox's jobs (the receipts) and the counter's
	// periodic fold. The sweeper and the recoverer stay on every process:
	// their batches are fenced and skip what another process holds, so
	// they need no leader, and keep working while River's is being elected.
	stopWorkers, err := graph.StartWorkers(ctx, client, drv, graph.Workers{ID: *riverID, Mailer: mail,
		FoldEvery: *foldEvery, FoldBatch: *foldBatch, PollOnly: *riverPoll, PollInterval: *riverPollInt, RescueAfter: *riverRescue, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		stopping, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = stopWorkers(stopping)
	}()
	// Listening before the log line names the address: a test that starts
	// the server on port 0 reads its port there, with no window in which
	// another process could take a port chosen in advance.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	backend := "sqlite " + dsn
	if idemdb.IsPostgres(dsn) {
		backend = "postgres"
	}
	logger.Info("serving GraphQL", "url", base+"/query", "playground", base+"/", "database", backend)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// openProvider opens the simulated provider's ledger, and the simulated
// mailer's records beside it, with a pool of their own, of maxConns
// connections: one statement per charge or receipt, none held while the
// simulated latencies pass.
func openProvider(ctx context.Context, dsn string, maxConns int, connectWait time.Duration, logger *slog.Logger) (*provider.Simulated, *mailer.Simulated, func(), error) {
	drv, err := idemdb.OpenSQL(dsn, idemdb.Pool{MaxConns: maxConns})
	if err != nil {
		return nil, nil, nil, err
	}
	db := drv.DB()
	if err := idemdb.WaitReady(ctx, db, connectWait, logger); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	p, err := provider.NewSimulated(ctx, db, idemdb.IsPostgres(dsn))
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	m, err := mailer.NewSimulated(ctx, db, idemdb.IsPostgres(dsn))
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return p, m, func() { db.Close() }, nil
}

// httpGate returns a provider Gate that asks gateURL about each charge (a
// GET with its tenant, key and order as parameters) and lets the charge
// answer once a 2xx answer arrives: whoever serves gateURL, a test, decides
// when. The request ends with the charge's context, so a client that goes
// away while its charge is held is seen at the gate too.
func httpGate(gateURL string) (func(context.Context, provider.ChargeRequest) error, error) {
	base, err := url.Parse(gateURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("-provider-gate must be an http(s) URL: %q", gateURL)
	}
	return func(ctx context.Context, req provider.ChargeRequest) error {
		u := *base
		q := u.Query()
		q.Set("tenant", req.Tenant)
		q.Set("key", req.Key)
		q.Set("order", strconv.Itoa(req.OrderID))
		u.RawQuery = q.Encode()
		hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(hreq)
		if err != nil {
			return fmt.Errorf("provider gate: %w", err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			return fmt.Errorf("provider gate: %s", res.Status)
		}
		return nil
	}, nil
}

// serveMetrics exports the OpenTelemetry metrics in Prometheus format on a
// listener of their own, so that the GraphQL port does not expose them.
func serveMetrics(ctx context.Context, addr string, logger *slog.Logger) (*sdkmetric.MeterProvider, error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server", slog.Any("error", err))
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	logger.Info("serving metrics", "url", "http://"+addr+"/metrics")
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)), nil
}

// openDriver opens the application's database: PostgreSQL on pgx unless
// driver is database/sql; SQLite always through database/sql.
func openDriver(dsn, driver string, maxConns int) (idemdb.Driver, error) {
	switch driver {
	case "pgx":
		return idemdb.OpenPool(dsn, idemdb.Pool{MaxConns: maxConns})
	case "database/sql":
		return idemdb.OpenSQL(dsn, idemdb.Pool{MaxConns: maxConns})
	}
	return nil, fmt.Errorf("-db-driver %q: want pgx or database/sql", driver)
}
