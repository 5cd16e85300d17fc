package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"
)

// dbConfig holds the flags every subcommand shares: where the run's
// database is, and the example server's binary.
type dbConfig struct {
	databaseURL   string
	schema        string
	pgBin         string
	pgCluster     string
	pgbouncer     bool
	pgbouncerPool int
	queryExecMode string
	serverBin     string
	keep          bool
	failover      failoverConfig
	mysql         bool
}

func addDBFlags(fs *flag.FlagSet, c *dbConfig) {
	fs.StringVar(&c.databaseURL, "database-url", "", "an external PostgreSQL to work in, in a schema of its own (default: a private cluster that the tool starts and removes)")
	fs.StringVar(&c.schema, "schema", "", "with -database-url: use this existing schema instead of creating and dropping one")
	fs.StringVar(&c.pgBin, "pg-bin", "", "PostgreSQL server binaries of the private cluster (default: the newest /usr/lib/postgresql/*/bin)")
	fs.StringVar(&c.pgCluster, "pg-cluster", "", "with -database-url: the cluster to restart (faults) or whose log to read (bench -count-statements) with pg_ctlcluster, version/name (default: the newest in /etc/postgresql, main)")
	fs.BoolVar(&c.pgbouncer, "pgbouncer", false, "servers reach the private cluster through PgBouncer in transaction pooling mode (Debian package pgbouncer)")
	fs.IntVar(&c.pgbouncerPool, "pgbouncer-pool", 20, "with -pgbouncer: PgBouncer's default_pool_size, the server connections of the servers' pool (their provider ledger has a pool of its own of the same size)")
	fs.StringVar(&c.queryExecMode, "query-exec-mode", "", "the servers' pgx default_query_exec_mode (default: pgx's own, cache_statement; exec with -pgbouncer, where cache_statement fails)")
	fs.StringVar(&c.serverBin, "server-bin", "", "example server binary (default: go build "+serverPackage+")")
	fs.BoolVar(&c.keep, "keep", false, "keep the schema (or the private cluster, stopped) and the server logs")
	addFailoverFlags(fs, &c.failover)
	fs.BoolVar(&c.mysql, "mysql", false, "run on a private MariaDB server (mariadb-install-db into a temporary directory, a free port, max_connections = 100) instead of PostgreSQL; its restarts (-pg-restarts) are a kill -9 of mariadbd and a start on the same data directory (loadtest faults only)")
}

func (c *dbConfig) check() error {
	switch {
	case c.mysql && (c.databaseURL != "" || c.pgbouncer || c.failover.mode != "" || c.pgBin != "" || c.pgCluster != "" || c.queryExecMode != ""):
		return errors.New("-mysql runs on a private MariaDB: it excludes -database-url, -pgbouncer, -failover and the PostgreSQL flags")
	case c.pgbouncer && c.databaseURL != "":
		return errors.New("-pgbouncer runs in front of the private cluster: it excludes -database-url")
	case c.schema != "" && c.databaseURL == "":
		return errors.New("-schema needs -database-url")
	case c.failover.mode != "" && c.databaseURL != "":
		return errors.New("-failover runs on a private primary and standby: it excludes -database-url")
	case c.failover.mode != "" && c.pgbouncer:
		return errors.New("-failover and -pgbouncer: not supported (PgBouncer would need to follow the promotion)")
	}
	if c.failover.mode != "" {
		if _, err := c.failover.replication(); err != nil {
			return err
		}
	}
	if c.pgbouncer && c.queryExecMode == "" {
		c.queryExecMode = "exec"
	}
	return nil
}

// needs says what a subcommand's run wants set up besides the database.
type needs struct {
	// server: the example server's binary (every subcommand but the
	// anchor, whose servers are the test application's).
	server bool
	// cluster: on an external PostgreSQL, the local cluster behind it, to
	// restart or to read the log of (the private cluster always is one).
	cluster bool
}

// runEnv is what a subcommand runs with: a database of its own, for as
// long as the run.
type runEnv struct {
	ctx context.Context
	tmp string    // the run's directory: server logs, SQLite files
	bin string    // the example server ("" unless needs.server)
	db  *database // the run's database (or schema)
	// dbServer is the server behind it: the private PostgreSQL or
	// MariaDB; nil on an external PostgreSQL unless needs.cluster.
	dbServer dbServer
	started  time.Time
}

// errFailed is a run that found violations and said so: exit status 1,
// where any other error is 2.
var errFailed = errors.New("violations found")

