package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/goovo/idem/internal/testkit/pgcluster"
)

// failoverConfig is the failover fault (-failover): the run's PostgreSQL
// is a primary and a streaming standby (pgcluster.Pair), the servers reach
// it by a two-host URL with target_session_attrs=read-write, and the first
// of the run's PostgreSQL faults (-pg-restarts) is a failover instead of a
// restart: the standby falls behind for -failover-lag (the primary's WAL
// sender stopped, as a slow link), then every process of the primary is
// killed and the standby promoted. Later PostgreSQL faults fail: there is
// no standby left. The audit then names what the failover lost.
type failoverConfig struct {
	mode string        // "", "sync" or "async"
	lag  time.Duration // how long the standby lags before the kill
}

// addFailoverFlags defines the failover fault's flags on fs.
func addFailoverFlags(fs *flag.FlagSet, c *failoverConfig) {
	fs.StringVar(&c.mode, "failover", "", "sync or async: run on a primary and a streaming standby (synchronous or asynchronous) and make the first PostgreSQL fault (-pg-restarts) a failover: the standby lags for -failover-lag, the primary is killed (every process) and the standby promoted (off when empty)")
	fs.DurationVar(&c.lag, "failover-lag", 1500*time.Millisecond, "with -failover: how long the primary's WAL sender is stopped before the primary is killed")
}

// replication returns the pair's setting, or an error for a bad -failover.
func (c failoverConfig) replication() (pgcluster.Replication, error) {
	switch c.mode {
	case "sync":
		return pgcluster.Synchronous, nil
	case "async":
		return pgcluster.Asynchronous, nil
	}
	return 0, fmt.Errorf("-failover %q: want sync or async", c.mode)
}

// replicated is the run's PostgreSQL under -failover: its restart is a
// failover, once.
type replicated struct {
	pair   *pgcluster.Pair
	lag    time.Duration
	failed bool
}

func (r *replicated) String() string {
	return fmt.Sprintf("%s pair (primary %s, standby %s)", r.pair.Mode, r.pair.Primary, r.pair.Standby)
}

// restart is the failover: the standby lags, the primary is killed, the
// standby promoted. It returns the time from the kill to the promoted
// standby accepting writes.
func (r *replicated) restart(ctx context.Context) (time.Duration, error) {
	if r.failed {
		return 0, errors.New("a second failover: no standby left")
	}
	resume, err := r.pair.HoldWAL(ctx)
	if err != nil {
		return 0, err
	}
	defer resume()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(r.lag):
	}
	r.failed = true
	// Not cancelled with the run: the standby must take over.
	return r.pair.Fail(context.WithoutCancel(ctx))
}

func (r *replicated) ensureRunning() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.pair.Current().WaitReady(ctx, time.Minute)
}

func (r *replicated) logFile() string { return r.pair.Current().LogFile() }

// startReplicated starts the pair of a -failover run and creates the run's
// database on it; stop removes both clusters, first copying their logs to
// logDir when given. It is the -failover counterpart of startPrivate.
func startReplicated(ctx context.Context, cfg *dbConfig) (pg *replicated, db *database, stop func(keep bool, logDir string), err error) {
	mode, err := cfg.failover.replication()
	if err != nil {
		return nil, nil, nil, err
	}
	pair, err := pgcluster.NewPair(ctx, mode, pgcluster.Options{BinDir: cfg.pgBin})
	if err != nil {
		return nil, nil, nil, err
	}
	stop = func(keep bool, logDir string) {
		if logDir != "" {
			copyFile(pair.Primary.LogFile(), filepath.Join(logDir, "postgresql-primary.log"))
			copyFile(pair.Standby.LogFile(), filepath.Join(logDir, "postgresql-standby.log"))
		}
		if err := pair.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: remove the replicated clusters:", err)
		}
	}
	const name = "loadtest"
	admin, err := sql.Open("pgx", pair.URL("postgres"))
	if err == nil {
		_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
		admin.Close()
	}
	if err != nil {
		stop(false, "")
		return nil, nil, nil, fmt.Errorf("create database: %w", err)
	}
	url := pair.URL(name)
	db = &database{engine: postgresEngine, adminURL: url, serverURL: url, providerURL: url,
		name: fmt.Sprintf("database %s of a primary and its %s standby, two-host URL, failover after %v of lag", name, mode, cfg.failover.lag)}
	return &replicated{pair: pair, lag: cfg.failover.lag}, db, stop, nil
}
