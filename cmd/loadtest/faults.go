package main

// loadtest faults: the example server's idempotency under load and faults.
// It starts several server processes on one database (PostgreSQL, or
// MariaDB with -mysql) and plays customers against them from many
// concurrent clients (workload.go): each creates an order (createOrder,
// atomic mode) and usually pays it (createPayment, lease mode, through the
// simulated payment provider), sometimes twice with two keys (competing
// payments). An intent is sometimes sent by several clients to several
// servers at once (duplicates); every client retries its intent with the
// same key and the same body, after timeouts, refused connections, HTTP
// 5xx, IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE and the outcome
// "released", until it gets a final answer.
//
// Meanwhile it injects faults (faultKinds): kill -9 of a server (restarted
// after a moment, with a spiking provider or without), restarts of the
// database (PostgreSQL's in fast mode, MariaDB's a kill -9), provider
// latency spikes beyond the lease and provider failures (server flags),
// and client timeouts that abandon requests mid-mutation.
//
// Then, with -burst-keys, a burst (burst.go): that many new orders, each
// sent by -burst-copies clients at once to the servers in turn, then their
// payments, the same way. The servers run with their default connection
// pools, on a database with max_connections = 100: a burst must get no
// IDEMPOTENCY_UNAVAILABLE (a request waits for a connection instead),
// which the audit counts as a violation.
//
// At the end, with every intent answered and every server stopped, it
// audits (audit.go): every client's final answer for a key has the same
// data bytes, and a fresh replay from a newly started server returns them
// again; exactly one order or payment row per successful intent, with the
// answered id; exactly one provider charge per paid intent, the payment's;
// orders paid if and only if a payment of theirs succeeded, never twice;
// no record left pending. It prints a summary (summary.go) and exits with
// status 1 on any violation.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// faultsConfig holds the flags of loadtest faults.
type faultsConfig struct {
	short, long bool

	servers  int
	clients  int
	rate     float64
	duration time.Duration
	drain    time.Duration
	tenants  int

	payRate      float64
	conflictRate float64
	noRetryRate  float64
	recoverAfter time.Duration
	dupRate      float64
	dupMax       int

	burstKeys   int
	burstCopies int

	client clientConfig

	kills        int
	killDowntime time.Duration
	newPort      bool
	pgRestarts   int

	lease           time.Duration
	waitInFlight    time.Duration
	dbMaxConns      int
	dbDriver        string
	providerConns   int
	providerLatency time.Duration
	responseLatency time.Duration
	failureRate     float64
	spikeLatency    time.Duration
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

func defineFaults(fs *flag.FlagSet) command {
	c := &faultsConfig{}
	fs.BoolVar(&c.short, "short", false, "CI preset: 4 servers, 24 clients, 30s of load (a few thousand requests), 2 kills, 1 database restart, then a burst of 40 keys × 8 copies")
	fs.BoolVar(&c.long, "long", false, "reporting preset: 4 servers, 32 clients, 3m of load, 12 kills, 4 database restarts, then a burst of 60 keys × 10 copies")

	fs.IntVar(&c.servers, "servers", 3, "server processes")
	fs.IntVar(&c.clients, "clients", 24, "concurrent clients (customers in progress); each intent may add duplicate copies")
	fs.IntVar(&c.client.maxInFlight, "max-in-flight", 24, "most requests in flight at once, over all clients and copies, during the load phase (not the burst)")
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

	fs.DurationVar(&c.client.timeout, "timeout", 3*time.Second, "client timeout of an attempt, after which it is abandoned and retried (the burst's attempts wait up to -drain)")
	fs.Float64Var(&c.noRetryRate, "no-retry-rate", 0.1, "fraction of payments (of orders without a competing one) whose client sends one request and never retries, as a client that crashed: the servers' recoverer must finish them")
	fs.DurationVar(&c.recoverAfter, "recover-after", time.Second, "servers' -recover-after (0: off; then -no-retry-rate must be 0)")
	fs.Float64Var(&c.client.abandonRate, "abandon-rate", 0.03, "fraction of attempts abandoned early, with a random timeout below -abandon-max")
	fs.DurationVar(&c.client.abandonMax, "abandon-max", 300*time.Millisecond, "longest timeout of an attempt abandoned early")
	fs.DurationVar(&c.client.maxBackoff, "max-backoff", time.Second, "longest wait between two attempts of an intent")

	fs.IntVar(&c.kills, "kills", 4, "kill -9 of a server during the load phase (each restarted after -kill-downtime)")
	fs.DurationVar(&c.killDowntime, "kill-downtime", 300*time.Millisecond, "how long a killed server stays down")
	fs.BoolVar(&c.newPort, "new-port", false, "restart a killed server on a new port (default: the same port)")
	fs.IntVar(&c.pgRestarts, "pg-restarts", 2, "database restarts during the load phase (PostgreSQL's in fast mode; with -mysql, kill -9 of MariaDB)")
	defineServerFlags(fs, c)
	return c
}

// defineServerFlags adds the flags that the servers of loadtest faults
// take.
func defineServerFlags(fs *flag.FlagSet, c *faultsConfig) {
	fs.DurationVar(&c.lease, "lease", time.Second, "servers' -lease: a killed server's claims are taken over after it")
	fs.DurationVar(&c.waitInFlight, "wait-in-flight", 200*time.Millisecond, "servers' -wait-in-flight")
	fs.IntVar(&c.dbMaxConns, "db-max-conns", 0, "servers' -db-max-conns (0: the server's default)")
	fs.StringVar(&c.dbDriver, "db-driver", "", "servers' -db-driver: pgx or database/sql (default: the server's, pgx)")
	fs.IntVar(&c.providerConns, "provider-max-conns", 0, "servers' -provider-max-conns (0: the server's default)")
	fs.DurationVar(&c.providerLatency, "provider-latency", 30*time.Millisecond, "provider latency before a charge executes")
	fs.DurationVar(&c.responseLatency, "provider-response-latency", 30*time.Millisecond, "provider latency after a charge executed (a crash in it leaves money charged, books unwritten)")
	fs.Float64Var(&c.failureRate, "provider-failure-rate", 0.05, "probability that a provider charge fails (retryable)")
	fs.DurationVar(&c.spikeLatency, "spike-latency", 600*time.Millisecond, "provider latency, before and after the charge, of the spiking server (one at a time; 0: none); above -lease/2, its live attempts are taken over")
}

// check applies the preset to the flags not set, then refuses what
// excludes each other.
func (c *faultsConfig) check(fs *flag.FlagSet, dc *dbConfig) error {
	if c.short && c.long {
		return errors.New("-short and -long exclude each other")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, on := range map[string]bool{"short": c.short, "long": c.long} {
		for flagName, value := range presets[name] {
			if on && !set[flagName] {
				if err := fs.Set(flagName, value); err != nil {
					return err
				}
			}
		}
	}
	switch {
	case c.servers < 1 || c.clients < 1 || c.client.maxInFlight < 1 || c.tenants < 1 || c.dupMax < 1 || c.burstCopies < 1:
		return errors.New("-servers, -clients, -max-in-flight, -tenants, -dup-max and -burst-copies must be at least 1")
	case c.duration < 0 || c.client.timeout <= 0 || c.client.abandonMax <= 0 || c.client.maxBackoff <= 0 || c.drain <= 0:
		return errors.New("-timeout, -abandon-max, -max-backoff and -drain must be positive, -duration not negative")
	case c.duration == 0 && c.burstKeys == 0:
		return errors.New("-duration 0 runs the burst only: give -burst-keys")
	case c.noRetryRate < 0 || c.noRetryRate > 1 || c.recoverAfter < 0:
		return errors.New("-no-retry-rate must be between 0 and 1, -recover-after not negative")
	case c.noRetryRate > 0 && c.recoverAfter == 0:
		return errors.New("-no-retry-rate needs -recover-after: nothing else finishes an intent whose client never retries")
	case c.kills < 0 || c.pgRestarts < 0 || c.burstKeys < 0:
		return errors.New("-kills, -pg-restarts and -burst-keys must not be negative")
	case c.duration == 0 && c.kills+c.pgRestarts > 0:
		return errors.New("faults are injected during the load phase: with -duration 0, give -kills 0 -pg-restarts 0")
	case dc.mysql && c.dbDriver != "":
		return errors.New("-db-driver chooses PostgreSQL's driver: it excludes -mysql")
	}
	return nil
}

// needs: an external PostgreSQL's cluster, to restart it.
func (c *faultsConfig) needs() needs { return needs{server: true, cluster: c.pgRestarts > 0} }

// serverArgs are the flags every server of a load run gets.
func (c *faultsConfig) serverArgs(db *database) []string {
	args := []string{
		"-lease", c.lease.String(),
		"-wait-in-flight", c.waitInFlight.String(),
		"-materialize-every", "0", // the page-view folder is not under test
		"-recover-after", c.recoverAfter.String(),
	}
	if db.engine.river {
		// Receipts: a job a killed server was running is run again soon.
		args = append(args, "-river-rescue-after", "4s", "-river-poll-interval", "200ms")
	}
	if db.pooled {
		// Transaction pooling cannot hold River's LISTEN.
		args = append(args, "-river-poll-only")
	}
	if c.dbMaxConns > 0 {
		args = append(args, "-db-max-conns", fmt.Sprint(c.dbMaxConns))
	}
	if c.providerConns > 0 {
		args = append(args, "-provider-max-conns", fmt.Sprint(c.providerConns))
	}
	return append(args, driverArgs(c.dbDriver)...)
}

// driverArgs select the servers' database driver, if -db-driver says.
func driverArgs(driver string) []string {
	if driver == "" {
		return nil
	}
	return []string{"-db-driver", driver}
}

// loadRun is one run of loadtest faults: its fleet, and what it sent.
type loadRun struct {
	cfg           *faultsConfig
	e             *runEnv
	fleet         *fleet
	env           []string // the servers' environment
	app           string   // their connections' application_name
	steady, spike profile
	sum           *summary
	reg           *registry
	prefix        string // of the run's keys
}

// run runs the phases of a load run on one fleet of servers: the load
// with its faults, then the burst; then it audits everything they did.
func (c *faultsConfig) run(e *runEnv) error {
	r := &loadRun{cfg: c, e: e, reg: &registry{}, prefix: runID()}
	defer func() {
		if r.fleet != nil {
			r.fleet.stop()
		}
	}()
	if err := r.startFleet(); err != nil {
		return err
	}
	loadStart := time.Now()
	r.sum.setup = loadStart.Sub(e.started)
	if c.duration > 0 {
		r.load()
	}
	r.sum.answered = time.Since(loadStart)
	if c.burstKeys > 0 && e.ctx.Err() == nil {
		fmt.Printf("loadtest: burst: %d keys × %d copies of createOrder at once, then of createPayment\n", c.burstKeys, c.burstCopies)
		sampler := e.db.sampleConnections(e.ctx, r.app)
		r.sum.burst = runBurst(e.ctx, c, r.fleet, r.reg, r.sum.v, r.prefix)
		r.sum.burst.peakConns = sampler.end()
	}
	// The receipts of the paid payments are delivered after their commits,
	// by the servers still running: wait for River to have no receipt job
	// left before they stop.
	r.sum.delivered = awaitReceipts(e.ctx, e.db)
	r.fleet.stop()
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if err := r.audit(); err != nil {
		return err
	}
	r.sum.wall = time.Since(e.started)
	r.sum.print(os.Stdout)
	if r.sum.v.total() > 0 {
		return errFailed
	}
	return nil
}

// startFleet starts the servers, one of them spiking from the start.
func (r *loadRun) startFleet() error {
	c, e := r.cfg, r.e
	r.steady = profile{name: "steady", latency: c.providerLatency, responseLatency: c.responseLatency, failureRate: c.failureRate}
	r.spike = profile{name: "spiking", latency: c.spikeLatency, responseLatency: c.spikeLatency, failureRate: c.failureRate}
	// The servers' connections carry the run's name, so that the tool can
	// count them among everyone's on an external PostgreSQL. (MariaDB is
	// the run's own, and would take the parameter for a system variable.)
	r.app = "loadtest_" + runID()
	var params url.Values
	if e.db.engine == postgresEngine {
		params = dsnParams("application_name", r.app)
	}
	r.env = e.db.serverEnv(params)
	r.fleet = &fleet{bin: e.bin, env: r.env, args: c.serverArgs(e.db), logDir: e.tmp, newPort: c.newPort, noRiver: !e.db.engine.river}
	for i := range c.servers {
		p := r.steady
		if c.spikeLatency > 0 && c.servers > 1 && i == c.servers-1 {
			p = r.spike
		}
		if err := r.fleet.add(e.ctx, p); err != nil {
			return err
		}
	}
	fmt.Printf("loadtest: %d servers on the %s\n", c.servers, e.db.name)
	r.sum = &summary{cfg: c, engine: e.db.engine.name, st: &stats{}, v: &violations{}, maxConns: e.db.maxConnections(e.ctx)}
	return nil
}

// load runs the load phase and its faults, then lets the unanswered
// intents drain.
func (r *loadRun) load() {
	c, e, sum := r.cfg, r.e, r.sum
	fmt.Printf("loadtest: load: %d clients, %.0f customers/s for %v (+ up to %v to drain), %d kills, %d %s restarts\n",
		c.clients, c.rate, c.duration, c.drain, c.kills, c.pgRestarts, e.db.engine.name)
	w := &workload{cfg: c, client: newClient(c.client, r.fleet, sum.st), stats: sum.st, reg: r.reg, prefix: r.prefix}
	sampler := e.db.sampleConnections(e.ctx, r.app)
	load, endLoad := context.WithTimeout(e.ctx, c.duration)
	defer endLoad()
	deadline, endDeadline := context.WithTimeout(e.ctx, c.duration+c.drain)
	defer endDeadline()
	faultsDone := make(chan struct{})
	go func() {
		fr := &faultRun{cfg: c, fleet: r.fleet, dbServer: e.dbServer, st: sum.st, v: sum.v, steady: r.steady, spike: r.spike}
		fr.inject(load)
		close(faultsDone)
	}()
	w.run(load, deadline)
	<-faultsDone
	sum.peakConns = sampler.end()
	if c.noRetryRate > 0 {
		// The intents whose client never retried are finished by the
		// servers' recoverer, or not at all: wait for it before the
		// servers stop (the audit then finds what it left pending).
		sum.recovered = awaitRecovery(deadline, e.db)
	}
}

// audit checks the database as the run left it, then replays every intent
// from a server started for the purpose.
func (r *loadRun) audit() error {
	e, sum := r.e, r.sum
	auditStart := time.Now()
	if e.dbServer != nil {
		if err := e.dbServer.ensureRunning(); err != nil {
			return err
		}
	}
	sum.intents = r.reg.all()
	sdb, err := e.db.open()
	if err != nil {
		return err
	}
	sum.snap, err = readSnapshot(e.ctx, sdb)
	sdb.Close()
	if err != nil {
		return err
	}
	sum.audit = auditDatabase(sum.intents, sum.snap, sum.v)
	sum.logs = r.fleet.logCounts(logPatterns)

	auditFleet := &fleet{bin: e.bin, env: r.env, args: r.cfg.serverArgs(e.db), logDir: filepath.Join(e.tmp, "audit"), noRiver: !e.db.engine.river}
	defer auditFleet.stop()
	if err := os.MkdirAll(auditFleet.logDir, 0o755); err == nil {
		err = auditFleet.add(e.ctx, profile{name: "audit"})
	}
	if err != nil {
		return fmt.Errorf("audit server: %w", err)
	}
	auditStats := &stats{}
	sum.audit.replays = auditReplays(e.ctx, newClient(r.cfg.client, auditFleet, auditStats), 0, sum.intents, sum.v)
	auditFleet.stop()
	sum.st.auditRequests.Store(auditStats.requests.Load())
	sum.auditTime = time.Since(auditStart)
	return nil
}

// fault is one planned fault.
type fault struct {
	at   time.Duration // after the start of the load
	kind string        // a key of faultKinds
}

// faultKinds inject each kind of fault the plan names. A new fault is an
// entry here, and its share of the plan in planFaults.
var faultKinds = map[string]func(r *faultRun, ctx context.Context, ft fault, at time.Duration){
	"kill":     (*faultRun).kill,
	"database": (*faultRun).restartDatabase,
}

// planFaults spreads the kills and the database restarts evenly over the
// load phase, restarts between kills, so that every fault hits a running
// workload and the recovery of one is not hidden by the next.
func planFaults(cfg *faultsConfig) []fault {
	k, r := cfg.kills, cfg.pgRestarts
	n := k + r
	plan := make([]fault, 0, n)
	for i := range n {
		kind := "kill"
		// The i-th event is a restart when the restarts' share of events
		// rounded at its middle grows: K R K for two kills and a restart.
		if ((2*i+2)*r+n)/(2*n) > (2*i*r+n)/(2*n) {
			kind = "database"
		}
		plan = append(plan, fault{at: cfg.duration * time.Duration(i+1) / time.Duration(n+1), kind: kind})
	}
	return plan
}

// faultRun is what the faults of one load phase act on.
type faultRun struct {
	cfg           *faultsConfig
	fleet         *fleet
	dbServer      dbServer
	st            *stats
	v             *violations
	steady, spike profile

	start    time.Time
	kills    int
	restarts sync.WaitGroup // of killed servers
}

// inject carries out the plan while the load runs, and returns when every
// killed server is back.
func (r *faultRun) inject(ctx context.Context) {
	r.start = time.Now()
	defer r.restarts.Wait()
	for _, ft := range planFaults(r.cfg) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(r.start.Add(ft.at))):
		}
		if ctx.Err() != nil {
			r.v.add("fault-not-injected", "%s at %v: the load phase ended first", ft.kind, ft.at)
			continue
		}
		inject, ok := faultKinds[ft.kind]
		if !ok {
			panic(fmt.Sprintf("unknown fault %q", ft.kind))
		}
		inject(r, ctx, ft, time.Since(r.start))
	}
}

