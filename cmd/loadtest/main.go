// Command loadtest proves the example server's idempotency under load and
// faults. It starts several server processes (cmd/server) on one
// PostgreSQL database, by default in a private PostgreSQL cluster that it
// starts for the run and removes after it, and plays customers against
// them from many concurrent clients: each creates an order (createOrder,
// atomic mode) and usually pays it (createPayment, lease mode, through the
// simulated payment provider), sometimes twice with two keys (competing
// payments). An intent is sometimes sent by several clients to several
// servers at once (duplicates); every client retries its intent with the
// same key and the same body, after timeouts, refused connections, HTTP
// 5xx, IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE and the outcome
// "released", until it gets a final answer.
//
// Meanwhile it injects faults: kill -9 of a server (restarted after a
// moment, with a spiking provider or without), restarts of PostgreSQL,
// provider latency spikes beyond the lease and provider failures (server
// flags), and client timeouts that abandon requests mid-mutation.
//
// Then, with -burst-keys, a burst: that many new orders, each sent by
// -burst-copies clients at once to the servers in turn (so that the copies
// of one key reach different servers), hundreds of requests at the same
// moment; then their payments, the same way. The servers run with their
// default connection pools, on a PostgreSQL with max_connections = 100: a
// burst must get no IDEMPOTENCY_UNAVAILABLE (a request waits for a
// connection instead), which the audit counts as a violation.
//
// At the end, with every intent answered and every server stopped, it
// audits: every client's final answer for a key has the same data bytes,
// and a fresh replay from a newly started server returns them again;
// exactly one order or payment row per successful intent, with the
// answered id; exactly one provider charge per paid intent, the payment's;
// orders paid if and only if a payment of theirs succeeded, never twice;
// no record left pending. It prints a summary and exits with status 1 on
// any violation.
//
//	go run ./cmd/loadtest -short    # CI: 4 servers, 30s, a few thousand requests, 2 kills, 1 PostgreSQL restart, a burst of 2×320 requests
//	go run ./cmd/loadtest -short -pgbouncer   # the same behind PgBouncer in transaction pooling mode
//	go run ./cmd/loadtest -long     # for reports: 4 servers, 3 minutes, 12 kills, 4 restarts, a burst of 2×600 requests
//	go run ./cmd/loadtest -bench    # mutations per second, no faults (see BENCHMARKS.md)
//	go run ./cmd/loadtest -adversary   # one tenant's hostile requests against another's latency (adversary.go)
//	go run ./cmd/loadtest -soak        # hostile and honest traffic, then memory, fds and goroutines back where they started (soak.go)
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
// postgres), or -pg-restarts 0. The tool always leaves an external
// PostgreSQL running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"
)

// config holds the flags.
type config struct {
	short, long bool

	servers     int
	clients     int
	maxInFlight int
	rate        float64
	duration    time.Duration
	drain       time.Duration
	tenants     int

	payRate      float64
	conflictRate float64
	noRetryRate  float64
	recoverAfter time.Duration
	dupRate      float64
	dupMax       int

	burstKeys   int
	burstCopies int

	timeout     time.Duration
	abandonRate float64
	abandonMax  time.Duration
	maxBackoff  time.Duration

	kills        int
	killDowntime time.Duration
	newPort      bool
	pgRestarts   int
	pgCluster    string

	lease           time.Duration
	waitInFlight    time.Duration
	dbMaxConns      int
	dbDriver        string
	providerConns   int
	providerLatency time.Duration
	responseLatency time.Duration
	failureRate     float64
	spikeLatency    time.Duration

	databaseURL   string
	pgBin         string
	pgbouncer     bool
	pgbouncerPool int
	queryExecMode string
	schema        string
	serverBin     string
	keep          bool

	bench           bool
	countStatements int
	anchor          bool
	anchorRounds    int
	anchorBin       string

	adversary adversaryConfig // adversary.go
	soak      soakConfig      // soak.go
	failover  failoverConfig  // failover.go
}

