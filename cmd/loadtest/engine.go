package main

import (
	"database/sql"

	_ "github.com/go-sql-driver/mysql" // registers "mysql" for database/sql
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for database/sql

	"github.com/goovo/idem/idemdb"
)

// engine is what the tool's own SQL needs to know of the database it runs
// on: the one place where PostgreSQL's and MariaDB's statements differ.
// (The audit's snapshot, readSnapshot, is the same SQL on both.)
type engine struct {
	name string // for messages: PostgreSQL, MariaDB
	// river: the example server runs River on it (its -river-* flags);
	// on MariaDB its receipt table's workers deliver instead.
	river bool
	// driver is the database/sql driver; dsn turns the run's URL into
	// its data source.
	driver string
	dsn    func(url string) (string, error)
	// connections counts the client connections the server serves, but
	// the counting one's (on a private server: everyone's is the run's).
	connections string
	// maxConnections reads the server's max_connections.
	maxConnections string
	// pendingReceipts counts the receipts of the example's outbox not
	// yet delivered.
	pendingReceipts string
}

var (
	postgresEngine = &engine{
		name:            "PostgreSQL",
		river:           true,
		driver:          "pgx",
		dsn:             func(url string) (string, error) { return url, nil },
		connections:     `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
		maxConnections:  `SELECT current_setting('max_connections')::int`,
		pendingReceipts: `SELECT count(*) FROM river_job WHERE kind = 'send_receipt' AND state NOT IN ('completed', 'discarded', 'cancelled')`,
	}
	mariadbEngine = &engine{
		name:   "MariaDB",
		driver: "mysql",
		// The settings the hook's store needs (idemdb.MySQLDSN): times in
		// UTC, binary collation; the audit reads what the servers wrote.
		dsn: idemdb.MySQLDSN,
		// Background threads are not connections; replication's run as
		// 'system user'.
		connections:    `SELECT count(*) FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Daemon' AND USER <> 'system user' AND ID <> CONNECTION_ID()`,
		maxConnections: `SELECT @@max_connections`,
		// The example's receipts on MariaDB go through a table outbox of
		// its own, graph.ReceiptTable (River has no MySQL driver).
		pendingReceipts: `SELECT count(*) FROM receipt_outbox WHERE delivered_at IS NULL`,
	}
)

// open opens url with the engine's driver.
func (en *engine) open(url string) (*sql.DB, error) {
	dsn, err := en.dsn(url)
	if err != nil {
		return nil, err
	}
	return sql.Open(en.driver, dsn)
}
