package idemdb

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// Defaults of the connection pool. A duplicate request in atomic mode holds
// a connection while it waits for the first one to commit, so the pool is
// bounded below PostgreSQL's default max_connections (100) to leave room for
// other processes.
const (
	DefaultMaxOpenConns = 40
	sqliteBusyTimeout   = 5 * time.Second
)

// Open opens dsn and returns an ent driver for it. A dsn that starts with
// postgres:// or postgresql:// is PostgreSQL; one that starts with sqlite:
// or file:, or any other string, is a SQLite file path.
func Open(dsn string) (*entsql.Driver, error) {
	name, source, dialectName := Resolve(dsn)
	db, err := sql.Open(name, source)
	if err != nil {
		return nil, fmt.Errorf("idemdb: open %s: %w", dialectName, err)
	}
	db.SetMaxOpenConns(DefaultMaxOpenConns)
	db.SetMaxIdleConns(DefaultMaxOpenConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return entsql.OpenDB(dialectName, db), nil
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