// presets are the values -short and -long give to the flags not set on
// the command line.
var presets = map[string]map[string]string{
	"short": {
		"servers": "4", "clients": "24", "rate": "50", "duration": "30s", "drain": "45s",
		"kills": "2", "pg-restarts": "1", "burst-keys": "40", "burst-copies": "8",
	},
	"long": {
		"servers": "4", "clients": "32", "rate": "100", "duration": "3m", "drain": "90s",
		"kills": "12", "pg-restarts": "4", "burst-keys": "60", "burst-copies": "10",
	},
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./cmd/loadtest [-short | -long | -bench] [flags]")
		fmt.Fprintln(stderr, "\nProves the example server's idempotency under load and faults, audits the database\nand the provider's ledger, and exits 1 on any violation (see the package documentation).\n\nflags:")
		fs.PrintDefaults()
	}
	fs.BoolVar(&c.short, "short", false, "CI preset: 4 servers, 24 clients, 30s of load (a few thousand requests), 2 kills, 1 PostgreSQL restart, then a burst of 40 keys × 8 copies")
	fs.BoolVar(&c.long, "long", false, "reporting preset: 4 servers, 32 clients, 3m of load, 12 kills, 4 PostgreSQL restarts, then a burst of 60 keys × 10 copies")

	fs.IntVar(&c.servers, "servers", 3, "server processes")
	fs.IntVar(&c.clients, "clients", 24, "concurrent clients (customers in progress); each intent may add duplicate copies")
	fs.IntVar(&c.maxInFlight, "max-in-flight", 24, "most requests in flight at once, over all clients and copies, during the load phase (not the burst)")
	fs.Float64Var(&c.rate, "rate", 50, "customers started per second (0: as fast as the clients go)")
	fs.DurationVar(&c.duration, "duration", time.Minute, "load phase: customers start and faults are injected during it (0: no load phase, the burst only)")
	fs.DurationVar(&c.drain, "drain", 60*time.Second, "after the load phase, how long unanswered intents keep retrying (without faults); also the burst's bound")
	fs.IntVar(&c.tenants, "tenants", 4, "tenants the customers belong to")

	fs.Float64Var(&c.payRate, "pay-rate", 0.8, "fraction of orders that get a payment")
	fs.Float64Var(&c.conflictRate, "conflict-rate", 0.1, "fraction of paid orders that get a second, competing payment with its own key")
	fs.Float64Var(&c.dupRate, "dup-rate", 0.3, "fraction of intents sent by several clients at once, to different servers")
	fs.IntVar(&c.dupMax, "dup-max", 3, "most clients sending one duplicated intent")

	fs.IntVar(&c.burstKeys, "burst-keys", 0, "after the load phase, a burst of this many new orders sent at once, then of their payments (0: no burst)")
	fs.IntVar(&c.burstCopies, "burst-copies", 8, "clients sending each key of the burst at once, to the servers in turn")

	fs.DurationVar(&c.timeout, "timeout", 3*time.Second, "client timeout of an attempt, after which it is abandoned and retried (the burst's attempts wait up to -drain)")
	fs.Float64Var(&c.noRetryRate, "no-retry-rate", 0.1, "fraction of payments (of orders without a competing one) whose client sends one request and never retries, as a client that crashed: the servers' recoverer must finish them")
	fs.DurationVar(&c.recoverAfter, "recover-after", time.Second, "servers' -recover-after (0: off; then -no-retry-rate must be 0)")
	fs.Float64Var(&c.abandonRate, "abandon-rate", 0.03, "fraction of attempts abandoned early, with a random timeout below -abandon-max")
	fs.DurationVar(&c.abandonMax, "abandon-max", 300*time.Millisecond, "longest timeout of an attempt abandoned early")
	fs.DurationVar(&c.maxBackoff, "max-backoff", time.Second, "longest wait between two attempts of an intent")

	fs.IntVar(&c.kills, "kills", 4, "kill -9 of a server during the load phase (each restarted after -kill-downtime)")
	fs.DurationVar(&c.killDowntime, "kill-downtime", 300*time.Millisecond, "how long a killed server stays down")
	fs.BoolVar(&c.newPort, "new-port", false, "restart a killed server on a new port (default: the same port)")
	fs.IntVar(&c.pgRestarts, "pg-restarts", 2, "PostgreSQL restarts during the load phase")
	fs.StringVar(&c.pgCluster, "pg-cluster", "", "with -database-url: the cluster to restart with pg_ctlcluster, version/name (default: the newest in /etc/postgresql, main)")

	fs.DurationVar(&c.lease, "lease", time.Second, "servers' -lease: a killed server's claims are taken over after it")
	fs.DurationVar(&c.waitInFlight, "wait-in-flight", 200*time.Millisecond, "servers' -wait-in-flight")
	fs.IntVar(&c.dbMaxConns, "db-max-conns", 0, "servers' -db-max-conns (0: the server's default)")
	fs.StringVar(&c.dbDriver, "db-driver", "", "servers' -db-driver: pgx or database/sql (default: the server's, pgx)")
	fs.IntVar(&c.providerConns, "provider-max-conns", 0, "servers' -provider-max-conns (0: the server's default)")
	fs.DurationVar(&c.providerLatency, "provider-latency", 30*time.Millisecond, "provider latency before a charge executes")
	fs.DurationVar(&c.responseLatency, "provider-response-latency", 30*time.Millisecond, "provider latency after a charge executed (a crash in it leaves money charged, books unwritten)")
	fs.Float64Var(&c.failureRate, "provider-failure-rate", 0.05, "probability that a provider charge fails (retryable)")
	fs.DurationVar(&c.spikeLatency, "spike-latency", 600*time.Millisecond, "provider latency, before and after the charge, of the spiking server (one at a time; 0: none); above -lease/2, its live attempts are taken over")

	fs.StringVar(&c.databaseURL, "database-url", "", "an external PostgreSQL to work in, in a schema of its own (default: a private cluster that the tool starts and removes)")
	fs.StringVar(&c.pgBin, "pg-bin", "", "PostgreSQL server binaries of the private cluster (default: the newest /usr/lib/postgresql/*/bin)")
	fs.BoolVar(&c.pgbouncer, "pgbouncer", false, "servers reach the private cluster through PgBouncer in transaction pooling mode (Debian package pgbouncer)")
	fs.IntVar(&c.pgbouncerPool, "pgbouncer-pool", 20, "with -pgbouncer: PgBouncer's default_pool_size, the server connections of the servers' pool (their provider ledger has a pool of its own of the same size)")
	fs.StringVar(&c.queryExecMode, "query-exec-mode", "", "the servers' pgx default_query_exec_mode (default: pgx's own, cache_statement; exec with -pgbouncer, where cache_statement fails)")
	fs.StringVar(&c.schema, "schema", "", "with -database-url: use this existing schema instead of creating and dropping one")
	fs.StringVar(&c.serverBin, "server-bin", "", "server binary (default: go build "+serverPackage+")")
	fs.BoolVar(&c.keep, "keep", false, "keep the schema (or the private cluster, stopped) and the server logs")

	fs.BoolVar(&c.bench, "bench", false, "measure mutations per second instead: createOrder, then createPayment, each for -duration, no faults, no duplicates")
	fs.IntVar(&c.countStatements, "count-statements", 0, "with -bench: send this many of each mutation from one client to one server with log_statement=all and count their statements in the PostgreSQL log")

	fs.BoolVar(&c.anchor, "anchor", false, "with -bench: the plain anchor instead (anchor.go): -servers processes of the test application's server serve the same create of a shipment without the hook, in atomic and lease mode and written by hand, each in turn for -duration/-anchor-rounds, -anchor-rounds times")
	fs.IntVar(&c.anchorRounds, "anchor-rounds", 5, "with -anchor: how many times each create gets its turn")
	fs.StringVar(&c.anchorBin, "anchor-bin", "", "with -anchor: the test application's server binary (default: go build "+anchorPackage+")")

	addAdversaryFlags(fs, &c.adversary)
	addSoakFlags(fs, &c.soak)
	addFailoverFlags(fs, &c.failover)

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.short && c.long {
		return nil, errors.New("-short and -long exclude each other")
	}
	if c.pgbouncer && c.queryExecMode == "" {
		c.queryExecMode = "exec"
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, on := range map[string]bool{"short": c.short, "long": c.long} {
		if !on {
			continue
		}
		for flagName, value := range presets[name] {
			if !set[flagName] {
				if err := fs.Set(flagName, value); err != nil {
					return nil, err
				}
			}
		}
	}
	switch {
	case c.servers < 1 || c.clients < 1 || c.maxInFlight < 1 || c.tenants < 1 || c.dupMax < 1 || c.burstCopies < 1:
		return nil, errors.New("-servers, -clients, -max-in-flight, -tenants, -dup-max and -burst-copies must be at least 1")
	case c.duration < 0 || c.timeout <= 0 || c.abandonMax <= 0 || c.maxBackoff <= 0 || c.drain <= 0:
		return nil, errors.New("-timeout, -abandon-max, -max-backoff and -drain must be positive, -duration not negative")
	case c.duration == 0 && c.burstKeys == 0:
		return nil, errors.New("-duration 0 runs the burst only: give -burst-keys")
	case c.noRetryRate < 0 || c.noRetryRate > 1 || c.recoverAfter < 0:
		return nil, errors.New("-no-retry-rate must be between 0 and 1, -recover-after not negative")
	case c.noRetryRate > 0 && c.recoverAfter == 0:
		return nil, errors.New("-no-retry-rate needs -recover-after: nothing else finishes an intent whose client never retries")
	case c.kills < 0 || c.pgRestarts < 0 || c.burstKeys < 0:
		return nil, errors.New("-kills, -pg-restarts and -burst-keys must not be negative")
	case c.duration == 0 && c.kills+c.pgRestarts > 0:
		return nil, errors.New("faults are injected during the load phase: with -duration 0, give -kills 0 -pg-restarts 0")
	case c.pgbouncer && c.databaseURL != "":
		return nil, errors.New("-pgbouncer runs in front of the private cluster: it excludes -database-url")
	case c.pgbouncer && c.countStatements > 0:
		return nil, errors.New("-count-statements sets log_statement per connection, which PgBouncer does not pass on")
	case c.schema != "" && c.databaseURL == "":
		return nil, errors.New("-schema needs -database-url")
	case c.bench && c.duration == 0:
		return nil, errors.New("-bench needs a positive -duration")
	case c.anchor && (!c.bench || c.countStatements > 0 || c.anchorRounds < 1):
		return nil, errors.New("-anchor needs -bench, no -count-statements, and -anchor-rounds of at least 1")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

// run sets up the database and the servers, runs the load (or the bench)
// and always cleans up: servers stopped, the private cluster removed, or
// the schema dropped and the external PostgreSQL running.
func run(cfg *config) int {
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "idem-loadtest")
	if err != nil {
		return fail(err)
	}
	keepLogs := cfg.keep
	defer func() {
		if keepLogs {
			fmt.Printf("logs kept in %s\n", tmp)
		} else {
			os.RemoveAll(tmp)
		}
	}()
	bin := cfg.serverBin
	if bin == "" && !cfg.anchor {
		if bin, err = buildServer(tmp); err != nil {
			return fail(err)
		}
	}

	var (
		pg postgres
		db *database
	)
	if cfg.databaseURL == "" && cfg.failover.mode != "" {
		var remove func(keep bool, logDir string)
		if pg, db, remove, err = startReplicated(ctx, cfg); err != nil {
			return fail(fmt.Errorf("replicated PostgreSQL: %w", err))
		}
		defer func() { remove(cfg.keep, map[bool]string{true: tmp}[keepLogs]) }()
	} else if cfg.databaseURL == "" {
		var p private
		var remove func(keep bool, logDir string)
		if p, db, remove, err = startPrivate(ctx, cfg); err != nil {
			return fail(fmt.Errorf("private PostgreSQL: %w", err))
		}
		pg = p
		defer func() {
			logDir := ""
			if keepLogs {
				logDir = tmp
			}
			remove(cfg.keep, logDir)
		}()
	} else {
		if err := waitReady(ctx, cfg.databaseURL, 10*time.Second); err != nil {
			return fail(err)
		}
		if (!cfg.bench && cfg.pgRestarts > 0) || cfg.countStatements > 0 {
			ext, err := findCluster(cfg.pgCluster, cfg.databaseURL)
			if err != nil {
				return fail(err)
			}
			pg = ext
			// Whatever happens to this run, PostgreSQL is left running:
			// other tests share it.
			defer func() {
				if err := ext.ensureRunning(); err != nil {
					fmt.Fprintln(os.Stderr, "loadtest: PostgreSQL is not running:", err)
				}
			}()
		}
		if db, err = newSchema(ctx, cfg.databaseURL, cfg.schema); err != nil {
			return fail(err)
		}
		defer func() {
			if cfg.keep && db.owned {
				fmt.Printf("schema %s kept\n", db.schema)
				return
			}
			if pg != nil {
				_ = pg.ensureRunning() // an interrupted restart may have left it stopped
			}
			if err := db.drop(); err != nil {
				fmt.Fprintf(os.Stderr, "loadtest: drop schema %s: %v\n", db.schema, err)
			}
		}()
	}

	if cfg.queryExecMode != "" {
		db.serverParams = url.Values{"default_query_exec_mode": {cfg.queryExecMode}}
		db.name += ", pgx default_query_exec_mode " + cfg.queryExecMode
	}

	if cfg.adversary.on {
		if err := runAdversary(ctx, cfg.adversary, bin, tmp, db.serverEnv(nil)); err != nil {
			keepLogs = true
			return fail(err)
		}
		return 0
	}
	if cfg.soak.on {
		if err := runSoak(ctx, cfg.soak, bin, tmp, db.serverEnv(nil)); err != nil {
			keepLogs = true
			return fail(err)
		}
		return 0
	}
	if cfg.anchor {
		if err := runAnchor(ctx, cfg, tmp, db); err != nil {
			keepLogs = true
			return fail(err)
		}
		return 0
	}
	if cfg.bench {
		if err := runBench(ctx, cfg, bin, tmp, db, pg); err != nil {
			keepLogs = true
			return fail(err)
		}
		return 0
	}
	code := runLoad(ctx, cfg, bin, tmp, db, pg, started)
	if code != 0 {
		keepLogs = true
	}
	return code
}

// driverArgs select the servers' database driver, if -db-driver says.
func driverArgs(cfg *config) []string {
	if cfg.dbDriver == "" {
		return nil
	}
	return []string{"-db-driver", cfg.dbDriver}
}

// serverArgs are the flags every server of a load run gets.
func serverArgs(cfg *config) []string {
	args := []string{
		"-lease", cfg.lease.String(),
		"-wait-in-flight", cfg.waitInFlight.String(),
		"-materialize-every", "0", // the page-view folder is not under test
		"-recover-after", cfg.recoverAfter.String(),
		// Receipts: a job a killed server was running is run again soon.
		"-river-rescue-after", "4s", "-river-poll-interval", "200ms",
	}
	if cfg.pgbouncer {
		// Transaction pooling cannot hold River's LISTEN.
		args = append(args, "-river-poll-only")
	}
	if cfg.dbMaxConns > 0 {
		args = append(args, "-db-max-conns", fmt.Sprint(cfg.dbMaxConns))
	}
	if cfg.providerConns > 0 {
		args = append(args, "-provider-max-conns", fmt.Sprint(cfg.providerConns))
	}
	return append(args, driverArgs(cfg)...)
}

// runLoad runs the phases of a load run on one fleet of servers: the load
// with its faults, then the burst; then it audits everything they did.
func runLoad(ctx context.Context, cfg *config, bin, tmp string, db *database, pg postgres, started time.Time) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	steady := profile{name: "steady", latency: cfg.providerLatency, responseLatency: cfg.responseLatency, failureRate: cfg.failureRate}
	spike := profile{name: "spiking", latency: cfg.spikeLatency, responseLatency: cfg.spikeLatency, failureRate: cfg.failureRate}
	// The servers' connections carry the run's name, so that the tool can
	// count them among everyone's on an external PostgreSQL.
	app := "loadtest_" + runID()
	env := db.serverEnv(dsnParams("application_name", app))
	f := &fleet{bin: bin, env: env, args: serverArgs(cfg), logDir: tmp, newPort: cfg.newPort}
	defer f.stop()
	for i := range cfg.servers {
		p := steady
		if cfg.spikeLatency > 0 && cfg.servers > 1 && i == cfg.servers-1 {
			p = spike // one spiking server from the start
		}
		if err := f.add(ctx, p); err != nil {
			return fail(err)
		}
	}
	fmt.Printf("loadtest: %d servers on the %s\n", cfg.servers, db.name)

	sum := &summary{cfg: cfg, st: &stats{}, v: &violations{}, maxConns: db.maxConnections(ctx)}
	reg := &registry{}
	prefix := runID()
	loadStart := time.Now()
	sum.setup = loadStart.Sub(started)
	if cfg.duration > 0 {
		fmt.Printf("loadtest: load: %d clients, %.0f customers/s for %v (+ up to %v to drain), %d kills, %d PostgreSQL restarts\n",
			cfg.clients, cfg.rate, cfg.duration, cfg.drain, cfg.kills, cfg.pgRestarts)
		w := &workload{cfg: cfg, client: newClient(cfg, f, sum.st), stats: sum.st, reg: reg, prefix: prefix}
		sampler := db.sampleConnections(ctx, app)
		load, endLoad := context.WithTimeout(ctx, cfg.duration)
		defer endLoad()
		deadline, endDeadline := context.WithTimeout(ctx, cfg.duration+cfg.drain)
		defer endDeadline()
		faultsDone := make(chan struct{})
		go func() {
			injectFaults(load, cfg, f, pg, sum.st, sum.v, steady, spike)
			close(faultsDone)
		}()
		w.run(load, deadline)
		<-faultsDone
		sum.peakConns = sampler.end()
		if cfg.noRetryRate > 0 {
			// The intents whose client never retried are finished by the
			// servers' recoverer, or not at all: wait for it before the
			// servers stop (the audit then finds what it left pending).
			sum.recovered = awaitRecovery(deadline, db)
		}
	}
	sum.answered = time.Since(loadStart)
	if cfg.burstKeys > 0 && ctx.Err() == nil {
		fmt.Printf("loadtest: burst: %d keys × %d copies of createOrder at once, then of createPayment\n", cfg.burstKeys, cfg.burstCopies)
		sampler := db.sampleConnections(ctx, app)
		sum.burst = runBurst(ctx, cfg, f, reg, sum.v, prefix)
		sum.burst.peakConns = sampler.end()
	}
	// The receipts of the paid payments are delivered after their commits,
	// by the servers still running: wait for River to have no receipt job
	// left before they stop.
	sum.delivered = awaitReceipts(ctx, db)
	f.stop()
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}

	// The audit: the database as the run left it, then a fresh replay of
	// every intent from a server started for the purpose.
	auditStart := time.Now()
	if pg != nil {
		if err := pg.ensureRunning(); err != nil {
			return fail(err)
		}
	}
	sum.intents = reg.all()
	sdb, err := db.open()
	if err != nil {
		return fail(err)
	}
	sum.snap, err = readSnapshot(ctx, sdb)
	sdb.Close()
	if err != nil {
		return fail(err)
	}
	sum.audit = auditDatabase(sum.intents, sum.snap, sum.v)
	sum.logs = f.logCounts(logPatterns)

	auditFleet := &fleet{bin: bin, env: env, args: serverArgs(cfg), logDir: filepath.Join(tmp, "audit")}
	defer auditFleet.stop()
	if err := os.MkdirAll(auditFleet.logDir, 0o755); err == nil {
		err = auditFleet.add(ctx, profile{name: "audit"})
	}
	if err != nil {
		return fail(fmt.Errorf("audit server: %w", err))
	}
	auditStats := &stats{}
	sum.audit.replays = auditReplays(ctx, newClient(cfg, auditFleet, auditStats), 0, sum.intents, sum.v)
	auditFleet.stop()
	sum.st.auditRequests.Store(auditStats.requests.Load())
	sum.auditTime = time.Since(auditStart)
	sum.wall = time.Since(started)

	sum.print(os.Stdout)
	if sum.v.total() > 0 {
		return 1
	}
	return 0
}

