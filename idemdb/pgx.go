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

// Driver is an ent driver with a database/sql view of its database:
// *pgxdriver.Driver (PostgreSQL, OpenPool) or *entsql.Driver (SQLite, and
// OpenSQL). The view is for what needs a *sql.DB (WaitReady, a migration
// tool, a health check); ent's client and the hook use the driver.
type Driver interface {
	dialect.Driver
	DB() *sql.DB
}

// openPgx opens the PostgreSQL URL dsn on pgx with the pool p, or the
// URL's own pool settings where p leaves them zero.
func openPgx(dsn string, p Pool) (*pgxdriver.Driver, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("idemdb: PostgreSQL URL: %w", err) // pgconn masks the password
	}
	switch {
	case p.MaxConns > 0:
		cfg.MaxConns = int32(p.MaxConns)
	case !hasParam(dsn, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	switch {
	case p.MaxIdleTime > 0:
		cfg.MaxConnIdleTime = p.MaxIdleTime
	case !hasParam(dsn, "pool_max_conn_idle_time"):
		cfg.MaxConnIdleTime = 5 * time.Minute
	}
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
