package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goovo/idem/internal/testkit/pgcluster"
)

// database is the database of one run. On the private cluster (the
// default) or the private MariaDB (-mysql) it is a database of its own; on
// an external PostgreSQL (-database-url) a schema of its own in that
// database, selected with search_path, so that the run never reads or
// writes anything else.
type database struct {
	engine *engine // PostgreSQL or MariaDB
	// adminURL is the tool's own way in: directly to PostgreSQL, in the
	// run's database but not in its schema.
	adminURL string
	// serverURL is the servers' way in: adminURL, or PgBouncer in front of
	// it; providerURL is their provider ledger's (the same, or a PgBouncer
	// pool of its own).
	serverURL, providerURL string
	// serverParams are extra URL parameters of the servers' connections
	// (pgx's default_query_exec_mode behind PgBouncer).
	serverParams url.Values
	// pooled: the servers reach it through PgBouncer in transaction
	// pooling mode.
	pooled bool
	schema string // "" on the private cluster: the database's own
	owned  bool   // the schema was created by this run, dropped by it
	name   string // for messages
}

// newSchema creates a fresh schema in the database of baseURL, or adopts an
// existing one (which it will not drop) when schema is not empty.
func newSchema(ctx context.Context, baseURL, schema string) (*database, error) {
	d := &database{engine: postgresEngine, adminURL: baseURL, serverURL: baseURL, providerURL: baseURL, schema: schema}
	d.name = "schema " + schema
	if schema != "" {
		return d, nil
	}
	d.schema, d.owned = "loadtest_"+runID()+runID()[:4], true
	d.name = "schema " + d.schema
	db, err := d.admin()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+d.schema); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	return d, nil
}

// admin opens the run's database, outside the run's schema.
func (d *database) admin() (*sql.DB, error) { return d.engine.open(d.adminURL) }

// withParams returns base with the run's search_path (if it has a schema)
// and the extra query parameters (runtime parameters for pgx, such as
// log_statement=all).
func (d *database) withParams(base string, extra url.Values) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	if d.schema != "" {
		q.Set("search_path", d.schema)
	}
	for k, vs := range extra {
		for _, v := range vs {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// serverEnv returns the environment of the servers: their database and
// their provider's, with the run's parameters and extra ones.
func (d *database) serverEnv(extra url.Values) []string {
	params := url.Values{}
	for k, vs := range d.serverParams {
		params[k] = vs
	}
	for k, vs := range extra {
		params[k] = vs
	}
	return []string{
		"DATABASE_URL=" + d.withParams(d.serverURL, params),
		"PROVIDER_DATABASE_URL=" + d.withParams(d.providerURL, params),
	}
}

// open connects to the run's schema directly (for the audit).
func (d *database) open() (*sql.DB, error) { return d.engine.open(d.withParams(d.adminURL, nil)) }

// drop removes the schema if this run created it. It waits for PostgreSQL
// first: a drop attempted during a restart would leave the schema behind.
func (d *database) drop() error {
	if !d.owned {
		return nil
	}
	if err := waitReady(context.Background(), d.adminURL, time.Minute); err != nil {
		return err
	}
	db, err := d.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "DROP SCHEMA "+d.schema+" CASCADE")
	return err
}

// waitReady waits until PostgreSQL accepts connections, or timeout.
func waitReady(ctx context.Context, baseURL string, timeout time.Duration) error {
	if err := pgcluster.WaitReady(ctx, baseURL, timeout); err != nil {
		return fmt.Errorf("PostgreSQL does not accept connections: %w", err)
	}
	return nil
}

// dbServer is the database server of a run, as the faults see it: a
// PostgreSQL cluster (private, a replicated pair, or an external one's) or
// the private MariaDB.
type dbServer interface {
	fmt.Stringer
	// restart restarts the server (PostgreSQL in fast mode: open sessions
	// are terminated, as in a crash of the database seen from the
	// clients; MariaDB with kill -9), waits until it accepts connections
	// again, and returns how long it was unavailable, as seen from here.
	restart(ctx context.Context) (time.Duration, error)
	// ensureRunning starts the server if it does not answer: whatever
	// happened to a run, it leaves it running.
	ensureRunning() error
	// logFile is the server log (PostgreSQL's with Debian's
	// log_line_prefix).
	logFile() string
}

// private is the cluster the tool starts for a run (pgcluster): restarts
// and the connection budget of the run touch nobody else's database.
type private struct{ *pgcluster.Cluster }

func (p private) restart(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	// Not cancelled with the run: PostgreSQL must come back.
	err := p.Restart(context.WithoutCancel(ctx))
	return time.Since(start), err
}

func (p private) ensureRunning() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if p.Running(ctx) {
		return p.WaitReady(ctx, time.Minute)
	}
	return p.Start(ctx)
}