// kill kills a server with kill -9. Kills go round the running servers; a
// killed server restarts in the background (a start can take long while
// the database is busy), so that the plan keeps its times. At most one
// server spikes at a time: a killed spiking server comes back steady, and
// a killed steady one comes back spiking if none spikes, so that the spike
// moves from server to server. (If every server spiked beyond the lease,
// the attempts of a key that several clients retry could take each other
// over for ever: see BENCHMARKS.md.)
func (r *faultRun) kill(ctx context.Context, ft fault, at time.Duration) {
	victim := r.fleet.running(r.kills)
	if victim < 0 {
		r.v.add("fault-not-injected", "kill at %v: no server is running", ft.at)
		return
	}
	r.kills++
	next := r.steady
	if r.cfg.spikeLatency > 0 && !r.fleet.anyRuns(r.spike.name) {
		next = r.spike
	}
	r.fleet.kill(victim, next)
	r.st.faults.add("kill -9")
	r.restarts.Go(func() {
		time.Sleep(r.cfg.killDowntime)
		if err := r.fleet.restart(context.WithoutCancel(ctx), victim); err != nil {
			r.v.add("fault-failed", "restart of server %d after kill -9: %v", victim, err)
			return
		}
		r.st.event(at, "kill -9 server %d, back after %v with provider %s", victim, (time.Since(r.start) - at).Round(time.Millisecond), next.name)
	})
}

// restartDatabase restarts the database server: PostgreSQL in fast mode,
// or under -failover fails it over; MariaDB with kill -9.
func (r *faultRun) restartDatabase(ctx context.Context, _ fault, at time.Duration) {
	down, err := r.dbServer.restart(ctx)
	if err != nil {
		r.v.add("fault-failed", "restart of %s: %v", r.dbServer, err)
		return
	}
	switch r.dbServer.(type) {
	case *replicated:
		r.st.faults.add("postgres failover")
		r.st.event(at, "failover of PostgreSQL %s: the primary killed, the standby promoted and accepting writes after %v", r.dbServer, down.Round(time.Millisecond))
	case mariadb:
		r.st.faults.add("mariadb kill -9")
		r.st.event(at, "kill -9 of %s and a restart on its data directory: accepting connections again after %v", r.dbServer, down.Round(time.Millisecond))
	default:
		r.st.faults.add("postgres restart")
		r.st.event(at, "restart PostgreSQL %s, accepting connections again after %v", r.dbServer, down.Round(time.Millisecond))
	}
}
