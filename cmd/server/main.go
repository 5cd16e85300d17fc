// Command server runs the example application: orders and payments whose
// mutations are retry-safe.
//
//	go run ./cmd/server                      # embedded SQLite file idem-example.db
//	DATABASE_URL=postgres://… go run ./cmd/server
//	DATABASE_URL=mysql://root@127.0.0.1:3306/test go run ./cmd/server  # MySQL or MariaDB
//
// On PostgreSQL and SQLite River sends the receipts (idemoutbox) and folds
// the page views; on MySQL, which River has no driver for, the example's
// own receipt table and workers do (graph.ReceiptTable, docs/mysql.md).
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
	"database/sql"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"entgo.io/ent/dialect"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/example/simsql"
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
		foldEvery    = flag.Duration("materialize-every", time.Second, "how often to fold page views into counts: a River periodic job, which the leader of the servers enqueues, so give every server the same; on MySQL every server folds on its own ticker (0: never)")
		mailLatency  = flag.Duration("mailer-latency", 0, "latency of the simulated mailer, before it records a receipt: a crash in it falls between the payment's commit and the receipt's delivery")
		riverID      = flag.String("river-id", "", "this process's River client id, the same across its restarts, so that River tells its jobs from other processes' (default: one River makes up; refused on MySQL, where River does not run)")
		riverPoll    = flag.Bool("river-poll-only", false, "River polls for jobs instead of listening (behind PgBouncer's transaction pooling, which cannot hold a LISTEN)")
		riverPollInt = flag.Duration("river-poll-interval", 0, "how often River polls for jobs (default 1s)")
		riverConns   = flag.Int("river-max-conns", graph.DefaultRiverMaxConns, "most connections of River's own pool, which it opens behind PgBouncer (a -db-dsn in an exec mode); counts in the connection budget")
		riverRescue  = flag.Duration("river-rescue-after", graph.DefaultRescueAfter, "how long a job may run before River takes it for stuck (its process died) and runs it again; jobs time out at half of it")
		foldBatch    = flag.Int("materialize-batch", 500, "page views folded per transaction")
		autoMigrate  = flag.Bool("migrate", true, "create or update the tables at start with ent's automatic migration, River's and the simulated provider's and mailer's (production PostgreSQL: apply cmd/migrate's versioned migrations, which hold them all, and pass -migrate=false, which creates no table and stops if one is missing)")
		metricsAddr  = flag.String("metrics-addr", "", "serve the hook's metrics in Prometheus format at http://ADDR/metrics (off when empty)")
		verbose      = flag.Bool("v", false, "log every refusal and takeover (-log-level debug)")
		logFormat    = flag.String("log-format", "text", "log format: text (logfmt) or json (one JSON object a line)")
		logLevel     = flag.String("log-level", "info", "least level logged: debug, info, warn or error (River's own lines are logged one level lower: its info at debug)")
		maxConns     = flag.Int("db-max-conns", idemdb.DefaultMaxConns, "most database connections of the application (PostgreSQL: keep the sum over all processes below max_connections); a request waits for a free one")
		provConns    = flag.Int("provider-max-conns", 4, "most database connections of the simulated provider's ledger")
		dbDriver     = flag.String("db-driver", "pgx", "PostgreSQL only: pgx (the hook's statements pipelined, the default) or database/sql (one statement per round trip: the path before the pipelined store, kept to compare)")
		corsOrigins  = flag.String("cors-origin", "", "comma-separated origins whose pages may call the server from a browser (CORS: the idempotency headers and X-Tenant-ID, X-User-ID allowed; Idempotent-Replayed exposed); \"*\" for any (off when empty)")
		connectWait  = flag.Duration("db-connect-timeout", time.Minute, "how long to keep trying to connect at start while the database is down, restarting or full, before giving up")
		playground   = flag.Bool("playground", true, "serve the GraphQL playground at / (false: / answers 404)")
		serviceName  = flag.String("service-name", "idem-example", "the metrics' service.name (OTEL_SERVICE_NAME wins)")
	)
	// Shutdown phases (docs/operations.md, "Shutdown"): at SIGTERM /readyz
	// fails at once, the server keeps serving for the grace, then stops
	// accepting and waits up to the drain for the requests under way.
	var sd shutdown
	flag.DurationVar(&sd.Grace, "shutdown-grace", 0, "after SIGTERM, how long /readyz fails while the server still accepts and serves requests, so that load balancers stop sending before the listener closes (a second signal ends it early)")
	flag.DurationVar(&sd.Drain, "shutdown-drain", 10*time.Second, "after the grace, how long requests under way may take to finish once the listener is closed; those still running then are cancelled")
	flag.DurationVar(&sd.RiverStop, "shutdown-river", 10*time.Second, "after SIGTERM, how long River's running jobs (on MySQL: the receipt workers' deliveries) may take to finish (beside the HTTP drain); those still running then are cancelled and run again elsewhere")
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
	flag.Int64Var(&limits.DocumentCacheBytes, "document-cache-bytes", 0, "memory of the parsed documents kept for the next request that sends the same text: what a client can make the server keep after its answer (default 16 MiB)")
	flag.Int64Var(&limits.MaxCachedDocumentBytes, "max-cached-document-bytes", 0, "largest document text kept in the document cache; a larger one is parsed again each time (default 64 KiB)")
	// Connection phases (idemhttp.Timeouts), the same convention.
	var timeouts idemhttp.Timeouts
	flag.DurationVar(&timeouts.ReadHeader, "read-header-timeout", 0, "how long a connection may take to send a request's headers (default 10s)")
	flag.DurationVar(&timeouts.Read, "read-timeout", 0, "how long a connection may take to send a whole request, body included (default 2m)")
	flag.DurationVar(&timeouts.Write, "write-timeout", 0, "how long a request may take from its headers to the end of its answer; longer than -wait-in-flight (default 5m)")
	flag.DurationVar(&timeouts.Idle, "idle-timeout", 0, "how long a keep-alive connection may wait for its next request (default 2m)")
	flag.Parse()
	if *failureRate < 0 || *failureRate > 1 {
		return errors.New("-provider-failure-rate must be between 0 and 1")
	}
	if timeouts.Write > 0 && *wait >= timeouts.Write {
		return errors.New("-write-timeout must be longer than -wait-in-flight: a duplicate that waits its whole time would lose its answer")
	}
	if *maxConns < 1 || *provConns < 1 || *riverConns < 1 {
		return errors.New("-db-max-conns, -provider-max-conns and -river-max-conns must be at least 1")
	}
	logger, err := newLogger(os.Stderr, *logFormat, *logLevel, *verbose)
	if err != nil {
		return err
	}
	logConfiguration(logger)

	dsn := os.Getenv("DATABASE_URL")
	switch {
	case dsn == "":
		dsn = *dbPath
	case idemdb.IsMySQL(dsn):
		if err := refuseRiverFlags(); err != nil {
			return err
		}
	case !idemdb.IsPostgres(dsn):
		return errors.New("DATABASE_URL must be a postgres:// or mysql:// URL; for SQLite use -db")
	}
	onServer := func(dsn string) bool { return idemdb.IsPostgres(dsn) || idemdb.IsMySQL(dsn) }
	providerDSN := os.Getenv("PROVIDER_DATABASE_URL")
	switch {
	case providerDSN == "" && onServer(dsn):
		providerDSN = dsn
	case providerDSN == "":
		// A SQLite file of its own: a second writer in the application's
		// file would wait on the application's transaction.
		providerDSN = strings.TrimSuffix(dsn, ".db") + "-provider.db"
	case !onServer(providerDSN):
		return errors.New("PROVIDER_DATABASE_URL must be a postgres:// or mysql:// URL")
	}
	// ctx ends at the first SIGTERM or interrupt: the background work (the
	// recoverer, the sweeper) stops then; requests are served on until the
	// shutdown's phases say otherwise.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-signals:
			stop()
		case <-ctx.Done():
		}
	}()

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
		if err := graph.Migrate(ctx, client, drv); err != nil {
			return err
		}
	} else if err := graph.ValidateOutbox(ctx, drv); err != nil {
		// Versioned migrations: River's (on MySQL the receipt table) must
		// have been applied with the rest.
		return err
	}

	prov, mail, closeProv, err := openProvider(ctx, providerDSN, *provConns, *connectWait, *autoMigrate, logger)
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
		// Served until run returns, the shutdown's phases included.
		lifetime, end := context.WithCancel(context.Background())
		defer end()
		mp, err := serveMetrics(lifetime, *metricsAddr, *serviceName, logger)
		if err != nil {
			return err
		}
		opts.MeterProvider = mp
		if err := registerPoolMetrics(mp, "app", drv); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		// How many effects wait in the outbox (on MySQL the receipt
		// table), how old the oldest is.
		if err := graph.RegisterOutboxMetrics(mp, drv); err != nil {
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
	// One Admin sweeps and reports: its metrics say what its sweeps kept.
	admin := idemctl.New(hook)
	// Once, at start: what a failover of the database would lose.
	admin.ReportReplication(ctx)
	if *sweepEvery > 0 {
		go admin.RunSweeper(ctx, *sweepEvery, idemctl.SweepOptions{})
	}
	// River works the outbox's jobs (the receipts) and the counter's
	// periodic fold; on MySQL the receipt table's workers and a ticker do
	// (graph.StartRiver chooses). The sweeper and the recoverer stay on every process:
	// their batches are fenced and skip what another process holds, so
	// they need no leader, and keep working while River's is being elected.
	riv, err := graph.StartRiver(ctx, client, drv, graph.Workers{ID: *riverID, Mailer: mail,
		FoldEvery: *foldEvery, FoldBatch: *foldBatch, PollOnly: *riverPoll, PollInterval: *riverPollInt, RescueAfter: *riverRescue, MaxConns: *riverConns,
		Logger: riverLogger(logger)})
	if err != nil {
		return err
	}
	if opts.MeterProvider != nil {
		// Claims past their lease, per table.
		if err := admin.RegisterMetrics(opts.MeterProvider); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	// Readiness: the database, the claim tables and River (on MySQL the
	// receipt workers) answer.
	health := idemhttp.NewHealth(
		idemhttp.PingCheck("database", drv.DB()),
		idemhttp.ReadinessCheck{Name: "claims", Check: admin.CheckClaimTables},
		idemhttp.ReadinessCheck{Name: riv.Name, Check: riv.Check},
	)
	health.Logger = logger
	mux := http.NewServeMux()
	health.Mount(mux)
	if !*playground {
		mux.Handle("GET /{$}", http.NotFoundHandler())
	}
	mux.Handle("/", h)
	sd.Health, sd.Hook, sd.River, sd.Logger, sd.Signals = health, hook, riv, logger, signals
	// Listening before the log line names the address: a test that starts
	// the server on port 0 reads its port there, with no window in which
	// another process could take a port chosen in advance.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	var served http.Handler = mux
	if *corsOrigins != "" {
		served = idemhttp.CORS{Origins: strings.Split(*corsOrigins, ","), AllowHeaders: []string{"X-Tenant-ID", "X-User-ID"}}.Handler(served)
	}
	if opts.MeterProvider != nil {
		// HTTP requests: count, duration and status (OpenTelemetry's
		// net/http instrumentation).
		served = otelhttp.NewHandler(served, "server", otelhttp.WithMeterProvider(opts.MeterProvider))
	}
	srv := sd.server(served, timeouts)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	backend := "sqlite " + dsn
	if idemdb.IsPostgres(dsn) {
		backend = "postgres"
	} else if idemdb.IsMySQL(dsn) {
		backend = "mysql"
	}
	logger.Info("serving GraphQL", "url", base+"/query", "playground", base+"/", "database", backend,
		"health", base+idemhttp.PathLive, "ready", base+idemhttp.PathReady)
	select {
	case err := <-errc:
		_ = riv.Stop(context.Background())
		return err
	case <-ctx.Done():
		return sd.run(srv)
	}
}

// riverOnlyFlags configure River, which does not run on MySQL.
var riverOnlyFlags = []string{"river-id", "river-poll-only", "river-poll-interval", "river-max-conns", "river-rescue-after"}

// refuseRiverFlags refuses, on MySQL, the flags that only River or pgx
// read: a setting that would silently do nothing is worse than a start
// that says so.
func refuseRiverFlags() error {
	var err error
	flag.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case slices.Contains(riverOnlyFlags, f.Name):
			err = fmt.Errorf("-%s configures River, which has no MySQL driver: on MySQL/MariaDB the example sends its receipts through its own receipt table and workers (docs/mysql.md); drop the flag", f.Name)
		case f.Name == "db-driver" && f.Value.String() != "database/sql":
			err = fmt.Errorf("-db-driver %s is PostgreSQL's: on MySQL/MariaDB the server uses database/sql's go-sql-driver; drop the flag", f.Value)
		}
	})
	return err
}