// logPatterns name the server log lines the summary counts (messages of
// the hook (protocol.go, attempt.go) and of cmd/server). A line counts for the first pattern all of
// whose parts it contains.
var logPatterns = []logPattern{
	{"store unavailable, request cancelled", []string{"idempotency store unavailable", "context canceled"}},
	{"store unavailable", []string{"idempotency store unavailable"}},
	{"store failed while storing a result", []string{"idempotency store failed while storing a result"}},
	{"claims taken over", []string{"idempotency claim taken over"}},
	{"attempts fenced out (lost their claim)", []string{"idempotent attempt lost its claim"}},
	{"retryable failures, claim released", []string{"retryable error; claim released"}},
	{"claim releases retried in the background", []string{"could not release idempotency claim yet"}},
	{"claim releases that got through after retries", []string{"idempotency claim released after retries"}},
	{"claim releases given up (the lease ran out)", []string{"could not release idempotency claim;"}},
	{"unexpected errors (INTERNAL_SERVER_ERROR)", []string{"unexpected error"}},
	{"failed starts (migration)", []string{"server: migrate:"}},
	{"panics", []string{"panic"}},
}

// summary is what a load run reports.
type summary struct {
	cfg   *config
	st    *stats
	v     *violations
	audit auditReport
	// recovered is how long the recoverer took to leave no payment
	// pending after the load (negative: it had not by the deadline).
	recovered time.Duration
	// delivered is how long River took after the load to have no receipt
	// job left to work (negative: it had not within awaitReceipts' bound).
	delivered time.Duration
	snap      *snapshot
	logs      map[string]int
	intents   []*intent
	burst     *burstReport // nil: no burst

	peakConns, maxConns              int
	setup, answered, auditTime, wall time.Duration
}

