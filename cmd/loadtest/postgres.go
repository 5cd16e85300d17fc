package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
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

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for database/sql
)

// database is the PostgreSQL database of one run: a schema of its own in the
// database of baseURL, so that the run never reads or writes anything else.
type database struct {
	baseURL string
	schema  string
	owned   bool // created by this run, dropped by it
}

// openDatabase creates a fresh schema, or adopts an existing one (which it
// will not drop) when schema is not empty.
func openDatabase(ctx context.Context, baseURL, schema string) (*database, error) {
	d := &database{baseURL: baseURL, schema: schema}
	if schema != "" {
		return d, nil
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	d.schema, d.owned = "loadtest_"+hex.EncodeToString(suffix), true
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

// admin opens the base database, outside the run's schema.
func (d *database) admin() (*sql.DB, error) { return sql.Open("pgx", d.baseURL) }

// url returns the URL of the run's schema (search_path), with extra query
// parameters (runtime parameters for pgx, such as log_statement=all).
func (d *database) url(extra url.Values) string {
	u, err := url.Parse(d.baseURL)
	if err != nil {
		return d.baseURL
	}
	q := u.Query()
	q.Set("search_path", d.schema)
	for k, vs := range extra {
		for _, v := range vs {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// open connects to the run's schema.
func (d *database) open() (*sql.DB, error) { return sql.Open("pgx", d.url(nil)) }

// drop removes the schema if this run created it. It waits for PostgreSQL
// first: a drop attempted during a restart would leave the schema behind.
func (d *database) drop() error {
	if !d.owned {
		return nil
	}
	if err := waitReady(context.Background(), d.baseURL, time.Minute); err != nil {
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
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, baseURL)
		if err == nil {
			err = conn.Ping(cctx)
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("PostgreSQL does not accept connections after %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cluster is a local PostgreSQL cluster that pg_ctlcluster (Debian's
// postgresql-common) can restart: "15 main".
type cluster struct {
	version, name string
}

func (c cluster) String() string { return c.version + "/" + c.name }

// findCluster parses "15/main", or, when spec is empty, picks the newest
// version under /etc/postgresql and its cluster "main".
func findCluster(spec string) (cluster, error) {
	if spec != "" {
		v, n, ok := strings.Cut(spec, "/")
		if !ok || v == "" || n == "" {
			return cluster{}, fmt.Errorf("-pg-cluster %q: want version/name, e.g. 15/main", spec)
		}
		return cluster{v, n}, nil
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		return cluster{}, errors.New("pg_ctlcluster not found: PostgreSQL restarts need a local Debian-style cluster (or -pg-restarts 0)")
	}
	entries, err := os.ReadDir("/etc/postgresql")
	if err != nil {
		return cluster{}, fmt.Errorf("no local PostgreSQL cluster (or -pg-restarts 0): %w", err)
	}
	var versions []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("/etc/postgresql", e.Name(), "main")); err == nil {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		return cluster{}, errors.New("no cluster main under /etc/postgresql (or -pg-restarts 0)")
	}
	slices.SortFunc(versions, compareVersions)
	return cluster{versions[len(versions)-1], "main"}, nil
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

// logFile is where Debian's clusters log by default: the statement counter
// reads it.
func (c cluster) logFile() string {
	return fmt.Sprintf("/var/log/postgresql/postgresql-%s-%s.log", c.version, c.name)
}

func (c cluster) ctl(ctx context.Context, action string) error {
	out, err := exec.CommandContext(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", c.version, c.name, action).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s: %v: %s", c, action, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// restart restarts the cluster (fast mode: open sessions are terminated, as
// in a crash of the database seen from the clients) and waits until it
// accepts connections again. It returns how long PostgreSQL was
// unavailable, as seen from here.
func (c cluster) restart(ctx context.Context, baseURL string) (time.Duration, error) {
	start := time.Now()
	// The restart is not cancelled with the run: PostgreSQL must come back.
	err := c.ctl(context.WithoutCancel(ctx), "restart")
	if err != nil {
		_ = c.ensureRunning(baseURL)
		return time.Since(start), err
	}
	err = waitReady(context.WithoutCancel(ctx), baseURL, time.Minute)
	return time.Since(start), err
}

// ensureRunning starts the cluster if it does not answer. PostgreSQL is
// shared with other tests: whatever happened to this run, it must be left
// running.
func (c cluster) ensureRunning(baseURL string) error {
	if waitReady(context.Background(), baseURL, 3*time.Second) == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ctl(ctx, "start"); err != nil {
		// It may have been starting already; what counts is that it answers.
		fmt.Fprintln(os.Stderr, "loadtest:", err)
	}
	return waitReady(ctx, baseURL, time.Minute)
}

// connectionPeak samples how many connections named app PostgreSQL serves,
// every 200ms until ctx ends, and returns the largest count: the run must
// stay well below max_connections, which other tests share.
func (d *database) connectionPeak(ctx context.Context, app string) (peak func() int) {
	var (
		mu sync.Mutex
		n  int
	)
	go func() {
		db, err := d.admin()
		if err != nil {
			return
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var now int
			// Errors (PostgreSQL restarting) only skip a sample.
			if db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&now) == nil {
				mu.Lock()
				n = max(n, now)
				mu.Unlock()
			}
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// maxConnections returns PostgreSQL's max_connections.
func (d *database) maxConnections(ctx context.Context) int {
	db, err := d.admin()
	if err != nil {
		return 0
	}
	defer db.Close()
	var n int
	_ = db.QueryRowContext(ctx, `SELECT current_setting('max_connections')::int`).Scan(&n)
	return n
}