// openProvider opens the simulated provider's ledger, and the simulated
// mailer's records beside it, with a pool of their own, of maxConns
// connections: one statement per charge or receipt, none held while the
// simulated latencies pass. With migrate (-migrate) it creates their
// tables; without, they must exist (cmd/migrate up makes them with the
// rest) and a missing one stops the start: -migrate=false changes no
// schema.
func openProvider(ctx context.Context, dsn string, maxConns int, connectWait time.Duration, migrate bool, logger *slog.Logger) (*provider.Simulated, *mailer.Simulated, func(), error) {
	drv, err := idemdb.OpenSQL(dsn, idemdb.Pool{MaxConns: maxConns})
	if err != nil {
		return nil, nil, nil, err
	}
	db := drv.DB()
	p, m, err := openStandIns(ctx, db, drv.Dialect(), connectWait, migrate, logger)
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return p, m, func() { db.Close() }, nil
}

// openStandIns is openProvider's work on the opened pool.
func openStandIns(ctx context.Context, db *sql.DB, d string, connectWait time.Duration, migrate bool, logger *slog.Logger) (*provider.Simulated, *mailer.Simulated, error) {
	if err := idemdb.WaitReady(ctx, db, connectWait, logger); err != nil {
		return nil, nil, err
	}
	if migrate {
		if err := errors.Join(provider.Migrate(ctx, db, d), mailer.Migrate(ctx, db, d)); err != nil {
			return nil, nil, err
		}
	}
	p, err := provider.NewSimulated(ctx, db, d)
	if err != nil {
		return nil, nil, notMigrated(err, d)
	}
	m, err := mailer.NewSimulated(ctx, db, d)
	if err != nil {
		return nil, nil, notMigrated(err, d)
	}
	return p, m, nil
}