func (s *summary) print(w io.Writer) {
	p := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-14s %s\n", label, fmt.Sprintf(format, args...))
	}
	st := s.st
	fmt.Fprintln(w, "\n== loadtest summary")
	if s.cfg.duration > 0 {
		s.printLoad(w, p)
	}
	if s.burst != nil {
		s.burst.print(p, s.maxConns)
	}
	p("database", "%d orders, %d payments, %d provider charges; the provider deduplicated %d requests on %d keys",
		len(s.snap.orders), len(s.snap.payments), len(s.snap.charges), s.audit.dedupedRequests, s.audit.dedupedKeys)
	p("receipts", "%d sent, one per paid payment required; %d redelivered to the mailer and deduplicated by their downstream key; none left to deliver %v after the load",
		len(s.snap.receipts), s.audit.redeliveredReceipts, s.delivered.Round(time.Millisecond))
	if nr := s.audit.noRetry; nr.intents > 0 {
		p("no retry", "%d payment intents sent once, never retried: %d answered by that request; of the %d unanswered, %d finished by the servers' recoverer "+
			"(%d paid, %d ORDER_ALREADY_PAID), %d never claimed (nothing charged); no payment pending %v after the load",
			nr.intents, nr.answered, nr.intents-nr.answered, nr.recoveredPaid+nr.recoveredFailed, nr.recoveredPaid, nr.recoveredFailed, nr.unclaimed, s.recovered.Round(time.Millisecond))
	}
	if s.audit.orphanCharges > 0 {
		p("notice", "%d charges voided: an attempt of a payment intent charged, was rolled back, and the competing payment won; "+
			"the intent voided its charge before answering ORDER_ALREADY_PAID", s.audit.orphanCharges)
	}
	var lines []string
	for _, lp := range logPatterns {
		if n := s.logs[lp.label]; n > 0 {
			lines = append(lines, fmt.Sprintf("%s %d", lp.label, n))
		}
	}
	if len(lines) == 0 {
		lines = []string{"nothing notable"}
	}
	p("server logs", "%s", lines[0])
	for _, l := range lines[1:] {
		p("", "%s", l)
	}
	p("audit", "%d fresh replays compared (%d requests)", s.audit.replays, st.auditRequests.Load())
	p("time", "setup %v, load and answers %v, burst %v, audit %v, %v in all",
		s.setup.Round(time.Millisecond), s.answered.Round(time.Millisecond), s.burstTime().Round(time.Millisecond),
		s.auditTime.Round(time.Millisecond), s.wall.Round(time.Millisecond))
	if s.v.total() == 0 {
		p("violations", "none")
		fmt.Fprintln(w, "PASS")
		return
	}
	p("violations", "%d: %s", s.v.total(), &s.v.counts)
	kinds := make([]string, 0, len(s.v.examples))
	for k := range s.v.examples {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		for _, e := range s.v.examples[k] {
			p("", "%s: %s", k, e)
		}
	}
	fmt.Fprintln(w, "FAIL")
}

