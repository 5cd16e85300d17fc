package idemdb

import (
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"entgo.io/ent/dialect"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/goovo/idem/idemdb/pgxdriver"
)

// OpenPgx opens the PostgreSQL URL dsn as an ent driver that runs on pgx
// directly (package pgxdriver) instead of database/sql: its transactions
// send BEGIN with their first statement, and the hook's store can put its
// own statements into their round trips. Everything ent's generated code
// does works on it unchanged, the hook and migrations included:
//
//	drv, err := idemdb.OpenPgx(url)
//	client := ent.NewClient(ent.Driver(drv))
//	err = client.Schema.Create(ctx)
//
// The pool is bounded like Open's: DefaultMaxConns connections unless
// the URL sets pool_max_conns, and idle connections closed after five
// minutes unless it sets pool_max_conn_idle_time. On this driver the
// hook's store pipelines its statements (BENCHMARKS.md has the figures).
func OpenPgx(dsn string) (*pgxdriver.Driver, error) {
	if !IsPostgres(dsn) {
		return nil, fmt.Errorf("idemdb: OpenPgx needs a postgres:// URL")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("idemdb: open postgres: %w", err)
	}
	if !hasParam(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	if !hasParam(dsn, "pool_max_conn_idle_time") {
		cfg.MaxConnIdleTime = 5 * time.Minute
	}
	drv, err := pgxdriver.OpenConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemdb: open postgres: %w", err)
	}
	return drv, nil
}

// Driver is an ent driver with a database/sql view of its database:
// *pgxdriver.Driver (OpenPgx) or *entsql.Driver (Open).
type Driver interface {
	dialect.Driver
	DB() *sql.DB
}

// OpenDriver opens dsn with the pool p: PostgreSQL on pgx (OpenPgx), on
// which the hook's store pipelines its statements, SQLite on database/sql
// (OpenPool). OpenPool keeps PostgreSQL on database/sql.
func OpenDriver(dsn string, p Pool) (Driver, error) {
	if !IsPostgres(dsn) {
		return OpenPool(dsn, p)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("idemdb: open postgres: %w", err)
	}
	p = p.withDefaults()
	cfg.MaxConns = int32(p.MaxConns)
	cfg.MaxConnIdleTime = p.MaxIdleTime
	drv, err := pgxdriver.OpenConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemdb: open postgres: %w", err)
	}
	return drv, nil
}

// hasParam reports whether the URL dsn sets the query parameter name.
func hasParam(dsn, name string) bool {
	u, err := url.Parse(dsn)
	return err == nil && u.Query().Has(name)
}