// notMigrated adds the way out to a stand-in's missing table: the
// simulated provider and mailer stand in for services that keep their
// records in their own systems, but the example keeps them in its
// database, and -migrate=false creates no table.
func notMigrated(err error, d string) error {
	if !errors.Is(err, simsql.ErrNotMigrated) {
		return err
	}
	fix := "start once with -migrate (SQLite has no versioned migrations)"
	switch d {
	case dialect.MySQL:
		fix = "start once with -migrate, or create them with the statements of graph.MySQLTables (PROVIDER_DATABASE_URL, when set, must reach a database that has them)"
	case dialect.Postgres:
		fix = "apply the versioned migrations, which create it with the rest (DATABASE_URL=… go run ./cmd/migrate up; PROVIDER_DATABASE_URL, when set, must reach a database that has them), or start with -migrate"
	}
	return fmt.Errorf("%w: the example's simulated provider and mailer keep their tables in its database and -migrate=false creates none: %s", err, fix)
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

// openDriver opens the application's database: PostgreSQL on pgx unless
// driver is database/sql; SQLite and MySQL always through database/sql.
func openDriver(dsn, driver string, maxConns int) (idemdb.Driver, error) {
	if idemdb.IsMySQL(dsn) {
		return idemdb.OpenSQL(dsn, idemdb.Pool{MaxConns: maxConns})
	}
	switch driver {
	case "pgx":
		return idemdb.OpenPool(dsn, idemdb.Pool{MaxConns: maxConns})
	case "database/sql":
		return idemdb.OpenSQL(dsn, idemdb.Pool{MaxConns: maxConns})
	}
	return nil, fmt.Errorf("-db-driver %q: want pgx or database/sql", driver)
}
