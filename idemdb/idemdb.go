package idemdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"           // registers "sqlite"
)

// DefaultMaxConns is the default size of a pool (Pool.MaxConns): small
// enough that four processes, each with this pool and a few connections
// besides, fit in PostgreSQL's default max_connections (100) with room to
// spare for migrations, operators and monitoring. A request that finds
// every connection busy waits for one, as long as its context allows.
const DefaultMaxConns = 16

// sqliteBusyTimeout is how long a SQLite writer waits for the write lock.
const sqliteBusyTimeout = 5 * time.Second

// Pool sizes the connection pool of OpenPool. The zero value is the
// default of each field (for PostgreSQL, the URL's pool_max_conns and
// pool_max_conn_idle_time if it sets them).
type Pool struct {
	// MaxConns is the most connections open at once (default
	// DefaultMaxConns). A request that needs one while all are in use
	// waits until one is free or its context ends; it does not fail.
	//
	// Size it from the database's budget: PostgreSQL's max_connections,
	// shared by every process, divided by the processes, less what
	// anything else needs. A duplicate request in atomic mode holds a
	// connection while it waits for the first one to commit, so a burst of
	// duplicates uses the whole pool and the rest of the requests queue.
	MaxConns int
	// MaxIdleConns is the most connections kept open while idle (default
	// MaxConns: a pool that stays warm). database/sql only: pgxpool keeps
	// every connection until MaxIdleTime.
	MaxIdleConns int
	// MaxIdleTime closes a connection idle for that long (default 5
	// minutes), so that a quiet process gives its connections back.
	MaxIdleTime time.Duration
}

func (p Pool) withDefaults() Pool {
	if p.MaxConns <= 0 {
		p.MaxConns = DefaultMaxConns
	}
	if p.MaxIdleConns <= 0 || p.MaxIdleConns > p.MaxConns {
		p.MaxIdleConns = p.MaxConns
	}
	if p.MaxIdleTime <= 0 {
		p.MaxIdleTime = 5 * time.Minute
	}
	return p
}

// Open opens dsn with the default pool (OpenPool).
func Open(dsn string) (Driver, error) { return OpenPool(dsn, Pool{}) }

// OpenPool opens dsn and returns an ent driver for it, its connections
// pooled as p says. A dsn that starts with postgres:// or postgresql:// is
// PostgreSQL; one that starts with mysql:// is MySQL or MariaDB (see
// MySQLDSN); one that starts with sqlite: or file:, or any other string,
// is a SQLite file path.
//
// PostgreSQL runs on pgx itself (package pgxdriver, a pgxpool): its
// transactions send BEGIN with their first statement, and the hook's store
// folds its own statements into the round trips that happen anyway
// (BENCHMARKS.md). SQLite and MySQL run on database/sql. OpenSQL keeps PostgreSQL
// on database/sql too.
//
// A PostgreSQL URL may carry pgx's settings besides libpq's: behind
// PgBouncer in transaction pooling mode, add
// default_query_exec_mode=exec (docs/operations.md, "Connections, start-up and PgBouncer"); a
// URL's pool_max_conns and pool_max_conn_idle_time apply where p leaves
// MaxConns and MaxIdleTime zero. A URL that pgx cannot parse is an error
// here, not at the first query. Nothing is connected yet: see WaitReady.
func OpenPool(dsn string, p Pool) (Driver, error) {
	if IsPostgres(dsn) {
		return openPgx(dsn, p)
	}
	return OpenSQL(dsn, p)
}

// OpenSQL opens dsn as OpenPool does, but PostgreSQL on database/sql (pgx's
// stdlib driver): one statement per round trip, nothing pipelined. It is
// the path before the pipelined store, kept for code that needs ent's own
// *entsql.Driver, and to measure one against the other.
func OpenSQL(dsn string, p Pool) (*entsql.Driver, error) {
	db, dialectName, err := open(dsn)
	if err != nil {
		return nil, err
	}
	p = p.withDefaults()
	db.SetMaxOpenConns(p.MaxConns)
	db.SetMaxIdleConns(p.MaxIdleConns)
	db.SetConnMaxIdleTime(p.MaxIdleTime)
	return entsql.OpenDB(dialectName, db), nil
}

func open(dsn string) (*sql.DB, string, error) {
	if IsMySQL(dsn) {
		if _, err := MySQLDSN(dsn); err != nil {
			return nil, "", err
		}
	}
	name, source, dialectName := Resolve(dsn)
	if name != "pgx" {
		db, err := sql.Open(name, source)
		if err != nil {
			return nil, "", fmt.Errorf("idemdb: open %s: %w", dialectName, err)
		}
		return db, dialectName, nil
	}
	cfg, err := pgx.ParseConfig(source)
	if err != nil {
		return nil, "", fmt.Errorf("idemdb: PostgreSQL URL: %w", err) // pgconn masks the password
	}
	return stdlib.OpenDB(*cfg), dialectName, nil
}

// WaitReady pings db until the database answers, for at most timeout,
// waiting longer after each failure (100 ms, doubling up to 5 s). A process
// started while its database is down, restarting, or full ("sorry, too many
// clients already") thus waits for it instead of exiting. It gives up at
// once on what waiting cannot fix: a refused login or an unknown database.
// Each failure is logged at level Info on logger (nil: none).
func WaitReady(ctx context.Context, db *sql.DB, timeout time.Duration, logger *slog.Logger) error {
	deadline := time.Now().Add(timeout)
	delay := 100 * time.Millisecond
	for try := 1; ; try++ {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if permanent(err) {
			return fmt.Errorf("idemdb: database refused the connection: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := min(delay, time.Until(deadline))
		if wait <= 0 {
			return fmt.Errorf("idemdb: database unavailable for %v (%d tries): %w", timeout, try, err)
		}
		if logger != nil {
			logger.Info("database unavailable; waiting for it", slog.Int("try", try), slog.Duration("retry_in", wait), slog.Any("error", err))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// permanent reports whether a connection error is one that waiting does not
// fix: PostgreSQL's invalid authorization (class 28: a wrong password, a
// role or host not allowed) or an unknown database (3D000), and MySQL's
// equivalents.
func permanent(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "28") || pe.Code == "3D000") || mysqlPermanent(err)
}

// Resolve returns the database/sql driver name, the driver's data source
// name and the ent dialect for dsn, without opening anything. For SQLite the
// driver is modernc.org/sqlite behind a queue in which the writers of this
// process take turns for the database file, in arrival order (see
// writers.go).
func Resolve(dsn string) (driverName, source, dialectName string) {
	if IsPostgres(dsn) {
		return "pgx", dsn, dialect.Postgres
	}
	if IsMySQL(dsn) {
		source, err := MySQLDSN(dsn)
		if err != nil {
			return "mysql", dsn, dialect.MySQL // sql.Open reports it
		}
		return "mysql", source, dialect.MySQL
	}
	return sqliteDriverName, SQLiteDSN(strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite://"), "sqlite:")), dialect.SQLite
}

// IsPostgres reports whether dsn is a PostgreSQL URL.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// SQLiteDSN returns the modernc.org/sqlite data source for the file at path
// (or a "file:" URI), with the settings the claim protocol needs. Times are
// stored in SQLite's own text format so that the store can compare them.
func SQLiteDSN(path string) string {
	if !strings.HasPrefix(path, "file:") {
		path = "file:" + path
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + q.Encode()
}
