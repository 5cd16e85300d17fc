// Package simsql is what the example's simulated services (the payment
// provider, the mailer) share to keep their ledgers in PostgreSQL, MySQL
// (MariaDB) or SQLite with one text of each statement where the databases
// agree. Each function takes the database's ent dialect name
// (dialect.Postgres, dialect.MySQL, dialect.SQLite).
package simsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"entgo.io/ent/dialect"
)

// Now is the current time as the ledger stores it: a timestamp on
// PostgreSQL and MySQL, RFC 3339 text on SQLite, whose TEXT column sorts
// it.
func Now(d string) any {
	if d == dialect.SQLite {
		return time.Now().UTC().Format(time.RFC3339Nano)
	}
	return time.Now().UTC()
}

// TimeColumn is the column type of the times Now writes: TIMESTAMPTZ on
// PostgreSQL, DATETIME(6) on MySQL (microseconds, UTC: idemdb's
// connections read and write UTC), TEXT on SQLite.
func TimeColumn(d string) string {
	switch d {
	case dialect.Postgres:
		return "TIMESTAMPTZ"
	case dialect.MySQL:
		return "DATETIME(6)"
	}
	return "TEXT"
}

// Rebind turns q's $1…$9 placeholders into ? on SQLite and MySQL.
func Rebind(d string, q string) string {
	if d == dialect.Postgres {
		return q
	}
	for i := 9; i >= 1; i-- {
		q = strings.ReplaceAll(q, fmt.Sprintf("$%d", i), "?")
	}
	return q
}

// MySQLTableOptions end a stand-in's CREATE TABLE on MySQL: keys and
// tenants are utf8mb4 compared byte for byte, as on PostgreSQL, whatever
// the database's default character set.
const MySQLTableOptions = " DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

// ErrNotMigrated is returned by the simulated services' constructors when
// their table is missing or lacks a column: they never create it
// themselves, so that a server started without its automatic migration
// (-migrate=false) changes no schema. Their Migrate functions, or the
// versioned migrations, create it.
var ErrNotMigrated = errors.New("table missing or out of date")

// Check returns ErrNotMigrated, with the database's own error, unless
// table exists in db with every column named.
func Check(ctx context.Context, db *sql.DB, table string, columns ...string) error {
	rows, err := db.QueryContext(ctx, "SELECT "+strings.Join(columns, ", ")+" FROM "+table+" WHERE 1 = 0")
	if err != nil {
		return fmt.Errorf("%s: %w (%v)", table, ErrNotMigrated, err)
	}
	return errors.Join(rows.Err(), rows.Close())
}