func (p private) logFile() string { return p.LogFile() }

// startPrivate starts a private cluster with max_connections = 100 (the
// budget the servers must fit in) and creates the run's database in it;
// with cfg.pgbouncer, PgBouncer in transaction pooling mode in front of it.
// stop removes everything, keeping the cluster's directory (stopped) with
// keep; with a logDir, it first copies PostgreSQL's and PgBouncer's logs
// there.
func startPrivate(ctx context.Context, cfg *dbConfig) (pg private, db *database, stop func(keep bool, logDir string), err error) {
	c, err := pgcluster.Init(ctx, pgcluster.Options{BinDir: cfg.pgBin})
	if err != nil {
		return private{}, nil, nil, err
	}
	var bouncer *pgcluster.Bouncer
	stop = func(keep bool, logDir string) {
		if logDir != "" {
			copyFile(c.LogFile(), filepath.Join(logDir, "postgresql.log"))
		}
		if bouncer != nil {
			if logDir != "" {
				copyFile(bouncer.LogFile(), filepath.Join(logDir, "pgbouncer.log"))
			}
			_ = bouncer.Stop()
		}
		if keep {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.Stop(sctx)
			fmt.Printf("private cluster kept (stopped) in %s\n", c.Dir())
			return
		}
		if err := c.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: remove the private cluster:", err)
		}
	}
	fail := func(err error) (private, *database, func(bool, string), error) {
		stop(false, "")
		return private{}, nil, nil, err
	}
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	const name = "loadtest"
	admin, err := sql.Open("pgx", c.URL("postgres"))
	if err == nil {
		_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
		admin.Close()
	}
	if err != nil {
		return fail(fmt.Errorf("create database: %w", err))
	}
	db = &database{engine: postgresEngine, adminURL: c.URL(name), serverURL: c.URL(name), providerURL: c.URL(name), name: "database " + name + " of the " + c.String()}
	if cfg.pgbouncer {
		// The provider's ledger gets a pool of its own: a lease-mode
		// payment holds its server connection while it calls the
		// provider, so sharing one pool could fill it with transactions
		// that wait for the provider's statements (docs/operations.md).
		const providerAlias = name + "_provider"
		bouncer, err = pgcluster.StartBouncer(ctx, c, pgcluster.BouncerOptions{
			PoolMode:  "transaction",
			PoolSize:  cfg.pgbouncerPool,
			Databases: map[string]string{providerAlias: name},
		})
		if err != nil {
			return fail(err)
		}
		db.serverURL, db.providerURL, db.pooled = bouncer.URL(name), bouncer.URL(providerAlias), true
		db.name += ", through " + bouncer.String() + " (transaction pooling, default_pool_size " + fmt.Sprint(cfg.pgbouncerPool) + ")"
	}
	return private{c}, db, stop, nil
}

// copyFile copies a log for the run's kept logs; a log that cannot be
// copied is only missing from them.
func copyFile(from, to string) {
	if b, err := os.ReadFile(from); err == nil {
		_ = os.WriteFile(to, b, 0o644)
	}
}