// execute sets up the run's database and servers' binary, runs body and
// always cleans up: the private cluster removed, or the schema dropped and
// the external PostgreSQL running. It returns the exit status, and keeps
// the logs of a run that did not pass.
func execute(ctx context.Context, dc *dbConfig, n needs, body func(*runEnv) error) int {
	e := &runEnv{ctx: ctx, started: time.Now()}
	err := e.withTemp(dc.keep, func() error {
		if n.server {
			bin := dc.serverBin
			if bin == "" {
				var err error
				if bin, err = buildServer(e.tmp); err != nil {
					return err
				}
			}
			e.bin = bin
		}
		return e.withDatabase(dc, n.cluster, func() error { return body(e) })
	})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errFailed):
		return 1
	}
	fmt.Fprintln(os.Stderr, "loadtest:", err)
	return 2
}

// withTemp runs body with a temporary directory, removed after it unless
// keep or body failed.
func (e *runEnv) withTemp(keep bool, body func() error) error {
	tmp, err := os.MkdirTemp("", "idem-loadtest")
	if err != nil {
		return err
	}
	e.tmp = tmp
	err = body()
	if keep || err != nil {
		fmt.Printf("logs kept in %s\n", tmp)
	} else {
		os.RemoveAll(tmp)
	}
	return err
}

// withDatabase runs body on a database server of the run's own or in a
// schema of the external PostgreSQL.
func (e *runEnv) withDatabase(dc *dbConfig, cluster bool, body func() error) error {
	var err error
	if dc.databaseURL == "" {
		var remove func(keep bool, logDir string)
		if remove, err = e.startOwn(dc); err != nil {
			return err
		}
		defer func() {
			logDir := ""
			if dc.keep || err != nil {
				logDir = e.tmp
			}
			remove(dc.keep, logDir)
		}()
	} else {
		var cleanup func()
		if cleanup, err = e.external(dc, cluster); err != nil {
			return err
		}
		defer cleanup()
	}
	if dc.queryExecMode != "" {
		e.db.serverParams = url.Values{"default_query_exec_mode": {dc.queryExecMode}}
		e.db.name += ", pgx default_query_exec_mode " + dc.queryExecMode
	}
	err = body()
	return err
}

// startOwn starts the run's own database server: the private MariaDB
// (-mysql), the replicated PostgreSQL pair (-failover) or the private
// PostgreSQL cluster. remove removes it (see startPrivate).
func (e *runEnv) startOwn(dc *dbConfig) (remove func(keep bool, logDir string), err error) {
	switch {
	case dc.mysql:
		var m mariadb
		if m, e.db, remove, err = startMariaDB(e.ctx); err != nil {
			return nil, fmt.Errorf("private MariaDB: %w", err)
		}
		e.dbServer = m
	case dc.failover.mode != "":
		var r *replicated
		if r, e.db, remove, err = startReplicated(e.ctx, dc); err != nil {
			return nil, fmt.Errorf("replicated PostgreSQL: %w", err)
		}
		e.dbServer = r
	default:
		var p private
		if p, e.db, remove, err = startPrivate(e.ctx, dc); err != nil {
			return nil, fmt.Errorf("private PostgreSQL: %w", err)
		}
		e.dbServer = p
	}
	return remove, nil
}

// external makes a schema of the run in the external PostgreSQL and finds
// its cluster when asked; cleanup drops the schema (unless kept) and
// leaves PostgreSQL running, whatever happened to the run: others share
// it.
func (e *runEnv) external(dc *dbConfig, cluster bool) (cleanup func(), err error) {
	if err := waitReady(e.ctx, dc.databaseURL, 10*time.Second); err != nil {
		return nil, err
	}
	var ext *external
	if cluster {
		c, err := findCluster(dc.pgCluster, dc.databaseURL)
		if err != nil {
			return nil, err
		}
		ext, e.dbServer = &c, c
	}
	running := func() {
		if ext == nil {
			return
		}
		if err := ext.ensureRunning(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: PostgreSQL is not running:", err)
		}
	}
	if e.db, err = newSchema(e.ctx, dc.databaseURL, dc.schema); err != nil {
		running()
		return nil, err
	}
	return func() {
		if dc.keep && e.db.owned {
			fmt.Printf("schema %s kept\n", e.db.schema)
		} else {
			running() // an interrupted restart may have left it stopped
			if err := e.db.drop(); err != nil {
				fmt.Fprintf(os.Stderr, "loadtest: drop schema %s: %v\n", e.db.schema, err)
			}
		}
		running()
	}, nil
}

// dsnParams returns extra runtime parameters for the servers' connections.
func dsnParams(pairs ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		q.Set(pairs[i], pairs[i+1])
	}
	return q
}