func (s *summary) burstTime() time.Duration {
	if s.burst == nil {
		return 0
	}
	return s.burst.elapsed
}

// printLoad prints the figures of the load phase.
func (s *summary) printLoad(w io.Writer, p func(label, format string, args ...any)) {
	st := s.st
	fmt.Fprintln(w, "-- load phase, with faults")
	p("requests", "%d (load, until every intent was answered)", st.requests.Load())
	p("intents", "%d: %s", st.intents.total(), &st.intents)
	p("duplicates", "%d intents sent by several clients at once (%d extra copies)", st.duplicated.Load(), st.copies.Load())
	p("answers", "%d final: %s", st.answers.total(), &st.answers)
	p("retries", "%d: %s", st.retries.total(), &st.retries)
	var lat []time.Duration
	for _, in := range s.intents {
		if _, ok := in.result(); ok && !in.burst {
			lat = append(lat, in.latency)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Millisecond) }
		p("intent time", "until the first final answer: p50 %v, p90 %v, p99 %v, max %v", q(0.5), q(0.9), q(0.99), q(1))
	}
	p("faults", "%s", &st.faults)
	for _, e := range st.sortedEvents() {
		p("", "%7v %s", e.at.Round(time.Millisecond), e.text)
	}
	p("connections", "at most %d to PostgreSQL (max_connections %d)", s.peakConns, s.maxConns)
}

// dsnParams returns extra runtime parameters for the servers' connections.
func dsnParams(pairs ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		q.Set(pairs[i], pairs[i+1])
	}
	return q
}