// external is a local Debian-style cluster of an external PostgreSQL
// (-database-url), restarted with pg_ctlcluster: "15 main".
type external struct {
	version, name string
	url           string
}

func (c external) String() string { return c.version + "/" + c.name }

// findCluster parses "15/main", or, when spec is empty, picks the newest
// version under /etc/postgresql and its cluster "main".
func findCluster(spec, url string) (external, error) {
	if spec != "" {
		v, n, ok := strings.Cut(spec, "/")
		if !ok || v == "" || n == "" {
			return external{}, fmt.Errorf("-pg-cluster %q: want version/name, e.g. 15/main", spec)
		}
		return external{v, n, url}, nil
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		return external{}, errors.New("pg_ctlcluster not found: PostgreSQL restarts of -database-url need a local Debian-style cluster (or -pg-restarts 0, or the private cluster)")
	}
	entries, err := os.ReadDir("/etc/postgresql")
	if err != nil {
		return external{}, fmt.Errorf("no local PostgreSQL cluster (or -pg-restarts 0): %w", err)
	}
	var versions []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("/etc/postgresql", e.Name(), "main")); err == nil {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		return external{}, errors.New("no cluster main under /etc/postgresql (or -pg-restarts 0)")
	}
	slices.SortFunc(versions, compareVersions)
	return external{versions[len(versions)-1], "main", url}, nil
}

// compareVersions orders "9.6" < "15" < "16" numerically.
func compareVersions(a, b string) int {
	var x, y float64
	fmt.Sscan(a, &x)
	fmt.Sscan(b, &y)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// logFile is where Debian's clusters log by default.
func (c external) logFile() string {
	return fmt.Sprintf("/var/log/postgresql/postgresql-%s-%s.log", c.version, c.name)
}

func (c external) ctl(ctx context.Context, action string) error {
	out, err := exec.CommandContext(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", c.version, c.name, action).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s: %v: %s", c, action, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c external) restart(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	// The restart is not cancelled with the run: PostgreSQL must come back.
	err := c.ctl(context.WithoutCancel(ctx), "restart")
	if err != nil {
		_ = c.ensureRunning()
		return time.Since(start), err
	}
	err = waitReady(context.WithoutCancel(ctx), c.url, time.Minute)
	return time.Since(start), err
}

func (c external) ensureRunning() error {
	if waitReady(context.Background(), c.url, 3*time.Second) == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ctl(ctx, "start"); err != nil {
		// It may have been starting already; what counts is that it answers.
		fmt.Fprintln(os.Stderr, "loadtest:", err)
	}
	return waitReady(ctx, c.url, time.Minute)
}

// connectionSampler counts the client connections the database serves,
// every 100ms, and keeps the largest count: on the private cluster or
// MariaDB every client connection (the servers', PgBouncer's and the
// tool's own) but the sampler's; on an external PostgreSQL, which others
// share, those named app.
type connectionSampler struct {
	mu   sync.Mutex
	peak int
	stop context.CancelFunc
	done chan struct{}
}

func (d *database) sampleConnections(ctx context.Context, app string) *connectionSampler {
	query, args := d.engine.connections, []any{}
	if d.schema != "" {
		query, args = `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, []any{app}
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &connectionSampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		db, err := d.admin()
		if err != nil {
			return
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var now int
			// Errors (the database restarting, or full) only skip a sample.
			if db.QueryRowContext(ctx, query, args...).Scan(&now) == nil {
				s.mu.Lock()
				s.peak = max(s.peak, now)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// end stops the sampling and returns the largest count.
func (s *connectionSampler) end() int {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// maxConnections returns the database's max_connections.
func (d *database) maxConnections(ctx context.Context) int {
	db, err := d.admin()
	if err != nil {
		return 0
	}
	defer db.Close()
	var n int
	_ = db.QueryRowContext(ctx, d.engine.maxConnections).Scan(&n)
	return n
}
